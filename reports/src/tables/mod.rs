//! The numbers behind each figure as tables, and the results matrix: CSV for tools,
//! Markdown for notes, formatted cells for the HTML report, a compact matrix for the
//! terminal.
//!
//! A table's frame keeps full-precision numbers (the CSV holds them) with units in the
//! column names; formatting happens only on display: three significant digits, "—" for a
//! missing value, and a failed row's numbers replaced by its outcome in capitals (`OOM`).

mod format;
mod matrix;
mod summaries;
mod summary_table;

use crate::aggregate::RunAggregates;
use crate::ReportError;

pub use format::{outcome_label, three_significant, MISSING};
pub use matrix::{matrix_for_terminal, results_matrix};
pub(crate) use summaries::Columns;
pub use summaries::{
    bubble_table, device_usage_table, loss_table, pipeline_stages_table, speedup_table, split_backward_table,
    step_breakdown_table, straggler_table, throughput_table, time_to_accuracy_table,
};
pub use summary_table::{SummaryTable, OUTCOME_COLUMN};

/// Every summary table of a run: the results matrix first, then one per figure kind
/// (speedup backs both the speedup bars and the scaling lines). The step-time breakdown,
/// the pipeline stages and the stragglers come last, each only when the run recorded them
/// (multi-worker trials with events, pipeline trials, straggler cells).
pub fn summary_tables(aggregates: &RunAggregates) -> Result<Vec<SummaryTable>, ReportError> {
    let mut tables = vec![
        results_matrix(aggregates)?,
        speedup_table(aggregates)?,
        throughput_table(aggregates)?,
        device_usage_table(aggregates)?,
        time_to_accuracy_table(aggregates)?,
        loss_table(aggregates)?,
    ];
    if !aggregates.step_breakdown.is_empty() {
        tables.push(step_breakdown_table(aggregates)?);
    }
    if !aggregates.pipelines.is_empty() {
        tables.push(pipeline_stages_table(aggregates)?);
    }
    if let Some(stragglers) = straggler_table(aggregates) {
        tables.push(stragglers?);
    }
    Ok(tables)
}
