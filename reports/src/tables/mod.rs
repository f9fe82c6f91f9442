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

use std::fs::File;
use std::path::{Path, PathBuf};

use comfy_table::{presets::ASCII_MARKDOWN, CellAlignment, Table};
use polars::prelude::{AnyValue, CsvWriter, DataFrame, SerWriter};

use crate::aggregate::RunAggregates;
use crate::ReportError;

pub use format::{outcome_label, three_significant, MISSING};
pub use matrix::{matrix_for_terminal, results_matrix};
pub use summaries::{
    bubble_table, device_usage_table, loss_table, pipeline_stages_table, speedup_table, step_breakdown_table,
    throughput_table, time_to_accuracy_table,
};

/// Name of the column holding a row's stored outcome (`ok`, `oom`, …). On display, the
/// empty numeric cells of a row whose outcome is not `ok` show that outcome in capitals.
pub const OUTCOME_COLUMN: &str = "outcome";

/// One summary table: a frame of display columns with units in their names.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryTable {
    /// File stem, e.g. `"speedup"`.
    pub name: String,
    /// Human title, e.g. "Speedup over single (W = 1)".
    pub title: String,
    /// The columns, full precision; units in the names (`"samples/s (median)"`).
    pub frame: DataFrame,
}

impl SummaryTable {
    /// Writes `dir/<name>.csv` (full-precision numbers, empty for null) and returns its path.
    pub fn write_csv(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_path_buf(), source })?;
        let path = dir.join(format!("{}.csv", self.name));
        let file = File::create(&path).map_err(|source| ReportError::Io { path: path.clone(), source })?;
        CsvWriter::new(file)
            .include_header(true)
            .finish(&mut self.frame.clone())
            .map_err(|source| ReportError::Csv { path: path.clone(), source })?;
        Ok(path)
    }

    /// The table as GitHub Markdown (header and rows; the title is left to the caller's
    /// heading), numeric columns right-aligned in the source.
    pub fn to_markdown(&self) -> String {
        let (header, rows, numeric) = self.cells();
        let escape = |text: &str| text.replace('|', "\\|").replace('\n', " ");
        let mut table = Table::new();
        table.load_preset(ASCII_MARKDOWN);
        table.set_header(header.iter().map(|h| escape(h)).collect::<Vec<_>>());
        for row in rows {
            table.add_row(row.iter().map(|cell| escape(cell)).collect::<Vec<_>>());
        }
        align_numeric(&mut table, &numeric);
        table.to_string()
    }

    /// Header, formatted rows and which columns are numeric (for right alignment).
    pub fn cells(&self) -> (Vec<String>, Vec<Vec<String>>, Vec<bool>) {
        let columns = self.frame.columns();
        let header = columns.iter().map(|c| c.name().to_string()).collect();
        let numeric: Vec<bool> = columns.iter().map(|c| c.dtype().is_primitive_numeric()).collect();
        let outcome = self.frame.column(OUTCOME_COLUMN).ok().and_then(|c| c.str().ok());
        let rows = (0..self.frame.height())
            .map(|i| {
                let failed = outcome.and_then(|o| o.get(i)).filter(|o| *o != "ok").map(outcome_label);
                columns
                    .iter()
                    .zip(&numeric)
                    .map(|(column, is_numeric)| {
                        let value = column.get(i).unwrap_or(AnyValue::Null);
                        match (&value, &failed) {
                            (AnyValue::Null, Some(label)) if *is_numeric => label.clone(),
                            (_, Some(label)) if column.name().as_str() == OUTCOME_COLUMN => label.clone(),
                            _ => format::cell_text(&value),
                        }
                    })
                    .collect()
            })
            .collect();
        (header, rows, numeric)
    }
}

/// Right-aligns the numeric columns of a comfy table.
pub(crate) fn align_numeric(table: &mut Table, numeric: &[bool]) {
    for (i, is_numeric) in numeric.iter().enumerate() {
        if let (true, Some(column)) = (*is_numeric, table.column_mut(i)) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Every summary table of a run: the results matrix first, then one per figure kind
/// (speedup backs both the speedup bars and the scaling lines). The step-time breakdown
/// and the pipeline stages come last, each only when the run recorded them (multi-worker
/// trials with events, pipeline trials).
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
    Ok(tables)
}
