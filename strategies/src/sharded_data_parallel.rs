//! `sharded-data-parallel` (ZeRO; PyTorch FSDP): data parallelism whose ranks each keep a
//! 1/N shard of what a replica holds.
//!
//! The weights are grouped into units (each network stage, or at ZeRO-3 with `shard_unit:
//! network` the whole network), and each unit's weights live in one flat buffer, padded to
//! a multiple of the world size, that the parameters view ([`shard`]). Rank r owns the rth
//! chunk: its optimizer (SGD or Adam) steps only that chunk, a variable of its own store,
//! so its state is 1/N of a replica's at every stage.
//!
//! - ZeRO-1: each unit's gradients are reduce-scattered (averaged) as soon as its backward
//!   ends, overlapping the stages below, as data parallelism's buckets are; the gradients
//!   stay until the step ends. After the update every rank all-gathers the chunks into the
//!   flat buffers: the weights are whole again.
//! - ZeRO-2: as ZeRO-1, but a unit's gradients are freed once packed for their
//!   reduce-scatter, so only this rank's chunk of them outlives the stage's backward.
//! - ZeRO-3: as ZeRO-2, and the flat buffers exist only while a unit computes: gathered
//!   before its forward and freed after it, gathered again before its backward and freed
//!   after (FSDP's `reshard_after_forward=True`). Evaluation gathers every unit first.
//!
//! All through c10d's own collectives (`_reduce_scatter_base`, `_allgather_base`): Gloo runs
//! the reduce-scatter as an all-reduce, NCCL as a ring reduce-scatter.

mod shard;

use std::ops::Range;

use std::sync::Arc;

use stratlab_comm::{ProcessGroup, ReduceOp, Work};
use stratlab_datasets::Dataset;
use stratlab_strategy_spec::{ShardUnit, ZeroStage};
use tch::nn::{self, ModuleT, VarStore};
use tch::{Device, Tensor};

use crate::evaluate::correct_on_device;
use crate::evaluate::{evaluate_shard, EvalSums};
use crate::loss_scale;
use crate::replica_sync::{agree_any, broadcast_variables, sum_over_group};
use crate::setup::{self, Replica};
use crate::staged_model::StagedModel;
use crate::staged_pass::{StageHooks, StagedPass};
use crate::timeline::{EventKind, Timeline};
use crate::traffic::Traffic;
use crate::train_loop::{self, StepOutput, StepRunner, TrainContext};
use crate::{PrecisionOps, TrainConfig, TrainError, TrainObserver, TrainReport};
use shard::Unit;

/// Trains with ZeRO stage `stage` over `group`, gathering `unit` at a time at stage 3
/// (every rank calls this with its own group).
pub fn train(
    context: &TrainContext<'_>,
    group: &ProcessGroup,
    stage: ZeroStage,
    unit: ShardUnit,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let config = context.config;
    let device = setup::prepare(config)?;
    // The replica's own optimizer is never stepped, so it never allocates state (libtorch's
    // SGD and Adam create theirs at the first step): each rank's optimizer is over its chunks.
    let Replica { store, model, optimizer: _, loss_scaler } =
        setup::replica(config, device, |store| Ok(StagedModel::build(context.network, store)))?;
    let mut timeline = Timeline::of_rank(device, group.rank(), config.straggler.as_ref(), config.seed);
    broadcast_variables(group, &store, &mut timeline)?;
    let params = store.trainable_variables();
    let stage_count = model.stages.len();
    let unit_stages: Vec<Range<usize>> = match (stage.shards_weights(), unit) {
        (true, ShardUnit::Network) => std::iter::once(0..stage_count).collect(),
        _ => (0..stage_count).map(|stage| stage..stage + 1).collect(),
    };
    let mut chunks = VarStore::new(device);
    let mut units = Vec::with_capacity(unit_stages.len());
    for (index, stages) in unit_stages.into_iter().enumerate() {
        let owned = model.param_ranges[stages.start].start..model.param_ranges[stages.end - 1].end;
        units.push(Unit::new(index, stages, &params[owned], group, &chunks)?);
    }
    chunks.set_kind(config.precision.kind());
    let optimizer = config.update_rule().build(&chunks, config.lr)?;
    let unit_of = units.iter().enumerate().flat_map(|(index, unit)| unit.stages.clone().map(move |_| index)).collect();
    let mut runner = ShardedStep {
        group,
        unit_of,
        pass: StagedPass { model, precision: config.precision, device, loss_scaler },
        stage,
        units,
        optimizer,
        wall_time_budget: config.budget.seconds.is_some(),
    };
    if stage.shards_weights() {
        runner.release_all();
    }
    let mut report = train_loop::run(context, device, &mut runner, &mut timeline, observer)?;
    runner.gather_all(&mut timeline)?;
    observer.on_trained(&store);
    report.events = timeline.into_events();
    Ok(report)
}

struct ShardedStep<'a> {
    group: &'a ProcessGroup,
    pass: StagedPass,
    stage: ZeroStage,
    units: Vec<Unit>,
    /// The unit of each network stage.
    unit_of: Vec<usize>,
    /// Over every unit's chunk of the weights, and nothing else.
    optimizer: nn::Optimizer,
    wall_time_budget: bool,
}

impl ShardedStep<'_> {
    /// Gathers every unit's weights whole (after training, and before an evaluation at
    /// ZeRO-3, FSDP's `summon_full_params`).
    fn gather_all(&mut self, timeline: &mut Timeline) -> Result<(), TrainError> {
        for unit in &mut self.units {
            if !unit.is_gathered() {
                unit.gather(self.group, timeline)?;
            }
        }
        Ok(())
    }

    /// Frees every unit's gathered weights (ZeRO-3 between steps).
    fn release_all(&mut self) {
        for unit in &mut self.units {
            unit.release();
        }
    }
}

/// The hooks of one step: at ZeRO-3 the gathers and frees around each unit's passes, at
/// every stage each unit's reduce-scatter once its last stage's backward ends.
struct ShardHooks<'s> {
    group: &'s ProcessGroup,
    stage: ZeroStage,
    units: &'s mut [Unit],
    /// The unit of each network stage.
    unit_of: &'s [usize],
    in_flight: Vec<(usize, Work, Tensor)>,
    traffic: Traffic,
}

/// Reduce-scatters in flight at most, each holding its unit's packed gradients: two let
/// one overlap the next stage's backward, where waiting for all at the end would hold a
/// packed copy of every gradient at once, as much as ZeRO-2 saves.
const IN_FLIGHT: usize = 2;

impl ShardHooks<'_> {
    /// Waits for the reduce-scatters started first until at most `keep` are in flight.
    fn settle(&mut self, keep: usize, timeline: &mut Timeline) -> Result<(), TrainError> {
        while self.in_flight.len() > keep {
            let (index, work, packed) = self.in_flight.remove(0);
            let done = work.wait()?;
            drop(packed);
            timeline.communication(EventKind::ReduceScatter, format!("unit {index} gradients"), &done);
            self.traffic.add(&done);
        }
        Ok(())
    }
}

impl StageHooks for ShardHooks<'_> {
    fn before_forward(&mut self, stage: usize, timeline: &mut Timeline) -> Result<(), TrainError> {
        let unit = &mut self.units[self.unit_of[stage]];
        if self.stage.shards_weights() && unit.stages.start == stage {
            unit.gather(self.group, timeline)?;
        }
        Ok(())
    }

    fn after_forward(&mut self, stage: usize, _timeline: &mut Timeline) -> Result<(), TrainError> {
        let unit = &mut self.units[self.unit_of[stage]];
        if self.stage.shards_weights() && unit.stages.end == stage + 1 {
            unit.release();
        }
        Ok(())
    }

    fn before_backward(&mut self, stage: usize, timeline: &mut Timeline) -> Result<(), TrainError> {
        let unit = &mut self.units[self.unit_of[stage]];
        if self.stage.shards_weights() && unit.stages.end == stage + 1 {
            unit.gather(self.group, timeline)?;
        }
        Ok(())
    }

    fn after_backward(&mut self, stage: usize, timeline: &mut Timeline) -> Result<(), TrainError> {
        let index = self.unit_of[stage];
        let unit = &mut self.units[index];
        if unit.stages.start != stage {
            return Ok(());
        }
        let started = unit.reduce_scatter_gradients(self.group, self.stage.shards_gradients())?;
        if self.stage.shards_weights() {
            unit.release();
        }
        if let Some((work, packed)) = started {
            self.in_flight.push((index, work, packed));
        }
        self.settle(IN_FLIGHT, timeline)
    }
}

impl StepRunner for ShardedStep<'_> {
    fn model(&self) -> &dyn ModuleT {
        &self.pass.model
    }

    fn shard(&self) -> (usize, usize) {
        (self.group.rank(), self.group.world_size())
    }

    fn step(
        &mut self,
        images: &Tensor,
        labels: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<StepOutput, TrainError> {
        self.optimizer.set_lr(lr);
        self.optimizer.zero_grad();
        let mut hooks = ShardHooks {
            group: self.group,
            stage: self.stage,
            units: &mut self.units,
            unit_of: &self.unit_of,
            in_flight: Vec::new(),
            traffic: Traffic::default(),
        };
        let (logits, loss) = self.pass.run(images, labels, timeline, &mut hooks)?;
        let wait_start = timeline.now();
        hooks.settle(0, timeline)?;
        timeline.record(EventKind::Idle, "waiting for reduce-scatter", wait_start, timeline.now(), None);
        let mut traffic = hooks.traffic;
        // Each rank holds its own chunk's verdict: every rank skips if any chunk overflowed.
        let chunks: Vec<Tensor> = self.units.iter().map(|unit| unit.chunk.shallow_clone()).collect();
        let group = self.group;
        let agree = |found_inf: Tensor| -> Result<Tensor, TrainError> {
            let mut verdict = found_inf;
            group.all_reduce(&mut verdict, ReduceOp::Max)?;
            Ok(verdict)
        };
        let optimizer = &mut self.optimizer;
        let scaling = timeline.span(EventKind::Optimizer, "optimizer step (own chunks)", || {
            loss_scale::step(self.pass.loss_scaler.as_mut(), &chunks, agree, || optimizer.step())
        })?;
        if !self.stage.shards_weights() {
            // The updated chunks, gathered into every rank's whole weights.
            for unit in &mut self.units {
                let Some(done) = unit.gather_updated(self.group)? else { continue };
                traffic.add(&done);
                timeline.communication(EventKind::AllGather, format!("unit {} weights", unit.index), &done);
            }
            for unit in &self.units {
                unit.clear_gradients()?;
            }
        }
        let (comm_bytes, comm_s) = (traffic.bytes, traffic.seconds);
        Ok(StepOutput { correct: correct_on_device(&logits, labels), loss, comm_bytes, comm_s, scaling })
    }

    fn eval_shard(&self) -> (usize, usize) {
        self.shard()
    }

    /// Every rank evaluates its share with whole weights: at ZeRO-3 every unit is gathered
    /// first (off the timeline, which holds training steps) and freed after.
    fn evaluate(
        &mut self,
        test: &Arc<dyn Dataset>,
        config: &TrainConfig,
        device: Device,
    ) -> Result<EvalSums, TrainError> {
        self.gather_all(&mut Timeline::new(device, false))?;
        let sums = evaluate_shard(&self.pass.model, test, config, device, self.eval_shard());
        if self.stage.shards_weights() {
            self.release_all();
        }
        train_loop::sum_evaluation(self, sums?)
    }

    fn sum_across_ranks(&mut self, values: &mut [f64]) -> Result<(), TrainError> {
        sum_over_group(self.group, self.pass.device, values)
    }

    fn agree_to_stop(&mut self, local_stop: bool) -> Result<bool, TrainError> {
        agree_any(self.group, self.pass.device, local_stop, self.wall_time_budget)
    }
}
