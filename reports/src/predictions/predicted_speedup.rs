//! Thesis fig. 3.2 predicted: each strategy's speedup over `single` against the number of
//! workers, from the predicted steps of a suite's cells (on a cluster file's devices, say,
//! at worker counts this machine cannot run), with the measured speedups of a run of the
//! same suite beside them where it has them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stratlab_results::{CellKey, PredictionRow};

use crate::aggregate::Labels;
use crate::{speedup_scaling_noted, FigureTarget, Format, Plotted, ReportError, ScalingLine, ScalingPoint, Stat};

/// The seconds one step of a cell takes, by trial id (its first repeat).
pub type StepTimes = BTreeMap<String, f64>;

/// A predicted cell: its first repeat's trial id and its key.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictedCell {
    /// The trial id prediction rows and measured steps name it by.
    pub trial_id: String,
    /// What it measures.
    pub key: CellKey,
}

/// Writes `dir/predicted_speedup.svg` and `.png` from `rows` (one per cell of `cells`) and,
/// where given, the `measured` p10 steps; returns the files. `Ok(None)` where no cell has
/// both a prediction and a `single` cell to divide by.
pub fn write_predicted_speedup(
    cells: &[PredictedCell],
    rows: &[PredictionRow],
    measured: Option<&StepTimes>,
    dir: &Path,
) -> Result<Option<Vec<PathBuf>>, ReportError> {
    let predicted: StepTimes = rows.iter().filter_map(|row| Some((row.trial_id.clone(), row.step_s?))).collect();
    let mut points = speedups(cells, &predicted, false);
    if let Some(measured) = measured {
        points.extend(speedups(cells, measured, true));
    }
    if points.is_empty() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_path_buf(), source })?;
    let target = FigureTarget::new(dir, "predicted_speedup").with_formats(&[Format::Svg, Format::Png]);
    let note = match measured {
        Some(_) => "predicted before training; \"(measured)\": the run's p10 steps",
        None => "predicted before training, not measured",
    };
    Ok(Some(speedup_scaling_noted(&points, Some(note), &target)?))
}

/// Each cell's speedup over the `single` cell it is measured against (the same network,
/// data set, batch, threads, precision, memory format and optimizer: `CellKey::baseline`):
/// samples per second over all its workers ÷ single's. A line per strategy as the suite
/// tells it apart, measured ones beside the predicted as [`ScalingLine::Also`].
fn speedups(cells: &[PredictedCell], steps: &StepTimes, measured: bool) -> Vec<ScalingPoint> {
    let keys: Vec<CellKey> = cells.iter().map(|cell| cell.key.clone()).collect();
    let labels = Labels::of(&keys);
    let throughput = |cell: &PredictedCell| {
        let key = &cell.key;
        let global_batch = key.strategy.global_batch(key.batch_size as usize, key.workers as usize);
        Some(global_batch as f64 / steps.get(&cell.trial_id)?)
    };
    let by_key: BTreeMap<&CellKey, &PredictedCell> = cells.iter().map(|cell| (&cell.key, cell)).collect();
    cells
        .iter()
        .filter_map(|cell| {
            let key = &cell.key;
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
    use stratlab_strategy_spec::{
        DataSource, MemoryFormat, OptimizerKind, Parameters, Precision, Strategy, StrategyKind, ZeroStage,
    };

    use super::*;

    /// Single and data parallelism in fp32 and bf16, and ZeRO's three stages, on one
    /// network, data set and batch.
    fn cells() -> Vec<PredictedCell> {
        let zero = |stage| {
            let parameters = Parameters { stage: Some(stage), ..Parameters::default() };
            Strategy::new(StrategyKind::ShardedDataParallel, parameters).unwrap()
        };
        let data_parallel = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
        let mut cells = Vec::new();
        for precision in [Precision::Float32, Precision::Bfloat16] {
            let strategies = [(Strategy::Single, 1), (data_parallel.clone(), 2)]
                .into_iter()
                .chain([ZeroStage::One, ZeroStage::Two, ZeroStage::Three].map(|stage| (zero(stage), 2)));
            for (strategy, workers) in strategies {
                let key = CellKey {
                    network: "small-cnn".into(),
                    dataset: "mnist".into(),
                    data_source: DataSource::Synthetic,
                    strategy,
                    workers,
                    batch_size: 64,
                    swept_threads: None,
                    link: None,
                    nodes: 1,
                    straggler: None,
                    precision,
                    memory_format: MemoryFormat::Contiguous,
                    optimizer: OptimizerKind::Sgd,
                };
                cells.push(PredictedCell { trial_id: format!("cell{}", cells.len()), key });
            }
        }
        cells
    }

    #[test]
    fn each_cell_divides_by_the_single_cell_that_computes_as_it_does_and_each_stage_is_its_own_line() {
        let cells = cells();
        // single: 1 s a step in fp32 and 0.5 s in bf16; every two-worker cell 1 s a step.
        let steps: StepTimes = cells
            .iter()
            .map(|cell| {
                let step = match (cell.key.workers, cell.key.precision) {
                    (1, Precision::Bfloat16) => 0.5,
                    _ => 1.0,
                };
                (cell.trial_id.clone(), step)
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
