//! Device utilisation and memory per cell, medians over the `ok` repeats of each trial's
//! telemetry summary in the trials table (the single-GPU vs data/model/GPipe study, figs. 8–11).

use stratlab_results::CellKey;

use super::cells::{OkTrials, Repeats};
use crate::{Plotted, ReportError};

/// One cell's device usage over its repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUsageCell {
    /// The cell.
    pub key: CellKey,
    /// Its repeats, failed ones counted.
    pub repeats: Repeats,
    /// Mean device utilisation of a trial, percent (`trials.utilization_mean_pct`).
    pub utilisation_mean_pct: Plotted,
    /// Peak device utilisation of a trial, percent (`trials.utilization_max_pct`).
    pub utilisation_max_pct: Plotted,
    /// Mean device memory in use, bytes (`trials.memory_mean_bytes`).
    pub memory_mean_bytes: Plotted,
    /// Peak device memory in use, bytes (`trials.memory_max_bytes`).
    pub memory_max_bytes: Plotted,
}

/// Summarises the `ok` trials per cell of `cells` (the run's, in its order).
pub(crate) fn device_usage_cells(
    cells: &[(CellKey, Repeats)],
    ok: &OkTrials<'_>,
) -> Result<Vec<DeviceUsageCell>, ReportError> {
    let util_mean = ok.stats("utilization_mean_pct", |t| t.load.utilization_mean_pct)?;
    let util_max = ok.stats("utilization_max_pct", |t| t.load.utilization_max_pct)?;
    let memory_mean = ok.stats("memory_mean_bytes", |t| t.load.memory_mean_bytes)?;
    let memory_max = ok.stats("memory_max_bytes", |t| t.load.memory_max_bytes.map(|bytes| bytes as f64))?;
    Ok(cells
        .iter()
        .enumerate()
        .map(|(i, (key, repeats))| DeviceUsageCell {
            key: key.clone(),
            repeats: repeats.clone(),
            utilisation_mean_pct: repeats.plotted(util_mean.get(&i).copied()),
            utilisation_max_pct: repeats.plotted(util_max.get(&i).copied()),
            memory_mean_bytes: repeats.plotted(memory_mean.get(&i).copied()),
            memory_max_bytes: repeats.plotted(memory_max.get(&i).copied()),
        })
        .collect())
}
