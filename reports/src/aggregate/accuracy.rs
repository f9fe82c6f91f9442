//! Time-to-accuracy per trial: the trials table's headline number and target, and the test
//! accuracy curve from every evaluation the `evaluations` table holds (runs stored before it
//! existed: the epochs table's end-of-epoch ones) (the single-GPU vs data/model/GPipe study,
//! figs. 14–17).

use std::collections::{HashMap, HashSet};

use stratlab_results::{EpochRow, EvaluationRow};

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
    /// Every evaluation (`elapsed_s`, accuracy) of the rank that stands for the trial, in time
    /// order: a parameter server's own where it made them (the weights it serves), else the
    /// lowest rank's. Runs stored before the `evaluations` table read the epochs table's,
    /// end-of-epoch evaluations only, read after the evaluation, so a curve crosses the target
    /// slightly later than `time_to_accuracy_s`.
    pub points: Vec<AccuracyPoint>,
}

/// One evaluation, from either table.
struct Evaluation {
    /// Ranks sort the server first, then by rank: the lowest is the trial's.
    evaluator: (bool, i64),
    elapsed_s: f64,
    accuracy: f64,
}

/// Accuracy curves for every trial in `records`, from the evaluations table's rows, or the
/// epochs table's for a trial without any.
pub(crate) fn trial_accuracies(
    records: &[TrialRecord],
    epochs: &[EpochRow],
    evaluations: &[EvaluationRow],
) -> Vec<TrialAccuracy> {
    let mut by_trial: HashMap<&str, Vec<Evaluation>> = HashMap::new();
    // Out-of-range values cannot be drawn; they are not evaluations the figure can show.
    let drawable =
        |elapsed_s: f64, accuracy: f64| elapsed_s.is_finite() && elapsed_s >= 0.0 && (0.0..=1.0).contains(&accuracy);
    for row in evaluations {
        let (elapsed_s, accuracy) = (row.record.elapsed_s, row.record.accuracy);
        if drawable(elapsed_s, accuracy) {
            let evaluator = (!row.by_server, row.worker);
            by_trial.entry(&row.trial_id).or_default().push(Evaluation { evaluator, elapsed_s, accuracy });
        }
    }
    let evaluated: HashSet<&str> = evaluations.iter().map(|row| row.trial_id.as_str()).collect();
    for row in epochs.iter().filter(|row| !evaluated.contains(row.trial_id.as_str())) {
        // Epochs without an evaluation on this worker (no accuracy) are no points.
        let Some(accuracy) = row.record.test_accuracy else { continue };
        if drawable(row.record.elapsed_s, accuracy) {
            let evaluator = (true, row.worker);
            let elapsed_s = row.record.elapsed_s;
            by_trial.entry(&row.trial_id).or_default().push(Evaluation { evaluator, elapsed_s, accuracy });
        }
    }
    records
        .iter()
        .map(|record| {
            let evaluations = by_trial.remove(record.info.trial_id.as_str()).unwrap_or_default();
            // Every rank may evaluate the same model; one curve per trial, the lead's.
            let lead = evaluations.iter().map(|e| e.evaluator).min();
            let mut points: Vec<AccuracyPoint> = evaluations
                .iter()
                .filter(|e| Some(e.evaluator) == lead)
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
