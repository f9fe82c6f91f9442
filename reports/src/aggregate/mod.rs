//! From a run's tables to the numbers behind its figures and tables: throughput,
//! epoch time and speedup per cell with the spread over repeats, device usage, accuracy and
//! loss curves per trial, where each rank's step time went (compute, exposed and overlapped
//! communication, idle), each pipeline stage's imbalance and bubble, and the pipeline bubble
//! of a timeline.
//!
//! The run is read once through `stratlab_results::RunView`: typed trial rows, each with
//! its `CellKey`. Only `ok` trials are measurements; failed ones are counted and their
//! outcome kept, so a cell whose repeats all failed shows as that failure, never as a gap
//! or a made-up number. Repeats are summarised with Polars' group-by on the cell.

mod accuracy;
mod bubble;
mod cells;
mod device;
mod figures;
mod labels;
mod loss;
mod pipeline;
mod speedup;
mod split_backward;
mod step_breakdown;
mod throughput;
mod trial;

use std::collections::BTreeMap;

use stratlab_results::{
    EpochRow, EvaluationRow, PipelineStageRow, PredictedPassRow, RankBreakdownRow, RunStore, RunView, StepRow,
};

use crate::ReportError;

pub use accuracy::TrialAccuracy;
pub use bubble::{bubble_share, bubble_share_of, gpipe_bubble, BubbleShare};
pub use cells::{FailedTrial, Repeats};
pub use device::DeviceUsageCell;
pub use labels::Labels;
pub use loss::{StepsPerEpoch, TrialLoss, MAX_LOSS_POINTS};
pub use pipeline::{PipelineStage, PipelineTrial};
pub use speedup::{Speedup, NO_BASELINE};
pub use split_backward::{split_backward_stages, SplitBackwardStage};
pub use step_breakdown::{RankStepBreakdown, StepTimes};
/// A cell of the matrix: the results crate's key, which every reader of a run groups by.
pub use stratlab_results::CellKey;
pub use throughput::ThroughputCell;
pub use trial::TrialInfo;

/// Everything a report shows about one run, computed once from its tables.
///
/// Cells are in the order the suite's matrix first lists them, trials in matrix order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunAggregates {
    /// The run's id (`20261123T100115Z-default`).
    pub run_id: String,
    /// How the run's cells are named where they are drawn and printed.
    pub labels: Labels,
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

/// Aggregates the run `store` holds. A run without finished trials gives empty
/// aggregates, not an error; a run folder from before the `rank_breakdown` or
/// `pipeline_stages` table existed reads as having no breakdown or no pipeline stages.
pub fn aggregate_run(store: &RunStore) -> Result<RunAggregates, ReportError> {
    let view = RunView::of(store.clone()).map_err(ReportError::Store)?;
    aggregate_view(&view)
}

/// Aggregates a run already read.
pub fn aggregate_view(run: &RunView) -> Result<RunAggregates, ReportError> {
    if run.trials().is_empty() {
        return Ok(RunAggregates { run_id: run.run_id().to_owned(), ..RunAggregates::default() });
    }
    let load = |table: &'static str| move |source| ReportError::Load { table, source };
    let epochs: Vec<EpochRow> = run.rows().map_err(load("epochs"))?;
    let evaluations: Vec<EvaluationRow> = run.rows().map_err(load("evaluations"))?;
    let steps: Vec<StepRow> = run.rows().map_err(load("steps"))?;
    let rank_breakdown: Vec<RankBreakdownRow> = run.rows().map_err(load("rank_breakdown"))?;
    let pipeline_stages: Vec<PipelineStageRow> = run.rows().map_err(load("pipeline_stages"))?;
    let predicted_passes: Vec<PredictedPassRow> = run.rows().map_err(load("predicted_passes"))?;
    let cells = cells::repeats_by_cell(run);
    let ok = cells::ok_trials(run)?;
    let records = trial::trial_records(run);
    Ok(RunAggregates {
        run_id: run.run_id().to_owned(),
        labels: Labels::of(run.cells()),
        throughput: throughput::throughput_cells(&cells, &ok)?,
        device_usage: device::device_usage_cells(&cells, &ok)?,
        accuracy: accuracy::trial_accuracies(&records, &epochs, &evaluations),
        loss: loss::trial_losses(&records, &steps),
        step_breakdown: step_breakdown::step_breakdowns(&records, &rank_breakdown),
        pipelines: pipeline::pipeline_trials(&records, pipeline_stages, &predicted_by_cell(run, predicted_passes)),
    })
}

/// The predicted passes of each cell: a prediction names its cell's first repeat, and every
/// repeat of the cell draws it.
fn predicted_by_cell(run: &RunView, passes: Vec<PredictedPassRow>) -> BTreeMap<CellKey, Vec<PredictedPassRow>> {
    let cell_of: BTreeMap<&str, &CellKey> =
        run.trials_with_cells().map(|(trial, key)| (trial.trial_id.as_str(), key)).collect();
    let mut by_cell: BTreeMap<CellKey, Vec<PredictedPassRow>> = BTreeMap::new();
    for pass in passes {
        if let Some(&key) = cell_of.get(pass.trial_id.as_str()) {
            by_cell.entry(key.clone()).or_default().push(pass);
        }
    }
    by_cell
}
