//! The cells of a run's matrix and their repeats: how many trials each cell has, how many
//! failed and why, and the median, min, max and n of a metric over the cell's `ok`
//! repeats, summarised with Polars' group-by on the cell.

use std::collections::HashMap;

use polars::prelude::{Column, DataFrame};
use stratlab_results::{CellKey, Outcome, RunView, TrialRow};

use crate::{Plotted, ReportError, Stat};

/// A failed trial as stored: its outcome and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedTrial {
    /// How it ended (never `ok`).
    pub outcome: Outcome,
    /// Why, as recorded.
    pub reason: Option<String>,
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
    /// none, the first failure if every repeat failed, else "not recorded".
    pub fn plotted(&self, stat: Option<Stat>) -> Plotted {
        match (stat, &self.first_failure) {
            (Some(stat), _) => Plotted::Measured(stat),
            (None, Some(failed)) if self.ok() == 0 => Plotted::Failed(failed.outcome),
            (None, _) => Plotted::not_recorded(),
        }
    }
}

/// Every cell of `run` with its repeats, in the run's cell order (first appearance in
/// the matrix): the i-th entry is cell i of [`RunView::cells`].
pub(crate) fn repeats_by_cell(run: &RunView) -> Vec<(CellKey, Repeats)> {
    let mut cells: Vec<(CellKey, Repeats)> =
        run.cells().iter().map(|key| (key.clone(), Repeats { trials: 0, failed: 0, first_failure: None })).collect();
    for (i, trial) in run.trials().iter().enumerate() {
        let repeats = &mut cells[run.cell_index(i)].1;
        repeats.trials += 1;
        if !trial.outcome.is_ok() {
            repeats.failed += 1;
            repeats
                .first_failure
                .get_or_insert_with(|| FailedTrial { outcome: trial.outcome, reason: trial.reason.clone() });
        }
    }
    cells
}

/// The `ok` trials of a run with their cells: the only measurements.
pub(crate) struct OkTrials<'a> {
    trials: Vec<(usize, &'a TrialRow)>,
}

/// The `ok` trials of `run`.
pub(crate) fn ok_trials(run: &RunView) -> Result<OkTrials<'_>, ReportError> {
    let trials = run
        .trials()
        .iter()
        .enumerate()
        .filter(|(_, trial)| trial.outcome.is_ok())
        .map(|(i, trial)| (run.cell_index(i), trial))
        .collect();
    Ok(OkTrials { trials })
}

/// Name of the value column while a metric is grouped.
const VALUE: &str = "value";
/// Name of the cell column while a metric is grouped.
const CELL: &str = "cell";

impl OkTrials<'_> {
    /// Whether any `ok` trial of cell `cell` has `predicate`.
    pub(crate) fn any(&self, cell: usize, predicate: impl Fn(&TrialRow) -> bool) -> bool {
        self.trials.iter().any(|(index, trial)| *index == cell && predicate(trial))
    }

    /// Median, min, max and n of `metric` over the `ok` trials per cell index. Missing and
    /// non-finite values are left out: a metric that was not measured is absent, and must
    /// not shift the median.
    #[allow(deprecated)] // polars-core's eager GroupBy aggregations: this crate builds without `lazy`
    pub(crate) fn stats(
        &self,
        name: &str,
        metric: impl Fn(&TrialRow) -> Option<f64>,
    ) -> Result<HashMap<usize, Stat>, ReportError> {
        let error = |source| ReportError::Column { table: "trials".into(), column: name.to_owned(), source };
        let (cells, values): (Vec<u32>, Vec<f64>) = self
            .trials
            .iter()
            .filter_map(|(cell, trial)| Some((*cell as u32, metric(trial).filter(|v| v.is_finite())?)))
            .unzip();
        if values.is_empty() {
            return Ok(HashMap::new());
        }
        let frame =
            DataFrame::new_infer_height(vec![Column::new(CELL.into(), cells), Column::new(VALUE.into(), values)])
                .map_err(error)?;
        let grouped = frame.group_by_stable([CELL]).map_err(error)?.select([VALUE]);
        // One grouping, four aggregations: the groups (and so the rows) line up.
        let (median, min, max, count) = (
            grouped.median().map_err(error)?,
            grouped.min().map_err(error)?,
            grouped.max().map_err(error)?,
            grouped.count().map_err(error)?,
        );
        let column = |frame: &DataFrame, name: &str| -> Result<Vec<Option<f64>>, ReportError> {
            let values = frame.column(name).and_then(|c| c.cast(&polars::prelude::DataType::Float64)).map_err(error)?;
            Ok(values.f64().map_err(error)?.to_vec())
        };
        let cells: Vec<Option<u32>> = median.column(CELL).and_then(|c| c.u32().cloned()).map_err(error)?.to_vec();
        let (median, min, max, count) = (
            column(&median, &format!("{VALUE}_median"))?,
            column(&min, &format!("{VALUE}_min"))?,
            column(&max, &format!("{VALUE}_max"))?,
            column(&count, &format!("{VALUE}_count"))?,
        );
        let mut stats = HashMap::new();
        for i in 0..cells.len() {
            let (Some(cell), Some(median), Some(min), Some(max), Some(n)) =
                (cells[i], median[i], min[i], max[i], count[i])
            else {
                continue;
            };
            stats.insert(cell as usize, Stat { median, min, max, n: n as usize });
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_without_values_is_the_failure_only_when_every_repeat_failed() {
        let oom = Some(FailedTrial { outcome: Outcome::Oom, reason: None });
        let all_failed = Repeats { trials: 2, failed: 2, first_failure: oom.clone() };
        assert_eq!(all_failed.plotted(None), Plotted::Failed(Outcome::Oom));
        let some_ok = Repeats { trials: 3, failed: 1, first_failure: oom };
        assert_eq!(some_ok.plotted(None), Plotted::not_recorded());
        assert_eq!(some_ok.plotted(Some(Stat::single(2.0))), Plotted::single(2.0));
    }
}
