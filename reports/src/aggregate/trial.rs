//! One trial's identity and ending, from its typed row, for the per-trial curves.

use stratlab_results::{CellKey, RunView};

use super::cells::FailedTrial;

/// Which trial a curve belongs to and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialInfo {
    /// The trial's id (its part files' name).
    pub trial_id: String,
    /// Its cell.
    pub key: CellKey,
    /// Repeat number within the cell, from 0.
    pub repeat: i64,
    /// Its outcome and reason when it did not end `ok`.
    pub failure: Option<FailedTrial>,
}

/// Per-trial values the curves need besides the identity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrialRecord {
    pub(crate) info: TrialInfo,
    pub(crate) target_accuracy: f64,
    pub(crate) time_to_accuracy_s: Option<f64>,
    pub(crate) final_accuracy: Option<f64>,
    pub(crate) seconds_per_epoch_estimate: Option<f64>,
    /// Warm-up steps, left out of every timed measurement.
    pub(crate) warmup_steps: u64,
    /// Steps whose update float16's loss scale skipped (null without loss scaling).
    pub(crate) skipped_updates: Option<i64>,
}

/// Every trial of `run`, in matrix order.
pub(crate) fn trial_records(run: &RunView) -> Vec<TrialRecord> {
    run.trials_with_cells()
        .map(|(trial, key)| TrialRecord {
            info: TrialInfo {
                trial_id: trial.trial_id.clone(),
                key: key.clone(),
                repeat: trial.repeat,
                failure: (!trial.outcome.is_ok())
                    .then(|| FailedTrial { outcome: trial.outcome, reason: trial.reason.clone() }),
            },
            target_accuracy: trial.target_accuracy,
            time_to_accuracy_s: trial.training.time_to_accuracy_s,
            final_accuracy: trial.training.final_accuracy,
            seconds_per_epoch_estimate: trial.training.seconds_per_epoch_estimate,
            warmup_steps: u64::try_from(trial.warmup_steps).unwrap_or(0),
            skipped_updates: trial.training.skipped_updates,
        })
        .collect()
}
