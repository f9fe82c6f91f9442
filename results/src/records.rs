//! What one worker measures in a step and in an epoch, in the shape the tables store:
//! a strategy's training loop produces these records, and the `steps` and `epochs` rows
//! are the record plus the run, trial and worker it belongs to (see `rows.rs`), so a new
//! measurement is one field here.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

/// One optimizer step on one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct StepRecord {
    /// Epoch number, from 0.
    pub epoch: usize,
    /// Step number within the trial, counted across epochs, from 0.
    pub step: usize,
    /// Training loss of the batch, where this worker computes it: NaN or infinity when
    /// training diverged, null where this worker computes no loss.
    #[serde(with = "crate::nonfinite::option")]
    pub loss: Option<f64>,
    /// Forward + backward + optimizer, seconds (device synchronised before both clock reads).
    pub step_time_s: f64,
    /// Time spent waiting for the data loader before the step, seconds.
    pub data_wait_s: f64,
    /// Host-to-device copy of the batch (pinned, asynchronous, then synchronised) before the
    /// step, seconds; 0 on the CPU.
    pub h2d_s: f64,
    /// Samples this worker processed in the step.
    pub samples: usize,
    /// Learning rate of the step.
    pub lr: f64,
    /// Whether the step is in the warm-up excluded from statistics (the first steps pay for
    /// allocation and tuning).
    pub warmup: bool,
    /// Bytes this worker sent or reduced in the step (null for one-worker trials and for
    /// runs stored before the column existed); the column is signed, as the first release
    /// wrote it.
    #[serde(default)]
    #[columns(stored_as = "Int64")]
    pub comm_bytes: Option<u64>,
    /// Seconds this worker's communication was in flight in the step, launch to completion,
    /// summed over its transfers (hidden behind compute or not: `rank_breakdown` tells which).
    #[serde(default)]
    pub comm_s: Option<f64>,
    /// The most bytes of tensor storage this worker held at once during the step: weights,
    /// gradients, optimizer state, the batch, activations and buffers, and whatever the
    /// loader's threads prepared meanwhile. Exact on the CPU (a counting allocator); null
    /// where the device cannot tell and for runs stored before the column existed.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// The loss scale the step's backward ran with (float16's dynamic loss scaling); null
    /// where the trial scales no loss, and for runs stored before the column existed.
    #[serde(default)]
    pub loss_scale: Option<f64>,
    /// Whether a gradient overflowed at that scale, so the optimizer skipped the step's
    /// update (every rank alike); null where the trial scales no loss.
    #[serde(default)]
    pub skipped_update: Option<bool>,
}

impl StepRecord {
    /// Loader wait + host-to-device copy + step: the step's share of the epoch's wall time.
    pub fn wall_time_s(&self) -> f64 {
        self.data_wait_s + self.h2d_s + self.step_time_s
    }
}

/// One (possibly partial) epoch on one worker: its training, and the evaluations run during
/// it, timed apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct EpochRecord {
    /// Epoch number, from 0.
    pub epoch: usize,
    /// Mean training loss over the epoch's steps.
    #[serde(with = "crate::nonfinite::option")]
    pub train_loss: Option<f64>,
    /// Training accuracy over the epoch's batches (as trained, not re-evaluated), 0–1.
    pub train_accuracy: Option<f64>,
    /// Loss on the test split after the epoch.
    #[serde(with = "crate::nonfinite::option")]
    pub test_loss: Option<f64>,
    /// Accuracy on the test split after the epoch, 0–1.
    pub test_accuracy: Option<f64>,
    /// Wall time of the epoch's training (loader waits, copies, steps), evaluation
    /// excluded, seconds.
    pub epoch_time_s: f64,
    /// Seconds of the evaluations run during the epoch and closing it.
    pub eval_time_s: f64,
    /// Training samples ÷ `epoch_time_s`: the wall-clock training rate, waits included.
    pub wall_samples_per_s: Option<f64>,
    /// Evaluation samples per second.
    pub val_samples_per_s: Option<f64>,
    /// Seconds since the trial's training started, at the end of this epoch's evaluation
    /// (for time-to-accuracy curves).
    pub elapsed_s: f64,
    /// Steps the epoch ran (fewer than a full epoch when the budget ended it); null for
    /// runs stored before the column existed.
    #[serde(default)]
    pub steps: Option<usize>,
}

/// What a trial's training measured, reduced to the columns of its `trials` row: progress,
/// pace (the slowest rank's, after warm-up), throughput over every batch shard, accuracy.
/// A strategy's report computes it; the row stores it flattened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Columns)]
pub struct TrainingSummary {
    /// Mean measured seconds per epoch over complete epochs; `None` when none completed.
    pub seconds_per_epoch_mean: Option<f64>,
    /// Seconds per epoch extrapolated from the timed steps (steps per epoch × mean step
    /// time including loader wait), available even when the budget ended mid-epoch.
    pub seconds_per_epoch_estimate: Option<f64>,
    /// Median step time after warm-up, seconds.
    pub step_time_median_s: Option<f64>,
    /// 10th percentile of step time after warm-up, seconds.
    pub step_time_p10_s: Option<f64>,
    /// 90th percentile of step time after warm-up, seconds.
    pub step_time_p90_s: Option<f64>,
    /// Median loader wait before a step after warm-up, seconds.
    pub data_wait_median_s: Option<f64>,
    /// Median host-to-device copy of a batch after warm-up, seconds (0 on the CPU).
    pub h2d_median_s: Option<f64>,
    /// Training throughput over all workers: global samples ÷ synchronised step time
    /// (forward, backward, optimizer) of the timed steps.
    pub step_samples_per_s: Option<f64>,
    /// Training throughput over all workers: global samples ÷ wall time of the timed steps
    /// including loader waits and copies.
    pub wall_samples_per_s: Option<f64>,
    /// Validation throughput, samples per second.
    pub val_samples_per_s: Option<f64>,
    /// Wall seconds until test accuracy first reached `target_accuracy`; `None` if never.
    pub time_to_accuracy_s: Option<f64>,
    /// Test accuracy after the last epoch, 0–1.
    pub final_accuracy: Option<f64>,
    /// Test loss after the last epoch (NaN or infinity when training diverged; null when
    /// never evaluated).
    #[serde(with = "crate::nonfinite::option")]
    pub final_loss: Option<f64>,
    /// Seconds spent evaluating, kept out of epoch times and throughput.
    pub eval_time_s: Option<f64>,
    /// The highest step peak of tensor memory over the timed steps, of the worker that held
    /// the most (`steps.peak_memory_bytes`); null where the device cannot tell and for runs
    /// stored before the column existed.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// Steps whose update the loss scaler skipped because a gradient overflowed (float16),
    /// warm-up included; null where the trial scales no loss, and for runs stored before
    /// the column existed.
    #[serde(default)]
    pub skipped_updates: Option<i64>,
}

/// One evaluation on the test split (after an epoch, or every N steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct EvalRecord {
    /// Steps trained before this evaluation (a parameter server's own evaluations: updates
    /// applied).
    pub after_step: usize,
    /// Mean test loss.
    #[serde(with = "crate::nonfinite::float")]
    pub loss: f64,
    /// Test accuracy.
    pub accuracy: f64,
    /// Samples evaluated.
    pub samples: usize,
    /// Seconds the evaluation took.
    pub time_s: f64,
    /// Wall time since training started, at the end of this evaluation.
    pub elapsed_s: f64,
}
