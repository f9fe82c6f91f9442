//! The training loop every strategy's worker runs: SGD with momentum and weight decay, a
//! learning-rate schedule, evaluation after every epoch (and optionally every N steps), and
//! per-step timing with the device synchronised before each clock read. What differs
//! between strategies, one batch's forward, backward, communication and update, is a
//! [`StepRunner`].
//!
//! What each clock covers: `data_wait_s` the wait for the loader, `h2d_s` the copy to the
//! device, `step_time_s` the runner's step (forward, backward, communication, optimizer),
//! ended by the step's only host synchronisation (losses and accuracies are read back every
//! `metrics_every_steps`). Epoch time is training only: evaluations run between steps are
//! timed on their own.
//!
//! With several ranks, every rank runs this loop on its shard of each global batch and
//! evaluates the same test samples (replicas hold the same weights), so the ranks stay in
//! step; a wall-time budget is agreed on collectively so no rank stops alone.

use std::sync::Arc;
use std::time::Instant;

use stratlab_datasets::{Batch, Dataset, Loader, LoaderConfig};
use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use crate::device::{device_label, synchronize};
use crate::evaluate::{evaluate_shard, EvalSums};
use crate::loss_scale::ScaledStep;
use crate::memory;
use crate::memory_format::to_memory_format;
use crate::record::{EpochRecord, EvalRecord, StepRecord, TrainOutcome, TrainReport};
use crate::timeline::{EventKind, Timeline};
use crate::{PrecisionOps, TrainConfig, TrainError, TrainObserver};

/// What a run trains and evaluates on, grouped so callers pass one value.
pub struct TrainContext<'a> {
    /// The network to build and train.
    pub network: &'a stratlab_networks::NetworkSpec,
    /// Training split.
    pub train: Arc<dyn Dataset>,
    /// Test split, for accuracy and time-to-accuracy.
    pub test: Arc<dyn Dataset>,
    /// Hyper-parameters, budget, device and seed (batch size per rank).
    pub config: &'a TrainConfig,
}

/// `sums`, one rank's evaluation shard, added up across the ranks that evaluate.
pub(crate) fn sum_evaluation<R: StepRunner + ?Sized>(runner: &mut R, sums: EvalSums) -> Result<EvalSums, TrainError> {
    let mut values = [sums.loss_sum, sums.correct, sums.samples];
    runner.sum_across_ranks(&mut values)?;
    let [loss_sum, correct, samples] = values;
    Ok(EvalSums { loss_sum, correct, samples })
}

/// One batch's work for a strategy: everything between "the batch is on the device" and
/// "the weights are updated".
pub trait StepRunner {
    /// The model replica this rank evaluates.
    fn model(&self) -> &dyn ModuleT;

    /// This rank's data shard: `(rank, ranks sharing each global batch)`.
    fn shard(&self) -> (usize, usize) {
        (0, 1)
    }

    /// Trains on one batch at learning rate `lr`, recording its events on `timeline`.
    fn step(
        &mut self,
        images: &Tensor,
        labels: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<StepOutput, TrainError>;

    /// This rank's share of each evaluation, `(rank, ranks)`; every rank evaluates all of
    /// it unless the runner can add up the ranks' sums ([`StepRunner::sum_across_ranks`]).
    fn eval_shard(&self) -> (usize, usize) {
        (0, 1)
    }

    /// Adds `values` up across the ranks that evaluate (in place): evaluation is split
    /// between ranks and its sums combined.
    fn sum_across_ranks(&mut self, _values: &mut [f64]) -> Result<(), TrainError> {
        Ok(())
    }

    /// Loss and accuracy sums over the first `config.eval_samples` test samples, the same on
    /// every rank.
    /// By default this rank evaluates its [`StepRunner::eval_shard`] with
    /// [`StepRunner::model`] and the sums are added across ranks; a pipeline, where no rank
    /// holds the whole model, runs the test batches through its stages instead.
    fn evaluate(
        &mut self,
        test: &Arc<dyn Dataset>,
        config: &TrainConfig,
        device: Device,
    ) -> Result<EvalSums, TrainError> {
        let sums = evaluate_shard(self.model(), test, config, device, self.eval_shard())?;
        sum_evaluation(self, sums)
    }

    /// Whether this rank evaluates every `eval_every_steps` of its own steps (it still
    /// evaluates after every epoch): a dedicated parameter server answering each worker on
    /// its own evaluates the weights it serves instead, every that many updates.
    fn evaluates_every_steps(&self) -> bool {
        true
    }

    /// Called once when training ends, before the report: work a schedule still has in
    /// flight (PipeDream's unflushed micro-batches) completes here.
    fn finish(&mut self, _timeline: &mut Timeline) -> Result<(), TrainError> {
        Ok(())
    }

    /// Whether to stop now, given this rank's own view (`local_stop`). Multi-rank runners
    /// agree collectively, so ranks never disagree on the number of steps.
    fn agree_to_stop(&mut self, local_stop: bool) -> Result<bool, TrainError> {
        Ok(local_stop)
    }
}

/// What a step leaves for the loop's bookkeeping.
pub struct StepOutput {
    /// The loss of this rank's batch (on the device, not read back yet).
    pub loss: Tensor,
    /// Correct predictions in this rank's batch, a 0-d count on the device
    /// ([`crate::evaluate::correct_on_device`]).
    pub correct: Tensor,
    /// Bytes this rank sent or reduced in the step.
    pub comm_bytes: u64,
    /// Seconds this rank's communication was in flight (launch to completion, summed).
    pub comm_s: f64,
    /// The loss scale the step ran with and whether it skipped its update, where the trial
    /// scales its loss ([`crate::loss_scale`]).
    pub scaling: Option<ScaledStep>,
}

/// Runs the loop over `context`'s data with `runner` doing each step, on `device`.
///
/// Divergence (a NaN or infinite loss) ends training with [`TrainOutcome::Diverged`]; it is a
/// result, not an error. Errors are failures to train at all (bad configuration, missing
/// device, unreadable data, libtorch failures such as out-of-memory, a dead peer).
pub fn run(
    context: &TrainContext<'_>,
    device: Device,
    runner: &mut dyn StepRunner,
    timeline: &mut Timeline,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let config = context.config;
    let (rank, world_size) = runner.shard();
    let loader = Loader::new(
        context.train.clone(),
        LoaderConfig {
            batch_size: config.batch_size,
            shuffle: true,
            seed: config.seed,
            drop_last: true,
            rank,
            world_size,
            prefetch: config.prefetch,
            // The rank's share of the cores, as for libtorch: decoding keeps pace with the step.
            threads: config.threads,
        },
    )?;
    let steps_per_epoch = loader.batches_per_epoch();
    if steps_per_epoch == 0 {
        return Err(TrainError::InvalidConfig {
            field: "batch_size",
            reason: format!(
                "{} per rank × {world_size} ranks exceeds the {} training samples",
                config.batch_size,
                context.train.len()
            ),
        });
    }
    let total_steps = config.budget.total_steps(steps_per_epoch);
    observer.on_start(steps_per_epoch, total_steps);

    let mut run = RunState::new(config, device);
    let started = Instant::now();
    'epochs: for epoch in 0.. {
        if config.budget.epochs.is_some_and(|epochs| epoch >= epochs) {
            break;
        }
        let mut clock = EpochClock::start();
        let mut wait_started = Instant::now();
        let mut wait_started_ns = stratlab_comm::monotonic_ns();
        for batch in loader.epoch(epoch as u64) {
            if runner.agree_to_stop(run.budget_spent(started))? {
                run.finish_epoch(epoch, &mut clock, started, runner, context, observer)?;
                break 'epochs;
            }
            let batch = batch?;
            timeline.set_step(run.steps_done as u64);
            let copy_started = Instant::now();
            let data_wait_s = (copy_started - wait_started).as_secs_f64();
            timeline.record(EventKind::DataWait, "loader", wait_started_ns, timeline.now(), None);
            let samples = batch.len();
            let (images, labels) = timeline.span(EventKind::H2d, "batch", || to_device(batch, device, config))?;
            // Ends the copy, so it is timed on its own and the step starts with its data resident.
            synchronize(device);
            let step_started = Instant::now();
            let h2d_s = (step_started - copy_started).as_secs_f64();

            let lr = config.schedule.rate(config.lr, epoch, run.steps_done, total_steps);
            // The step's peak memory counts from here, the batch already resident.
            memory::reset_peak(device);
            let output = runner.step(&images, &labels, lr, timeline)?;
            // Loss and accuracy stay on the device until the next read: no host sync here.
            synchronize(device);
            let step_time_s = step_started.elapsed().as_secs_f64();

            run.pending.push(PendingStep {
                record: StepRecord {
                    epoch,
                    step: run.steps_done,
                    loss: None,
                    step_time_s,
                    data_wait_s,
                    h2d_s,
                    samples,
                    lr,
                    warmup: run.steps_done < config.warmup_steps,
                    comm_bytes: Some(output.comm_bytes),
                    comm_s: Some(output.comm_s),
                    peak_memory_bytes: memory::peak_bytes(device),
                    loss_scale: output.scaling.map(|scaled| scaled.loss_scale),
                    skipped_update: output.scaling.map(|scaled| scaled.skipped),
                },
                loss: output.loss.detach(),
                correct: output.correct,
            });
            run.steps_done += 1;
            let evaluate_now = runner.evaluates_every_steps()
                && config.eval_every_steps.is_some_and(|every| run.steps_done.is_multiple_of(every));
            if evaluate_now || run.steps_done.is_multiple_of(config.metrics_every_steps) {
                run.read_metrics(&mut clock, observer)?;
                if run.outcome == TrainOutcome::Diverged {
                    run.finish_epoch(epoch, &mut clock, started, runner, context, observer)?;
                    break 'epochs;
                }
            }
            if evaluate_now {
                run.evaluate(runner, context, started, &mut clock, observer)?;
            }
            wait_started = Instant::now();
            wait_started_ns = stratlab_comm::monotonic_ns();
        }
        run.finish_epoch(epoch, &mut clock, started, runner, context, observer)?;
        if run.outcome == TrainOutcome::Diverged || runner.agree_to_stop(run.budget_spent(started))? {
            break;
        }
    }
    runner.finish(timeline)?;
    Ok(run.into_report(config, steps_per_epoch, started))
}

/// Moves a host batch to `device`, its images in the trial's precision and memory format. On CUDA the batch
/// is pinned first and copied without blocking: pinned memory is what lets the DMA engine run
/// at full speed. (Overlapping the copy with the previous step would need a second CUDA
/// stream, which tch does not expose; the caller synchronises so the copy gets its own time.)
fn to_device(batch: Batch, device: Device, config: &TrainConfig) -> Result<(Tensor, Tensor), TrainError> {
    let (precision, format) = (config.precision, config.memory_format);
    match device {
        Device::Cuda(_) => {
            let copy = |tensor: &Tensor, kind: Kind| tensor.pin_memory(device).to_device_(device, kind, true, false);
            let images = to_memory_format(&copy(&batch.images, precision.kind()), format)?;
            Ok((images, copy(&batch.labels, batch.labels.kind())))
        }
        _ => {
            crate::device_double::record(crate::device_double::DeviceCall::BatchCopy);
            Ok((precision.input(&batch.images, device, format)?, batch.labels.to_device(device)))
        }
    }
}

/// A step whose loss and accuracy are still on the device.
struct PendingStep {
    record: StepRecord,
    loss: Tensor,
    correct: Tensor,
}

/// Times one epoch's training apart from the evaluations run inside it.
struct EpochClock {
    started: Instant,
    eval_s: f64,
    /// Sums over the epoch's steps, filled as metrics are read back.
    stats: EpochStats,
}

impl EpochClock {
    fn start() -> Self {
        EpochClock { started: Instant::now(), eval_s: 0.0, stats: EpochStats::default() }
    }

    /// Wall time since the epoch started, minus the evaluations run during it.
    fn training_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64() - self.eval_s
    }
}

/// Running sums over one epoch's steps.
#[derive(Default, Clone, Copy)]
struct EpochStats {
    loss_sum: f64,
    correct: i64,
    samples: usize,
    steps: usize,
}

impl EpochStats {
    fn add(&mut self, loss: f64, correct: i64, samples: usize) {
        self.loss_sum += loss;
        self.correct += correct;
        self.samples += samples;
        self.steps += 1;
    }
}

/// What the loop accumulates across epochs.
struct RunState<'a> {
    config: &'a TrainConfig,
    device: tch::Device,
    /// Steps trained so far (their records may still be pending).
    steps_done: usize,
    /// Steps whose metrics have not been read back from the device yet.
    pending: Vec<PendingStep>,
    steps: Vec<StepRecord>,
    epochs: Vec<EpochRecord>,
    evaluations: Vec<EvalRecord>,
    time_to_accuracy_s: Option<f64>,
    outcome: TrainOutcome,
    reason: Option<String>,
}

impl<'a> RunState<'a> {
    fn new(config: &'a TrainConfig, device: tch::Device) -> Self {
        RunState {
            config,
            device,
            steps_done: 0,
            pending: Vec::new(),
            steps: Vec::new(),
            epochs: Vec::new(),
            evaluations: Vec::new(),
            time_to_accuracy_s: None,
            outcome: TrainOutcome::Completed,
            reason: None,
        }
    }

    fn budget_spent(&self, started: Instant) -> bool {
        let budget = self.config.budget;
        let timed_enough = budget
            .min_timed_steps
            .is_none_or(|timed| self.steps_done >= self.config.warmup_steps.saturating_add(timed));
        budget.steps.is_some_and(|steps| self.steps_done >= steps)
            || (timed_enough && budget.seconds.is_some_and(|seconds| started.elapsed().as_secs_f64() >= seconds))
    }

    /// Reads the pending steps' losses and accuracies back in one transfer, completes their
    /// records and hands them to the observer. The first non-finite loss ends training as
    /// diverged; steps already run after it are still recorded (they happened).
    fn read_metrics(&mut self, clock: &mut EpochClock, observer: &mut dyn TrainObserver) -> Result<(), TrainError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let losses: Vec<Tensor> = pending.iter().map(|step| step.loss.reshape([1])).collect();
        let corrects: Vec<Tensor> = pending.iter().map(|step| step.correct.reshape([1])).collect();
        let losses = Vec::<f64>::try_from(Tensor::f_cat(&losses, 0)?.to_kind(Kind::Double).to_device(Device::Cpu))?;
        let corrects = Vec::<i64>::try_from(Tensor::f_cat(&corrects, 0)?.to_device(Device::Cpu))?;
        for ((step, loss), correct) in pending.into_iter().zip(losses).zip(corrects) {
            let record = StepRecord { loss: Some(loss), ..step.record };
            clock.stats.add(loss, correct, record.samples);
            if !loss.is_finite() && self.outcome != TrainOutcome::Diverged {
                self.outcome = TrainOutcome::Diverged;
                self.reason = Some(format!("loss became {loss} at step {}", record.step));
            }
            observer.on_step(&record);
            self.steps.push(record);
        }
        Ok(())
    }

    fn evaluate(
        &mut self,
        runner: &mut dyn StepRunner,
        context: &TrainContext<'_>,
        started: Instant,
        clock: &mut EpochClock,
        observer: &mut dyn TrainObserver,
    ) -> Result<EvalRecord, TrainError> {
        if self.evaluations.last().is_some_and(|last| last.after_step == self.steps_done) {
            return Ok(self.evaluations.last().cloned().expect("checked above"));
        }
        let eval_started = Instant::now();
        let config = self.config;
        let sums = runner.evaluate(&context.test, config, self.device)?;
        let result = sums.into_evaluation(eval_started.elapsed().as_secs_f64())?;
        clock.eval_s += result.time_s;
        let elapsed_s = started.elapsed().as_secs_f64();
        if self.time_to_accuracy_s.is_none() && result.accuracy >= self.config.target_accuracy {
            self.time_to_accuracy_s = Some(elapsed_s);
        }
        let record = EvalRecord {
            after_step: self.steps_done,
            loss: result.loss,
            accuracy: result.accuracy,
            samples: result.samples,
            time_s: result.time_s,
            elapsed_s,
        };
        observer.on_eval(&record);
        self.evaluations.push(record.clone());
        Ok(record)
    }

    /// Reads the last metrics, takes the epoch's training time, evaluates and records the
    /// epoch (once: a second call for the same epoch does nothing).
    fn finish_epoch(
        &mut self,
        epoch: usize,
        clock: &mut EpochClock,
        started: Instant,
        runner: &mut dyn StepRunner,
        context: &TrainContext<'_>,
        observer: &mut dyn TrainObserver,
    ) -> Result<(), TrainError> {
        self.read_metrics(clock, observer)?;
        let stats = clock.stats;
        if stats.steps == 0 || self.epochs.last().is_some_and(|last| last.epoch == epoch) {
            return Ok(());
        }
        let epoch_time_s = clock.training_s();
        let eval = self.evaluate(runner, context, started, clock, observer)?;
        let record = EpochRecord {
            epoch,
            train_loss: Some(stats.loss_sum / stats.steps as f64),
            train_accuracy: Some(stats.correct as f64 / stats.samples as f64),
            test_loss: Some(eval.loss),
            test_accuracy: Some(eval.accuracy),
            epoch_time_s,
            eval_time_s: clock.eval_s,
            wall_samples_per_s: Some(stats.samples as f64 / epoch_time_s),
            val_samples_per_s: Some(eval.samples as f64 / eval.time_s),
            elapsed_s: started.elapsed().as_secs_f64(),
            steps: Some(stats.steps),
        };
        observer.on_epoch(&record);
        self.epochs.push(record);
        Ok(())
    }

    fn into_report(self, config: &TrainConfig, steps_per_epoch: usize, started: Instant) -> TrainReport {
        TrainReport {
            outcome: self.outcome,
            reason: self.reason,
            device: device_label(self.device),
            threads: config.threads,
            numerics: crate::Numerics::current().unwrap_or(config.numerics),
            steps_per_epoch,
            steps: self.steps,
            epochs: self.epochs,
            evaluations: self.evaluations,
            time_to_accuracy_s: self.time_to_accuracy_s,
            target_accuracy: config.target_accuracy,
            wall_time_s: started.elapsed().as_secs_f64(),
            events: Vec::new(),
            pipeline: None,
            gradients: Vec::new(),
        }
    }
}
