//! Device utilisation and memory per cell, medians over the `ok` repeats of each trial's
//! telemetry summary in the trials table (the single-GPU vs data/model/GPipe study, figs. 8–11).

use polars::prelude::DataFrame;

use super::cells::{stats_by_cell, Repeats};
use super::columns::CellKey;
use crate::{Outcome, ReportError};

/// One cell's device usage over its repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUsageCell {
    /// The cell.
    pub key: CellKey,
    /// Its repeats, failed ones counted.
    pub repeats: Repeats,
    /// Mean device utilisation of a trial, percent (`trials.utilization_mean_pct`).
    pub utilisation_mean_pct: Outcome,
    /// Peak device utilisation of a trial, percent (`trials.utilization_max_pct`).
    pub utilisation_max_pct: Outcome,
    /// Mean device memory in use, bytes (`trials.memory_mean_bytes`).
    pub memory_mean_bytes: Outcome,
    /// Peak device memory in use, bytes (`trials.memory_max_bytes`).
    pub memory_max_bytes: Outcome,
}

/// Summarises `ok` (the `ok` rows of the trials table) per cell of `cells`.
pub(crate) fn device_usage_cells(
    cells: &[(CellKey, Repeats)],
    ok: &DataFrame,
) -> Result<Vec<DeviceUsageCell>, ReportError> {
    let util_mean = stats_by_cell(ok, "utilization_mean_pct")?;
    let util_max = stats_by_cell(ok, "utilization_max_pct")?;
    let memory_mean = stats_by_cell(ok, "memory_mean_bytes")?;
    let memory_max = stats_by_cell(ok, "memory_max_bytes")?;
    Ok(cells
        .iter()
        .map(|(key, repeats)| DeviceUsageCell {
            key: key.clone(),
            repeats: repeats.clone(),
            utilisation_mean_pct: repeats.outcome(util_mean.get(key).copied()),
            utilisation_max_pct: repeats.outcome(util_max.get(key).copied()),
            memory_mean_bytes: repeats.outcome(memory_mean.get(key).copied()),
            memory_max_bytes: repeats.outcome(memory_max.get(key).copied()),
        })
        .collect())
}
