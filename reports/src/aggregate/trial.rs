//! One trial's identity and ending, read from the trials table, for the per-trial curves.

use polars::prelude::DataFrame;

use super::cells::{is_ok, FailedTrial};
use super::columns::{CellKey, Frame};
use crate::ReportError;

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

/// Per-trial columns the curves need besides the identity.
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

/// Every trial of `trials` (sorted by matrix index) in order.
pub(crate) fn trial_records(trials: &DataFrame) -> Result<Vec<TrialRecord>, ReportError> {
    let frame = Frame::new("trials", trials);
    let keys = frame.keys()?;
    let (ids, repeats) = (frame.str("trial_id")?, frame.i64("repeat")?);
    let (outcomes, reasons) = (frame.str("outcome")?, frame.str("reason")?);
    let target = frame.f64("target_accuracy")?;
    let tta = frame.f64("time_to_accuracy_s")?;
    let final_accuracy = frame.f64("final_accuracy")?;
    let estimate = frame.f64("seconds_per_epoch_estimate")?;
    let warmup = frame.i64("warmup_steps")?;
    let skipped = frame.i64("skipped_updates")?;
    (0..trials.height())
        .map(|i| {
            let outcome = outcomes.get(i).unwrap_or("unknown");
            let failure = (!is_ok(outcome))
                .then(|| FailedTrial { outcome: outcome.to_owned(), reason: reasons.get(i).map(str::to_owned) });
            Ok(TrialRecord {
                info: TrialInfo {
                    trial_id: ids.get(i).unwrap_or_default().to_owned(),
                    key: keys.key(i)?,
                    repeat: repeats.get(i).unwrap_or(0),
                    failure,
                },
                target_accuracy: target.get(i).unwrap_or(f64::NAN),
                time_to_accuracy_s: tta.get(i),
                final_accuracy: final_accuracy.get(i),
                seconds_per_epoch_estimate: estimate.get(i),
                warmup_steps: warmup.get(i).and_then(|steps| u64::try_from(steps).ok()).unwrap_or(0),
                skipped_updates: skipped.get(i),
            })
        })
        .collect()
}
