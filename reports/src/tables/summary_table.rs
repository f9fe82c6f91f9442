//! One summary table: its frame of full-precision numbers and how it is written (CSV) and
//! shown (Markdown, formatted cells).

use std::path::{Path, PathBuf};

use comfy_table::{presets::ASCII_MARKDOWN, CellAlignment, Table};
use polars::prelude::{AnyValue, Column, CsvWriter, DataFrame, SerWriter};

use super::format::{cell_text, outcome_label};
use crate::report_error::write_file;
use crate::ReportError;
use stratlab_results::Outcome;

/// Name of the column holding a row's outcome (`ok`, `oom`, …).
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
    /// Each row's outcome, where the rows are cells or trials (empty otherwise): on
    /// display, the empty numeric cells of a row whose outcome is not `ok` show that
    /// outcome in capitals, and so does its outcome column.
    pub outcomes: Vec<Outcome>,
}

impl SummaryTable {
    /// A table of `columns` (of one height), named `name` and titled `title`.
    pub fn from_columns(name: &str, title: &str, columns: Vec<Column>) -> Result<SummaryTable, ReportError> {
        let frame = DataFrame::new_infer_height(columns).map_err(|source| ReportError::Column {
            table: name.to_owned(),
            column: "(all)".into(),
            source,
        })?;
        Ok(SummaryTable { name: name.to_owned(), title: title.to_owned(), frame, outcomes: Vec::new() })
    }

    /// The same table with each row's outcome.
    pub fn with_outcomes(mut self, outcomes: Vec<Outcome>) -> SummaryTable {
        self.outcomes = outcomes;
        self
    }

    /// Writes `dir/<name>.csv` (full-precision numbers, empty for null) and returns its path.
    pub fn write_csv(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_path_buf(), source })?;
        let path = dir.join(format!("{}.csv", self.name));
        let mut csv = Vec::new();
        CsvWriter::new(&mut csv)
            .include_header(true)
            .finish(&mut self.frame.clone())
            .map_err(|source| ReportError::Csv { path: path.clone(), source })?;
        write_file(&path, &csv)?;
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
        let rows = (0..self.frame.height())
            .map(|i| {
                let failed =
                    self.outcomes.get(i).filter(|outcome| !outcome.is_ok()).map(|&outcome| outcome_label(outcome));
                columns
                    .iter()
                    .zip(&numeric)
                    .map(|(column, is_numeric)| {
                        let value = column.get(i).unwrap_or(AnyValue::Null);
                        match (&value, &failed) {
                            (AnyValue::Null, Some(label)) if *is_numeric => label.clone(),
                            (_, Some(label)) if column.name().as_str() == OUTCOME_COLUMN => label.clone(),
                            _ => cell_text(&value),
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
