//! Throughput, seconds per epoch and speedup per cell: the numbers behind the
//! speedup, scaling and throughput figures.

use std::collections::HashMap;

use stratlab_results::CellKey;

use super::cells::{OkTrials, Repeats};
use super::speedup::Speedup;
use crate::{Plotted, ReportError};

/// One cell's speed over its repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputCell {
    /// The cell.
    pub key: CellKey,
    /// Its repeats, failed ones counted.
    pub repeats: Repeats,
    /// Headline throughput: global samples ÷ wall time of the timed steps, loader wait and
    /// copies included (`trials.wall_samples_per_s`), samples/s.
    pub wall_samples_per_s: Plotted,
    /// Global samples ÷ synchronised step time of the timed steps
    /// (`trials.step_samples_per_s`), samples/s.
    pub step_samples_per_s: Plotted,
    /// Seconds per epoch: the measured mean over complete epochs, else the estimate from the
    /// timed steps (`seconds_per_epoch_mean`, else `seconds_per_epoch_estimate`).
    pub seconds_per_epoch: Plotted,
    /// Whether any repeat's seconds per epoch is the estimate (no complete epoch).
    pub epoch_time_estimated: bool,
    /// Speedup over the `single` W = 1 cell with the same network, data set and batch.
    pub speedup: Speedup,
}

/// Summarises the `ok` trials per cell of `cells` (the run's, in its order).
pub(crate) fn throughput_cells(
    cells: &[(CellKey, Repeats)],
    ok: &OkTrials<'_>,
) -> Result<Vec<ThroughputCell>, ReportError> {
    let wall = ok.stats("wall_samples_per_s", |t| t.training.wall_samples_per_s)?;
    let step = ok.stats("step_samples_per_s", |t| t.training.step_samples_per_s)?;
    let epoch =
        ok.stats("seconds_per_epoch", |t| t.training.seconds_per_epoch_mean.or(t.training.seconds_per_epoch_estimate))?;
    let mut result: Vec<ThroughputCell> = cells
        .iter()
        .enumerate()
        .map(|(i, (key, repeats))| ThroughputCell {
            key: key.clone(),
            repeats: repeats.clone(),
            wall_samples_per_s: repeats.plotted(wall.get(&i).copied()),
            step_samples_per_s: repeats.plotted(step.get(&i).copied()),
            seconds_per_epoch: repeats.plotted(epoch.get(&i).copied()),
            epoch_time_estimated: ok.any(i, |t| {
                t.training.seconds_per_epoch_mean.is_none() && t.training.seconds_per_epoch_estimate.is_some()
            }),
            // Filled in below, once every cell's throughput is known.
            speedup: Speedup::NoBaseline { why: String::new() },
        })
        .collect();
    let baselines: HashMap<CellKey, Plotted> =
        result.iter().map(|cell| (cell.key.clone(), cell.wall_samples_per_s.clone())).collect();
    for cell in &mut result {
        let (workers, batch) = (cell.key.workers, cell.key.batch_size);
        cell.speedup = match (baselines.get(&cell.key.baseline()), own_batch_baseline(&baselines, &cell.key)) {
            (None, Some((other_batch, baseline))) => {
                Speedup::of(&cell.wall_samples_per_s, workers, batch, Some(baseline)).against_batch(other_batch)
            }
            (baseline, _) => Speedup::of(&cell.wall_samples_per_s, workers, batch, baseline),
        };
    }
    Ok(result)
}

/// A pipeline's batch is the whole model's, and a pipeline may train at its own (GPipe at
/// the thesis's table 3.3 sizes, 384 where single trains 32): where no `single` shares its
/// batch, the run's one `single` batch for the same network, data set and numerics is its
/// baseline, compared by throughput. Several such batches leave it without one.
fn own_batch_baseline<'a>(baselines: &'a HashMap<CellKey, Plotted>, key: &CellKey) -> Option<(u32, &'a Plotted)> {
    if !key.strategy.kind().is_pipeline() {
        return None;
    }
    let mut singles = baselines
        .iter()
        .filter(|(single, _)| {
            single.workers == 1 && single.strategy.kind() == stratlab_strategy_spec::StrategyKind::Single
        })
        .filter(|(single, _)| CellKey { batch_size: key.batch_size, ..(*single).clone() } == key.baseline());
    let (single, baseline) = singles.next()?;
    singles.next().is_none().then_some((single.batch_size, baseline))
}
