//! `data-parallel` (Horovod-style): every rank holds a replica and trains on its shard of
//! each global batch; parameters are broadcast from rank 0 at the start; gradients are
//! fused into buckets and all-reduced (averaged) asynchronously while the backward pass
//! still runs, stage by stage from the last; then every rank takes the same optimizer step.
//!
//! The backward pass runs one stage at a time (`crate::staged_pass`): when stage *i*
//! finishes, its parameters' gradients are final, and that is where its buckets'
//! all-reduces start, overlapping the remaining backward (see
//! `stratlab_strategy_spec::buckets`).

use stratlab_comm::{ProcessGroup, ReduceOp, Work};
use tch::nn::{self, ModuleT};
use tch::Tensor;

use crate::evaluate::correct_on_device;
use crate::flat::{buffer_for, pack, unpack};
use crate::loss_scale;
use crate::replica_sync::{agree_any, broadcast_variables, sum_over_group};
use crate::setup::{self, Replica};
use crate::timeline::{EventKind, Timeline};
use crate::traffic::Traffic;
use crate::train_loop::{self, StepOutput, StepRunner, TrainContext};
use crate::{TrainError, TrainObserver, TrainReport};
use stratlab_strategy_spec::buckets::{plan_buckets, Bucket};

use crate::staged_model::StagedModel;
use crate::staged_pass::{StageHooks, StagedPass};

/// Trains with data parallelism over `group` (every rank calls this with its own group).
pub fn train(
    context: &TrainContext<'_>,
    group: &ProcessGroup,
    fusion_threshold_bytes: u64,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let config = context.config;
    let device = setup::prepare(config)?;
    let Replica { store, model, optimizer, loss_scaler } =
        setup::replica(config, device, |store| Ok(StagedModel::build(context.network, store)))?;
    let mut timeline = Timeline::of_rank(device, group.rank(), config.straggler.as_ref(), config.seed);
    broadcast_variables(group, &store, &mut timeline)?;
    let params = store.trainable_variables();
    let param_bytes: Vec<u64> = params.iter().map(stratlab_comm::byte_size).collect();
    let buckets = plan_buckets(&model.param_ranges, &param_bytes, fusion_threshold_bytes.max(1));
    let fused: Vec<Vec<Tensor>> = buckets
        .iter()
        .map(|stage| {
            stage.iter().map(|bucket| buffer_for(bucket.params.iter().map(|&p| &params[p]), 0, device)).collect()
        })
        .collect();
    let mut runner = DataParallelStep {
        group,
        pass: StagedPass { model, precision: config.precision, device, loss_scaler },
        optimizer,
        params,
        buckets,
        fused,
        wall_time_budget: config.budget.seconds.is_some(),
    };
    let mut report = train_loop::run(context, device, &mut runner, &mut timeline, observer)?;
    observer.on_trained(&store);
    report.events = timeline.into_events();
    Ok(report)
}

struct DataParallelStep<'a> {
    group: &'a ProcessGroup,
    pass: StagedPass,
    optimizer: nn::Optimizer,
    params: Vec<Tensor>,
    buckets: Vec<Vec<Bucket>>,
    /// Each bucket's fused buffer, kept from step to step ([`crate::flat`]).
    fused: Vec<Vec<Tensor>>,
    wall_time_budget: bool,
}

/// A bucket's all-reduce in flight, with its fused buffer.
struct InFlight<'b> {
    bucket: &'b Bucket,
    label: String,
    flat: Tensor,
    work: Work,
}

/// Starts each stage's buckets' all-reduces as soon as its backward ends, overlapping the
/// backward of the stages below.
struct BucketLauncher<'s, 'b> {
    group: &'s ProcessGroup,
    params: &'s [Tensor],
    buckets: &'b [Vec<Bucket>],
    fused: &'s [Vec<Tensor>],
    in_flight: Vec<InFlight<'b>>,
}

impl StageHooks for BucketLauncher<'_, '_> {
    fn after_backward(&mut self, stage: usize, _timeline: &mut Timeline) -> Result<(), TrainError> {
        for (bucket, fused) in self.buckets[stage].iter().zip(&self.fused[stage]) {
            let mut flat = fused.shallow_clone();
            pack(bucket.params.iter().map(|&p| self.params[p].grad()), &flat);
            let work = self.group.all_reduce_async(&mut flat, ReduceOp::Average)?;
            let label = format!("bucket {}", self.in_flight.len());
            self.in_flight.push(InFlight { bucket, label, flat, work });
        }
        Ok(())
    }
}

impl StepRunner for DataParallelStep<'_> {
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
        let mut launcher = BucketLauncher {
            group: self.group,
            params: &self.params,
            buckets: &self.buckets,
            fused: &self.fused,
            in_flight: Vec::new(),
        };
        let (logits, loss) = self.pass.run(images, labels, timeline, &mut launcher)?;
        let in_flight = launcher.in_flight;

        let mut traffic = Traffic::default();
        let wait_start = timeline.now();
        for InFlight { bucket, label, flat, work } in in_flight {
            let done = work.wait()?;
            timeline.communication(EventKind::AllReduce, label, &done);
            traffic.add(&done);
            unpack(&flat, bucket.params.iter().map(|&p| self.params[p].grad()));
        }
        timeline.record(EventKind::Idle, "waiting for all-reduce", wait_start, timeline.now(), None);
        // The all-reduced gradients are alike on every rank, and so is the scaler's verdict.
        let optimizer = &mut self.optimizer;
        let scaling = timeline.span(EventKind::Optimizer, "optimizer step", || {
            loss_scale::step(self.pass.loss_scaler.as_mut(), &self.params, Ok, || optimizer.step())
        })?;
        let (comm_bytes, comm_s) = (traffic.bytes, traffic.seconds);
        Ok(StepOutput { correct: correct_on_device(&logits, labels), loss, comm_bytes, comm_s, scaling })
    }

    fn eval_shard(&self) -> (usize, usize) {
        self.shard()
    }

    fn sum_across_ranks(&mut self, values: &mut [f64]) -> Result<(), TrainError> {
        sum_over_group(self.group, self.pass.device, values)
    }

    fn agree_to_stop(&mut self, local_stop: bool) -> Result<bool, TrainError> {
        agree_any(self.group, self.pass.device, local_stop, self.wall_time_budget)
    }
}
