//! Time-to-accuracy per trial: the trials table's headline number and target, and the test
//! accuracy curve from the epochs table's evaluations (the single-GPU vs data/model/GPipe
//! study, figs. 14–17).

use std::collections::HashMap;

use stratlab_results::EpochRow;

use super::trial::{TrialInfo, TrialRecord};
use crate::AccuracyPoint;

/// One trial's accuracy over wall time.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialAccuracy {
    /// The trial.
    pub trial: TrialInfo,
    /// Test accuracy that counts as reached, 0–1 (`trials.target_accuracy`).
    pub target_accuracy: f64,
    /// Wall seconds from the start of training until test accuracy first reached the
    /// target (`trials.time_to_accuracy_s`, timed at the evaluation itself); `None` if never.
    pub time_to_accuracy_s: Option<f64>,
    /// Test accuracy after the last epoch, 0–1.
    pub final_accuracy: Option<f64>,
    /// The evaluations recorded in the epochs table (`elapsed_s`, `test_accuracy`) of the
    /// lowest worker that evaluates, in time order. `elapsed_s` is read at the end of the
    /// epoch, after its evaluation, so a curve crosses the target slightly later than
    /// `time_to_accuracy_s`; evaluations inside an epoch are not in the table.
    pub points: Vec<AccuracyPoint>,
}

/// One evaluation of the epochs table.
struct Evaluation {
    worker: i64,
    elapsed_s: f64,
    accuracy: f64,
}

/// Accuracy curves for every trial in `records`, from the epochs table's rows.
pub(crate) fn trial_accuracies(records: &[TrialRecord], epochs: &[EpochRow]) -> Vec<TrialAccuracy> {
    let mut by_trial: HashMap<&str, Vec<Evaluation>> = HashMap::new();
    for row in epochs {
        // Epochs without an evaluation on this worker (no accuracy) are no points.
        let Some(accuracy) = row.record.test_accuracy else { continue };
        let elapsed_s = row.record.elapsed_s;
        // Out-of-range values cannot be drawn; they are not evaluations the figure can show.
        if elapsed_s.is_finite() && elapsed_s >= 0.0 && (0.0..=1.0).contains(&accuracy) {
            by_trial.entry(&row.trial_id).or_default().push(Evaluation { worker: row.worker, elapsed_s, accuracy });
        }
    }
    records
        .iter()
        .map(|record| {
            let evaluations = by_trial.remove(record.info.trial_id.as_str()).unwrap_or_default();
            // Every rank may evaluate the same model; one curve per trial, the lead's.
            let lead = evaluations.iter().map(|e| e.worker).min();
            let mut points: Vec<AccuracyPoint> = evaluations
                .iter()
                .filter(|e| Some(e.worker) == lead)
                .map(|e| AccuracyPoint { wall_s: e.elapsed_s, test_accuracy: e.accuracy })
                .collect();
            points.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
            TrialAccuracy {
                trial: record.info.clone(),
                target_accuracy: record.target_accuracy,
                time_to_accuracy_s: record.time_to_accuracy_s,
                final_accuracy: record.final_accuracy,
                points,
            }
        })
        .collect()
}
