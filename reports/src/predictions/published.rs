//! `stratlab validate`'s judgement of the performance model against published GPU tables
//! (`validation/published/*.yaml`): each table's rows beside the model's, the thesis's forms'
//! and the null model's predictions, their errors per table and over all, and each table's
//! speedup figure. The rows are predicted by the suite (`suite/src/validate.rs`).

use std::path::{Path, PathBuf};

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_perf_model::published::Calibration;
use stratlab_perf_model::published::PublishedTable;
use stratlab_results::stats::median;
use stratlab_results::ValidationRow;

use crate::{speedup_scaling_noted, FigureTarget, Format, Plotted, ReportError, ScalingLine, ScalingPoint, Stat};

/// Signed relative error of `predicted` against `published`.
fn error(predicted: f64, published: f64) -> f64 {
    predicted / published - 1.0
}

/// One table's rows: published against each predictor, throughput error and efficiency.
pub fn published_table_text(table: &PublishedTable, rows: &[ValidationRow]) -> String {
    let mut text = Table::new();
    text.load_preset(UTF8_FULL_CONDENSED);
    text.set_header([
        "row",
        "strategy",
        "samples/step",
        "published /s",
        "eff.",
        "model /s",
        "error",
        "eff.",
        "thesis /s",
        "error",
        "null /s",
        "error",
    ]);
    let percent = |value: Option<f64>| value.map_or("—".to_owned(), |value| format!("{:+.1} %", 100.0 * value));
    let efficiency = |value: Option<f64>| value.map_or("—".to_owned(), |value| format!("{:.1} %", 100.0 * value));
    let rate = |value: Option<f64>| value.map_or("—".to_owned(), |value| format!("{value:.1}"));
    for row in rows {
        let published = row.published_samples_per_s;
        let mark = if row.input { " (input)" } else { "" };
        text.add_row([
            format!("{}{mark}", row.label),
            row.strategy.clone(),
            row.global_batch.to_string(),
            rate(Some(published)),
            efficiency(Some(row.published_efficiency)),
            rate(row.model_samples_per_s),
            percent(row.model_samples_per_s.map(|model| error(model, published))),
            efficiency(row.model_efficiency),
            rate(row.thesis_samples_per_s),
            percent(row.thesis_samples_per_s.map(|thesis| error(thesis, published))),
            rate(Some(row.null_samples_per_s)),
            percent(Some(error(row.null_samples_per_s, published))),
        ]);
    }
    for column in 2..12 {
        if let Some(column) = text.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let unavailable: String = rows
        .iter()
        .filter_map(|row| Some(format!("\n{}: no model prediction: {}", row.label, row.model_unavailable.as_ref()?)))
        .collect();
    let source = &table.source;
    let input = table.input_row();
    let calibration = match table.calibration() {
        Calibration::SingleDevice => format!("calibrated on `{}`: one device's step", input.label),
        Calibration::MultiDevice => format!(
            "calibrated on `{}` ({} devices): the device's speed scaled until the model's step for that row is its \
             measured one; links as the cluster file gives them",
            input.label, input.workers
        ),
    };
    format!(
        "{}: {} ({}, {}; {})\non {} ({}); {} {}; {calibration}\n{text}{unavailable}",
        table.name,
        source.title,
        source.file,
        source.table,
        source.pinned,
        table.cluster.name,
        table.cluster_path.display(),
        table.network,
        table.precision,
    )
}

/// One predictor's errors over a set of rows.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedErrors {
    /// Median |throughput error|.
    pub median_abs: f64,
    /// Largest |throughput error|.
    pub max_abs: f64,
    /// Median |scaling-efficiency error|, in points (0.01 = 1 point).
    pub median_abs_efficiency: f64,
}

/// The three predictors' errors over every row but the input, or `None` without such rows.
pub fn published_errors(rows: &[&ValidationRow]) -> [Option<PublishedErrors>; 3] {
    let judged: Vec<&&ValidationRow> = rows.iter().filter(|row| !row.input).collect();
    let of = |rate: &dyn Fn(&ValidationRow) -> Option<f64>, efficiency: &dyn Fn(&ValidationRow) -> Option<f64>| {
        let pairs: Vec<(f64, f64)> = judged
            .iter()
            .filter_map(|row| {
                let throughput = error(rate(row)?, row.published_samples_per_s).abs();
                Some((throughput, (efficiency(row)? - row.published_efficiency).abs()))
            })
            .collect();
        let throughput: Vec<f64> = pairs.iter().map(|pair| pair.0).collect();
        let points: Vec<f64> = pairs.iter().map(|pair| pair.1).collect();
        Some(PublishedErrors {
            median_abs: median(&throughput)?,
            max_abs: throughput.iter().copied().fold(0.0, f64::max),
            median_abs_efficiency: median(&points)?,
        })
    };
    [
        of(&|row| row.model_samples_per_s, &|row| row.model_efficiency),
        of(&|row| row.thesis_samples_per_s, &|row| row.thesis_efficiency),
        of(&|row| Some(row.null_samples_per_s), &|row| Some(row.null_efficiency)),
    ]
}

/// Median and largest |error| per table and over all, for each predictor.
pub fn published_summary_text(rows: &[ValidationRow]) -> String {
    let mut tables: Vec<&str> = rows.iter().map(|row| row.table.as_str()).collect();
    tables.dedup();
    let mut text = Table::new();
    text.load_preset(UTF8_FULL_CONDENSED);
    text.set_header([
        "table",
        "rows",
        "model |error| median (max)",
        "eff. pts",
        "thesis",
        "eff. pts",
        "null",
        "eff. pts",
    ]);
    let cells = |errors: &Option<PublishedErrors>| match errors {
        Some(errors) => [
            format!("{:.1} % ({:.1} %)", 100.0 * errors.median_abs, 100.0 * errors.max_abs),
            format!("{:.1}", 100.0 * errors.median_abs_efficiency),
        ],
        None => ["—".to_owned(), "—".to_owned()],
    };
    let all: Vec<&ValidationRow> = rows.iter().collect();
    for (name, selected) in tables
        .iter()
        .map(|table| (*table, rows.iter().filter(|row| row.table == *table).collect::<Vec<_>>()))
        .chain([("all", all)])
    {
        let [model, thesis, null] = published_errors(&selected);
        let judged = selected.iter().filter(|row| !row.input).count();
        let mut line = vec![name.to_owned(), judged.to_string()];
        for errors in [&model, &thesis, &null] {
            line.extend(cells(errors));
        }
        text.add_row(line);
    }
    format!("Throughput error (predicted ÷ published − 1) and scaling-efficiency error, rows but the input:\n{text}")
}

/// Speedup over the input row against workers: published, model, thesis forms, null model.
pub fn draw_published_scaling(
    table: &PublishedTable,
    rows: &[ValidationRow],
    dir: &Path,
    format: Format,
) -> Result<Vec<PathBuf>, ReportError> {
    // One device's throughput: the input row's, or where that row is on several devices,
    // what its published efficiency says one device did (the null model's).
    let Some(input) = rows.iter().find(|row| row.table == table.name && row.input) else { return Ok(Vec::new()) };
    let one_device_rate = input.published_samples_per_s / (input.published_efficiency * f64::from(input.workers));
    let series_of: std::collections::BTreeMap<&str, &str> =
        table.rows.iter().filter_map(|row| Some((row.label.as_str(), row.series.as_deref()?))).collect();
    let mut points = Vec::new();
    for row in rows.iter().filter(|row| row.table == table.name && !row.input) {
        // A panel per series where the table has several, so each line holds one row per
        // device count.
        let panel = series_of.get(row.label.as_str()).map_or_else(|| table.name.clone(), |series| series.to_string());
        let series = [
            ("published", Some(row.published_samples_per_s)),
            ("model", row.model_samples_per_s),
            ("thesis forms", row.thesis_samples_per_s),
            ("null model", Some(row.null_samples_per_s)),
        ];
        for (name, rate) in series {
            let Some(rate) = rate else { continue };
            points.push(ScalingPoint {
                line: ScalingLine::Named(name.to_owned()),
                network: table.network.clone(),
                dataset: panel.clone(),
                workers: row.workers,
                speedup: Plotted::Measured(Stat::single(rate / one_device_rate)),
            });
        }
    }
    if points.is_empty() {
        return Ok(Vec::new());
    }
    let target = FigureTarget::new(dir, format!("{}_scaling", table.name)).with_formats(&[format]);
    let note = match table.calibration() {
        Calibration::SingleDevice => {
            format!("speedup over the input row ({}), predicted from it alone", table.input_row().label)
        }
        Calibration::MultiDevice => format!(
            "speedup over one device as the null model makes it from the input row ({}), predicted from that row alone",
            table.input_row().label
        ),
    };
    speedup_scaling_noted(&points, Some(&note), &target)
}
