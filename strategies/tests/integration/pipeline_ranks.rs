//! The pipeline tests' ranks: a [`Run`] names a pipeline (kind, micro-batches, checkpoint,
//! stages, precision, …) as a role string; [`pipeline_child_rank`] is one stage rank of it,
//! a child process of this binary joined by c10d Gloo over loopback, which saves its
//! stages' weights, losses and timeline for the parent to merge and check; and the helpers
//! that read a timeline's compute order and the performance model's simulated one.

use std::path::Path;

use crate::common::*;
use stratlab_perf_model::pipeline as pipeline_model;
use stratlab_strategies::pipeline;
use stratlab_strategies::{EventKind, MemoryFormat, Precision, TimelineEvent, TrainConfig, TrainContext};
use stratlab_strategy_spec::{
    Action, Checkpoint, Parameters, Pass, Placement, Schedule, StageReplicas, Strategy, StrategyKind,
};

/// A pipeline run: `kind`, micro-batches, checkpoint, pp for hybrid and the precision;
/// encoded in the role string the children read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub(crate) kind: StrategyKind,
    pub(crate) micro_batches: usize,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) hybrid_stages: Option<usize>,
    /// Interleaved 1F1B's stages per rank.
    pub(crate) virtual_stages: Option<usize>,
    /// 1F1B's workers of each of two stages, where a stage is replicated.
    pub(crate) stage_replicas: Option<(usize, usize)>,
    /// Zero-bubble's placement.
    pub(crate) placement: Option<Placement>,
    pub(crate) precision: Precision,
    pub(crate) memory_format: MemoryFormat,
    /// Trains from [`OVERFLOWING_SCALE`] (in float16): every update is skipped.
    pub(crate) overflow: bool,
}

impl Run {
    pub(crate) fn new(kind: StrategyKind, micro_batches: usize) -> Run {
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

    pub(crate) fn role(&self) -> String {
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
pub(crate) const CHILD: &str = "pipeline_ranks::pipeline_child_rank";

/// The batch each pipeline (each replica, for hybrid) trains on per step.
pub(crate) const BATCH: usize = 2 * PER_RANK_BATCH;

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
pub(crate) fn pipeline_weights(run: Run, world_size: usize, out: &Path) -> Vec<(String, tch::Tensor)> {
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

pub(crate) fn events_of(out: &Path, rank: usize) -> Vec<TimelineEvent> {
    serde_json::from_slice(&std::fs::read(out.join(format!("rank{rank}.events.json"))).unwrap()).unwrap()
}

/// The order each of `ranks` ranks runs in the performance model's simulation of
/// `schedule` with `m` micro-batches (equal stages, a fast link), its stages replicated as
/// `stage_replicas` says where given.
pub(crate) fn simulated_orders(
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
pub(crate) fn compute_order(events: &[TimelineEvent], step: u64) -> Vec<Action> {
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
