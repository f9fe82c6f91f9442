//! What a training run reports: per-step and per-epoch records (their shape is the
//! results crate's, the one the tables store), evaluations and a summary, shaped alike for
//! every strategy so the results store needs one writer.

use serde::{Deserialize, Serialize};
pub use stratlab_results::{EpochRecord, EvalRecord, StepRecord, TrainingSummary};

/// How a training run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrainOutcome {
    /// The budget was used up.
    Completed,
    /// The loss became NaN or infinite; training stopped at that step.
    Diverged,
}

/// Everything one worker's training run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// How training ended.
    pub outcome: TrainOutcome,
    /// Why, for anything but completion.
    pub reason: Option<String>,
    /// Resolved device (`cpu`, `cuda:0`).
    pub device: stratlab_results::TrialDevice,
    /// libtorch intra-op threads used.
    pub threads: usize,
    /// cuDNN benchmark and TF32 settings in force while training (read back from libtorch).
    pub numerics: crate::Numerics,
    /// Optimizer steps in one full epoch on this worker.
    pub steps_per_epoch: usize,
    /// Every optimizer step.
    pub steps: Vec<StepRecord>,
    /// Every (possibly partial) epoch.
    pub epochs: Vec<EpochRecord>,
    /// Every evaluation.
    pub evaluations: Vec<EvalRecord>,
    /// Wall time from the start of training until test accuracy first reached the target.
    pub time_to_accuracy_s: Option<f64>,
    /// The target that time-to-accuracy refers to.
    pub target_accuracy: f64,
    /// Wall time of the whole run, evaluation included.
    pub wall_time_s: f64,
    /// This rank's timed events (multi-worker strategies; empty for single).
    #[serde(default)]
    pub events: Vec<crate::timeline::TimelineEvent>,
    /// This rank's stage, plan and activation memory (pipeline strategies only).
    #[serde(default)]
    pub pipeline: Option<stratlab_results::PipelineStageInfo>,
    /// Every gradient a parameter server was pushed, where it answers each worker on its
    /// own (asynchronous modes, backup workers): the server's report only.
    #[serde(default)]
    pub gradients: Vec<stratlab_results::GradientRecord>,
}

impl TrainReport {
    /// This report reduced to a trial's row. `shards` is how many batch shards trained
    /// side by side at this report's pace (data-parallel ranks each train one; a pipeline's
    /// stages share one batch, so only its replicas count), so throughputs are the trial's.
    pub fn summary(&self, shards: f64) -> TrainingSummary {
        let step_times = self.timed_step_times();
        let timed_median = |of: fn(&StepRecord) -> f64| {
            crate::stats::median(&self.steps.iter().filter(|step| !step.warmup).map(of).collect::<Vec<_>>())
        };
        TrainingSummary {
            seconds_per_epoch_mean: self.seconds_per_epoch_mean(),
            seconds_per_epoch_estimate: self.seconds_per_epoch_estimate(),
            step_time_median_s: crate::stats::median(&step_times),
            step_time_p10_s: crate::stats::quantile(&step_times, 0.1),
            step_time_p90_s: crate::stats::quantile(&step_times, 0.9),
            data_wait_median_s: timed_median(|step| step.data_wait_s),
            h2d_median_s: timed_median(|step| step.h2d_s),
            step_samples_per_s: self.step_samples_per_s().map(|per_shard| per_shard * shards),
            wall_samples_per_s: self.wall_samples_per_s().map(|per_shard| per_shard * shards),
            val_samples_per_s: self.val_samples_per_s(),
            time_to_accuracy_s: self.time_to_accuracy_s,
            final_accuracy: self.final_accuracy(),
            final_loss: self.final_loss(),
            eval_time_s: Some(self.evaluations.iter().map(|eval| eval.time_s).sum()),
            peak_memory_bytes: self.peak_memory_bytes(),
            skipped_updates: self.skipped_updates(),
        }
    }

    /// Steps whose update the loss scaler skipped, where the trial scales its loss.
    pub fn skipped_updates(&self) -> Option<i64> {
        let verdicts: Vec<bool> = self.steps.iter().filter_map(|step| step.skipped_update).collect();
        (!verdicts.is_empty()).then(|| verdicts.iter().filter(|&&skipped| skipped).count() as i64)
    }

    /// The highest step peak of tensor memory over the timed steps, where measured.
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        self.steps.iter().filter(|step| !step.warmup).filter_map(|step| step.peak_memory_bytes).max()
    }

    /// Step times of the timed (non-warm-up) steps.
    pub fn timed_step_times(&self) -> Vec<f64> {
        self.steps.iter().filter(|step| !step.warmup).map(|step| step.step_time_s).collect()
    }

    /// Accuracy of the last evaluation.
    pub fn final_accuracy(&self) -> Option<f64> {
        self.evaluations.last().map(|eval| eval.accuracy)
    }

    /// Test loss of the last evaluation.
    pub fn final_loss(&self) -> Option<f64> {
        self.evaluations.last().map(|eval| eval.loss)
    }

    /// Mean measured seconds per epoch over complete epochs only (a budget-cut epoch would
    /// bias it); `None` when no epoch completed.
    pub fn seconds_per_epoch_mean(&self) -> Option<f64> {
        let full: Vec<f64> =
            self.epochs.iter().filter(|e| e.steps == Some(self.steps_per_epoch)).map(|e| e.epoch_time_s).collect();
        crate::stats::mean(&full)
    }

    /// Seconds per epoch extrapolated from the timed steps (the thesis's method for budgets
    /// too short for a whole epoch): steps per epoch × mean wall time of a step (loader
    /// wait, copy and step).
    pub fn seconds_per_epoch_estimate(&self) -> Option<f64> {
        let per_step: Vec<f64> = self.steps.iter().filter(|step| !step.warmup).map(StepRecord::wall_time_s).collect();
        crate::stats::mean(&per_step).map(|seconds| seconds * self.steps_per_epoch as f64)
    }

    /// Training throughput over timed steps: samples ÷ synchronised step time (forward,
    /// backward, optimizer), what the device sustains when data is ready.
    pub fn step_samples_per_s(&self) -> Option<f64> {
        self.timed_rate(|step| step.step_time_s)
    }

    /// Training throughput over timed steps: samples ÷ wall time including loader waits and
    /// host-to-device copies, what the whole input pipeline plus device sustains.
    pub fn wall_samples_per_s(&self) -> Option<f64> {
        self.timed_rate(StepRecord::wall_time_s)
    }

    fn timed_rate(&self, seconds_of: impl Fn(&StepRecord) -> f64) -> Option<f64> {
        let timed: Vec<&StepRecord> = self.steps.iter().filter(|step| !step.warmup).collect();
        let seconds: f64 = timed.iter().map(|step| seconds_of(step)).sum();
        let samples: usize = timed.iter().map(|step| step.samples).sum();
        (seconds > 0.0).then(|| samples as f64 / seconds)
    }

    /// Evaluation throughput over all evaluations.
    pub fn val_samples_per_s(&self) -> Option<f64> {
        let seconds: f64 = self.evaluations.iter().map(|eval| eval.time_s).sum();
        let samples: usize = self.evaluations.iter().map(|eval| eval.samples).sum();
        (seconds > 0.0).then(|| samples as f64 / seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diverged_loss_survives_a_json_round_trip_as_nan_not_null() {
        let step = StepRecord {
            epoch: 0,
            step: 3,
            loss: Some(f64::NAN),
            step_time_s: 0.1,
            data_wait_s: 0.0,
            h2d_s: 0.0,
            samples: 8,
            lr: 0.1,
            warmup: false,
            comm_bytes: None,
            comm_s: None,
            peak_memory_bytes: None,
            loss_scale: None,
            skipped_update: None,
        };
        let json = serde_json::to_string(&step).unwrap();
        assert!(json.contains("\"loss\":\"NaN\""), "{json}");
        let back: StepRecord = serde_json::from_str(&json).unwrap();
        assert!(back.loss.is_some_and(f64::is_nan));
        assert_eq!(back.step, 3);
    }
}
