//! Throughput, seconds per epoch and speedup per cell: the numbers behind the
//! speedup, scaling and throughput figures.

use std::collections::{HashMap, HashSet};

use polars::prelude::DataFrame;

use super::cells::{coalesce, stats_by_cell, Repeats};
use super::columns::{CellKey, Frame};
use super::speedup::Speedup;
use crate::{Outcome, ReportError};

/// Name of the coalesced seconds-per-epoch column while it is grouped.
const SECONDS_PER_EPOCH: &str = "seconds_per_epoch";

/// One cell's speed over its repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputCell {
    /// The cell.
    pub key: CellKey,
    /// Its repeats, failed ones counted.
    pub repeats: Repeats,
    /// Headline throughput: global samples ÷ wall time of the timed steps, loader wait and
    /// copies included (`trials.wall_samples_per_s`), samples/s.
    pub wall_samples_per_s: Outcome,
    /// Global samples ÷ synchronised step time of the timed steps
    /// (`trials.step_samples_per_s`), samples/s.
    pub step_samples_per_s: Outcome,
    /// Seconds per epoch: the measured mean over complete epochs, else the estimate from the
    /// timed steps (`seconds_per_epoch_mean`, else `seconds_per_epoch_estimate`).
    pub seconds_per_epoch: Outcome,
    /// Whether any repeat's seconds per epoch is the estimate (no complete epoch).
    pub epoch_time_estimated: bool,
    /// Speedup over the `single` W = 1 cell with the same network, data set and batch.
    pub speedup: Speedup,
}

/// Summarises `ok` (the `ok` rows of the trials table) per cell of `cells`.
pub(crate) fn throughput_cells(
    cells: &[(CellKey, Repeats)],
    ok: &DataFrame,
) -> Result<Vec<ThroughputCell>, ReportError> {
    let wall = stats_by_cell(ok, "wall_samples_per_s")?;
    let step = stats_by_cell(ok, "step_samples_per_s")?;
    let mut with_epoch = ok.clone();
    let (mut seconds, fell_back) = coalesce(ok, "seconds_per_epoch_mean", "seconds_per_epoch_estimate")?;
    seconds.rename(SECONDS_PER_EPOCH.into());
    with_epoch.with_column(seconds).map_err(Frame::new("trials", ok).error(SECONDS_PER_EPOCH))?;
    let epoch = stats_by_cell(&with_epoch, SECONDS_PER_EPOCH)?;
    let keys = Frame::new("trials", ok).keys()?;
    let mut estimated = HashSet::new();
    for (i, fell_back) in fell_back.into_iter().enumerate() {
        if fell_back {
            estimated.insert(keys.key(i)?);
        }
    }

    let mut result: Vec<ThroughputCell> = cells
        .iter()
        .map(|(key, repeats)| ThroughputCell {
            key: key.clone(),
            repeats: repeats.clone(),
            wall_samples_per_s: repeats.outcome(wall.get(key).copied()),
            step_samples_per_s: repeats.outcome(step.get(key).copied()),
            seconds_per_epoch: repeats.outcome(epoch.get(key).copied()),
            epoch_time_estimated: estimated.contains(key),
            // Filled in below, once every cell's throughput is known.
            speedup: Speedup::NoBaseline { why: String::new() },
        })
        .collect();
    let baselines: HashMap<CellKey, Outcome> =
        result.iter().map(|cell| (cell.key.clone(), cell.wall_samples_per_s.clone())).collect();
    for cell in &mut result {
        let baseline = baselines.get(&cell.key.baseline());
        cell.speedup = Speedup::of(&cell.wall_samples_per_s, cell.key.workers, cell.key.batch_size, baseline);
    }
    Ok(result)
}
