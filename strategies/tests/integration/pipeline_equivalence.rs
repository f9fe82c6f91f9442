//! Pipelines on 2 and 3 stage processes, interleaved 1F1B on 2 (two stages each), 1F1B
//! with a stage replicated (PipeDream's 2-1 and 1-2 on 3), and hybrid on 2 × 2, must give
//! the weights
//! single-device training gives on the same batch (no batch norm, 5 steps in float64,
//! [`TOLERANCE`] relative);
//! every checkpoint mode must give the weights `never` gives; each schedule's recorded
//! timeline must follow its definition; in bfloat16 and float16 a pipeline must land as
//! near single-device training in that precision as that lands from exact training; and a
//! float16 gradient overflow must skip every stage's and replica's update together.
//!
//! Ranks are child processes of this binary joined by c10d Gloo over loopback; each saves
//! its stages' weights and its timeline for the parent to merge and check.

use std::path::Path;

use crate::common::*;
use stratlab_perf_model::pipeline as pipeline_model;
use stratlab_strategies::pipeline;
use stratlab_strategies::{EventKind, MemoryFormat, Precision, TimelineEvent, TrainConfig, TrainContext};
use stratlab_strategy_spec::{
    pipedream_actions, Action, Checkpoint, Parameters, Pass, Placement, Schedule, StageReplicas, Strategy, StrategyKind,
};

/// A pipeline run: `kind`, micro-batches, checkpoint, pp for hybrid and the precision;
/// encoded in the role string the children read.
#[derive(Debug, Clone, Copy)]
struct Run {
    kind: StrategyKind,
    micro_batches: usize,
    checkpoint: Checkpoint,
    hybrid_stages: Option<usize>,
    /// Interleaved 1F1B's stages per rank.
    virtual_stages: Option<usize>,
    /// 1F1B's workers of each of two stages, where a stage is replicated.
    stage_replicas: Option<(usize, usize)>,
    /// Zero-bubble's placement.
    placement: Option<Placement>,
    precision: Precision,
    memory_format: MemoryFormat,
    /// Trains from [`OVERFLOWING_SCALE`] (in float16): every update is skipped.
    overflow: bool,
}

impl Run {
    fn new(kind: StrategyKind, micro_batches: usize) -> Run {
        Run {
            kind,
            micro_batches,
            checkpoint: Checkpoint::Never,
            hybrid_stages: None,
            virtual_stages: None,
            stage_replicas: None,
            placement: None,
            precision: Precision::Float64,
            memory_format: MemoryFormat::Contiguous,
            overflow: false,
        }
    }

    fn role(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/{}/{}/{}/{}/{}",
            self.kind,
            self.micro_batches,
            self.checkpoint,
            self.hybrid_stages.unwrap_or(0),
            self.virtual_stages.unwrap_or(0),
            self.precision,
            self.memory_format,
            self.overflow,
            self.stage_replicas.map_or("none".to_owned(), |(first, second)| format!("{first}-{second}")),
            self.placement.map_or("none".to_owned(), |placement| placement.to_string()),
        )
    }

    fn parse(role: &str) -> Run {
        let parts: Vec<&str> = role.split('/').collect();
        let checkpoint = match parts[2] {
            "always" => Checkpoint::Always,
            "except_last" => Checkpoint::ExceptLast,
            _ => Checkpoint::Never,
        };
        let hybrid: usize = parts[3].parse().unwrap();
        let virtual_stages: usize = parts[4].parse().unwrap();
        Run {
            kind: parts[0].parse().unwrap(),
            micro_batches: parts[1].parse().unwrap(),
            checkpoint,
            hybrid_stages: (hybrid > 0).then_some(hybrid),
            virtual_stages: (virtual_stages > 0).then_some(virtual_stages),
            precision: parts[5].parse().unwrap(),
            memory_format: parts[6].parse().unwrap(),
            overflow: parts[7].parse().unwrap(),
            stage_replicas: parts[8]
                .split_once('-')
                .map(|(first, second)| (first.parse().unwrap(), second.parse().unwrap())),
            placement: parts[9].parse().ok(),
        }
    }
}

/// The child entry point's path, for [`run_ranks`].
const CHILD: &str = "pipeline_equivalence::pipeline_child_rank";

/// The batch each pipeline (each replica, for hybrid) trains on per step.
const BATCH: usize = 2 * PER_RANK_BATCH;

/// One stage rank of the run named in the environment; only the parent tests start it.
#[test]
#[ignore = "entry point of the child ranks the pipeline tests start"]
fn pipeline_child_rank() {
    let role = std::env::var(ROLE).expect("started by a parent test, with the role in the environment");
    let run = Run::parse(&role);
    let (launch, group) = child_group();
    let (train, test) = data();
    let spec = network(&train);
    let mut config = TrainConfig { memory_format: run.memory_format, ..config_in(run.precision, BATCH) };
    if run.overflow {
        config.loss_scale.initial = OVERFLOWING_SCALE;
    }
    let context = TrainContext { network: &spec, train, test, config: &config };
    let parameters = Parameters {
        micro_batches: (run.kind != StrategyKind::ModelParallel).then_some(run.micro_batches),
        checkpoint: (!matches!(run.kind, StrategyKind::PipeDream | StrategyKind::ZeroBubble)).then_some(run.checkpoint),
        pipeline_stages: run.hybrid_stages,
        virtual_stages: run.virtual_stages,
        placement: run.placement,
        stage_replicas: run.stage_replicas.map(|(first, second)| StageReplicas::try_from(vec![first, second]).unwrap()),
        ..Parameters::default()
    };
    let strategy = Strategy::new(run.kind, parameters).unwrap();
    let mut weights = Weights::default();
    let report = pipeline::train(&context, &group, &strategy, &mut weights).unwrap();
    assert_eq!(report.steps.len(), steps_in(run.precision));
    if run.overflow {
        assert_every_update_skipped(&report);
    }
    assert!(
        report.steps.iter().all(|step| step.loss.is_some_and(f64::is_finite)),
        "every rank records the pipeline's loss"
    );
    let out = Path::new(&std::env::var(OUT).unwrap()).to_path_buf();
    save_weights(&weights, &weights_path(&out, launch.rank));
    let events = serde_json::to_vec(&report.events).unwrap();
    std::fs::write(out.join(format!("rank{}.events.json", launch.rank)), events).unwrap();
    let losses: Vec<Option<f64>> = report.steps.iter().map(|step| step.loss).collect();
    std::fs::write(out.join(format!("rank{}.losses.json", launch.rank)), serde_json::to_vec(&losses).unwrap()).unwrap();
}

/// Runs `run` on `world_size` ranks; returns the merged weights of every stage, once every
/// rank is seen to record the losses its pipeline's last stage computed.
fn pipeline_weights(run: Run, world_size: usize, out: &Path) -> Vec<(String, tch::Tensor)> {
    run_ranks(CHILD, &run.role(), world_size, out);
    let losses = |rank: usize| -> Vec<Option<f64>> {
        serde_json::from_slice(&std::fs::read(out.join(format!("rank{rank}.losses.json"))).unwrap()).unwrap()
    };
    // Ranks are replica-major: a hybrid's replica r holds ranks r·pp to r·pp + pp − 1.
    let stages = run.hybrid_stages.unwrap_or(world_size);
    for rank in 0..world_size {
        let last = rank / stages * stages + stages - 1;
        assert_eq!(losses(rank), losses(last), "{}: rank {rank} records other losses than rank {last}", run.role());
    }
    load_weights(out, 0..world_size)
}

fn events_of(out: &Path, rank: usize) -> Vec<TimelineEvent> {
    serde_json::from_slice(&std::fs::read(out.join(format!("rank{rank}.events.json"))).unwrap()).unwrap()
}

#[test]
fn model_parallel_gpipe_and_1f1b_on_two_and_three_stages_match_single() {
    let expected = single_weights(BATCH);
    for stages in [2, 3] {
        for run in [
            Run::new(StrategyKind::ModelParallel, 1),
            Run::new(StrategyKind::Gpipe, 4),
            Run::new(StrategyKind::OneFOneB, 4),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let got = pipeline_weights(run, stages, dir.path());
            assert_same_weights(&format!("{} on {stages} stages", run.role()), &got, &expected);
        }
    }
}

/// Two ranks of two stages each: stage 1 (rank 1) hands over to stage 2 on rank 0, so
/// every micro-batch crosses between the ranks three times each way. Both round shapes:
/// m = 4 runs two rounds of 2, m = 3 one round of 3. Each rank runs its schedule's list,
/// which the model simulates too.
#[test]
fn interleaved_1f1b_on_two_ranks_of_two_stages_matches_single_and_runs_its_list() {
    let expected = single_weights(BATCH);
    let (ranks, v) = (2, 2);
    for m in [4, 3] {
        let run = Run { virtual_stages: Some(v), ..Run::new(StrategyKind::Interleaved1F1B, m) };
        let dir = tempfile::tempdir().unwrap();
        let got = pipeline_weights(run, ranks, dir.path());
        assert_same_weights(&run.role(), &got, &expected);
        let schedule = Schedule::Interleaved { virtual_stages: v };
        let simulated = simulated_orders(schedule, ranks, m, None);
        for (rank, simulated) in simulated.iter().enumerate() {
            let events = events_of(dir.path(), rank);
            let listed = schedule.actions(rank, ranks, m);
            assert_eq!(simulated, &listed, "m{m} rank {rank}: simulated");
            for step in 0..STEPS as u64 {
                assert_eq!(compute_order(&events, step), listed, "m{m} rank {rank} step {step}");
            }
        }
    }
}

/// Zero-bubble on two ranks: ZB-H1 (one stage each), ZB1P at two stages each and ZB-V,
/// whose rank 0 holds the first and the last stage. Splitting each backward into `I` and
/// `W` moves no gradient, so the weights are single's; each rank runs its list, `I` and `W`
/// included, which the model simulates too.
#[test]
fn zero_bubble_loop_and_v_match_single_and_run_their_lists_of_split_backwards() {
    let expected = single_weights(BATCH);
    let ranks = 2;
    for (placement, v, m) in
        [(Placement::Loop, 1, 4), (Placement::Loop, 2, 4), (Placement::V, 2, 4), (Placement::V, 2, 2)]
    {
        let run = Run { virtual_stages: Some(v), placement: Some(placement), ..Run::new(StrategyKind::ZeroBubble, m) };
        let dir = tempfile::tempdir().unwrap();
        let got = pipeline_weights(run, ranks, dir.path());
        assert_same_weights(&run.role(), &got, &expected);
        let schedule = Schedule::ZeroBubble { placement, virtual_stages: v };
        let simulated = simulated_orders(schedule, ranks, m, None);
        for (rank, simulated) in simulated.iter().enumerate() {
            let listed = schedule.actions(rank, ranks, m);
            assert_eq!(simulated, &listed, "{} rank {rank}: simulated", run.role());
            let events = events_of(dir.path(), rank);
            for step in 0..STEPS as u64 {
                assert_eq!(compute_order(&events, step), listed, "{} rank {rank} step {step}", run.role());
            }
        }
    }
}

/// PipeDream's 2-1 and 1-2 on three ranks: micro-batches 0 and 2 go to one worker of the
/// replicated stage, 1 and 3 to the other, and the two sum their gradients before the
/// update, so the weights are single's on the same batch, the replicated stage's two
/// workers end with the same weights, and every rank runs its list, which the model
/// simulates too.
#[test]
fn replicated_stages_2_1_and_1_2_match_single_and_each_worker_runs_its_share() {
    let expected = single_weights(BATCH);
    let m = 4;
    for (first, second) in [(2, 1), (1, 2)] {
        let run = Run { stage_replicas: Some((first, second)), ..Run::new(StrategyKind::OneFOneB, m) };
        let dir = tempfile::tempdir().unwrap();
        let got = pipeline_weights(run, 3, dir.path());
        assert_same_weights(&run.role(), &got, &expected);
        let layout = StageReplicas::try_from(vec![first, second]).unwrap();
        let replicated = if first == 2 { 0 } else { 1 };
        let [one, other] = layout.ranks_of(replicated)[..] else { panic!("two workers") };
        let (one, other) = (load_weights(dir.path(), [one]), load_weights(dir.path(), [other]));
        assert_same_weights(&format!("{} replicas of stage {replicated}", run.role()), &other, &one);
        let simulated = simulated_orders(Schedule::OneFOneB, 3, m, Some(&layout));
        for (rank, simulated) in simulated.iter().enumerate() {
            let (stage, replica) = layout.place_of(rank);
            let listed = layout.actions(stage, replica, m);
            assert_eq!(simulated, &listed, "{} rank {rank}: simulated", run.role());
            let events = events_of(dir.path(), rank);
            for step in 0..STEPS as u64 {
                assert_eq!(compute_order(&events, step), listed, "{} rank {rank} step {step}", run.role());
            }
        }
    }
}

/// PipeDream over 2-1 on three ranks: stage 0's two workers run micro-batches 0, 2, … and
/// 1, 3, …, each keeping one of its own in flight across batches, and average each round's
/// gradients before updating together, so they hold equal weights after training; every
/// rank records its list in every step, as the model simulates it.
#[test]
fn pipedream_2_1_replicas_update_together_and_each_runs_its_share() {
    let m = 4;
    let run = Run { stage_replicas: Some((2, 1)), ..Run::new(StrategyKind::PipeDream, m) };
    let dir = tempfile::tempdir().unwrap();
    let got = pipeline_weights(run, 3, dir.path());
    assert!(got.iter().all(|(_, tensor)| tensor.isfinite().all().int64_value(&[]) == 1), "finite weights");
    let (one, other) = (load_weights(dir.path(), [0]), load_weights(dir.path(), [1]));
    assert_same_weights("stage 0's two workers", &other, &one);
    let layout = StageReplicas::try_from(vec![2, 1]).unwrap();
    for rank in 0..3 {
        let (stage, replica) = layout.place_of(rank);
        let events = events_of(dir.path(), rank);
        for step in 0..STEPS {
            let listed: Vec<Action> = layout
                .pipedream_actions(stage, replica, m, step)
                .into_iter()
                .map(|action| Action { micro_batch: action.micro_batch % m, ..action })
                .collect();
            assert_eq!(compute_order(&events, step as u64), listed, "rank {rank} step {step}");
        }
    }
}

#[test]
fn every_checkpoint_mode_gives_the_weights_of_never() {
    let never_dir = tempfile::tempdir().unwrap();
    let never = pipeline_weights(Run::new(StrategyKind::Gpipe, 4), 2, never_dir.path());
    for checkpoint in [Checkpoint::Always, Checkpoint::ExceptLast] {
        let dir = tempfile::tempdir().unwrap();
        let run = Run { checkpoint, ..Run::new(StrategyKind::Gpipe, 4) };
        let got = pipeline_weights(run, 2, dir.path());
        assert_same_weights(&format!("gpipe checkpoint {checkpoint}"), &got, &never);
        // Recomputation shows in the timeline: `always` recomputes every micro-batch.
        let recomputed =
            events_of(dir.path(), 0).iter().filter(|e| e.kind == EventKind::Recompute && e.step == 0).count();
        assert_eq!(recomputed, if checkpoint == Checkpoint::Always { 4 } else { 3 }, "{checkpoint}");
    }
}

#[test]
fn hybrid_of_two_replicas_of_two_stages_matches_single_on_both_replicas_batches() {
    let dir = tempfile::tempdir().unwrap();
    let run = Run { hybrid_stages: Some(2), ..Run::new(StrategyKind::Hybrid, 2) };
    let got = pipeline_weights(run, 4, dir.path());
    assert_same_weights("hybrid 2×2", &got, &single_weights(2 * BATCH));
    // Replicas agree: rank 2 (replica 1, stage 0) holds rank 0's weights.
    let (replica0, replica1) = (load_weights(dir.path(), [0]), load_weights(dir.path(), [2]));
    assert_same_weights("replica 1 against replica 0", &replica1, &replica0);
}

#[test]
fn pipedream_on_one_stage_is_plain_sgd_on_its_micro_batches() {
    // No stage ahead, so no staleness: one update per micro-batch of 8, taken in the order
    // the batches of 32 hold them, is single-device training at batch 8 for 4× the steps.
    let dir = tempfile::tempdir().unwrap();
    let got = pipeline_weights(Run::new(StrategyKind::PipeDream, 4), 1, dir.path());
    assert_same_weights("pipedream on 1 stage", &got, &single_weights_after(BATCH / 4, 4 * STEPS));
}

#[test]
fn pipedream_updates_every_micro_batch_so_it_departs_from_synchronous_training() {
    let dir = tempfile::tempdir().unwrap();
    let got = pipeline_weights(Run::new(StrategyKind::PipeDream, 4), 2, dir.path());
    let synchronous = single_weights(BATCH);
    let (departed, _) = largest_difference(&got, &synchronous);
    assert!(departed > 1e-4, "four updates per batch with stale weights are not one synchronous update");
    assert!(got.iter().all(|(_, t)| t.isfinite().all().int64_value(&[]) == 1));
}

#[test]
fn in_bfloat16_and_float16_gpipe_and_1f1b_land_as_near_single_as_it_lands_from_exact() {
    // Micro-batches change how lower-precision products are summed, so a pipeline cannot
    // equal single-device training in that precision; measured, both schedules land 0.13 (in
    // bfloat16) and 0.14 (in float16) of the distance its rounding puts single-device
    // training from the exact (float64) weights. A pipeline computing outside autocast would
    // land about 1.0 of it (the exact weights are where float64 pipelines land), and a
    // micro-batch's loss scaled or unscaled wrongly farther. float16 runs one schedule: its
    // loss scale is the same code after either, and each float16 run costs seconds here.
    // Zero-bubble's split backward starts from the (scaled) loss itself: float16 checks its
    // scaling, bfloat16 that autocast's cast weights land in their W.
    for (precision, kinds) in [
        (Precision::Bfloat16, &[StrategyKind::Gpipe, StrategyKind::OneFOneB, StrategyKind::ZeroBubble][..]),
        (Precision::Float16, &[StrategyKind::OneFOneB, StrategyKind::ZeroBubble][..]),
    ] {
        let single = single_weights_with(config_in(precision, BATCH));
        let exact = single_weights_with(TrainConfig { precision: Precision::Float64, ..config_in(precision, BATCH) });
        let rounding = distance(&single, &exact);
        assert!(rounding > 0.0, "single-device {precision} training left float64");
        for &kind in kinds {
            let dir = tempfile::tempdir().unwrap();
            let got = pipeline_weights(Run { precision, ..Run::new(kind, 4) }, 2, dir.path());
            let apart = distance(&got, &single);
            eprintln!("{kind} in {precision}: {:.2} × single's rounding from exact", apart / rounding);
            assert!(
                apart < 0.4 * rounding,
                "{kind} in {precision} lands {apart:.3e} from single, rounding {rounding:.3e}"
            );
        }
    }
}

#[test]
fn in_float16_an_overflowing_loss_scale_skips_every_update_on_every_stage_and_replica() {
    // Each rank checks its own steps (every one skipped, the scale halving, one verdict for
    // every stage and replica); the merged weights must be the initial ones, exactly what
    // single-device float16 training from the same scale keeps. Two replicas of two stages
    // agree through both the replicas' all-reduce and the stages' verdict.
    let overflowed = single_weights_with(overflowing_float16(BATCH));
    let run = Run {
        precision: Precision::Float16,
        overflow: true,
        hybrid_stages: Some(2),
        ..Run::new(StrategyKind::Hybrid, 4)
    };
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(distance(&pipeline_weights(run, 4, dir.path()), &overflowed), 0.0, "{}", run.role());
}

#[test]
fn on_channels_last_tensors_a_pipeline_and_hybrid_match_contiguous_single() {
    // Activations leave a stage channels-last and must travel in logical order; a hybrid's
    // replicas average channels-last gradients.
    let hybrid = Run { hybrid_stages: Some(2), ..Run::new(StrategyKind::Hybrid, 4) };
    for (run, world_size) in [(Run::new(StrategyKind::OneFOneB, 4), 2), (hybrid, 4)] {
        let run = Run { memory_format: MemoryFormat::ChannelsLast, ..run };
        let dir = tempfile::tempdir().unwrap();
        let got = pipeline_weights(run, world_size, dir.path());
        // A hybrid's replicas each train a batch: the global batch is twice the pipeline's.
        let batch = if run.hybrid_stages.is_some() { 2 * BATCH } else { BATCH };
        assert_same_weights(&run.role(), &got, &single_weights(batch));
    }
}

/// The order each of `ranks` ranks runs in the performance model's simulation of
/// `schedule` with `m` micro-batches (equal stages, a fast link), its stages replicated as
/// `stage_replicas` says where given.
fn simulated_orders(
    schedule: Schedule,
    ranks: usize,
    m: usize,
    stage_replicas: Option<&StageReplicas>,
) -> Vec<Vec<Action>> {
    let cost = pipeline_model::StageCost {
        forward_s: 1.0,
        backward_s: 2.0,
        output_bytes: 1e3,
        gradient_bytes: 0.0,
        optimizer_s: 0.1,
        split_backward: None,
    };
    let costs = vec![cost; stage_replicas.map_or(schedule.stage_count(ranks), StageReplicas::stages)];
    let simulated = pipeline_model::simulate(&pipeline_model::Pipeline {
        schedule,
        micro_batches: m,
        checkpoint: Checkpoint::Never,
        stages: &costs,
        link: stratlab_perf_model::Link::new(1e9, 1e-5),
        replicas: 1,
        stage_replicas,
        measured_all_reduce: None,
    })
    .unwrap();
    (0..ranks)
        .map(|rank| simulated.actions.iter().filter(|action| action.rank == rank).map(|action| action.action).collect())
        .collect()
}

/// The compute events (forward and backward, with stage and micro-batch) of `rank` in
/// step `step`.
fn compute_order(events: &[TimelineEvent], step: u64) -> Vec<Action> {
    events
        .iter()
        .filter(|e| e.step == step)
        .filter_map(|e| {
            let pass = match e.kind {
                EventKind::Forward => Pass::Forward,
                EventKind::Backward => Pass::Backward,
                EventKind::BackwardInput => Pass::InputBackward,
                EventKind::BackwardWeight => Pass::WeightBackward,
                _ => return None,
            };
            let stage = e.pipeline_stage.expect("a pass names its stage") as usize;
            Some(Action { pass, stage, micro_batch: e.micro_batch.unwrap() as usize })
        })
        .collect()
}

#[test]
fn each_schedule_runs_in_the_order_it_defines_as_recorded_on_its_timeline() {
    let stages = 3;
    let m = 4;
    for (kind, schedule) in [(StrategyKind::Gpipe, Schedule::GPipe), (StrategyKind::OneFOneB, Schedule::OneFOneB)] {
        let dir = tempfile::tempdir().unwrap();
        run_ranks(CHILD, &Run::new(kind, m).role(), stages, dir.path());
        let timelines: Vec<Vec<TimelineEvent>> = (0..stages).map(|rank| events_of(dir.path(), rank)).collect();
        // What the performance model simulates for the same pipeline, rank by rank.
        let simulated = simulated_orders(schedule, stages, m, None);
        for (stage, events) in timelines.iter().enumerate() {
            let simulated_order = &simulated[stage];
            for step in 0..STEPS as u64 {
                assert_eq!(
                    compute_order(events, step),
                    schedule.actions(stage, stages, m),
                    "{kind} stage {stage} step {step}"
                );
                assert_eq!(
                    &compute_order(events, step),
                    simulated_order,
                    "{kind} stage {stage}: recorded vs simulated"
                );
            }
            let order = compute_order(events, 1);
            let warm_up = order.iter().take_while(|a| a.pass == Pass::Forward).count();
            let expected_warm_up = match kind {
                // 1F1B: p − s − 1 forwards before the first backward, plus the steady state's first forward.
                StrategyKind::OneFOneB => (stages - stage - 1).min(m) + 1,
                _ => m,
            };
            assert_eq!(
                warm_up.min(m),
                expected_warm_up.min(m),
                "{kind} stage {stage}: forwards before the first backward"
            );
        }
        // Causality on the shared clock: a micro-batch's forward on stage s + 1 starts after it
        // ends on stage s, and its backward on stage s starts after it ends on stage s + 1.
        let find = |rank: usize, kind: EventKind, mb: u32| {
            timelines[rank].iter().find(|e| e.step == 2 && e.kind == kind && e.micro_batch == Some(mb)).unwrap().clone()
        };
        for stage in 0..stages - 1 {
            for mb in 0..m as u32 {
                assert!(find(stage + 1, EventKind::Forward, mb).start_ns >= find(stage, EventKind::Forward, mb).end_ns);
                assert!(
                    find(stage, EventKind::Backward, mb).start_ns >= find(stage + 1, EventKind::Backward, mb).end_ns
                );
            }
        }
    }
}

#[test]
fn pipedream_never_flushes_its_stages_keep_their_depth_in_flight_across_batches() {
    let (stages, m) = (3, 4);
    let dir = tempfile::tempdir().unwrap();
    run_ranks(CHILD, &Run::new(StrategyKind::PipeDream, m).role(), stages, dir.path());
    for stage in 0..stages {
        let events = events_of(dir.path(), stage);
        for step in 0..STEPS {
            let expected: Vec<Action> = pipedream_actions(stage, stages, m, step)
                .into_iter()
                .map(|action| Action { micro_batch: action.micro_batch % m, ..action })
                .collect();
            assert_eq!(compute_order(&events, step as u64), expected, "pipedream stage {stage} step {step}");
        }
        // What was in flight at the end is drained: every forward has its backward.
        let count = |kind| events.iter().filter(|e| e.kind == kind).count();
        assert_eq!(count(EventKind::Forward), STEPS * m);
        assert_eq!(count(EventKind::Backward), STEPS * m, "stage {stage} drains its {} in flight", stages - stage - 1);
    }
}
