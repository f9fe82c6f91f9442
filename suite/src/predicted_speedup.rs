//! Thesis fig. 3.2 predicted: each strategy's speedup over `single` against the number of
//! workers, from the predicted steps of a suite's cells (on a cluster file's devices, say,
//! at worker counts this machine cannot run), with the measured speedups of a run of the
//! same suite beside them where it has them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stratlab_reports::aggregate::Labels;
use stratlab_reports::{speedup_scaling_noted, FigureTarget, Format, Plotted, ScalingLine, ScalingPoint, Stat};
use stratlab_results::{CellKey, PredictionRow};

use crate::trial::TrialSpec;

/// The seconds one step of a cell takes, by trial id (its first repeat).
pub type StepTimes = BTreeMap<String, f64>;

/// Writes `dir/predicted_speedup.svg` and `.png` from `rows` (one per first repeat of `trials`, in
/// plan order) and, where given, the `measured` p10 steps; returns the files.
pub fn write_speedup_figure(
    trials: &[TrialSpec],
    rows: &[PredictionRow],
    measured: Option<&StepTimes>,
    dir: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let cells: Vec<&TrialSpec> = trials.iter().filter(|trial| trial.repeat == 0).collect();
    let predicted: StepTimes = rows.iter().filter_map(|row| Some((row.trial_id.clone(), row.step_s?))).collect();
    let mut points = speedups(&cells, &predicted, false);
    if let Some(measured) = measured {
        points.extend(speedups(&cells, measured, true));
    }
    if points.is_empty() {
        anyhow::bail!(
            "no cell has both a prediction and a `single` cell of the same network, data set and batch to divide by"
        );
    }
    std::fs::create_dir_all(dir)?;
    let target = FigureTarget::new(dir, "predicted_speedup").with_formats(&[Format::Svg, Format::Png]);
    let note = match measured {
        Some(_) => "predicted before training; \"(measured)\": the run's p10 steps",
        None => "predicted before training, not measured",
    };
    Ok(speedup_scaling_noted(&points, Some(note), &target)?)
}

/// Each cell's speedup over the `single` cell it is measured against (the same network,
/// data set, batch, threads, precision, memory format and optimizer: `CellKey::baseline`):
/// samples per second over all its workers ÷ single's. A line per strategy as the suite
/// tells it apart, measured ones beside the predicted as [`ScalingLine::Also`].
fn speedups(cells: &[&TrialSpec], steps: &StepTimes, measured: bool) -> Vec<ScalingPoint> {
    let keys: Vec<CellKey> = cells.iter().map(|cell| cell.cell_key()).collect();
    let labels = Labels::of(&keys);
    let throughput = |cell: &TrialSpec| Some(cell.global_batch() as f64 / steps.get(&cell.trial_id)?);
    let by_key: BTreeMap<&CellKey, &TrialSpec> = keys.iter().zip(cells.iter().copied()).collect();
    cells
        .iter()
        .zip(&keys)
        .filter_map(|(cell, key)| {
            let baseline = throughput(by_key.get(&key.baseline())?)?;
            let series = labels.series(key);
            Some(ScalingPoint {
                line: match measured {
                    true => ScalingLine::Also(series, "measured".into()),
                    false => ScalingLine::Strategy(series),
                },
                network: key.network.clone(),
                dataset: key.dataset_label(),
                workers: key.workers,
                speedup: Plotted::Measured(Stat::single(throughput(cell)? / baseline)),
            })
        })
        .collect()
}
