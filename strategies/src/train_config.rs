//! Everything that determines one training run, grouped in one struct so that the runner,
//! the CLI and tests pass one value instead of long parameter lists.

use serde::{Deserialize, Serialize};
use stratlab_strategy_spec::Straggler;

use crate::loss_scale::LossScaleSettings;
use crate::optimizer::{AdamSettings, UpdateRule};
use crate::precision::Compute;
use crate::{DeviceChoice, LrSchedule, MemoryFormat, Numerics, OptimizerKind, Precision, TrainError};

/// How long to train: whichever limit is reached first ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Whole passes over the (sharded) training split.
    pub epochs: Option<usize>,
    /// Optimizer steps, counted across epochs.
    pub steps: Option<usize>,
    /// Wall-clock seconds of training (evaluation included), checked between steps.
    pub seconds: Option<f64>,
    /// With `seconds`: the time limit ends the run only once this many steps after the
    /// warm-up were timed (`epochs` and `steps` still end it). A time limit alone times
    /// many steps of a fast cell and one or two of a slow one (a parameter server over a
    /// slow link), and a 10th percentile of two steps is not a statistic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_timed_steps: Option<usize>,
}

impl Budget {
    /// The number of optimizer steps the budget allows, when it is known in advance.
    pub fn total_steps(&self, steps_per_epoch: usize) -> Option<usize> {
        let from_epochs = self.epochs.map(|epochs| epochs * steps_per_epoch);
        match (from_epochs, self.steps) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The configuration of one training run on one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Samples per optimizer step on this worker.
    pub batch_size: usize,
    /// Samples per evaluation batch. It does not change the result, only the speed, and
    /// larger is not always faster: on a CPU, ResNet-18 evaluated 230 samples/s in batches of
    /// 64–128 and 130 in batches of 500, whose activations no longer fit the caches.
    pub eval_batch_size: usize,
    /// When to stop.
    pub budget: Budget,
    /// The update rule (a suite axis).
    #[serde(default)]
    pub optimizer: OptimizerKind,
    /// Base learning rate of the optimizer.
    pub lr: f64,
    /// SGD momentum.
    pub momentum: f64,
    /// Adam's betas and epsilon, where the optimizer is Adam.
    #[serde(default)]
    pub adam: AdamSettings,
    /// L2 weight decay.
    pub weight_decay: f64,
    /// How the learning rate changes.
    pub schedule: LrSchedule,
    /// Steps at the start excluded from timing statistics (still trained, and recorded as warm-up).
    pub warmup_steps: usize,
    /// Evaluate on the test split every N steps as well as after each epoch.
    pub eval_every_steps: Option<usize>,
    /// Evaluate on at most this many test samples (all when `None`).
    pub eval_samples: Option<usize>,
    /// Test accuracy whose first crossing defines time-to-accuracy.
    pub target_accuracy: f64,
    /// Seeds weights, shuffling and synthetic data.
    pub seed: u64,
    /// Where to train.
    pub device: DeviceChoice,
    /// libtorch intra-op threads; recorded with the results because CPU speed depends on it.
    pub threads: usize,
    /// Batches the loader prepares ahead on its background thread.
    pub prefetch: usize,
    /// Read the step losses and accuracies back from the device every N steps (and at the
    /// end of every epoch). Reading is a host synchronisation; between reads the values
    /// accumulate on the device so a timed step holds only the synchronisation that ends it.
    /// A diverging loss is therefore noticed at most N − 1 steps late.
    pub metrics_every_steps: usize,
    /// cuDNN autotuning and TF32 settings, applied before training and recorded.
    pub numerics: Numerics,
    /// The floating-point types the trial trains in (a suite axis; float64 lets
    /// equivalence tests compare to rounding error).
    #[serde(default)]
    pub precision: Precision,
    /// How four-dimensional tensors (weights, images, activations) are laid out (a suite
    /// axis).
    #[serde(default)]
    pub memory_format: MemoryFormat,
    /// Seconds of each network stage's forward and backward at the pipeline's micro-batch,
    /// measured before training: a `time` balance cuts these (the profile the run predicted
    /// the cell from, so trial and prediction cut alike) instead of timing the stages again
    /// on its first rank, which re-measured near-ties differently and moved the cut of 59
    /// of 120 pipeline trials in one validation run. `None`: the pipeline times them.
    #[serde(default)]
    pub stage_seconds: Option<Vec<f64>>,
    /// How float16's dynamic loss scale starts and moves (PyTorch's `GradScaler`
    /// defaults); other precisions scale no loss.
    #[serde(default)]
    pub loss_scale: LossScaleSettings,
    /// A cap on the device allocator's bytes (a suite's `device_memory_limit_mib`): on CUDA
    /// the caching allocator's `setMemoryFraction`, so a large GPU stands in for a smaller
    /// one (`crate::device_memory`). CPU workers are limited by the runner instead.
    #[serde(default)]
    pub device_memory_limit_bytes: Option<u64>,
    /// Ranks whose compute is slowed, and by how much (a suite's `straggler` axis): each
    /// rank's [`crate::timeline::Timeline`] waits after its forwards and backwards.
    #[serde(default)]
    pub straggler: Option<Straggler>,
}

/// Default of [`TrainConfig::metrics_every_steps`]: one read per 5 steps costs a fifth of
/// the per-step synchronisations and still stops a diverged run within 4 steps.
pub const DEFAULT_METRICS_EVERY_STEPS: usize = 5;

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            batch_size: 64,
            eval_batch_size: 1000,
            budget: Budget { epochs: Some(1), ..Budget::default() },
            optimizer: OptimizerKind::Sgd,
            lr: 0.01,
            momentum: 0.9,
            adam: AdamSettings::default(),
            weight_decay: 5e-4,
            schedule: LrSchedule::Constant,
            warmup_steps: 5,
            eval_every_steps: None,
            eval_samples: None,
            target_accuracy: 0.98,
            seed: 0,
            device: DeviceChoice::Cpu,
            threads: 2,
            prefetch: 4,
            metrics_every_steps: DEFAULT_METRICS_EVERY_STEPS,
            numerics: Numerics::default(),
            precision: Precision::Float32,
            memory_format: MemoryFormat::Contiguous,
            stage_seconds: None,
            loss_scale: LossScaleSettings::default(),
            device_memory_limit_bytes: None,
            straggler: None,
        }
    }
}

impl TrainConfig {
    /// The trial's optimizer, everything about its update but the learning rate.
    pub fn update_rule(&self) -> UpdateRule {
        UpdateRule { kind: self.optimizer, momentum: self.momentum, weight_decay: self.weight_decay, adam: self.adam }
    }

    /// The precision and memory format the trial computes in.
    pub fn compute(&self) -> Compute {
        Compute { precision: self.precision, memory_format: self.memory_format }
    }

    /// How every evaluation reads `rank`'s share of the test split (of `ranks`): in file
    /// order, in batches of `eval_batch_size`, decoded by the trial's share of the cores as
    /// training's batches are (one decoding thread made synthetic test sets the bottleneck
    /// of a small network's evaluation).
    pub fn eval_loader(&self, rank: usize, ranks: usize) -> stratlab_datasets::LoaderConfig {
        stratlab_datasets::LoaderConfig {
            shuffle: false,
            rank,
            world_size: ranks,
            threads: self.threads,
            ..stratlab_datasets::LoaderConfig::new(self.eval_batch_size)
        }
    }

    /// How many test samples each of `ranks` evaluates: its share of `eval_samples` (all of
    /// its shard when `None`).
    pub fn eval_limit(&self, ranks: usize) -> usize {
        self.eval_samples.map_or(usize::MAX, |limit| limit.div_ceil(ranks))
    }

    /// Rejects configurations that cannot train, naming the field.
    pub fn validate(&self) -> Result<(), TrainError> {
        let invalid = |field, reason: &str| Err(TrainError::InvalidConfig { field, reason: reason.to_string() });
        if self.batch_size == 0 {
            return invalid("batch_size", "must be at least 1");
        }
        if self.eval_batch_size == 0 {
            return invalid("eval_batch_size", "must be at least 1");
        }
        if self.threads == 0 {
            return invalid("threads", "must be at least 1");
        }
        if self.metrics_every_steps == 0 {
            return invalid("metrics_every_steps", "must be at least 1");
        }
        if self.eval_every_steps == Some(0) {
            return invalid("eval_every_steps", "must be at least 1 (or absent for evaluation after each epoch only)");
        }
        if self.eval_samples == Some(0) {
            return invalid("eval_samples", "must be at least 1 (or absent for the whole test split)");
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return invalid("lr", "must be a positive number");
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return invalid("momentum", "must lie in [0, 1)");
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return invalid("weight_decay", "must be a non-negative number");
        }
        if !(0.0..=1.0).contains(&self.target_accuracy) {
            return invalid("target_accuracy", "must lie between 0 and 1");
        }
        self.loss_scale.validate()?;
        if self.optimizer == OptimizerKind::Adam {
            self.adam.validate()?;
        }
        let budget = self.budget;
        if budget.epochs.is_none() && budget.steps.is_none() && budget.seconds.is_none() {
            return invalid("budget", "give epochs, steps or seconds");
        }
        if budget.epochs == Some(0) || budget.steps == Some(0) || budget.min_timed_steps == Some(0) {
            return invalid("budget", "limits must be positive");
        }
        if budget.min_timed_steps.is_some() && budget.seconds.is_none() {
            return invalid("budget.min_timed_steps", "only lengthens a time limit: give budget.seconds too");
        }
        if let Some(seconds) = budget.seconds {
            if !(seconds.is_finite() && seconds > 0.0) {
                return invalid(
                    "budget.seconds",
                    &format!("must be a finite positive number of seconds, got {seconds}"),
                );
            }
        }
        Ok(())
    }
}
