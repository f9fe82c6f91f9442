//! Files a comparison or a history leaves behind, each written to a temporary file in its
//! folder and renamed into place, so a reader never sees half of one.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::Table;
use polars::prelude::ParquetWriter;
use stratlab_results::to_frame;

use crate::compare::Comparison;
use crate::compare_text::{comparison_text, percent, TextStyle};
use crate::history::History;
use crate::RegressionError;

/// Writes `bytes` to `path` atomically (temp file in the same folder, then rename).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RegressionError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |source| RegressionError::Io { path: path.to_path_buf(), source };
    fs::create_dir_all(dir).map_err(io)?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.as_file().sync_all().map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
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

/// The history's runs and step changes as text.
pub fn history_text(history: &History, style: TextStyle) -> String {
    let table = |header: &[&str]| {
        let mut table = Table::new();
        table.load_preset(if style == TextStyle::Markdown { ASCII_MARKDOWN } else { UTF8_FULL_CONDENSED });
        table.set_header(header.iter().copied());
        table
    };
    let heading = |text: &str| match style {
        TextStyle::Markdown => format!("## {text}\n\n"),
        TextStyle::Terminal => format!("{text}\n{}\n", "─".repeat(text.chars().count())),
    };
    let mut out = String::new();
    if style == TextStyle::Markdown {
        out.push_str(&format!("# History of suite {}\n\n", history.suite));
    }
    out.push_str(&format!(
        "{} runs, {} cells; cells summarised by the {} of their timed step times; a step is a lasting change of a \
         cell's level (median over runs) of more than {:.0} % (L1 optimal partition, penalty = the noise threshold).\n\n",
        history.runs.len(),
        history.rows.iter().map(|row| &row.cell).collect::<std::collections::BTreeSet<_>>().len(),
        history.statistic.name(),
        history.noise_threshold * 100.0
    ));
    out.push_str(&heading("Runs"));
    let mut runs = table(&["#", "run", "started", "environment", "changed since the run before"]);
    let changes: std::collections::BTreeMap<usize, String> = history
        .environment_changes()
        .into_iter()
        .map(|(i, changes)| {
            (
                i,
                changes
                    .iter()
                    .map(|c| format!("{} {} → {}", c.field, c.baseline, c.new))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
        .collect();
    for (i, run) in history.runs.iter().enumerate() {
        runs.add_row([
            i.to_string(),
            run.run_id.clone(),
            run.run_started.clone(),
            run.environment.clone(),
            changes.get(&i).cloned().unwrap_or_default(),
        ]);
    }
    out.push_str(&format!("{runs}\n\n"));
    out.push_str(&heading("Step changes"));
    if history.steps.is_empty() {
        out.push_str("No cell's metric changed level beyond the noise threshold.\n");
        return out;
    }
    let mut steps = table(&[
        "cell",
        "metric",
        "from run",
        "to run",
        "before",
        "after",
        "change",
        "",
        "environment changes at the step",
    ]);
    for step in &history.steps {
        let suspects = if step.environment_changes.is_empty() {
            "none recorded".to_owned()
        } else {
            step.environment_changes
                .iter()
                .map(|c| format!("{} {} → {}", c.field, c.baseline, c.new))
                .collect::<Vec<_>>()
                .join("; ")
        };
        steps.add_row([
            step.cell.clone(),
            step.metric.axis_label().to_owned(),
            step.from_run.clone(),
            step.to_run.clone(),
            format!("{:.4}", step.before),
            format!("{:.4}", step.after),
            percent(step.after / step.before),
            if step.worse { "worse" } else { "better" }.to_owned(),
            suspects,
        ]);
    }
    out.push_str(&format!("{steps}\n"));
    out
}
