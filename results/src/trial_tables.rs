//! Everything one finished trial writes, handed to `RunStore::write_trial` in one piece.

use crate::{
    EpochRow, EvaluationRow, EventRow, GradientUpdateRow, PipelineStageRow, RankBreakdownRow, StepRow, TelemetryRow,
    TrialNodeRow, TrialRow,
};

/// The rows of one trial for every per-trial table: grouped so adding a table adds a field
/// instead of another positional argument at every call site.
///
/// Start from [`TrialTables::new`] and fill what the trial has:
/// `TrialTables { steps: &steps, ..TrialTables::new(&trial) }`.
#[derive(Debug, Clone, Copy)]
pub struct TrialTables<'a> {
    /// The trial row: written last, it commits the trial.
    pub trial: &'a TrialRow,
    /// One row per worker and epoch.
    pub epochs: &'a [EpochRow],
    /// One row per worker and optimizer step.
    pub steps: &'a [StepRow],
    /// One row per device and telemetry sample.
    pub telemetry: &'a [TelemetryRow],
    /// Timed events of every rank; non-empty also writes `traces/<trial_id>.json`.
    pub events: &'a [EventRow],
    /// Per-rank step-time breakdown (see [`crate::rank_breakdown()`]).
    pub rank_breakdown: &'a [RankBreakdownRow],
    /// One row per pipeline rank (see [`crate::pipeline_stage_rows()`]); empty for
    /// strategies that do not cut the network into stages.
    pub pipeline_stages: &'a [PipelineStageRow],
    /// One row per evaluation of every rank.
    pub evaluations: &'a [EvaluationRow],
    /// One row per gradient a parameter server was pushed, where its mode records them
    /// (asynchronous modes and backup workers); empty otherwise.
    pub gradient_updates: &'a [GradientUpdateRow],
    /// One row per rank of a trial across nodes (the node it ran on); empty for a trial on
    /// the runner's own machine.
    pub nodes: &'a [TrialNodeRow],
}

impl<'a> TrialTables<'a> {
    /// The trial row with every other table empty.
    pub fn new(trial: &'a TrialRow) -> TrialTables<'a> {
        TrialTables {
            trial,
            epochs: &[],
            steps: &[],
            telemetry: &[],
            events: &[],
            rank_breakdown: &[],
            pipeline_stages: &[],
            evaluations: &[],
            gradient_updates: &[],
            nodes: &[],
        }
    }
}
