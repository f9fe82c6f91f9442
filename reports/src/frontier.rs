//! The memory frontier (`batch_size: max` cells): per strategy, workers, micro-batches and
//! checkpointing, the largest batch that trained under the memory limit, its peak per
//! worker and the throughput the cell's trials then measured there, beside the batch the
//! model predicted before the first probe. Runs without a `batch_probes` table (every run
//! made before it existed, and every run without `max`) have no frontier.

use polars::prelude::Column;
use stratlab_results::stats::median;
use stratlab_results::{BatchProbeRow, CellKey, Outcome, RunView};

use crate::aggregate::Labels;
use crate::figures::frontier::FrontierBar;
use crate::tables::SummaryTable;
use crate::{FigureTarget, HtmlTable, ReportError, ReportFigure, ReportSection, StrategySeries};

const MIB: f64 = 1024.0 * 1024.0;

/// One cell's search and what its trials measured at the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontierCell {
    /// The searched cell's first trial id.
    pub trial_id: String,
    /// Network name.
    pub network: String,
    /// Data set as suites name it (`cifar10:synthetic`).
    pub dataset: String,
    /// The strategy as the run's figures draw it (`gpipe (m4, ckpt always)`).
    pub series: StrategySeries,
    /// Workers.
    pub workers: i64,
    /// The search's step (batches are multiples of it).
    pub batch_step: i64,
    /// The limit per worker.
    pub memory_limit_bytes: Option<u64>,
    /// The largest per-worker batch that trained, its global batch and its peak; `None`
    /// when not even one step did.
    pub largest: Option<ProbedBatch>,
    /// The model's largest per-worker batch and its global batch.
    pub predicted: Option<(i64, i64)>,
    /// The smallest batch that did not train, where one was tried.
    pub smallest_failing: Option<ProbedBatch>,
    /// Probes made.
    pub probes: usize,
    /// Seconds the probes took, processes' start included.
    pub probing_s: f64,
    /// Median wall throughput of the cell's `ok` trials at the largest batch, samples/s.
    pub samples_per_s: Option<f64>,
}

/// One probe's batch and peak.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbedBatch {
    /// Per worker (per pipeline).
    pub batch_size: i64,
    /// Over all workers.
    pub global_batch: i64,
    /// The fullest worker's peak.
    pub peak_memory_bytes: Option<u64>,
    /// How the probe ended.
    pub outcome: Outcome,
}

impl FrontierCell {
    /// Whether the prediction is within one bisection step of the answer: the search's
    /// resolution, a sixteenth of it or one step, whichever is larger.
    pub fn predicted_within_a_step(&self) -> Option<bool> {
        let largest = self.largest.as_ref()?.batch_size;
        let (predicted, _) = self.predicted?;
        let resolution = stratlab_results::bisection_resolution(largest as usize, self.batch_step as usize);
        Some((predicted - largest).unsigned_abs() as usize <= resolution)
    }
}

/// Every searched cell of `probes`, in the order the searches ran, with the throughput the
/// cell's trials in `run` measured. A cell is the one of its first trial (the probes'
/// `trial_id`), named as the run's other figures name it.
pub fn frontier_cells(probes: &[BatchProbeRow], run: &RunView, labels: &Labels) -> Vec<FrontierCell> {
    let mut order: Vec<&str> = Vec::new();
    for probe in probes {
        if !order.contains(&probe.trial_id.as_str()) {
            order.push(&probe.trial_id);
        }
    }
    order
        .into_iter()
        .map(|trial_id| {
            let cell: Vec<&BatchProbeRow> = probes.iter().filter(|probe| probe.trial_id == trial_id).collect();
            let first = cell[0];
            let probed = |probe: &BatchProbeRow| ProbedBatch {
                batch_size: probe.batch_size,
                global_batch: probe.global_batch,
                peak_memory_bytes: probe.peak_memory_bytes,
                outcome: probe.outcome,
            };
            let largest = cell.iter().filter(|probe| probe.fits).max_by_key(|probe| probe.batch_size);
            let smallest_failing = cell.iter().filter(|probe| !probe.fits).min_by_key(|probe| probe.batch_size);
            let samples_per_worker = first.global_batch as f64 / first.batch_size.max(1) as f64;
            let predicted =
                first.predicted_batch_size.map(|batch| (batch, (batch as f64 * samples_per_worker).round() as i64));
            let key = run.trials_with_cells().find(|(trial, _)| trial.trial_id == trial_id).map(|(_, key)| key);
            let samples_per_s = largest.zip(key).and_then(|(largest, key)| throughput_at(run, key, largest.batch_size));
            // A search whose cell left no trial row (a killed run) is named by its probes.
            let (dataset, series) = match key {
                Some(key) => (key.dataset_label(), labels.series(key)),
                None => (first.dataset.clone(), StrategySeries::of(first.strategy)),
            };
            FrontierCell {
                trial_id: trial_id.to_owned(),
                network: first.network.clone(),
                dataset,
                series,
                workers: first.workers,
                batch_step: first.batch_step,
                memory_limit_bytes: first.memory_limit_bytes,
                largest: largest.map(|probe| probed(probe)),
                predicted,
                smallest_failing: smallest_failing.map(|probe| probed(probe)),
                probes: cell.len(),
                probing_s: cell.iter().map(|probe| probe.wall_time_s).sum(),
                samples_per_s,
            }
        })
        .collect()
}

/// The median wall throughput of the `ok` trials of cell `key` at `batch_size`.
fn throughput_at(run: &RunView, key: &CellKey, batch_size: i64) -> Option<f64> {
    let measured: Vec<f64> = run
        .trials_with_cells()
        .filter(|(trial, cell)| *cell == key && trial.batch_size == batch_size && trial.outcome.is_ok())
        .filter_map(|(trial, _)| trial.training.wall_samples_per_s)
        .collect();
    median(&measured)
}

/// The frontier as a table: a row per searched cell.
pub fn frontier_table(cells: &[FrontierCell]) -> Result<SummaryTable, ReportError> {
    let text = |f: &dyn Fn(&FrontierCell) -> String| cells.iter().map(f).collect::<Vec<String>>();
    let int = |f: &dyn Fn(&FrontierCell) -> Option<i64>| cells.iter().map(f).collect::<Vec<Option<i64>>>();
    let float = |f: &dyn Fn(&FrontierCell) -> Option<f64>| cells.iter().map(f).collect::<Vec<Option<f64>>>();
    let mib = |bytes: Option<u64>| bytes.map(|bytes| bytes as f64 / MIB);
    let columns = vec![
        Column::new("network".into(), text(&|c| c.network.clone())),
        Column::new("dataset".into(), text(&|c| c.dataset.clone())),
        Column::new("strategy".into(), text(&|c| c.series.full_label())),
        Column::new("W".into(), cells.iter().map(|c| c.workers).collect::<Vec<i64>>()),
        Column::new("limit/worker (MiB)".into(), float(&|c| mib(c.memory_limit_bytes))),
        Column::new("largest batch/worker".into(), int(&|c| c.largest.as_ref().map(|b| b.batch_size))),
        Column::new("largest global batch".into(), int(&|c| c.largest.as_ref().map(|b| b.global_batch))),
        Column::new("predicted global batch".into(), int(&|c| c.predicted.map(|(_, global)| global))),
        Column::new(
            "predicted ÷ measured".into(),
            float(&|c| Some(c.predicted?.1 as f64 / c.largest.as_ref()?.global_batch as f64)),
        ),
        Column::new(
            "predicted within a bisection step".into(),
            text(&|c| c.predicted_within_a_step().map_or(String::new(), |yes| if yes { "yes" } else { "no" }.into())),
        ),
        Column::new(
            "peak/worker at largest (MiB)".into(),
            float(&|c| mib(c.largest.as_ref().and_then(|b| b.peak_memory_bytes))),
        ),
        Column::new(
            "smallest failing global batch".into(),
            int(&|c| c.smallest_failing.as_ref().map(|b| b.global_batch)),
        ),
        Column::new(
            "it failed as".into(),
            text(&|c| c.smallest_failing.as_ref().map(|b| b.outcome.name().to_owned()).unwrap_or_default()),
        ),
        Column::new("samples/s at largest (median)".into(), float(&|c| c.samples_per_s)),
        Column::new("probes".into(), cells.iter().map(|c| c.probes as i64).collect::<Vec<i64>>()),
        Column::new("probing (s)".into(), float(&|c| Some(c.probing_s))),
    ];
    SummaryTable::from_columns("memory_frontier", "Largest batch that trains under the memory limit", columns)
}

/// The figure's bars: a cell's largest global batch measured and predicted, and its
/// throughput there.
pub fn frontier_bars(cells: &[FrontierCell]) -> Vec<FrontierBar> {
    cells
        .iter()
        .map(|cell| FrontierBar {
            series: cell.series.clone(),
            workers: cell.workers as u32,
            network: cell.network.clone(),
            dataset: cell.dataset.clone(),
            largest_global_batch: cell.largest.as_ref().map(|b| b.global_batch as f64),
            predicted_global_batch: cell.predicted.map(|(_, global)| global as f64),
            samples_per_s: cell.samples_per_s,
            why_none: match &cell.largest {
                Some(_) => None,
                None => Some(cell.smallest_failing.as_ref().map_or("no probe".into(), |b| b.outcome.name().to_owned())),
            },
        })
        .collect()
}

/// The report's "Memory frontier" section: the figure into `figure`, the table added to
/// `tables` and shown through `html_table`.
pub(crate) fn frontier_section(
    cells: &[FrontierCell],
    figure: &FigureTarget,
    html_table: fn(&SummaryTable) -> HtmlTable,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let alt = "Largest global batch that trains per strategy, measured and predicted, and the throughput there";
    let figures = crate::memory_frontier(&frontier_bars(cells), figure)?
        .into_iter()
        .map(|path| ReportFigure::new(path, alt.to_owned()))
        .collect();
    let table = frontier_table(cells)?;
    let section = ReportSection {
        id: "memory-frontier".to_owned(),
        title: "Memory frontier".to_owned(),
        caption: "For each cell asking for `batch_size: max`, the runner searched for the largest batch that \
                  trains under the memory limit before the trials: the model's prediction first (the batch \
                  whose predicted peak meets the limit, made before any probe), then a few real steps per \
                  probe in fresh worker processes, doubling and halving, then bisecting to a sixteenth of the \
                  answer or one micro-batch per pipeline, whichever is larger. A probe that ran out of memory \
                  or crashed is a result. The cell's trials then trained at the answer; their median wall \
                  throughput is shown. The prediction counts as within a bisection step when it is within \
                  that resolution of the answer."
            .to_owned(),
        figures,
        tables: vec![html_table(&table)],
    };
    tables.push(table);
    Ok(section)
}
