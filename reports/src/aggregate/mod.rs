//! From a run's tables to the numbers behind its figures and tables: throughput,
//! epoch time and speedup per cell with the spread over repeats, device usage, accuracy and
//! loss curves per trial, where each rank's step time went (compute, exposed and overlapped
//! communication, idle), each pipeline stage's imbalance and bubble, and the pipeline bubble
//! of a timeline.
//!
//! Only `ok` trials are measurements; failed ones are counted and their outcome kept, so a
//! cell whose repeats all failed shows as that failure, never as a gap or a made-up number.
//! Repeats are summarised with Polars' group-by (median, min, max, count).

mod accuracy;
mod bubble;
mod cells;
mod columns;
mod device;
mod figures;
mod loss;
mod pipeline;
mod speedup;
mod step_breakdown;
mod throughput;
mod trial;

use std::collections::{BTreeSet, HashMap};

use polars::prelude::{Column, DataFrame};
use stratlab_results::{decode_rows, EpochRow, PipelineStageRow, RankBreakdownRow, RunStore, StepRow, Table, TrialRow};
use stratlab_strategy_spec::{
    stored_compute, ColumnsError, MemoryFormat, OptimizerKind, Precision, Strategy, StrategyColumns,
};

use crate::ReportError;

pub use accuracy::TrialAccuracy;
pub use bubble::{bubble_share, bubble_share_of, gpipe_bubble, BubbleShare};
pub use cells::{failure_of, FailedTrial, Repeats, NOT_RECORDED};
use columns::cell_strategy_label;
pub use columns::CellKey;
pub use device::DeviceUsageCell;
pub use loss::{StepsPerEpoch, TrialLoss, MAX_LOSS_POINTS};
pub use pipeline::{PipelineStage, PipelineTrial};
pub use speedup::{Speedup, NO_BASELINE};
pub use step_breakdown::{RankStepBreakdown, StepTimes};
pub use throughput::ThroughputCell;
pub use trial::TrialInfo;

/// Everything a report shows about one run, computed once from its tables.
///
/// Cells are in the order the suite's matrix first lists them, trials in matrix order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunAggregates {
    /// The run's id (`20261123T100115Z-default`).
    pub run_id: String,
    /// Throughput, epoch time and speedup per cell.
    pub throughput: Vec<ThroughputCell>,
    /// Device utilisation and memory per cell.
    pub device_usage: Vec<DeviceUsageCell>,
    /// Accuracy over time per trial.
    pub accuracy: Vec<TrialAccuracy>,
    /// Training loss per trial.
    pub loss: Vec<TrialLoss>,
    /// Step-time breakdown per trial and rank, for trials that recorded one (multi-worker
    /// strategies with events); empty for runs without any.
    pub step_breakdown: Vec<RankStepBreakdown>,
    /// Pipeline trials with their stages' rows (strategies that cut the network into
    /// stages); empty for runs without any.
    pub pipelines: Vec<PipelineTrial>,
}

impl RunAggregates {
    /// Whether the run holds no finished trial (an interrupted run may not).
    pub fn is_empty(&self) -> bool {
        self.throughput.is_empty()
    }
}

/// Loads the trials, epochs, steps, rank-breakdown and pipeline-stage tables of `store` once
/// and aggregates them. A run without finished trials gives empty aggregates, not an error;
/// a run folder from before the `rank_breakdown` or `pipeline_stages` table existed reads as
/// having no breakdown or no pipeline stages.
pub fn aggregate_run(store: &RunStore) -> Result<RunAggregates, ReportError> {
    let load = |table: &'static str| store.load(table).map_err(|source| ReportError::Load { table, source });
    let trials = load(TrialRow::NAME)?;
    let epochs = load(EpochRow::NAME)?;
    let steps = load(StepRow::NAME)?;
    let rank_breakdown = if store.run_dir().join(RankBreakdownRow::NAME).is_dir() {
        load(RankBreakdownRow::NAME)?
    } else {
        DataFrame::empty_with_schema(&RankBreakdownRow::schema())
    };
    let pipeline_stages = load(PipelineStageRow::NAME)?;
    aggregate_frames(
        store.run_id(),
        &RunFrames {
            trials: &trials,
            epochs: &epochs,
            steps: &steps,
            rank_breakdown: &rank_breakdown,
            pipeline_stages: &pipeline_stages,
        },
    )
}

/// A run's tables as loaded frames (with the store's column names and types).
#[derive(Debug, Clone, Copy)]
pub struct RunFrames<'a> {
    /// The trials table: one row per finished trial.
    pub trials: &'a DataFrame,
    /// The epochs table.
    pub epochs: &'a DataFrame,
    /// The steps table.
    pub steps: &'a DataFrame,
    /// The rank-breakdown table (empty for runs without multi-worker events).
    pub rank_breakdown: &'a DataFrame,
    /// The pipeline-stages table (empty for runs without pipeline strategies).
    pub pipeline_stages: &'a DataFrame,
}

/// What labelling reads of a trial row: its id, its strategy columns and swept threads.
#[derive(serde::Deserialize)]
struct TrialStrategy {
    trial_id: String,
    #[serde(flatten)]
    columns: StrategyColumns,
    #[serde(default)]
    swept_threads: Option<i64>,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    precision: Option<String>,
    #[serde(default)]
    memory_format: Option<String>,
    #[serde(default)]
    optimizer: Option<String>,
}

impl TrialStrategy {
    /// The precision and memory format, the defaults for runs stored before the axes.
    fn compute(&self) -> Result<(Precision, MemoryFormat), ColumnsError> {
        stored_compute(&self.trial_id, self.precision.as_deref(), self.memory_format.as_deref())
    }
}

/// Aggregates already loaded tables.
pub fn aggregate_frames(run_id: &str, frames: &RunFrames<'_>) -> Result<RunAggregates, ReportError> {
    let RunFrames { trials, epochs, steps, rank_breakdown, pipeline_stages } = *frames;
    if trials.height() == 0 {
        return Ok(RunAggregates { run_id: run_id.to_owned(), ..RunAggregates::default() });
    }
    let trials = cells::in_matrix_order(&with_synthetic_marked(trials)?)?;
    let cells = cells::repeats_by_cell(&trials)?;
    let ok = columns::Frame::new("trials", &trials).ok_rows()?;
    let records = trial::trial_records(&trials)?;
    Ok(RunAggregates {
        run_id: run_id.to_owned(),
        throughput: throughput::throughput_cells(&cells, &ok)?,
        device_usage: device::device_usage_cells(&cells, &ok)?,
        accuracy: accuracy::trial_accuracies(&records, epochs)?,
        loss: loss::trial_losses(&records, steps)?,
        step_breakdown: step_breakdown::step_breakdowns(&records, rank_breakdown)?,
        pipelines: pipeline::pipeline_trials(&records, pipeline_stages)?,
    })
}

/// The trials with synthetic data named as suites name it (`cifar10:synthetic`): real and
/// synthetic runs of one data set are different cells (their accuracy is not comparable),
/// and no figure or table may show synthetic numbers under the real set's name.
fn with_synthetic_marked(trials: &DataFrame) -> Result<DataFrame, ReportError> {
    let error = |column: &str| {
        let column = column.to_owned();
        move |source| ReportError::Column { table: TrialRow::NAME.to_owned(), column, source }
    };
    let dataset = trials.column("dataset").and_then(|c| c.str().cloned()).map_err(error("dataset"))?;
    let source = trials.column("data_source").and_then(|c| c.str().cloned()).map_err(error("data_source"))?;
    let named: Vec<Option<String>> = dataset
        .iter()
        .zip(source.iter())
        .map(|(dataset, source)| dataset.map(|name| dataset_label(name, source.unwrap_or_default())))
        .collect();
    let mut trials = trials.clone();
    trials.replace("dataset", Column::new("dataset".into(), named)).map_err(error("dataset"))?;
    // Cells that differ only in a strategy parameter are different cells: the parameter
    // joins the strategy's label (`parameter-server (dedicated server)`), as `:synthetic` joins
    // the data set's. A pipeline parameter joins the label of a strategy the run tried with
    // more than one value of it (`gpipe (m4)`); a value all its cells share needs no
    // telling apart. Threads a suite swept join every label they apply to.
    let rows: Vec<TrialStrategy> =
        decode_rows(&trials, TrialRow::NAME).map_err(|source| ReportError::Load { table: TrialRow::NAME, source })?;
    let strategies =
        rows.iter().map(|row| row.columns.strategy(&row.trial_id)).collect::<Result<Vec<Strategy>, _>>()?;
    let mut values_of: HashMap<(&str, &str), BTreeSet<Option<String>>> = HashMap::new();
    for strategy in &strategies {
        for (parameter, value) in strategy.pipeline_parameters() {
            values_of.entry((strategy.name(), parameter)).or_default().insert(value);
        }
    }
    let labelled: Vec<Option<String>> = strategies
        .iter()
        .zip(&rows)
        .map(|(strategy, row)| {
            let varies =
                |parameter: &str| values_of.get(&(strategy.name(), parameter)).is_some_and(|values| values.len() > 1);
            let label = &strategy.report_label(varies);
            let optimizer = OptimizerKind::stored(&row.trial_id, row.optimizer.as_deref())?;
            Ok(Some(cell_strategy_label(label, row.swept_threads, row.link.as_deref(), row.compute()?, optimizer)))
        })
        .collect::<Result<_, ColumnsError>>()?;
    trials.replace("strategy", Column::new("strategy".into(), labelled)).map_err(error("strategy"))?;
    Ok(trials)
}

/// A data set's name as suites write it: `cifar10:synthetic` when the data was synthetic.
pub(crate) fn dataset_label(dataset: &str, data_source: &str) -> String {
    if data_source == "synthetic" {
        format!("{dataset}:synthetic")
    } else {
        dataset.to_owned()
    }
}
