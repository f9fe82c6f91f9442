//! Thesis fig. 3.2 predicted: each strategy's speedup over `single` against the number of
//! workers, from the predicted steps of a suite's cells (on a cluster file's devices, say,
//! at worker counts this machine cannot run), with the measured speedups of a run of the
//! same suite beside them where it has them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stratlab_reports::{speedup_scaling_noted, FigureTarget, Format, Outcome, ScalingPoint, Stat};
use stratlab_results::PredictionRow;
use stratlab_strategy_spec::StrategyKind;

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
    let mut points = speedups(&cells, &predicted, "");
    if let Some(measured) = measured {
        points.extend(speedups(&cells, measured, " (measured)"));
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

/// Each cell's speedup over the `single` cell of its network, data set and batch: samples
/// per second over all its workers ÷ single's. Strategies are named with `suffix`.
fn speedups(cells: &[&TrialSpec], steps: &StepTimes, suffix: &str) -> Vec<ScalingPoint> {
    let baseline = |cell: &TrialSpec| {
        cells
            .iter()
            .find(|other| {
                other.strategy.kind() == StrategyKind::Single
                    && (&other.network, &other.dataset, other.train.batch_size)
                        == (&cell.network, &cell.dataset, cell.train.batch_size)
            })
            .and_then(|single| Some(cell.train.batch_size as f64 / steps.get(&single.trial_id)?))
    };
    cells
        .iter()
        .filter_map(|cell| {
            let samples = cell.strategy.global_batch(cell.train.batch_size, cell.workers) as f64;
            let throughput = samples / steps.get(&cell.trial_id)?;
            Some(ScalingPoint {
                strategy: format!("{}{suffix}", cell.strategy.name()),
                network: cell.network.clone(),
                dataset: cell.dataset.to_string(),
                workers: cell.workers as u32,
                speedup: Outcome::Measured(Stat::single(throughput / baseline(cell)?)),
            })
        })
        .collect()
}
