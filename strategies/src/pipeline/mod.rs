//! Pipeline strategies: the network cut into consecutive stages, one per worker process,
//! activations sent forward and gradients backward with c10d send/receive.
//!
//! - [`partition`] turns a network's stages into a stage plan (`balance`);
//! - [`Schedule`] (in `stratlab-strategy-spec`) says, per stage, in which order its forwards and backwards run
//!   (model-parallel, GPipe, 1F1B, PipeDream);
//! - the stage worker runs that order, overlapping sends and receives with compute.

mod evaluate;
mod layout;
mod links;
pub mod partition;
mod stage_worker;

use std::sync::Arc;

use stratlab_comm::ProcessGroup;
use stratlab_datasets::Dataset;
use tch::nn::{self, ModuleT};
use tch::{Device, Kind, Tensor};

use crate::evaluate::EvalSums;
use crate::replica_sync::agree_any;
use crate::setup::{self, Replica};
use crate::timeline::Timeline;
use crate::train_loop::{self, StepOutput, StepRunner, TrainContext};
use crate::{TrainConfig, TrainError, TrainObserver, TrainReport};
use layout::Layout;
pub use partition::{
    linear_partition, plan_by_stage_seconds, plan_shared_by_stage_seconds, plan_shared_stages, plan_stages,
    shared_partition, StagePlan,
};
use stage_worker::build::{StageModel, StageOrder, StagePlace};
use stage_worker::{Chunk, StageWorker};
use stratlab_strategy_spec::{check_balance, Balance, PartitionError, Strategy};

/// Trains with a pipeline over `world` (every rank calls this): builds this rank's stages
/// with the same initial weights a single-device build has, then runs the schedule on
/// every batch.
pub fn train(
    context: &TrainContext<'_>,
    world: &ProcessGroup,
    strategy: &Strategy,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let config = context.config;
    let invalid = |field: &'static str, reason: String| TrainError::InvalidConfig { field, reason };
    let order = StageOrder::of(strategy)?;
    let (stages, replicas) =
        strategy.pipeline_shape(world.world_size()).map_err(|reason| invalid("workers", reason.to_string()))?;
    let layout = match strategy.stage_replicas() {
        Some(replicated) => Layout { stage: replicated.place_of(world.rank()).0, stages, replica: 0, replicas: 1 },
        None => Layout::of(world.rank(), stages, replicas),
    };
    let device = setup::prepare(config)?;
    let micro_batch = strategy.stage_samples(config.batch_size) as i64;
    // The network is cut into every pipeline stage (v per rank when interleaved).
    // (A replicated stage is cut to hold its workers' share of the work.)
    let shares = strategy.stage_shares(world.world_size()).map_err(|reason| invalid("workers", reason.0))?;
    let plan = match (strategy.balance(), &config.stage_seconds) {
        // Every rank cuts the same given seconds: nothing to time or to agree on.
        (Balance::Time, Some(seconds)) => plan_shared_by_stage_seconds(context.network, seconds, &shares)
            .map_err(|error| invalid("balance", error.to_string()))?,
        (balance, _) => agree_on_plan(context.network, &balance, &shares, micro_batch, device, world)?,
    };
    // Profiling (`time`) drew from the generator on rank 0 only: seed again so every rank,
    // and every replica of a stage, builds the weights a single-device build draws.
    tch::manual_seed(config.seed as i64);

    // Built whole and copied, so a stage's weights are the ones a single-device build
    // draws from the same seed.
    if let Err(refused) = config.precision.check_strategy(strategy.kind()) {
        return Err(invalid("precision", refused.to_string()));
    }
    let schedule = strategy.schedule().expect("StageOrder::of checked it pipelines");
    let Replica { store, model: chunks, optimizer, loss_scaler } = setup::replica(config, device, |store| {
        let whole = nn::VarStore::new(device);
        let _ = context.network.build(&whole.root());
        let chunks: Vec<Chunk> = schedule
            .stages_of_rank(layout.stage, stages)
            .into_iter()
            .map(|stage| Chunk {
                stage,
                network: context.network.build_range(plan.ranges[stage].clone(), &store.root()),
            })
            .collect();
        store.copy(&whole)?;
        Ok(chunks)
    })?;
    // A stage's workers: hybrid's replicas of it, or a replicated stage's workers.
    let members: Vec<usize> = match strategy.stage_replicas() {
        Some(replicated) => replicated.ranks_of(layout.stage),
        None => (0..replicas).map(|replica| replica * stages + layout.stage).collect(),
    };
    let replica_group = match members.len() > 1 {
        true => Some(world.subgroup(&format!("stage{}", layout.stage), &members)?),
        false => None,
    };
    let place = StagePlace { world, replica_group, layout, stage_replicas: strategy.stage_replicas().cloned() };
    let stage_output_dims = context.network.analyze(1)?.stages.into_iter().map(|stage| stage.output_shape).collect();
    let params = store.trainable_variables();
    let model = StageModel { plan, stage_output_dims, chunks, params, optimizer, loss_scaler };
    let worker = StageWorker::new(place, model, order, config, device);
    let mut runner = PipelineStep { worker, wall_time_budget: config.budget.seconds.is_some() };
    let mut timeline = Timeline::of_rank(device, world.rank(), config.straggler.as_ref(), config.seed);
    let mut report = train_loop::run(context, device, &mut runner, &mut timeline, observer)?;
    observer.on_trained(&store);
    report.events = timeline.into_events();
    report.pipeline = Some(runner.worker.stage_info(strategy.kind()));
    Ok(report)
}

/// Every rank must cut the network the same way: rank 0 plans (profiling, for `time`) and
/// broadcasts the stage counts and predicted costs.
fn agree_on_plan(
    spec: &stratlab_networks::NetworkSpec,
    balance: &Balance,
    shares: &[usize],
    micro_batch: i64,
    device: Device,
    world: &ProcessGroup,
) -> Result<StagePlan, TrainError> {
    let partition_error =
        |error: PartitionError| TrainError::InvalidConfig { field: "balance", reason: error.to_string() };
    let stages = shares.len();
    let mut plan = if world.rank() == 0 || *balance != Balance::Time {
        plan_shared_stages(spec, balance, shares, micro_batch, device).map_err(partition_error)?
    } else {
        check_balance(spec.stages.len(), balance, stages).map_err(|error| partition_error(error.into()))?;
        let mut placeholder =
            plan_stages(spec, &Balance::Uniform, stages, micro_batch, device).map_err(partition_error)?;
        placeholder.balance = Balance::Time;
        placeholder.unit = "seconds".into();
        placeholder
    };
    if world.world_size() > 1 {
        let mut shared: Vec<f64> = plan.ranges.iter().map(|range| range.len() as f64).collect();
        shared.extend(&plan.costs);
        let mut tensor = Tensor::from_slice(&shared).to_kind(Kind::Double).to_device(world.tensor_device(device));
        world.broadcast(&mut tensor, 0)?;
        let shared = Vec::<f64>::try_from(tensor.to_device(Device::Cpu))?;
        let mut start = 0;
        plan.ranges = shared[..stages]
            .iter()
            .map(|&count| {
                let range = start..start + count as usize;
                start = range.end;
                range
            })
            .collect();
        plan.costs = shared[stages..].to_vec();
    }
    Ok(plan)
}

struct PipelineStep<'a> {
    worker: StageWorker<'a>,
    wall_time_budget: bool,
}

impl StepRunner for PipelineStep<'_> {
    fn model(&self) -> &dyn ModuleT {
        self.worker.model()
    }

    fn shard(&self) -> (usize, usize) {
        (self.worker.layout.replica, self.worker.layout.replicas)
    }

    fn step(
        &mut self,
        images: &Tensor,
        labels: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<StepOutput, TrainError> {
        self.worker.run_step(images, labels, lr, timeline)
    }

    fn finish(&mut self, timeline: &mut Timeline) -> Result<(), TrainError> {
        self.worker.drain(timeline)
    }

    fn evaluate(
        &mut self,
        test: &Arc<dyn Dataset>,
        config: &TrainConfig,
        _device: Device,
    ) -> Result<EvalSums, TrainError> {
        let [loss_sum, correct, samples] = self.worker.evaluate_through(test, config)?;
        Ok(EvalSums { loss_sum, correct, samples })
    }

    fn agree_to_stop(&mut self, local_stop: bool) -> Result<bool, TrainError> {
        agree_any(self.worker.world, self.worker.device, local_stop, self.wall_time_budget)
    }
}
