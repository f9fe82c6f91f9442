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
use stratlab_perf_model::predict::{StepPrediction, StepQuestion};
use stratlab_perf_model::published::{null_model_step_s, Calibration, PublishedRow, PublishedTable};
use stratlab_profile::NetworkProfile;
use stratlab_reports::{draw_published_scaling, published_summary_text, published_table_text};
use stratlab_results::ValidationRow;
use stratlab_strategies::model_inputs::{loader_sample_bytes, pipeline_cuts};
use stratlab_strategies::optimizer::UpdateRule;
use stratlab_strategies::profile::analytical_profile;
use stratlab_strategy_spec::StrategyKind;

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
    let profile = calibrated_roofline(table, &spec, input)?;
    // Efficiency is throughput per device over one device's: the input's where it is one
    // device, else what the null model makes of one device from it.
    let one_device_rate = match table.calibration() {
        Calibration::SingleDevice => input.samples_per_s(),
        Calibration::MultiDevice => {
            let alone = one_device(input);
            alone.global_batch() as f64 / null_model_step_s(input, &alone)
        }
    };
    let efficiency = |rate: f64, workers: usize| rate / workers as f64 / one_device_rate;
    let mut rows = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let prediction = predict_row(table, &spec, &profile, row)?;
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

/// The prediction of `row` on the table's cluster from `profile`.
fn predict_row(
    table: &PublishedTable,
    spec: &stratlab_networks::NetworkSpec,
    profile: &NetworkProfile,
    row: &PublishedRow,
) -> anyhow::Result<StepPrediction> {
    // The ring's slowest link (the inter-node one once it spans nodes), which is also
    // what a pipeline's hops cross within one node.
    let link = table.cluster.ring_link(row.workers)?;
    let question = StepQuestion {
        strategy: &row.strategy,
        workers: row.workers,
        batch: row.batch,
        profile,
        cuts: pipeline_cuts(&row.strategy, row.workers, row.batch, spec, profile),
        sample_bytes: loader_sample_bytes(spec),
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
    Ok(question.predict())
}

/// One device training the input row's per-device batch alone: what the null model
/// compares efficiency with where the input row is itself on several devices.
fn one_device(input: &PublishedRow) -> PublishedRow {
    let single = stratlab_strategy_spec::Strategy::new(StrategyKind::Single, Default::default())
        .expect("single takes no parameters");
    PublishedRow { workers: 1, strategy: single, input: false, source_balance: None, ..input.clone() }
}

/// The network's ops on the cluster device's roofline at every size a row's stages run,
/// scaled to the input row: the roofline says how a step splits over layers and sizes, the
/// input row how long it is. A single-device input is the sequential step itself; a
/// multi-device one is matched through the model's own prediction of it, a few fixed-point
/// rounds since its communication does not scale with the device.
fn calibrated_roofline(
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
    sizes.push(input.batch);
    sizes.sort_unstable();
    sizes.dedup();
    let seconds = |flops: f64, bytes: f64| cluster.analytical_seconds(flops, bytes).unwrap_or(0.0);
    let roofline = analytical_profile(spec, &sizes, costed_update(), table.precision, &seconds)?;
    let roofline_step = roofline.stage_sum_s(input.batch).unwrap_or(0.0) + roofline.optimizer_s;
    let mut scale = input.step_s() / roofline_step;
    if table.calibration() == Calibration::MultiDevice {
        for _ in 0..CALIBRATION_ROUNDS {
            let predicted = predict_row(table, spec, &roofline.scaled(scale), input)?.model.map_err(|why| {
                InputError(format!(
                    "{}: the input row `{}` cannot calibrate the model: {why}",
                    table.path.display(),
                    input.label
                ))
            })?;
            scale *= input.step_s() / predicted.step_s;
        }
    }
    Ok(roofline.scaled(scale))
}

/// Fixed-point rounds of a multi-device calibration: each scales the compute by measured
/// ÷ predicted; the communication it leaves unscaled is a fraction of the step, so the
/// error shrinks by that fraction a round.
const CALIBRATION_ROUNDS: usize = 8;

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
