//! The single-device training loop: SGD with momentum and weight decay, a learning-rate
//! schedule, evaluation after every epoch (and optionally every N steps), and per-step
//! timing with the device synchronised before each clock read.

use std::sync::Arc;
use std::time::Instant;

use stratlab_datasets::{Dataset, Loader, LoaderConfig};
use stratlab_networks::NetworkSpec;
use tch::nn::{self, ModuleT, OptimizerConfig};

use crate::device::{device_label, synchronize};
use crate::evaluate::{correct_predictions, evaluate};
use crate::record::{EpochRecord, EvalRecord, StepRecord, TrainOutcome, TrainReport};
use crate::{TrainConfig, TrainError, TrainObserver};

/// What one single-device run trains on, grouped so callers pass one value.
pub struct TrainContext<'a> {
    /// The network to build and train.
    pub network: &'a NetworkSpec,
    /// Training split.
    pub train: Arc<dyn Dataset>,
    /// Test split, for accuracy and time-to-accuracy.
    pub test: Arc<dyn Dataset>,
    /// Hyper-parameters, budget, device and seed.
    pub config: &'a TrainConfig,
}

/// Trains `context.network` from a fresh seeded initialisation and reports what it measured.
///
/// Divergence (a NaN or infinite loss) ends training with [`TrainOutcome::Diverged`]; it is a
/// result, not an error. Errors are failures to train at all (bad configuration, missing
/// device, unreadable data, libtorch failures such as out-of-memory).
pub fn train(context: &TrainContext<'_>, observer: &mut dyn TrainObserver) -> Result<TrainReport, TrainError> {
    let config = context.config;
    config.validate()?;
    let device = config.device.resolve().map_err(TrainError::Device)?;
    tch::set_num_threads(config.threads as i32);
    tch::manual_seed(config.seed as i64);

    let store = nn::VarStore::new(device);
    let model = context.network.build(&store.root());
    let mut optimizer = nn::Sgd { momentum: config.momentum, dampening: 0.0, wd: config.weight_decay, nesterov: false }
        .build(&store, config.lr)?;

    let loader = Loader::new(
        context.train.clone(),
        LoaderConfig {
            batch_size: config.batch_size,
            shuffle: true,
            seed: config.seed,
            drop_last: true,
            rank: 0,
            world_size: 1,
            prefetch: config.prefetch,
        },
    )?;
    let steps_per_epoch = loader.batches_per_epoch();
    if steps_per_epoch == 0 {
        return Err(TrainError::InvalidConfig {
            field: "batch_size",
            reason: format!("{} exceeds the {} training samples", config.batch_size, context.train.len()),
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
        let mut epoch_stats = EpochStats::default();
        let epoch_started = Instant::now();
        let mut wait_started = Instant::now();
        for batch in loader.epoch(epoch as u64) {
            if run.budget_spent(started) {
                run.finish_epoch(epoch, epoch_stats, epoch_started, started, &model, context, observer)?;
                break 'epochs;
            }
            let batch = batch?;
            let images = batch.images.to_device(device);
            let labels = batch.labels.to_device(device);
            synchronize(device);
            let step_started = Instant::now();
            let data_wait_s = (step_started - wait_started).as_secs_f64();

            let lr = config.schedule.rate(config.lr, epoch, run.steps.len(), total_steps);
            optimizer.set_lr(lr);
            let logits = model.forward_t(&images, true);
            let loss = logits.cross_entropy_for_logits(&labels);
            optimizer.backward_step(&loss);
            let loss_value = f64::try_from(&loss)?;
            let correct = correct_predictions(&logits, &labels)?;
            synchronize(device);
            let step_time_s = step_started.elapsed().as_secs_f64();

            let samples = batch.labels.size()[0] as usize;
            let step = StepRecord {
                epoch,
                step: run.steps.len(),
                loss: loss_value,
                step_time_s,
                data_wait_s,
                samples,
                lr,
                warmup: run.steps.len() < config.warmup_steps,
            };
            observer.on_step(&step);
            run.steps.push(step);
            epoch_stats.add(loss_value, correct, samples);
            if !loss_value.is_finite() {
                run.outcome = TrainOutcome::Diverged;
                run.reason = Some(format!("loss became {loss_value} at step {}", run.steps.len() - 1));
                run.finish_epoch(epoch, epoch_stats, epoch_started, started, &model, context, observer)?;
                break 'epochs;
            }
            if config.eval_every_steps.is_some_and(|every| run.steps.len() % every == 0) {
                run.evaluate(&model, context, started, observer)?;
            }
            wait_started = Instant::now();
        }
        run.finish_epoch(epoch, epoch_stats, epoch_started, started, &model, context, observer)?;
        if run.budget_spent(started) {
            break;
        }
    }
    Ok(run.into_report(config, steps_per_epoch, started))
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
        budget.steps.is_some_and(|steps| self.steps.len() >= steps)
            || budget.seconds.is_some_and(|seconds| started.elapsed().as_secs_f64() >= seconds)
    }

    fn evaluate(
        &mut self,
        model: &dyn ModuleT,
        context: &TrainContext<'_>,
        started: Instant,
        observer: &mut dyn TrainObserver,
    ) -> Result<EvalRecord, TrainError> {
        if self.evaluations.last().is_some_and(|last| last.after_step == self.steps.len()) {
            return Ok(self.evaluations.last().cloned().expect("checked above"));
        }
        let result =
            evaluate(model, &context.test, self.config.eval_batch_size, self.config.eval_samples, self.device)?;
        let elapsed_s = started.elapsed().as_secs_f64();
        if self.time_to_accuracy_s.is_none() && result.accuracy >= self.config.target_accuracy {
            self.time_to_accuracy_s = Some(elapsed_s);
        }
        let record = EvalRecord {
            after_step: self.steps.len(),
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

    #[allow(clippy::too_many_arguments)]
    fn finish_epoch(
        &mut self,
        epoch: usize,
        stats: EpochStats,
        epoch_started: Instant,
        started: Instant,
        model: &dyn ModuleT,
        context: &TrainContext<'_>,
        observer: &mut dyn TrainObserver,
    ) -> Result<(), TrainError> {
        if stats.steps == 0 || self.epochs.last().is_some_and(|last| last.epoch == epoch) {
            return Ok(());
        }
        let epoch_time_s = epoch_started.elapsed().as_secs_f64();
        let eval = self.evaluate(model, context, started, observer)?;
        let record = EpochRecord {
            epoch,
            train_loss: stats.loss_sum / stats.steps as f64,
            train_accuracy: stats.correct as f64 / stats.samples as f64,
            test_loss: eval.loss,
            test_accuracy: eval.accuracy,
            epoch_time_s,
            train_samples_per_s: stats.samples as f64 / epoch_time_s,
            val_samples_per_s: eval.samples as f64 / eval.time_s,
            elapsed_s: started.elapsed().as_secs_f64(),
            steps: stats.steps,
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
            steps_per_epoch,
            steps: self.steps,
            epochs: self.epochs,
            evaluations: self.evaluations,
            time_to_accuracy_s: self.time_to_accuracy_s,
            target_accuracy: config.target_accuracy,
            wall_time_s: started.elapsed().as_secs_f64(),
        }
    }
}
