//! `stratlab recommend`: for one network, data set, worker count and global batch (samples
//! per optimizer step), every strategy with every parameter value searched
//! (`stratlab_strategy_spec::search_space`: each at the per-worker batch that trains that
//! global batch, pipelines' micro-batches within it) predicted on this machine or a cluster
//! file's devices (the same path as `stratlab predict`), then ranked as the thesis's
//! recommender ranks: what does not fit the device's memory is set aside, the rest ordered
//! by time per sample, each strategy with its best parameters and why it loses to the first
//! (`stratlab_perf_model::recommend`). Every candidate trains the same samples per step, so
//! none wins by taking a larger step (a data-parallel step of 16 × 32 samples against a
//! pipeline's 32). Candidates compute in the precision and memory format asked (`auto`
//! measured on this machine as `run` measures it); each row gives the time per epoch, the
//! time to the data set's target where a run says how many steps that took, and the
//! thesis's closed forms' step, whose pick is printed beside the model's.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_datasets::DatasetSelector;
use stratlab_perf_model::recommend::{rank, Candidate};
use stratlab_perf_model::{Cluster, StepBreakdown};
use stratlab_results::{EvaluationRow, RunView};
use stratlab_strategies::Numerics;
use stratlab_strategies::TrainConfig;
use stratlab_strategy_spec::{search_space, AutoOr, MemoryFormat, OptimizerKind, Precision, SearchedStrategy};

use crate::auto_compute::{resolve_auto, ChoiceStore};
use crate::exit::InputError;
use crate::largest_batch::predicted_largest;
use crate::predictions::{predict_cells, LocalLinks, Placement};
use crate::profiles::ProfileCache;
use crate::shapes::input_shape;
use crate::trial::TrialSpec;

/// What `stratlab recommend` was asked.
pub struct Question<'a> {
    /// Network name.
    pub network: &'a str,
    /// Data set (`name` or `name:synthetic`).
    pub dataset: &'a str,
    /// Workers to use.
    pub workers: usize,
    /// Samples per optimizer step over all workers (default: the data set's per-worker
    /// batch on every worker).
    pub batch: Option<usize>,
    /// A cluster file, or `local`.
    pub cluster: Option<&'a Path>,
    /// A probe run for the local link.
    pub probe: Option<&'a Path>,
    /// The optimizer every candidate trains with.
    pub optimizer: OptimizerKind,
    /// Memory per worker in place of the device's, where given.
    pub memory_limit_bytes: Option<f64>,
    /// What the candidates compute in (`auto`: the fastest, measured here).
    pub precision: AutoOr<Precision>,
    /// How they lay out their tensors (`auto`: the faster, measured here).
    pub memory_format: AutoOr<MemoryFormat>,
    /// A run whose trials of this network and data set say how many steps reaching the
    /// data set's target took at each global batch.
    pub steps_from: Option<&'a Path>,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Runs `stratlab recommend`.
pub fn recommend(
    cache: &mut ProfileCache,
    choices: &mut ChoiceStore,
    question: &Question<'_>,
) -> anyhow::Result<ExitCode> {
    let dataset: DatasetSelector = question.dataset.parse().map_err(|error: stratlab_datasets::DataError| {
        InputError(format!("--dataset {}: {error}", question.dataset))
    })?;
    let info = dataset.info()?;
    let spec = stratlab_networks::spec(question.network, &input_shape(info))
        .map_err(|error| InputError(format!("--network {}: {error}", question.network)))?;
    let batch = question.batch.unwrap_or(info.batch_size * question.workers);
    if question.workers == 0 || batch == 0 {
        return Err(InputError("--workers and --batch must be at least 1".into()).into());
    }
    let cluster = match question.cluster {
        Some(path) if path != Path::new("local") => {
            Some(Cluster::load(path).map_err(|error| InputError(error.to_string()))?)
        }
        _ => None,
    };
    let links = match question.probe {
        Some(run) => LocalLinks::from_probe_run(run)?.of_one_machine(run)?,
        None => LocalLinks::default(),
    };
    // Threads matter only where the speed is profiled here: a cluster's device per worker
    // is one core of this machine when profiled, and a roofline ignores them.
    let (placement, device_memory, cores) = match &cluster {
        Some(cluster) => (Placement::Cluster(cluster), cluster.device.memory_bytes as f64, question.workers),
        None => {
            let cores = crate::fingerprint::cores_here();
            // Workers on this machine share its memory.
            let memory = crate::fingerprint::memory_total_bytes().unwrap_or(u64::MAX) as f64;
            (Placement::Local { links: &links, cores }, memory / question.workers as f64, cores)
        }
    };
    // What a worker may use: the limit where one was given, else its device's.
    let usable_memory = question.memory_limit_bytes.unwrap_or(device_memory);
    let threads = (cores / question.workers).max(1);
    let mut trials: Vec<TrialSpec> = search_space(question.workers, batch, spec.stages.len())
        .into_iter()
        .enumerate()
        .map(|(index, SearchedStrategy { strategy, batch_per_worker })| {
            let workers = if strategy.kind().is_distributed() { question.workers } else { 1 };
            TrialSpec {
                trial_id: format!("{} · b{batch_per_worker}", strategy.label_with_workers(workers)),
                index,
                network: question.network.to_owned(),
                dataset: dataset.clone(),
                workers,
                swept_threads: None,
                link: crate::link_axis::TrialLink::Loopback,
                nodes: 1,
                precision: question.precision,
                memory_format: question.memory_format,
                batch_request: Default::default(),
                repeat: 0,
                train: TrainConfig {
                    batch_size: batch_per_worker,
                    threads: if workers == 1 { cores } else { threads },
                    optimizer: question.optimizer,
                    precision: question.precision.given().unwrap_or_default(),
                    memory_format: question.memory_format.given().unwrap_or_default(),
                    numerics: Numerics::default().for_precision(question.precision.given().unwrap_or_default()),
                    ..TrainConfig::default()
                },
                timeout_s: 0.0,
                memory_limit_bytes: None,
                telemetry_interval_ms: 0,
                strategy,
            }
        })
        .collect();
    if cluster.is_none() {
        resolve_auto(&mut trials, Numerics::default(), choices, &mut |line| eprintln!("{line}"))?;
    } else if trials.iter().any(TrialSpec::awaits_resolution) {
        // `auto` is measured on the device that trains; a cluster's cannot be.
        eprintln!("warning: `auto` precision or memory format is predicted as fp32 on contiguous tensors on a cluster");
    }
    let compute = trials.first().map(|trial| format!("{} {}", trial.train.precision, trial.train.memory_format));
    let steps_to_target = match question.steps_from {
        Some(run) => Some(steps_to_target(run, question.network, &dataset)?),
        None => None,
    };
    let started = Instant::now();
    let rows = predict_cells(&trials, &placement, cache, "", &mut |line| eprintln!("{line}"))?.rows;
    eprintln!("{} candidates predicted in {:.1} s", rows.len(), started.elapsed().as_secs_f64());
    let candidates: Vec<Candidate> = rows
        .iter()
        .zip(&trials)
        .filter_map(|(row, trial)| {
            let step = StepBreakdown {
                step_s: row.step_s?,
                compute_s: row.compute_s?,
                exposed_comm_s: row.exposed_comm_s?,
                bubble_s: row.bubble_s?,
                optimizer_s: row.optimizer_s?,
            };
            Some(Candidate {
                strategy: trial.strategy.name().to_owned(),
                label: row.trial_id.clone(),
                step,
                global_batch: trial.global_batch(),
                workers: trial.workers,
                peak_memory_bytes: row.peak_memory_bytes?,
            })
        })
        .collect();
    let missing: Vec<String> = rows
        .iter()
        .filter_map(|row| row.step_unavailable.as_ref().map(|why| format!("{}: {why}", row.trial_id)))
        .collect();
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header([
        "#",
        "strategy and parameters",
        "searched",
        "step",
        "thesis step",
        "samples/s",
        "per epoch",
        "to target",
        "peak memory",
        "largest global batch",
        "why",
    ]);
    let thesis_step = |label: &str| rows.iter().find(|row| row.trial_id == label).and_then(|row| row.thesis_step_s);
    let ranking = rank(&candidates, usable_memory);
    for (place, ranked) in ranking.iter().enumerate() {
        let candidate = &ranked.candidate;
        // The largest batch this strategy, with these parameters, fits on the devices: the
        // same line through two predicted peaks `batch_size: max` starts its search from.
        let trial = trials.iter().find(|trial| trial.trial_id == candidate.label).expect("a candidate is a trial");
        let largest = predicted_largest(trial, usable_memory, &placement, cache, &mut |line| eprintln!("{line}"))
            .map(|per_worker| trial.strategy.global_batch(per_worker, trial.workers));
        let why = match (ranked.fits, largest) {
            (false, Some(largest)) => format!("{} (fits up to a global batch of {largest})", ranked.why),
            _ => ranked.why.clone(),
        };
        let steps_per_epoch = info.train_len.div_ceil(candidate.global_batch.max(1)) as f64;
        let to_target = match &steps_to_target {
            None => "unknown (--steps-from RUN)".to_owned(),
            Some(steps) => steps.iter().find(|(global, _)| *global == candidate.global_batch).map_or_else(
                || format!("unknown (no trial at {} samples a step)", candidate.global_batch),
                |(_, steps)| duration(steps * candidate.step.step_s),
            ),
        };
        table.add_row([
            (place + 1).to_string(),
            candidate.label.clone(),
            ranked.searched.to_string(),
            format!("{:.1} ms", candidate.step.step_s * 1e3),
            thesis_step(&candidate.label).map_or("—".into(), |step| format!("{:.1} ms", step * 1e3)),
            stratlab_reports::tables::three_significant(1.0 / candidate.seconds_per_sample()),
            duration(steps_per_epoch * candidate.step.step_s),
            to_target,
            format!("{:.2} GiB", candidate.peak_memory_bytes / GIB),
            largest.map_or("—".into(), |largest| largest.to_string()),
            why,
        ]);
    }
    for column in [0, 2, 3, 4, 5, 6, 8, 9] {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let place = match &cluster {
        Some(cluster) => format!(
            "on {} ({} per worker, {:.1} GiB each{})",
            cluster.name,
            cluster.device.name,
            device_memory / GIB,
            if cluster.device.speed.is_validated() { "" } else { "; datasheet roofline: unvalidated" }
        ),
        None => {
            format!("on this machine ({cores} cores shared, {:.1} GiB of memory per worker)", device_memory / GIB)
        }
    };
    let place = match question.memory_limit_bytes {
        Some(limit) => format!("{place}, limited to {:.1} GiB per worker", limit / GIB),
        None => place,
    };
    println!(
        "{} on {} with {} worker(s) and {} in {}, {batch} samples per step (b: each worker's batch), {place}:\n{table}",
        question.network,
        dataset,
        question.workers,
        question.optimizer,
        compute.unwrap_or_default()
    );
    // The thesis's recommender ranked by its closed forms (eq. 5.1, 6.1 + 6.2): its pick
    // among what fits, beside the model's.
    let thesis_pick = ranking
        .iter()
        .filter(|ranked| ranked.fits)
        .filter_map(|ranked| {
            let step = thesis_step(&ranked.candidate.label)?;
            Some((step / ranked.candidate.global_batch as f64, &ranked.candidate.label))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(first) = ranking.first() {
        let thesis = thesis_pick.map_or_else(
            || "none (its forms cover single, data parallelism and GPipe)".to_owned(),
            |(_, label)| label.clone(),
        );
        println!("picks: the model's {}; the thesis's closed forms' {thesis}", first.candidate.label);
    }
    if !missing.is_empty() {
        println!("not predicted: {}", missing.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// A duration for the table: seconds, minutes or hours.
fn duration(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// Per global batch, the median number of steps the `ok` trials of `network` on `dataset`
/// in the run at `run` took to first reach their target accuracy (those that never did
/// count for nothing); a candidate trains as many steps at the same global batch.
fn steps_to_target(run: &Path, network: &str, dataset: &DatasetSelector) -> anyhow::Result<Vec<(usize, f64)>> {
    let view = RunView::open(run).map_err(|error| InputError(format!("--steps-from {}: {error}", run.display())))?;
    let evaluations: Vec<EvaluationRow> = view.rows()?;
    let mut by_batch: Vec<(usize, Vec<f64>)> = Vec::new();
    for trial in view.trials().iter().filter(|trial| trial.outcome.is_ok()) {
        if trial.network != network || trial.dataset != dataset.name || trial.data_source != dataset.source {
            continue;
        }
        let reached = evaluations
            .iter()
            .filter(|row| row.trial_id == trial.trial_id && row.record.accuracy >= trial.target_accuracy)
            .map(|row| row.record.after_step)
            .min();
        let Some(steps) = reached else { continue };
        let global = trial.global_batch.max(1) as usize;
        match by_batch.iter_mut().find(|(batch, _)| *batch == global) {
            Some((_, steps_seen)) => steps_seen.push(steps as f64),
            None => by_batch.push((global, vec![steps as f64])),
        }
    }
    Ok(by_batch
        .into_iter()
        .filter_map(|(batch, steps)| Some((batch, stratlab_results::stats::median(&steps)?)))
        .collect())
}
