//! `stratlab validate`: the performance model put to published GPU measurements
//! (`validation/published/*.yaml`, `stratlab_perf_model::published`). Each table's
//! single-device row is the only measurement used: the network's step is split over its ops
//! by a roofline on the cluster's device (`stratlab_strategies::profile::analytical_profile`),
//! scaled to that row's step, and every other row predicted on the cluster's links as
//! `stratlab predict` predicts a cell (`StepQuestion`: data parallelism's buckets behind the
//! backward, pipelines simulated on their schedules), beside the thesis's closed forms and a
//! null model. Offline; nothing is trained.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use stratlab_datasets::DatasetSelector;
use stratlab_perf_model::predict::StepQuestion;
use stratlab_perf_model::published::{null_model_step_s, PublishedRow, PublishedTable};
use stratlab_profile::NetworkProfile;
use stratlab_reports::{draw_published_scaling, published_summary_text, published_table_text};
use stratlab_results::ValidationRow;
use stratlab_strategies::model_inputs::{loader_sample_bytes, pipeline_cuts};
use stratlab_strategies::optimizer::UpdateRule;
use stratlab_strategies::profile::analytical_profile;

use crate::cli::ValidateArgs;
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
        println!("{}", published_table_text(table, &predicted));
        rows.extend(predicted);
    }
    println!("{}", published_summary_text(&rows));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let csv = out.join("validation.csv");
    stratlab_results::write_csv(&rows, &csv)?;
    println!("{}", csv.display());
    for table in &tables {
        for file in draw_published_scaling(table, &rows, &out.join("figures"), figure_format(args.format))? {
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
            straggler: None,
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
