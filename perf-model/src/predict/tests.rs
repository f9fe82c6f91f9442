//! What the workers sharing one machine cost each other, on hand-made profiles.

use stratlab_strategy_spec::{Parameters, ServerMode, ServerPlacement, Straggler, Strategy, StrategyKind, ZeroStage};

use super::*;
use crate::profile::StageProfile;
use crate::Contention;

/// Network stages of the hand-made profile.
const STAGES: usize = 8;
/// An MNIST sample as the loader holds it: 28 × 28 f32 pixels and an i64 label.
const SAMPLE_BYTES: f64 = 28.0 * 28.0 * 4.0 + 8.0;

/// Every one of [`STAGES`] stages at 16 samples: 10 ms forward, 20 ms backward, 1 MB of
/// parameters, no update time.
fn profile(contention: Option<Contention>) -> NetworkProfile {
    let stages = (0..STAGES)
        .map(|stage| StageProfile {
            name: format!("stage{stage}"),
            forward_s: vec![(16, 0.010)],
            backward_s: vec![(16, 0.020)],
            parameter_bytes: vec![1_000_000],
            output_bytes_per_sample: 1000,
            kept_bytes: vec![(16, 1e5)],
            transient_bytes: vec![(16, 1e4)],
            input_backward_s: Vec::new(),
            weight_backward_s: Vec::new(),
        })
        .collect();
    NetworkProfile {
        stages,
        optimizer_s: 0.0,
        whole_model_copy_s: 0.0,
        contention,
        training_step_s: Vec::new(),
        training_step_peak_bytes: Vec::new(),
    }
}

/// Two workers of `strategy`; a pipeline cut in two halves.
fn question<'a>(
    strategy: &'a Strategy,
    profile: &'a NetworkProfile,
    link: &'a Link,
    host_copy_bandwidth: Option<f64>,
) -> StepQuestion<'a> {
    StepQuestion {
        strategy,
        workers: 2,
        batch: 16,
        profile,
        cuts: strategy.schedule().map(|_| Ok(vec![0..STAGES / 2, STAGES / 2..STAGES])),
        sample_bytes: SAMPLE_BYTES,
        link: Some(link),
        collectives: None,
        optimizer: Default::default(),
        prefetch: 0,
        threads: 1,
        cores: 2,
        host_copy_bandwidth,
        straggler: None,
    }
}

#[test]
fn transfers_the_host_copies_take_core_time_from_workers_that_fill_the_cores() {
    let profile = profile(None);
    let stages = STAGES as f64;
    let strategy = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    // A link so fast the all-reduce is all but free: the step is the compute.
    let link = Link::new(1e15, 0.0);
    let compute_s = stages * 0.030;
    let apart = question(&strategy, &profile, &link, None).predict();
    assert_eq!(apart.core_sharing, 1.0, "two 1-thread workers on two cores");
    // The ring all-reduce of 2 workers sends every gradient byte once each way: 2 × G bytes
    // between workers, each copied at both ends, at 2 × G × 100 bytes per second: 1 % of a
    // second per step of core time over two cores.
    let gradients = stages * 1e6;
    let shared = question(&strategy, &profile, &link, Some(2.0 * gradients * 100.0)).predict();
    let copying_s = 2.0 * 2.0 * gradients / (2.0 * gradients * 100.0);
    let expected = (2.0 + copying_s / compute_s) / 2.0;
    assert!((shared.core_sharing - expected).abs() < 1e-6, "{} vs {expected}", shared.core_sharing);
    assert!(shared.model_s().unwrap() > apart.model_s().unwrap());
}

#[test]
fn contention_slows_workers_that_compute_at_once_not_those_that_take_turns() {
    let contention = Contention { copies: 2, ratio: vec![(16, 1.5)] };
    let (alone, contended) = (profile(None), profile(Some(contention)));
    let link = Link::new(1e15, 0.0);
    let data_parallel = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    let step = |strategy: &Strategy, profile: &NetworkProfile| {
        question(strategy, profile, &link, None).predict().model_s().unwrap()
    };
    let ratio = step(&data_parallel, &contended) / step(&data_parallel, &alone);
    assert!((ratio - 1.5).abs() < 1e-6, "every data-parallel worker computes at once: {ratio}");
    let model_parallel = Strategy::new(StrategyKind::ModelParallel, Parameters::default()).unwrap();
    let ratio = step(&model_parallel, &contended) / step(&model_parallel, &alone);
    assert!((ratio - 1.0).abs() < 1e-6, "model-parallel's stages take turns: {ratio}");
}

#[test]
fn single_is_its_measured_training_step_where_there_is_one_and_its_stages_elsewhere() {
    let link = Link::new(1e15, 0.0);
    let single = Strategy::new(StrategyKind::Single, Parameters::default()).unwrap();
    let stages_only = profile(None);
    let summed = question(&single, &stages_only, &link, None).predict();
    let stages_s = STAGES as f64 * 0.030;
    assert!((summed.model_s().unwrap() - stages_s).abs() < 1e-12);
    // Steps trained at 16 samples (the question's batch) answer for it, in both predictors.
    // So does their measured peak for its memory, whatever the stages' counts say.
    let stepped = NetworkProfile {
        training_step_s: vec![(8, 0.5), (16, 0.25)],
        training_step_peak_bytes: vec![(16, 5e7)],
        ..profile(None)
    };
    let measured = question(&single, &stepped, &link, None).predict();
    assert_eq!(measured.model_s().unwrap(), 0.25);
    assert_eq!(measured.thesis_s.unwrap(), 0.25);
    let memory = measured.memory.unwrap();
    assert!((memory.total_bytes() - 5e7).abs() < 1.0, "{memory:?}");
    assert!(memory.transient_bytes > 0.0 && memory.weights_bytes > 0.0, "{memory:?}");
    assert_ne!(summed.memory.unwrap().total_bytes(), memory.total_bytes());
    // Data parallelism still times its stages: the steps say nothing of their split.
    let data_parallel = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    let step = |profile: &NetworkProfile| question(&data_parallel, profile, &link, None).predict().model_s();
    assert_eq!(step(&stepped).unwrap(), step(&stages_only).unwrap());
}

#[test]
fn the_parameter_server_pays_its_whole_model_copies() {
    let link = Link::new(1e15, 0.0);
    let server = Strategy::new(StrategyKind::ParameterServer, Parameters::default()).unwrap();
    let step = |whole_model_copy_s: f64| {
        let profile = NetworkProfile { whole_model_copy_s, ..profile(None) };
        question(&server, &profile, &link, None).predict().model.unwrap()
    };
    let (free, copying) = (step(0.0), step(0.01));
    // Two workers, the server colocated: one remote worker, six copies in the round.
    assert!((copying.exposed_comm_s - free.exposed_comm_s - 0.06).abs() < 1e-9, "{copying:?} vs {free:?}");
}

/// What a parameter server's ranks hold, as `parameter_server` keeps it from round to
/// round: every rank one flat buffer for its gradients out and the weights in, the server
/// one more per remote worker, beside the passes a training rank runs.
#[test]
fn a_parameter_server_keeps_a_buffer_per_remote_worker_beside_the_passes() {
    let profile = profile(None);
    let link = Link::new(1e15, 0.0);
    let parameter_bytes = STAGES as f64 * 1e6;
    let single = Strategy::new(StrategyKind::Single, Parameters::default()).unwrap();
    let alone = question(&single, &profile, &link, None).predict().memory.unwrap();
    let buffers_over_single = |placement: ServerPlacement, workers: usize| {
        let parameters = Parameters { server: Some(placement), ..Parameters::default() };
        let server = Strategy::new(StrategyKind::ParameterServer, parameters).unwrap();
        let memory = StepQuestion { workers, ..question(&server, &profile, &link, None) }.predict().memory.unwrap();
        (memory, (memory.total_bytes() - alone.total_bytes()) / parameter_bytes)
    };
    for (workers, buffers) in [(2, 2.0), (4, 4.0)] {
        let (memory, extra) = buffers_over_single(ServerPlacement::Colocated, workers);
        assert!((extra - buffers).abs() < 1e-9, "colocated, {workers} workers: {extra} weights' worth more");
        assert_eq!(memory.activations_bytes, alone.activations_bytes, "the passes run beside the buffers");
    }
    // Dedicated: the server holds W buffers (W - 1 workers' and its own) and runs no passes,
    // which outweighs a worker's one buffer beside these small activations.
    for workers in [2, 4] {
        let (server, _) = buffers_over_single(ServerPlacement::Dedicated, workers);
        assert_eq!(server.activations_bytes + server.transient_bytes, 0.0);
        assert!((server.buffers_bytes - workers as f64 * parameter_bytes).abs() < 1e-6, "{server:?}");
    }
    // Activations of 10 MB a stage outweigh four buffers: a worker is the fullest, one buffer
    // more than single-device training.
    let heavy = NetworkProfile {
        stages: profile
            .stages
            .iter()
            .map(|stage| StageProfile { kept_bytes: vec![(16, 1e7)], ..stage.clone() })
            .collect(),
        ..profile.clone()
    };
    let parameters = Parameters { server: Some(ServerPlacement::Dedicated), ..Parameters::default() };
    let server = Strategy::new(StrategyKind::ParameterServer, parameters).unwrap();
    let worker = StepQuestion { workers: 4, ..question(&server, &heavy, &link, None) }.predict().memory.unwrap();
    let heavy_alone = question(&single, &heavy, &link, None).predict().memory.unwrap();
    assert!((worker.total_bytes() - heavy_alone.total_bytes() - parameter_bytes).abs() < 1e-6, "{worker:?}");
}

#[test]
fn a_pipeline_is_predicted_on_the_cut_it_is_given_or_says_why_not() {
    let profile = profile(None);
    let link = Link::new(1e15, 0.0);
    let parameters = Parameters { micro_batches: Some(8), ..Parameters::default() };
    let gpipe = Strategy::new(StrategyKind::Gpipe, parameters).unwrap();
    let cut = |cuts| StepQuestion { cuts, ..question(&gpipe, &profile, &link, None) }.predict();
    // Eight micro-batches: a lopsided cut paces the pipeline at its larger part, 6 of the
    // 8 stages against 4.
    let even = cut(Some(Ok(vec![0..4, 4..8]))).model_s().unwrap();
    let lopsided = cut(Some(Ok(vec![0..6, 6..8]))).model_s().unwrap();
    assert!(lopsided > even * 1.2, "{lopsided} vs {even}");
    let refused = cut(Some(Err(PartitionError("3 parts of 2 stages".into()))));
    assert_eq!(refused.model_s(), Err(Unpredictable::Partition(PartitionError("3 parts of 2 stages".into()))));
    assert!(refused.memory.is_err() && refused.thesis_s.is_err());
    assert_eq!(cut(None).model_s(), Err(Unpredictable::NoCuts));
}

/// Zero-bubble is simulated on the profile's measured halves: where splitting costs (each
/// stage's I + W a quarter over its B), ZB-H1 is predicted slower than where the halves
/// add up to B, and the first stage's W is its whole backward either way.
#[test]
fn zero_bubble_is_predicted_on_the_profiled_halves_of_each_backward() {
    let link = Link::new(1e15, 0.0);
    let parameters = Parameters { micro_batches: Some(8), ..Parameters::default() };
    let h1 = Strategy::new(StrategyKind::ZeroBubble, parameters).unwrap();
    let with_halves = |input_s: f64, weight_s: f64| {
        let mut profile = profile(None);
        for stage in &mut profile.stages {
            stage.input_backward_s = vec![(16, input_s)];
            stage.weight_backward_s = vec![(16, weight_s)];
        }
        profile
    };
    let (free, dear) = (with_halves(0.010, 0.010), with_halves(0.0125, 0.0125));
    let free_s = question(&h1, &free, &link, None).predict().model_s().unwrap();
    let dear_s = question(&h1, &dear, &link, None).predict().model_s().unwrap();
    assert!(dear_s > free_s * 1.05, "{dear_s} vs {free_s}");
    let unsplit = question(&h1, &profile(None), &link, None).predict().model_s().unwrap();
    assert!((unsplit - free_s).abs() < 1e-9, "without halves the model halves B: {unsplit} vs {free_s}");
}

/// ZeRO's peak per worker falls stage by stage, and on Gloo (the workers share a host)
/// ZeRO-1 holds one unit more: the copy Gloo all-reduces to reduce-scatter, beside the
/// gradients ZeRO-1 keeps. From ZeRO-2 that copy takes the freed gradient's place.
#[test]
fn zero_stages_shard_memory_and_gloo_s_reduce_scatter_copies_its_input_beside_zero1_s_gradients() {
    let profile = profile(None);
    let link = Link::new(1e9, 0.0);
    let adam = stratlab_strategy_spec::OptimizerFootprint { states: 2, temporaries: 3 };
    let peak = |stage: Option<ZeroStage>, host_copy_bandwidth: Option<f64>| {
        let kind = if stage.is_some() { StrategyKind::ShardedDataParallel } else { StrategyKind::DataParallel };
        let strategy = Strategy::new(kind, Parameters { stage, ..Parameters::default() }).unwrap();
        let question = StepQuestion { optimizer: adam, ..question(&strategy, &profile, &link, host_copy_bandwidth) };
        question.predict().memory.unwrap()
    };
    let gloo = Some(1e9);
    let totals: Vec<f64> = [None, Some(ZeroStage::One), Some(ZeroStage::Two), Some(ZeroStage::Three)]
        .into_iter()
        .map(|stage| peak(stage, gloo).total_bytes())
        .collect();
    assert!(totals.windows(2).all(|pair| pair[0] > pair[1]), "{totals:?}");
    let unit_bytes = 1e6;
    let zero1 = peak(Some(ZeroStage::One), gloo).total_bytes() - peak(Some(ZeroStage::One), None).total_bytes();
    assert!((zero1 - unit_bytes).abs() < 1e-6, "{zero1}");
    let zero2 = peak(Some(ZeroStage::Two), gloo).total_bytes() - peak(Some(ZeroStage::Two), None).total_bytes();
    assert_eq!(zero2, 0.0);
}

#[test]
fn a_straggler_paces_synchronous_replicas_and_slows_only_its_own_pipeline_stage() {
    let profile = profile(None);
    let link = Link::new(1e9, 0.0);
    let slowed = Straggler { ranks: vec![1], slowdown: 2.0, jitter: 0.0 };
    let compute = |strategy: &Strategy, straggler: Option<&Straggler>| {
        let step = StepQuestion { straggler, ..question(strategy, &profile, &link, None) }.predict().model.unwrap();
        (step.step_s, step.compute_s)
    };
    let data_parallel = Strategy::new(StrategyKind::DataParallel, Default::default()).unwrap();
    let (full, full_compute) = compute(&data_parallel, None);
    let (paced, paced_compute) = compute(&data_parallel, Some(&slowed));
    assert!((paced_compute / full_compute - 2.0).abs() < 1e-9, "{paced_compute} against {full_compute}");
    assert!(paced > full);
    // GPipe over two stages: only stage 1's passes take twice as long, so the step grows by
    // less than twice (stage 0 keeps its speed).
    let gpipe =
        Strategy::new(StrategyKind::Gpipe, Parameters { micro_batches: Some(4), ..Default::default() }).unwrap();
    let (pipeline, _) = compute(&gpipe, None);
    let (slowed_pipeline, _) = compute(&gpipe, Some(&slowed));
    assert!(slowed_pipeline > pipeline && slowed_pipeline < 2.0 * pipeline, "{slowed_pipeline} against {pipeline}");
    // A straggler rank the trial does not have slows nothing.
    let absent = Straggler { ranks: vec![5], ..slowed.clone() };
    assert_eq!(compute(&data_parallel, Some(&absent)).0, full);
}

#[test]
fn a_server_answering_each_worker_is_paced_per_update_and_asynchrony_hides_a_straggler() {
    let profile = profile(None);
    let link = Link::new(1e9, 0.0);
    let slowed = Straggler { ranks: vec![1], slowdown: 2.0, jitter: 0.0 };
    let server = |mode: Option<ServerMode>, staleness: Option<usize>| {
        let parameters =
            Parameters { server: Some(ServerPlacement::Dedicated), mode, staleness, ..Parameters::default() };
        Strategy::new(StrategyKind::ParameterServer, parameters).unwrap()
    };
    let step = |strategy: &Strategy, straggler: Option<&Straggler>| {
        let question = StepQuestion { workers: 3, straggler, ..question(strategy, &profile, &link, None) };
        question.predict().model.unwrap().step_s
    };
    let (sync, asynchronous) = (server(None, None), server(Some(ServerMode::Async), None));
    let bounded = server(Some(ServerMode::Bounded), Some(2));
    // Two workers of equal speed: an update every half round, near enough (one exchange
    // instead of two queued on the server's link).
    let (round, update) = (step(&sync, None), step(&asynchronous, None));
    assert!(update < round && update > 0.4 * round, "{update} against {round}");
    assert_eq!(step(&bounded, None), update, "no worker is ahead without a straggler");
    // Rank 1 twice as slow: the synchronous round waits for it; async updates at both
    // workers' rates; bounded at the slow one's.
    let (slow_round, slow_update, slow_bounded) =
        (step(&sync, Some(&slowed)), step(&asynchronous, Some(&slowed)), step(&bounded, Some(&slowed)));
    assert!(slow_round > 1.5 * round);
    assert!(slow_update < slow_bounded && slow_bounded < slow_round, "{slow_update} {slow_bounded} {slow_round}");
}

#[test]
fn a_dedicated_server_takes_no_core_from_its_two_workers() {
    let profile = profile(None);
    let link = Link::new(1e15, 0.0);
    let parameters = Parameters { server: Some(ServerPlacement::Dedicated), ..Parameters::default() };
    let dedicated = Strategy::new(StrategyKind::ParameterServer, parameters).unwrap();
    // Three ranks on two cores, but only the two workers compute.
    let step = StepQuestion { workers: 3, ..question(&dedicated, &profile, &link, None) }.predict();
    assert_eq!(step.core_sharing, 1.0);
    let colocated = Strategy::new(StrategyKind::ParameterServer, Parameters::default()).unwrap();
    let crowded = StepQuestion { workers: 3, ..question(&colocated, &profile, &link, None) }.predict();
    assert!(crowded.core_sharing > 1.4, "three computing ranks on two cores: {}", crowded.core_sharing);
}
