//! Expands a suite file into its trials: the matrix product of the axes and of each
//! strategy's parameter axes, minus `exclude`, plus `include`, times `repeats` (or a
//! cell's own count from `repeats_of`), repeats in rounds.

use std::collections::BTreeSet;
use std::path::Path;

use stratlab_datasets::DatasetSelector;
use stratlab_strategies::TrainConfig;
use stratlab_strategy_spec::{AutoOr, MemoryFormat, OptimizerKind, Precision, Straggler, Strategy, StrategySweep};

use crate::link_axis::TrialLink;
use crate::suite_error::SuiteError;
use crate::suite_file::{BatchSize, CellRule, SuiteFile};
use crate::trial::{BatchRequest, TrialSpec};

/// One cell before repeats: a value of every axis.
struct Cell<'a> {
    network: &'a str,
    dataset: &'a DatasetSelector,
    strategy: Strategy,
    workers: usize,
    batch_size: BatchSize,
    /// The trial's threads when the suite sweeps them; `None` when it gives one count (or
    /// none) for every trial.
    swept_threads: Option<usize>,
    /// Where the workers talk (loopback for a single worker).
    link: TrialLink,
    /// Nodes its workers span (one for a single worker).
    nodes: usize,
    /// Its slowed ranks (none for a single worker).
    straggler: Option<Straggler>,
    /// What it computes in, as the suite asks.
    precision: AutoOr<Precision>,
    memory_format: AutoOr<MemoryFormat>,
    /// The update rule it trains with.
    optimizer: OptimizerKind,
}

impl Cell<'_> {
    /// The trial's threads, all its workers' together: the swept count, else the suite's
    /// one count, else every core.
    fn threads(&self, suite: &SuiteFile) -> usize {
        match (&self.swept_threads, &suite.threads) {
            (Some(threads), _) => *threads,
            (None, Some(threads)) => threads.counts()[0],
            (None, None) => crate::fingerprint::cores_here(),
        }
    }

    /// How many trials the cell runs: the first `repeats_of` rule it matches, else `repeats`.
    fn repeats(&self, suite: &SuiteFile) -> usize {
        suite
            .repeats_of
            .iter()
            .find(|rule| matches(&rule.cells, self, suite))
            .map_or(suite.repeats, |rule| rule.repeats)
    }
}

/// Expands `suite` (read from `path`, named in errors) into trials, in matrix order:
/// networks, data sets, strategies (each entry's workers, then micro-batches), batch
/// sizes, precisions, memory formats, optimizers, threads, links, nodes; then included cells. Repeats run in rounds, every cell's first
/// trial before any cell's second: a machine whose speed drifts over the run (a shared VM's
/// does, by a fifth over minutes for work on every core) then spreads each cell's repeats
/// rather than shifting some cells against others.
pub fn plan(suite: &SuiteFile, path: &Path) -> Result<Vec<TrialSpec>, SuiteError> {
    validate(suite, path)?;
    let swept_threads: Vec<Option<usize>> = match &suite.threads {
        Some(threads) if threads.is_axis() => threads.counts().into_iter().map(Some).collect(),
        _ => vec![None],
    };
    let mut cells = Vec::new();
    for network in &suite.networks {
        for dataset in &suite.datasets {
            for (i, entry) in suite.strategies.iter().enumerate() {
                let expanded = entry
                    .expand()
                    .map_err(|error| field_error(path, &format!("strategies[{i}].{}", error.field), error.message))?;
                let computes = computes_of(suite, entry);
                for (workers, strategy) in expanded {
                    for batch_size in batches_for(suite, dataset) {
                        for (&(precision, memory_format), optimizer) in computes.iter().flat_map(|compute| {
                            suite.optimizer.name.kinds().into_iter().map(move |optimizer| (compute, optimizer))
                        }) {
                            // Each worker takes at least a thread: fewer threads than workers
                            // would repeat the cell at one thread per worker under another name.
                            let per_worker =
                                swept_threads.iter().filter(|threads| threads.is_none_or(|t| t >= workers));
                            for &swept_threads in per_worker {
                                // One worker talks to no one: it runs once, not once per link.
                                let links = if workers > 1 { suite.link.as_slice() } else { &[TrialLink::Loopback] };
                                let nodes = if workers > 1 { suite.nodes.as_slice() } else { &[1] };
                                let placements =
                                    links.iter().flat_map(|link| nodes.iter().map(move |nodes| (link, nodes)));
                                for ((&link, &nodes), straggler) in placements.flat_map(|placement| {
                                    stragglers_of(suite, workers)
                                        .into_iter()
                                        .map(move |straggler| (placement, straggler))
                                }) {
                                    let cell = Cell {
                                        network: &network.0,
                                        dataset,
                                        strategy: strategy.clone(),
                                        workers,
                                        batch_size,
                                        swept_threads,
                                        link,
                                        nodes,
                                        straggler,
                                        precision,
                                        memory_format,
                                        optimizer,
                                    };
                                    if !suite.exclude.iter().any(|rule| matches(rule, &cell, suite)) {
                                        cells.push(cell);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for (i, cell) in suite.include.iter().enumerate() {
        let batch_size = match cell.batch_size {
            Some(batch_size) => BatchSize::Samples(batch_size),
            None => batches_for(suite, &cell.dataset)[0],
        };
        let mut sweep = cell.strategy.clone();
        if let Some(workers) = cell.workers {
            sweep.workers = vec![workers];
        }
        let given: Vec<(String, usize)> = given_sizes(&[batch_size]).map(|b| (cell.dataset.to_string(), b)).collect();
        sweep
            .validate(&given)
            .map_err(|error| field_error(path, &format!("include[{i}].strategy.{}", error.field), error.message))?;
        let expanded = sweep.expand().expect("validated above");
        let (precision, memory_format) = computes_of(suite, &sweep)[0];
        for (workers, strategy) in expanded {
            cells.push(Cell {
                network: &cell.network.0,
                dataset: &cell.dataset,
                strategy,
                workers,
                batch_size,
                swept_threads: swept_threads[0],
                link: if workers > 1 { suite.link[0] } else { TrialLink::Loopback },
                nodes: if workers > 1 { suite.nodes[0] } else { 1 },
                straggler: None,
                precision,
                memory_format,
                optimizer: suite.optimizer.name.kinds()[0],
            });
        }
    }

    if let Some(cell) = cells.iter().find(|cell| cell.nodes > 1 && cell.link.emulated().is_some()) {
        return Err(field_error(
            path,
            "nodes",
            format!(
                "{} nodes with the emulated link {}: an emulated link joins ranks on this one machine, and the \
                 ranks of a cell across nodes talk over the cluster's own network; drop those cells with \
                 `exclude: [{{nodes: {}, link: {{bandwidth: …}}}}]` or give such cells `link: loopback`",
                cell.nodes, cell.link, cell.nodes
            ),
        ));
    }
    let mut trials = Vec::new();
    let mut seen = BTreeSet::new();
    let repeats: Vec<usize> = cells.iter().map(|cell| cell.repeats(suite)).collect();
    for round in 0..repeats.iter().copied().max().unwrap_or(0) {
        for (cell, _) in cells.iter().zip(&repeats).filter(|(_, &repeats)| round < repeats) {
            let trial = resolve(suite, cell, round, trials.len());
            if seen.insert(trial.trial_id.clone()) {
                trials.push(trial);
            }
        }
    }
    if trials.is_empty() {
        return Err(field_error(path, "exclude", "excludes every cell of the matrix; nothing would run"));
    }
    Ok(trials)
}

/// The stragglers a cell of `workers` ranks runs with: every entry of the axis whose ranks it
/// has, or none at all for a single worker (it has no one to wait for it).
fn stragglers_of(suite: &SuiteFile, workers: usize) -> Vec<Option<Straggler>> {
    if workers == 1 {
        return vec![None];
    }
    let entries = suite.straggler.iter().map(|entry| entry.0.clone());
    entries.filter(|straggler| straggler.as_ref().is_none_or(|straggler| straggler.fits(workers).is_ok())).collect()
}

fn matches(rule: &CellRule, cell: &Cell<'_>, suite: &SuiteFile) -> bool {
    rule.network.as_ref().is_none_or(|n| n.0 == cell.network)
        && rule.dataset.as_ref().is_none_or(|d| d == cell.dataset)
        && rule.strategy.is_none_or(|s| s == cell.strategy.kind())
        && rule.workers.is_none_or(|w| w == cell.workers)
        && rule.batch_size.is_none_or(|b| BatchSize::Samples(b) == cell.batch_size)
        && rule.link.is_none_or(|l| l == cell.link)
        && rule.nodes.is_none_or(|n| n == cell.nodes)
        && rule.threads.is_none_or(|t| t == cell.threads(suite))
        && rule.precision.is_none_or(|p| p == cell.precision)
        && rule.memory_format.is_none_or(|f| f == cell.memory_format)
        && rule.optimizer.is_none_or(|o| o == cell.optimizer)
}

/// The (precision, memory format) pairs `entry`'s cells run: its own lists where it narrows
/// the suite's axes, else the suite's, precisions outer.
fn computes_of(suite: &SuiteFile, entry: &StrategySweep) -> Vec<(AutoOr<Precision>, AutoOr<MemoryFormat>)> {
    let precisions = entry.precision.as_ref().unwrap_or(&suite.precision);
    let formats = entry.memory_format.as_ref().unwrap_or(&suite.memory_format);
    precisions.iter().flat_map(|&precision| formats.iter().map(move |&format| (precision, format))).collect()
}

/// The part of a trial's id its precision and memory format add: nothing for float32 and
/// contiguous tensors, what every trial computed in before the axes existed, so their ids
/// stay.
fn compute_id_part(precision: AutoOr<Precision>, memory_format: AutoOr<MemoryFormat>) -> String {
    let precision = match precision {
        AutoOr::Given(precision) if precision.is_float32() => String::new(),
        AutoOr::Given(precision) => format!("__{precision}"),
        AutoOr::Auto => "__precision-auto".to_owned(),
    };
    let format = match memory_format {
        AutoOr::Given(MemoryFormat::Contiguous) => "",
        AutoOr::Given(MemoryFormat::ChannelsLast) => "__channels-last",
        AutoOr::Auto => "__format-auto",
    };
    precision + format
}

fn resolve(suite: &SuiteFile, cell: &Cell<'_>, repeat: usize, index: usize) -> TrialSpec {
    let info = cell.dataset.info().expect("selectors are validated while parsing");
    let trial_threads = cell.threads(suite);
    let (batch_size, batch_request, batch_id) = match cell.batch_size {
        BatchSize::Samples(batch) => (batch, BatchRequest::Given, batch.to_string()),
        // One step until the runner's search finds the largest (`largest_batch`).
        BatchSize::Largest => (cell.strategy.micro_batches(), BatchRequest::Largest, "max".to_owned()),
    };
    // One node, what every trial ran on before the axis, adds nothing: their ids stay.
    let nodes_id = if cell.nodes > 1 { format!("__n{}", cell.nodes) } else { String::new() };
    let mut trial_id = format!(
        "{}__{}__{}__w{}{nodes_id}__b{batch_id}{}",
        cell.network,
        cell.dataset.to_string().replace(':', "-"),
        cell.strategy.name(),
        cell.workers,
        // Strategy parameters that change what is measured are part of the cell's identity.
        cell.strategy.id_parameters(),
    );
    trial_id += &compute_id_part(cell.precision, cell.memory_format);
    // SGD, what every trial trained with before the axis, adds nothing: their ids stay.
    if !cell.optimizer.is_sgd() {
        trial_id += &format!("__{}", cell.optimizer);
    }
    if let Some(threads) = cell.swept_threads {
        trial_id += &format!("__t{threads}");
    }
    trial_id += &cell.link.id_part();
    // No straggler, what every trial ran with before the axis, adds nothing: their ids stay.
    trial_id += &cell.straggler.as_ref().map(Straggler::id_part).unwrap_or_default();
    trial_id += &format!("__r{repeat}");
    let mut train = TrainConfig {
        batch_size,
        eval_batch_size: suite.eval.batch_size,
        budget: suite.budget,
        warmup_steps: suite.warmup_steps,
        eval_every_steps: suite.eval.every_steps,
        eval_samples: suite.eval.samples,
        target_accuracy: suite.targets.get(info.name).copied().unwrap_or(info.target_accuracy),
        seed: suite.seed + repeat as u64,
        device: suite.device,
        // The trial's threads are shared among its worker processes on each node.
        threads: (trial_threads / (cell.workers / cell.nodes)).max(1),
        prefetch: 4,
        metrics_every_steps: suite.metrics_every_steps,
        // `auto` trains in what the runner resolves before the trials (`auto_compute`).
        numerics: suite.numerics.for_precision(cell.precision.given().unwrap_or_default()),
        precision: cell.precision.given().unwrap_or_default(),
        memory_format: cell.memory_format.given().unwrap_or_default(),
        // Given by the run from its profiles once they are taken (`ex_ante`).
        stage_seconds: None,
        loss_scale: suite.loss_scale,
        device_memory_limit_bytes: suite.device_memory_limit_mib.map(|mib| mib << 20),
        straggler: cell.straggler.clone(),
        ..TrainConfig::default()
    };
    suite.optimizer.apply(cell.optimizer, &mut train);
    TrialSpec {
        trial_id,
        index,
        network: cell.network.to_string(),
        dataset: cell.dataset.clone(),
        strategy: cell.strategy.clone(),
        workers: cell.workers,
        swept_threads: cell.swept_threads,
        link: cell.link,
        nodes: cell.nodes,
        precision: cell.precision,
        memory_format: cell.memory_format,
        batch_request,
        repeat,
        train,
        timeout_s: suite.timeout_s,
        memory_limit_bytes: suite.memory_limit_mib.map(|mib| mib << 20),
        telemetry_interval_ms: suite.telemetry_interval_ms,
    }
}

mod reading;
mod validate;

use reading::{batches_for, field_error, given_sizes};

use validate::validate;

#[cfg(test)]
mod straggler_tests;
#[cfg(test)]
mod tests;
