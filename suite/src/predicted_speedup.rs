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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::plan;
    use crate::suite_file::SuiteFile;

    /// Single and data parallelism in fp32 and bf16, and ZeRO's three stages, on one
    /// network, data set and batch.
    fn cells() -> Vec<TrialSpec> {
        let suite = SuiteFile::parse(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies:
  - single
  - {name: data-parallel, workers: [2]}
  - {name: sharded-data-parallel, workers: [2], stage: [1, 2, 3]}
precision: [fp32, bf16]
device: cpu
budget: {steps: 1}
",
        )
        .unwrap();
        plan(&suite, Path::new("t.yaml")).unwrap()
    }

    #[test]
    fn each_cell_divides_by_the_single_cell_that_computes_as_it_does_and_each_stage_is_its_own_line() {
        let trials = cells();
        let cells: Vec<&TrialSpec> = trials.iter().collect();
        // single: 1 s a step in fp32 and 0.5 s in bf16; every two-worker cell 1 s a step.
        let steps: StepTimes = trials
            .iter()
            .map(|trial| {
                let bf16 = !trial.train.precision.is_float32();
                let step = match (trial.workers, bf16) {
                    (1, true) => 0.5,
                    _ => 1.0,
                };
                (trial.trial_id.clone(), step)
            })
            .collect();
        let points = speedups(&cells, &steps, false);
        let speedup_of = |label: &str| -> Vec<f64> {
            let mut of: Vec<f64> = points
                .iter()
                .filter(|point| point.line.label() == label)
                .map(|point| point.speedup.stat().unwrap().median)
                .collect();
            of.sort_by(f64::total_cmp);
            of
        };
        // Two workers at 1 s do twice single's samples: 2× over fp32 single, 1× over bf16's.
        assert_eq!(speedup_of("data-parallel"), [2.0]);
        assert_eq!(speedup_of("data-parallel · bf16"), [1.0]);
        for stage in 1..=3 {
            let label = format!("sharded-data-parallel (ZeRO-{stage})");
            assert_eq!(speedup_of(&label), [2.0], "{label}");
            assert_eq!(speedup_of(&format!("{label} · bf16")), [1.0], "{label}");
        }
        let lines: std::collections::BTreeSet<String> = points.iter().map(|point| point.line.label()).collect();
        assert_eq!(lines.len(), 10, "{lines:?}");
    }
}
