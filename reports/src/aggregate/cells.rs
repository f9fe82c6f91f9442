//! The cells of a run's matrix and their repeats, summarised with Polars' group-by: how many
//! trials each cell has, how many failed and why, and the median, min, max and n of a metric
//! over the cell's `ok` repeats.

use std::collections::HashMap;

use polars::prelude::{ChunkCompareEq, DataFrame, DataType, SortMultipleOptions};
use stratlab_results::Outcome as StoredOutcome;

use super::columns::{CellKey, Frame, KEY_COLUMNS};
use crate::{Failure, Outcome, ReportError, Stat};

/// Name of the value column while a metric is grouped.
const VALUE: &str = "value";

/// Label of a metric that `ok` repeats did not record (e.g. utilisation without NVML): the
/// cell ran, but there is nothing to plot and nothing is made up.
pub const NOT_RECORDED: &str = "not recorded";

/// A failed trial as stored: its outcome name and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedTrial {
    /// The stored outcome (`oom`, `crashed`, `timeout`, `diverged`, `infeasible`, …).
    pub outcome: String,
    /// Why, as recorded.
    pub reason: Option<String>,
}

impl FailedTrial {
    /// The failure as figures draw it.
    pub fn failure(&self) -> Failure {
        failure_of(&self.outcome)
    }
}

/// Maps a stored outcome name to the figures' [`Failure`]; anything unknown is shown verbatim.
pub fn failure_of(outcome: &str) -> Failure {
    match outcome.parse::<StoredOutcome>() {
        Ok(StoredOutcome::Oom) => Failure::OutOfMemory,
        Ok(StoredOutcome::Crashed) => Failure::Crashed,
        Ok(StoredOutcome::Diverged) => Failure::Diverged,
        Ok(StoredOutcome::Timeout) => Failure::TimedOut,
        _ => Failure::Other(outcome.to_owned()),
    }
}

/// The repeats of one cell: how many ran, how many failed, and the first failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeats {
    /// Trials of the cell in the run (finished ones; an interrupted run has fewer).
    pub trials: usize,
    /// Trials whose outcome is not `ok`.
    pub failed: usize,
    /// The failed trial with the lowest matrix index, if any failed.
    pub first_failure: Option<FailedTrial>,
}

impl Repeats {
    /// Trials that are measurements.
    pub fn ok(&self) -> usize {
        self.trials - self.failed
    }

    /// A metric's value for figures: its statistic over the `ok` repeats; when there is
    /// none, the first failure if every repeat failed, else [`NOT_RECORDED`].
    pub fn outcome(&self, stat: Option<Stat>) -> Outcome {
        match (stat, &self.first_failure) {
            (Some(stat), _) => Outcome::Measured(stat),
            (None, Some(failed)) if self.ok() == 0 => Outcome::Failed(failed.failure()),
            (None, _) => Outcome::Failed(Failure::Other(NOT_RECORDED.into())),
        }
    }
}

/// The trials table in matrix order (by `index`), so "first" means first in the suite.
pub(crate) fn in_matrix_order(trials: &DataFrame) -> Result<DataFrame, ReportError> {
    let frame = Frame::new("trials", trials);
    trials.sort(["index"], SortMultipleOptions::default().with_maintain_order(true)).map_err(frame.error("index"))
}

/// Every cell of `trials` (sorted by [`in_matrix_order`]) with its repeats, in order of
/// first appearance.
#[allow(deprecated)] // polars-core's eager GroupBy aggregations: this crate builds without `lazy`
pub(crate) fn repeats_by_cell(trials: &DataFrame) -> Result<Vec<(CellKey, Repeats)>, ReportError> {
    if trials.height() == 0 {
        return Ok(Vec::new());
    }
    let frame = Frame::new("trials", trials);
    let counts = trials
        .group_by_stable(KEY_COLUMNS)
        .and_then(|g| g.select(["trial_id"]).count())
        .map_err(frame.error("trial_id"))?;
    let failed =
        trials.filter(&frame.str("outcome")?.not_equal(StoredOutcome::Ok.name())).map_err(frame.error("outcome"))?;
    let mut failures: HashMap<CellKey, Repeats> = HashMap::new();
    if failed.height() > 0 {
        let failed_frame = Frame::new("trials", &failed);
        let grouped = failed
            .group_by_stable(KEY_COLUMNS)
            .map_err(failed_frame.error("outcome"))?
            .select(["outcome", "reason", "trial_id"]);
        let first = grouped.first().map_err(failed_frame.error("outcome"))?;
        let n = grouped.count().map_err(failed_frame.error("trial_id"))?;
        let first = Frame::new("trials", &first);
        let (outcome, reason, keys) = (first.str("outcome_first")?, first.str("reason_first")?, first.keys()?);
        let n = Frame::new("trials", &n).f64("trial_id_count")?;
        for i in 0..first.frame.height() {
            let failed_trial = FailedTrial {
                outcome: outcome.get(i).unwrap_or("unknown").to_owned(),
                reason: reason.get(i).map(str::to_owned),
            };
            let repeats =
                Repeats { trials: 0, failed: n.get(i).unwrap_or(0.0) as usize, first_failure: Some(failed_trial) };
            failures.insert(keys.key(i)?, repeats);
        }
    }
    let counts_frame = Frame::new("trials", &counts);
    let (keys, n) = (counts_frame.keys()?, counts_frame.f64("trial_id_count")?);
    (0..counts.height())
        .map(|i| {
            let key = keys.key(i)?;
            let trials = n.get(i).unwrap_or(0.0) as usize;
            let repeats = match failures.remove(&key) {
                Some(failed) => Repeats { trials, ..failed },
                None => Repeats { trials, failed: 0, first_failure: None },
            };
            Ok((key, repeats))
        })
        .collect()
}

/// Median, min, max and n of `column` over the rows of `ok` (the `ok` trials) per cell.
/// Nulls and non-finite values are left out: a metric that was not measured is absent, and
/// must not shift the median.
#[allow(deprecated)] // polars-core's eager GroupBy aggregations: this crate builds without `lazy`
pub(crate) fn stats_by_cell(ok: &DataFrame, column: &str) -> Result<HashMap<CellKey, Stat>, ReportError> {
    let frame = Frame::new("trials", ok);
    let error = frame.error(column);
    let mut values = frame.column(column)?.cast(&DataType::Float64).map_err(&error)?;
    // A null value gives a null mask entry, which `filter` drops like `false`.
    let finite = values.f64().map_err(&error)?.is_finite();
    values.rename(VALUE.into());
    let mut selected = ok.select(KEY_COLUMNS).map_err(&error)?;
    selected.with_column(values).map_err(&error)?;
    let selected = selected.filter(&finite).map_err(&error)?;
    if selected.height() == 0 {
        return Ok(HashMap::new());
    }
    let grouped = selected.group_by_stable(KEY_COLUMNS).map_err(&error)?.select([VALUE]);
    // One grouping, four aggregations: the groups (and so the rows) line up.
    let median = grouped.median().map_err(&error)?;
    let (min, max, count) =
        (grouped.min().map_err(&error)?, grouped.max().map_err(&error)?, grouped.count().map_err(&error)?);
    let keys = Frame::new("trials", &median).keys()?;
    let column_of = |frame: &DataFrame, suffix: &str| Frame::new("trials", frame).f64(&format!("{VALUE}_{suffix}"));
    let (median, min, max, count) =
        (column_of(&median, "median")?, column_of(&min, "min")?, column_of(&max, "max")?, column_of(&count, "count")?);
    let mut stats = HashMap::new();
    for i in 0..median.len() {
        let (Some(median), Some(min), Some(max), Some(n)) = (median.get(i), min.get(i), max.get(i), count.get(i))
        else {
            continue;
        };
        stats.insert(keys.key(i)?, Stat { median, min, max, n: n as usize });
    }
    Ok(stats)
}

/// Column `name` with `fallback`'s value where `name` is null (seconds per epoch: measured,
/// else estimated), and whether each row fell back.
pub(crate) fn coalesce(
    frame: &DataFrame,
    name: &str,
    fallback: &str,
) -> Result<(polars::prelude::Column, Vec<bool>), ReportError> {
    use polars::prelude::{ChunkZip, IntoColumn};
    let reader = Frame::new("trials", frame);
    let (primary, secondary) = (reader.f64(name)?, reader.f64(fallback)?);
    let has_primary = primary.is_not_null();
    let merged = primary.zip_with(&has_primary, &secondary).map_err(reader.error(name))?;
    let fell_back =
        (0..frame.height()).map(|i| has_primary.get(i) != Some(true) && secondary.get(i).is_some()).collect();
    Ok((merged.into_column(), fell_back))
}

/// Whether the stored outcome is `ok`.
pub(crate) fn is_ok(outcome: &str) -> bool {
    outcome == StoredOutcome::Ok.name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_outcomes_map_to_figure_failures() {
        assert_eq!(failure_of("oom"), Failure::OutOfMemory);
        assert_eq!(failure_of("crashed"), Failure::Crashed);
        assert_eq!(failure_of("diverged"), Failure::Diverged);
        assert_eq!(failure_of("timeout"), Failure::TimedOut);
        assert_eq!(failure_of("infeasible"), Failure::Other("infeasible".into()));
    }

    #[test]
    fn a_metric_without_values_is_the_failure_only_when_every_repeat_failed() {
        let oom = Some(FailedTrial { outcome: "oom".into(), reason: None });
        let all_failed = Repeats { trials: 2, failed: 2, first_failure: oom.clone() };
        assert_eq!(all_failed.outcome(None), Outcome::Failed(Failure::OutOfMemory));
        let some_ok = Repeats { trials: 3, failed: 1, first_failure: oom };
        assert_eq!(some_ok.outcome(None), Outcome::Failed(Failure::Other(NOT_RECORDED.into())));
        assert_eq!(some_ok.outcome(Some(Stat::single(2.0))), Outcome::single(2.0));
    }
}
