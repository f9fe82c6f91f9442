//! A suite's history as figures (one per headline metric) and as a report section with the
//! step changes and the environment changes at them.

use std::path::{Path, PathBuf};

use stratlab_regressions::{HeadlineMetric, History};

use crate::figures::history::{history_chart, HistoryChart, HistoryLine};
use crate::{FigureTarget, Format, HtmlTable, ReportError, ReportFigure, ReportSection};

/// Shortens long values (hashes, commits) so a figure label stays legible.
fn short(value: &str) -> String {
    if value.len() > 12 && value.chars().all(|c| c.is_ascii_hexdigit()) {
        value[..8].to_owned()
    } else {
        value.to_owned()
    }
}

/// What changed at a run, in a few words: up to three fields, then a count.
fn change_label(changes: &[stratlab_regressions::EnvironmentChange]) -> String {
    let mut parts: Vec<String> =
        changes.iter().take(3).map(|c| format!("{} {}→{}", c.field, short(&c.baseline), short(&c.new))).collect();
    if changes.len() > 3 {
        parts.push(format!("+{} more", changes.len() - 3));
    }
    parts.join(", ")
}

/// The chart of one metric, or `None` when no cell has a value of it.
pub fn history_chart_of(history: &History, metric: HeadlineMetric) -> Option<HistoryChart> {
    let series = history.series(metric);
    if series.values().all(Vec::is_empty) {
        return None;
    }
    let cells: Vec<&String> = series.keys().collect();
    let lines =
        series.iter().map(|(cell, points)| HistoryLine { label: cell.clone(), points: points.clone() }).collect();
    let steps = history
        .steps
        .iter()
        .filter(|step| step.metric == metric)
        .filter_map(|step| cells.iter().position(|cell| **cell == step.cell).map(|line| (line, step.to_run_index)))
        .collect();
    Some(HistoryChart {
        title: format!("{} over time — suite {}", metric.axis_label(), history.suite),
        y_label: metric.axis_label().to_owned(),
        run_times_s: history.runs.iter().map(|run| run.started_unix_s).collect(),
        lines,
        environment_changes: history
            .environment_changes()
            .into_iter()
            .map(|(run, changes)| (run, change_label(&changes)))
            .collect(),
        steps,
    })
}

/// Draws one figure per headline metric with data into `dir` (`history_<metric>`);
/// returns the metric and file of each.
pub fn write_history_figures(
    history: &History,
    dir: &Path,
    format: Format,
) -> Result<Vec<(HeadlineMetric, PathBuf)>, ReportError> {
    let mut written = Vec::new();
    for metric in HeadlineMetric::ALL {
        let Some(chart) = history_chart_of(history, metric) else { continue };
        let height = 800 + 24 * chart.lines.len().saturating_sub(6) as u32;
        let target = FigureTarget::new(dir, format!("history_{}", metric.name()))
            .with_formats(&[format])
            .with_size(1200, height);
        for path in history_chart(&chart, &target)? {
            written.push((metric, path));
        }
    }
    Ok(written)
}

/// The report section of a history: its figures and its step changes.
pub(crate) fn history_section(history: &History, dir: &Path, format: Format) -> Result<ReportSection, ReportError> {
    let figures = write_history_figures(history, dir, format)?
        .into_iter()
        .map(|(metric, path)| {
            ReportFigure::new(
                path,
                format!("{} of every cell of suite {} against run date", metric.axis_label(), history.suite),
            )
        })
        .collect();
    let rows = history
        .steps
        .iter()
        .map(|step| {
            vec![
                step.cell.clone(),
                step.metric.axis_label().to_owned(),
                step.to_run.clone(),
                format!("{:.4}", step.before),
                format!("{:.4}", step.after),
                format!("{:+.1} %", (step.after / step.before - 1.0) * 100.0),
                if step.worse { "worse" } else { "better" }.to_owned(),
                if step.environment_changes.is_empty() {
                    "none recorded".to_owned()
                } else {
                    change_label(&step.environment_changes)
                },
            ]
        })
        .collect();
    Ok(ReportSection {
        id: "history".to_owned(),
        title: format!("History of suite {} ({} runs)", history.suite, history.runs.len()),
        caption: format!(
            "Each headline metric of every cell against run date. A step change is a lasting change of a cell's \
             median level by more than {:.0} % (L1 optimal partition); the table lists each with the fingerprint \
             fields that differ between the last run before it and the first after it.",
            history.noise_threshold * 100.0
        ),
        figures,
        tables: vec![HtmlTable {
            title: if history.steps.is_empty() { "No step changes".to_owned() } else { "Step changes".to_owned() },
            header: [
                "cell",
                "metric",
                "first run at new level",
                "before",
                "after",
                "change",
                "",
                "environment changes",
            ]
            .map(str::to_owned)
            .to_vec(),
            rows,
            numeric_columns: vec![false, false, false, true, true, true],
            whole: false,
        }],
    })
}
