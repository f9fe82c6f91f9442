//! `stratlab validate`: the performance model put to published GPU measurements
//! (`validation/published/*.yaml`, `stratlab_perf_model::published`). Each table's
//! single-device row is the only measurement used: the network's step is split over its ops
//! by a roofline on the cluster's device (`stratlab_strategies::profile::analytical_profile`),
//! scaled to that row's step, and every other row predicted on the cluster's links as
//! `stratlab predict` predicts a cell (`StepQuestion`: data parallelism's buckets behind the
//! backward, pipelines simulated on their schedules), beside the thesis's closed forms and a
//! null model. Offline; nothing is trained.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_datasets::DatasetSelector;
use stratlab_perf_model::predict::StepQuestion;
use stratlab_perf_model::published::{null_model_step_s, PublishedRow, PublishedTable};
use stratlab_profile::NetworkProfile;
use stratlab_reports::{speedup_scaling_noted, FigureTarget, Plotted, ScalingLine, ScalingPoint, Stat};
use stratlab_results::stats::median;
use stratlab_results::ValidationRow;
use stratlab_strategies::model_inputs::{loader_sample_bytes, pipeline_cuts};
use stratlab_strategies::optimizer::UpdateRule;
use stratlab_strategies::profile::analytical_profile;

use crate::cli::{FigureFormatArg, ValidateArgs};
use crate::exit::InputError;
use crate::regression_commands::figure_format;
use crate::shapes::input_shape;

/// The update the roofline costs: SGD with momentum 0.9. The sources' own (the DDP
/// benchmark's 0.9; torchgpipe's none) changes it by a fraction of a per cent of a step.
fn costed_update() -> UpdateRule {
    UpdateRule::momentum_sgd()
}

/// Runs `stratlab validate`.
pub fn validate(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let tables: Vec<PublishedTable> = args
        .tables
        .iter()
        .map(|path| PublishedTable::load(path).map_err(|error| InputError(error.to_string())))
        .collect::<Result<_, _>>()?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("runs/validate"));
    let mut rows = Vec::new();
    for table in &tables {
        let predicted = predict_table(table).with_context(|| format!("predicting {}", table.path.display()))?;
        println!("{}", table_text(table, &predicted));
        rows.extend(predicted);
    }
    println!("{}", summary_text(&rows));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let csv = out.join("validation.csv");
    stratlab_results::write_csv(&rows, &csv)?;
    println!("{}", csv.display());
    for table in &tables {
        for file in draw(table, &rows, &out.join("figures"), args.format)? {
            println!("{}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every row of `table` predicted three ways from its input row.
pub fn predict_table(table: &PublishedTable) -> anyhow::Result<Vec<ValidationRow>> {
    let dataset: DatasetSelector = table.dataset.parse().map_err(|error: stratlab_datasets::DataError| {
        InputError(format!("{}: dataset: {error}", table.path.display()))
    })?;
    let spec = stratlab_networks::spec(&table.network, &input_shape(dataset.info()?))
        .map_err(|error| InputError(format!("{}: network: {error}", table.path.display())))?;
    if let Some(layers) = table.source_layers_per_stage.as_ref().filter(|layers| layers.len() != spec.stages.len()) {
        let message = format!(
            "{}: `source_layers_per_stage` lists {} stages; {} has {} ({})",
            table.path.display(),
            layers.len(),
            table.network,
            spec.stages.len(),
            spec.stage_names().join(", ")
        );
        return Err(InputError(message).into());
    }
    let input = table.input_row();
    let profile = scaled_roofline(table, &spec, input)?;
    let input_rate = input.samples_per_s();
    let efficiency = |rate: f64, workers: usize| rate / workers as f64 / input_rate;
    let mut rows = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        // The ring's slowest link (the inter-node one once it spans nodes), which is also
        // what a pipeline's hops cross within one node.
        let link = table.cluster.ring_link(row.workers)?;
        let question = StepQuestion {
            strategy: &row.strategy,
            workers: row.workers,
            batch: row.batch,
            profile: &profile,
            cuts: pipeline_cuts(&row.strategy, row.workers, row.batch, &spec, &profile),
            sample_bytes: loader_sample_bytes(&spec),
            link: Some(&link),
            collectives: None,
            optimizer: costed_update().footprint(),
            prefetch: 0,
            threads: 1,
            // A device per worker: nothing shares compute, and transfers use no host core.
            cores: usize::MAX / 2,
            host_copy_bandwidth: None,
        };
        let prediction = question.predict();
        let samples = simulated_samples(row) as f64;
        let rate = |step_s: f64| samples / step_s;
        let model = prediction.model.as_ref().ok();
        let thesis_s = prediction.thesis_s.as_ref().ok().copied();
        let null_s = null_model_step_s(input, row);
        let null_rate = row.global_batch() as f64 / null_s;
        rows.push(ValidationRow {
            table: table.name.clone(),
            label: row.label.clone(),
            strategy: row.strategy.label_with_workers(row.workers),
            workers: row.workers as u32,
            global_batch: row.global_batch() as u64,
            input: row.input,
            published_step_s: row.step_s(),
            published_samples_per_s: row.samples_per_s(),
            published_efficiency: efficiency(row.samples_per_s(), row.workers),
            model_step_s: model.map(|step| step.step_s),
            model_samples_per_s: model.map(|step| rate(step.step_s)),
            model_efficiency: model.map(|step| efficiency(rate(step.step_s), row.workers)),
            model_exposed_comm_s: model.map(|step| step.exposed_comm_s),
            model_bubble_s: model.map(|step| step.bubble_s),
            model_unavailable: prediction.model.as_ref().err().map(ToString::to_string),
            thesis_step_s: thesis_s,
            thesis_samples_per_s: thesis_s.map(rate),
            thesis_efficiency: thesis_s.map(|step_s| efficiency(rate(step_s), row.workers)),
            null_step_s: null_s,
            null_samples_per_s: null_rate,
            null_efficiency: efficiency(null_rate, row.workers),
        });
    }
    Ok(rows)
}

/// The network's ops on the cluster device's roofline at every size a row's stages run,
/// scaled so that one device's sequential step at the input row's batch takes the
/// published time: the roofline says how a step splits over layers and sizes, the input
/// row how long it is.
fn scaled_roofline(
    table: &PublishedTable,
    spec: &stratlab_networks::NetworkSpec,
    input: &PublishedRow,
) -> anyhow::Result<NetworkProfile> {
    let cluster = &table.cluster;
    if !matches!(cluster.device.speed, stratlab_perf_model::DeviceSpeed::Analytical { .. }) {
        let message = format!(
            "{}: cluster {} gives no datasheet roofline (`peak_flops`, `memory_bandwidth`)",
            table.path.display(),
            cluster.name
        );
        return Err(InputError(message).into());
    }
    let mut sizes: Vec<usize> = table.rows.iter().map(|row| row.strategy.stage_samples(row.batch)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let seconds = |flops: f64, bytes: f64| cluster.analytical_seconds(flops, bytes).unwrap_or(0.0);
    let roofline = analytical_profile(spec, &sizes, costed_update(), table.precision, &seconds)?;
    let roofline_step = roofline.stage_sum_s(input.batch).unwrap_or(0.0) + roofline.optimizer_s;
    Ok(roofline.scaled(input.step_s() / roofline_step))
}

/// Samples the model's step trains: a pipeline's micro-batches are whole samples, so a
/// batch the micro-batches do not divide trains `m × ⌊batch / m⌋` in the simulation.
fn simulated_samples(row: &PublishedRow) -> usize {
    match row.strategy.schedule() {
        Some(_) => {
            row.strategy.global_batch(row.strategy.stage_samples(row.batch) * row.strategy.micro_batches(), row.workers)
        }
        None => row.global_batch(),
    }
}

/// Signed relative error of `predicted` against `published`.
fn error(predicted: f64, published: f64) -> f64 {
    predicted / published - 1.0
}

/// One table's rows: published against each predictor, throughput error and efficiency.
fn table_text(table: &PublishedTable, rows: &[ValidationRow]) -> String {
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
    format!(
        "{}: {} ({}, {}; {})\non {} ({}); {} {}\n{text}{unavailable}",
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
pub struct Errors {
    /// Median |throughput error|.
    pub median_abs: f64,
    /// Largest |throughput error|.
    pub max_abs: f64,
    /// Median |scaling-efficiency error|, in points (0.01 = 1 point).
    pub median_abs_efficiency: f64,
}

/// The three predictors' errors over every row but the input, or `None` without such rows.
pub fn errors(rows: &[&ValidationRow]) -> [Option<Errors>; 3] {
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
        Some(Errors {
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
fn summary_text(rows: &[ValidationRow]) -> String {
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
    let cells = |errors: &Option<Errors>| match errors {
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
        let [model, thesis, null] = errors(&selected);
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
fn draw(
    table: &PublishedTable,
    rows: &[ValidationRow],
    dir: &Path,
    format: FigureFormatArg,
) -> anyhow::Result<Vec<PathBuf>> {
    let input_rate = table.input_row().samples_per_s();
    let mut points = Vec::new();
    for row in rows.iter().filter(|row| row.table == table.name && !row.input) {
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
                dataset: table.name.clone(),
                workers: row.workers,
                speedup: Plotted::Measured(Stat::single(rate / input_rate)),
            });
        }
    }
    if points.is_empty() {
        return Ok(Vec::new());
    }
    let target = FigureTarget::new(dir, format!("{}_scaling", table.name)).with_formats(&[figure_format(format)]);
    let note = format!("speedup over the input row ({}), predicted from it alone", table.input_row().label);
    Ok(speedup_scaling_noted(&points, Some(&note), &target)?)
}
