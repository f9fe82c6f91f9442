//! Files a comparison or a history leaves behind, each written to a temporary file in its
//! folder and renamed into place, so a reader never sees half of one.

use std::path::{Path, PathBuf};

use polars::prelude::ParquetWriter;
use stratlab_results::{to_frame, write_file_atomically};

use crate::compare::Comparison;
use crate::compare_text::{comparison_text, TextStyle};
use crate::history::History;
use crate::history_text::history_text;
use crate::RegressionError;

/// Writes `bytes` to `path` atomically, through the results crate's one atomic writer.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RegressionError> {
    Ok(write_file_atomically(path, bytes)?)
}

fn json_bytes(path: &Path, value: &impl serde::Serialize) -> Result<Vec<u8>, RegressionError> {
    serde_json::to_vec_pretty(value).map_err(|source| RegressionError::Json { path: path.to_path_buf(), source })
}

/// Writes `comparison.md` and `comparison.json` into `dir`; returns their paths.
pub fn write_comparison(comparison: &Comparison, dir: &Path) -> Result<Vec<PathBuf>, RegressionError> {
    let markdown = dir.join("comparison.md");
    let json = dir.join("comparison.json");
    write_file(&markdown, comparison_text(comparison, TextStyle::Markdown).as_bytes())?;
    write_file(&json, &json_bytes(&json, comparison)?)?;
    Ok(vec![markdown, json])
}

/// Writes `history.parquet` (the table), `steps.md` and `history.json` (runs and steps)
/// into `dir`; returns their paths.
pub fn write_history(history: &History, dir: &Path) -> Result<Vec<PathBuf>, RegressionError> {
    let parquet = dir.join("history.parquet");
    let markdown = dir.join("steps.md");
    let json = dir.join("history.json");
    let mut frame = to_frame(&history.rows)?;
    let mut bytes = Vec::new();
    ParquetWriter::new(&mut bytes)
        .finish(&mut frame)
        .map_err(|source| RegressionError::Polars { path: parquet.clone(), source })?;
    write_file(&parquet, &bytes)?;
    write_file(&markdown, history_text(history, TextStyle::Markdown).as_bytes())?;
    write_file(&json, &json_bytes(&json, history)?)?;
    Ok(vec![parquet, markdown, json])
}
