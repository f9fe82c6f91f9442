//! The results matrix: one row per network, data set, batch per worker (and what it computed
//! in, where any cell was not float32 on contiguous tensors), one column per strategy and
//! W, each cell the headline throughput with its speedup, or the failure.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use polars::prelude::{Column, DataFrame};

use super::format::{outcome_label, three_significant};
use super::summary_table::{align_numeric, SummaryTable};
use crate::aggregate::{RunAggregates, ThroughputCell};
use crate::{Plotted, ReportError, StrategySeries, NOT_RECORDED};
use stratlab_strategy_spec::{MemoryFormat, OptimizerKind, Precision};

/// A matrix row: network, data set, batch per worker, what it computed in and the
/// optimizer.
type MatrixRow = (String, String, u32, (Precision, MemoryFormat), OptimizerKind);

/// A matrix column: a strategy as the run's labels name it (what it computed in is the
/// row's), and W.
type MatrixColumn = (StrategySeries, u32);

const TITLE: &str = "Results matrix: training samples/s (median over repeats), ×speedup over single (W = 1)";

/// The results matrix as a table: `network`, `dataset`, `batch/worker`, `compute`
/// (`bf16 · channels_last`; only where some cell was not float32 on contiguous tensors),
/// then one text column per `"<strategy> W=<w>"` (strategies in the figures' order, then W).
/// A cell reads `1230 ×1.80`, `1230 ×1.80 (1/4 failed)`, `1230` (no baseline), `OOM`, or
/// "—" when the run has no such trial.
pub fn results_matrix(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let cells = &aggregates.throughput;
    // What a cell computed in is a row of the matrix, not a column: a run whose `auto`
    // chose channels-last everywhere reads `fp32 · channels_last` once per row rather
    // than in every strategy's header, and two precisions of one network are two rows.
    let keyed: Vec<(MatrixRow, MatrixColumn, &ThroughputCell)> = cells
        .iter()
        .map(|cell| {
            let key = &cell.key;
            let compute = (key.precision, key.memory_format);
            let row = (key.network.clone(), key.dataset_label(), key.batch_size, compute, key.optimizer);
            (row, (aggregates.labels.series(key).strategy(), key.workers), cell)
        })
        .collect();
    let mut rows: Vec<MatrixRow> = Vec::new();
    let mut columns: Vec<MatrixColumn> = Vec::new();
    for (row, column, _) in &keyed {
        if !rows.contains(row) {
            rows.push(row.clone());
        }
        if !columns.contains(column) {
            columns.push(column.clone());
        }
    }
    columns.sort();

    let mut frame_columns = vec![
        Column::new("network".into(), rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>()),
        Column::new("dataset".into(), rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>()),
        Column::new("batch/worker".into(), rows.iter().map(|r| i64::from(r.2)).collect::<Vec<_>>()),
    ];
    // Runs that computed in float32 on contiguous tensors only (every run before the axes)
    // keep the matrix they always had.
    if rows.iter().any(|row| row.3 != (Precision::Float32, MemoryFormat::Contiguous)) {
        let names = rows.iter().map(|row| format!("{} · {}", row.3 .0, row.3 .1)).collect::<Vec<_>>();
        frame_columns.push(Column::new("compute".into(), names));
    }
    // Likewise runs that trained with SGD only.
    if rows.iter().any(|row| !row.4.is_sgd()) {
        frame_columns.push(Column::new("optimizer".into(), rows.iter().map(|row| row.4.name()).collect::<Vec<_>>()));
    }
    for column in columns {
        let values: Vec<Option<String>> = rows
            .iter()
            .map(|row| {
                keyed
                    .iter()
                    .find(|(cell_row, cell_column, _)| cell_row == row && *cell_column == column)
                    .map(|(_, _, cell)| cell_text(cell))
            })
            .collect();
        frame_columns.push(Column::new(format!("{} W={}", column.0.label, column.1).into(), values));
    }
    let frame = DataFrame::new_infer_height(frame_columns).map_err(|source| ReportError::Column {
        table: "results_matrix".into(),
        column: "(all)".into(),
        source,
    })?;
    Ok(SummaryTable { name: "results_matrix".into(), title: TITLE.into(), frame, outcomes: Vec::new() })
}

/// One matrix cell's text.
fn cell_text(cell: &ThroughputCell) -> String {
    let repeats = &cell.repeats;
    match &cell.wall_samples_per_s {
        Plotted::Measured(stat) => {
            let mut text = three_significant(stat.median);
            if let Some(speedup) = cell.speedup.speedup() {
                text.push_str(&format!(" ×{}", three_significant(speedup.median)));
            }
            if repeats.failed > 0 {
                text.push_str(&format!(" ({}/{} failed)", repeats.failed, repeats.trials));
            }
            text
        }
        Plotted::Failed(_) | Plotted::Missing(_) => match (&repeats.first_failure, repeats.ok()) {
            (Some(failed), 0) => outcome_label(failed.outcome),
            _ => NOT_RECORDED.into(),
        },
    }
}

/// The results matrix for the terminal (printed at the end of `just bench-matrix`): a
/// compact UTF-8 table under its title, strategy and W on two header lines.
pub fn matrix_for_terminal(aggregates: &RunAggregates) -> String {
    if aggregates.is_empty() {
        return format!("run {}: no finished trials yet", aggregates.run_id);
    }
    let matrix = match results_matrix(aggregates) {
        Ok(matrix) => matrix,
        Err(error) => return format!("run {}: results matrix unavailable: {error}", aggregates.run_id),
    };
    let (header, rows, numeric) = matrix.cells();
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(header.iter().map(|h| h.replacen(" W=", "\nW=", 1)).collect::<Vec<_>>());
    for row in rows {
        table.add_row(row);
    }
    // Strategy columns hold text but read as numbers: align them like numbers.
    let first_strategy = 3 + usize::from(header.iter().any(|name| name == "compute"));
    let aligned: Vec<bool> = numeric.iter().enumerate().map(|(i, n)| *n || i >= first_strategy).collect();
    align_numeric(&mut table, &aligned);
    format!("{}\n{TITLE}\n{table}", aggregates.run_id)
}
