//! `stratlab recommend`: for one network, data set, worker count and global batch (samples
//! per optimizer step), every strategy with every parameter value searched
//! (`stratlab_strategy_spec::search_space`: each at the per-worker batch that trains that
//! global batch, pipelines' micro-batches within it) predicted on this machine or a cluster
//! file's devices (the same path as `stratlab predict`), then ranked as the thesis's
//! recommender ranks: what does not fit the device's memory is set aside, the rest ordered
//! by time per sample, each strategy with its best parameters and why it loses to the first
//! (`stratlab_perf_model::recommend`). Every candidate trains the same samples per step, so
//! none wins by taking a larger step (a data-parallel step of 16 × 32 samples against a
//! pipeline's 32).

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_datasets::DatasetSelector;
use stratlab_perf_model::recommend::{rank, Candidate};
use stratlab_perf_model::{Cluster, StepBreakdown};
use stratlab_strategies::TrainConfig;
use stratlab_strategy_spec::{search_space, OptimizerKind, SearchedStrategy};

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
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Runs `stratlab recommend`.
pub fn recommend(cache: &mut ProfileCache, question: &Question<'_>) -> anyhow::Result<ExitCode> {
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
    let trials: Vec<TrialSpec> = search_space(question.workers, batch, spec.stages.len())
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
                precision: stratlab_strategy_spec::AutoOr::Given(Default::default()),
                memory_format: stratlab_strategy_spec::AutoOr::Given(Default::default()),
                batch_request: Default::default(),
                repeat: 0,
                train: TrainConfig {
                    batch_size: batch_per_worker,
                    threads: if workers == 1 { cores } else { threads },
                    optimizer: question.optimizer,
                    ..TrainConfig::default()
                },
                timeout_s: 0.0,
                memory_limit_bytes: None,
                telemetry_interval_ms: 0,
                strategy,
            }
        })
        .collect();
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
        "samples/s",
        "peak memory",
        "largest global batch",
        "why",
    ]);
    for (place, ranked) in rank(&candidates, usable_memory).iter().enumerate() {
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
        table.add_row([
            (place + 1).to_string(),
            candidate.label.clone(),
            ranked.searched.to_string(),
            format!("{:.1} ms", candidate.step.step_s * 1e3),
            stratlab_reports::tables::three_significant(1.0 / candidate.seconds_per_sample()),
            format!("{:.2} GiB", candidate.peak_memory_bytes / GIB),
            largest.map_or("—".into(), |largest| largest.to_string()),
            why,
        ]);
    }
    for column in [0, 2, 3, 4, 5, 6] {
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
        "{} on {} with {} worker(s) and {}, {batch} samples per step (b: each worker's batch), {place}:\n{table}",
        question.network, dataset, question.workers, question.optimizer
    );
    if !missing.is_empty() {
        println!("not predicted: {}", missing.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}
