//! Where each rank's step time went, per trial (Holistic Trace Analysis' temporal and
//! communication–computation overlap breakdowns): seconds per counted step of computation,
//! exposed and overlapped communication and idle time, and the shares of the step they take.
//!
//! The numbers come from the run's `rank_breakdown` table (sums over the steps after
//! warm-up, see `stratlab_results::rank_breakdown`), divided by the steps counted, and are
//! joined with the trial's identity from the trials table.

use std::collections::HashMap;

use stratlab_results::RankBreakdownRow;

use super::trial::{TrialInfo, TrialRecord};

/// One rank of one trial: its mean step and how the step's time splits.
#[derive(Debug, Clone, PartialEq)]
pub struct RankStepBreakdown {
    /// The trial (identity with `<set>:synthetic` data sets, repeat, failure).
    pub trial: TrialInfo,
    /// The rank, from 0.
    pub rank: u32,
    /// Steps counted (after warm-up) that have events of this rank.
    pub steps: u64,
    /// Mean times of a counted step; `None` when no step was counted (every step of the
    /// rank was warm-up), so there is nothing to divide.
    pub per_step: Option<StepTimes>,
}

/// A rank's mean counted step: the stored sums divided by the steps counted.
///
/// `wall_s = compute_s + exposed_communication_s + idle_s` and
/// `communication_s = exposed_communication_s + overlapped_communication_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTimes {
    /// Seconds per step from the step's first event to its last.
    pub wall_s: f64,
    /// Seconds per step computing (forward, backward, optimizer, host-to-device copies).
    pub compute_s: f64,
    /// Seconds per step communicating while nothing was computed: it lengthens the step.
    pub exposed_communication_s: f64,
    /// Seconds per step communicating behind computation: hidden, it costs no step time.
    pub overlapped_communication_s: f64,
    /// Seconds per step communicating in all (exposed + overlapped).
    pub communication_s: f64,
    /// Seconds per step with neither computation nor communication (loader waits, gaps).
    pub idle_s: f64,
    /// Overlapped ÷ all communication, 0–1; `None` without communication.
    pub overlap_share: Option<f64>,
    /// Exposed communication ÷ wall, 0–1: the step time communication costs; `None` when
    /// the steps took no time.
    pub exposed_communication_share: Option<f64>,
    /// All communication ÷ wall, 0–1 (more than the exposed share when it overlaps);
    /// `None` when the steps took no time.
    pub communication_share: Option<f64>,
}

impl StepTimes {
    /// The mean step of `row`; `None` when it counted no step.
    pub fn of(row: &RankBreakdownRow) -> Option<StepTimes> {
        if row.steps == 0 {
            return None;
        }
        let steps = row.steps as f64;
        let share = |part: f64, whole: f64| (whole > 0.0).then(|| part / whole);
        Some(StepTimes {
            wall_s: row.wall_s / steps,
            compute_s: row.compute_s / steps,
            exposed_communication_s: row.exposed_communication_s / steps,
            overlapped_communication_s: row.overlapped_communication_s / steps,
            communication_s: row.communication_s / steps,
            idle_s: row.idle_s / steps,
            overlap_share: share(row.overlapped_communication_s, row.communication_s),
            exposed_communication_share: share(row.exposed_communication_s, row.wall_s),
            communication_share: share(row.communication_s, row.wall_s),
        })
    }
}

/// One entry per rank of every trial in `records` that has breakdown rows, in matrix order
/// and then by rank. Rows of trials the trials table does not list are left out (the store
/// only loads finished trials' parts, so there are none in a consistent run).
pub(crate) fn step_breakdowns(records: &[TrialRecord], rows: &[RankBreakdownRow]) -> Vec<RankStepBreakdown> {
    let mut by_trial: HashMap<&str, Vec<&RankBreakdownRow>> = HashMap::new();
    for row in rows {
        by_trial.entry(row.trial_id.as_str()).or_default().push(row);
    }
    let mut breakdowns = Vec::new();
    for record in records {
        let Some(mut ranks) = by_trial.remove(record.info.trial_id.as_str()) else { continue };
        ranks.sort_by_key(|row| row.rank);
        breakdowns.extend(ranks.into_iter().map(|row| RankStepBreakdown {
            trial: record.info.clone(),
            rank: row.rank,
            steps: row.steps,
            per_step: StepTimes::of(row),
        }));
    }
    breakdowns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(steps: u64, wall_s: f64, communication_s: f64) -> RankBreakdownRow {
        RankBreakdownRow {
            run_id: "run".into(),
            trial_id: "t".into(),
            rank: 0,
            steps,
            wall_s,
            compute_s: wall_s,
            communication_s,
            exposed_communication_s: 0.0,
            overlapped_communication_s: communication_s,
            idle_s: 0.0,
            overlap_share: (communication_s > 0.0).then_some(1.0),
        }
    }

    #[test]
    fn a_rank_without_counted_steps_has_no_mean_step() {
        assert_eq!(StepTimes::of(&row(0, 0.0, 0.0)), None);
    }

    #[test]
    fn shares_are_absent_without_communication_or_time() {
        let no_communication = StepTimes::of(&row(2, 1.0, 0.0)).expect("counted steps");
        assert_eq!(no_communication.overlap_share, None);
        assert_eq!(no_communication.communication_share, Some(0.0));
        let no_time = StepTimes::of(&row(2, 0.0, 0.0)).expect("counted steps");
        assert_eq!((no_time.exposed_communication_share, no_time.communication_share), (None, None));
    }
}
