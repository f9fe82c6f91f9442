//! Expands a suite file into its trials: the matrix product of the axes and of each
//! strategy's parameter axes, minus `exclude`, plus `include`, times `repeats` (or a
//! cell's own count from `repeats_of`), repeats in rounds.

use std::collections::BTreeSet;
use std::path::Path;

use stratlab_datasets::DatasetSelector;
use stratlab_strategies::precision::check_trainable;
use stratlab_strategies::TrainConfig;
use stratlab_strategy_spec::{AutoOr, MemoryFormat, OptimizerKind, Precision, Strategy, StrategyKind, StrategySweep};

use crate::link_axis::TrialLink;
use crate::suite_error::SuiteError;
use crate::suite_file::{BatchSize, BatchSizes, CellRule, SuiteFile};
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
/// sizes, precisions, memory formats, optimizers, threads, links; then included cells. Repeats run in rounds, every cell's first
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
                                for &link in links {
                                    let cell = Cell {
                                        network: &network.0,
                                        dataset,
                                        strategy: strategy.clone(),
                                        workers,
                                        batch_size,
                                        swept_threads,
                                        link,
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
                precision,
                memory_format,
                optimizer: suite.optimizer.name.kinds()[0],
            });
        }
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

fn matches(rule: &CellRule, cell: &Cell<'_>, suite: &SuiteFile) -> bool {
    rule.network.as_ref().is_none_or(|n| n.0 == cell.network)
        && rule.dataset.as_ref().is_none_or(|d| d == cell.dataset)
        && rule.strategy.is_none_or(|s| s == cell.strategy.kind())
        && rule.workers.is_none_or(|w| w == cell.workers)
        && rule.batch_size.is_none_or(|b| BatchSize::Samples(b) == cell.batch_size)
        && rule.link.is_none_or(|l| l == cell.link)
        && rule.threads.is_none_or(|t| t == cell.threads(suite))
        && rule.precision.is_none_or(|p| p == cell.precision)
        && rule.memory_format.is_none_or(|f| f == cell.memory_format)
        && rule.optimizer.is_none_or(|o| o == cell.optimizer)
}

/// Why an entry's own list of axis `name` is not a narrowing of the suite's `axis`: the
/// first value it gives that the axis lacks.
fn outside_axis<T: PartialEq + std::fmt::Display>(
    given: Option<&[T]>,
    axis: &[T],
    name: &'static str,
) -> Option<(&'static str, String)> {
    let outside = given?.iter().find(|value| !axis.contains(value))?;
    let axis: Vec<String> = axis.iter().map(ToString::to_string).collect();
    Some((
        name,
        format!("`{outside}` is not on the suite's `{name}` axis ({}); an entry narrows the axis", axis.join(", ")),
    ))
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
    let mut trial_id = format!(
        "{}__{}__{}__w{}__b{batch_id}{}",
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
        // The trial's threads are shared among its worker processes.
        threads: (trial_threads / cell.workers).max(1),
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

fn field_error(path: &Path, field: &str, message: impl Into<String>) -> SuiteError {
    SuiteError::Field { path: path.to_path_buf(), field: field.to_string(), message: message.into() }
}

/// Checks what serde cannot: empty axes, impossible numbers, parameters that do not apply.
fn validate(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    let err = |field: &str, message: String| Err(field_error(path, field, message));
    if suite.networks.is_empty() {
        return err(
            "networks",
            format!("empty axis; give at least one of: {}", stratlab_networks::network_names().join(", ")),
        );
    }
    if suite.datasets.is_empty() {
        return err(
            "datasets",
            format!("empty axis; give at least one of: {}", stratlab_datasets::dataset_names().join(", ")),
        );
    }
    if suite.strategies.is_empty() {
        return err(
            "strategies",
            format!("empty axis; give at least one of: {}", StrategyKind::valid_names().join(", ")),
        );
    }
    if suite.repeats == 0 {
        return err("repeats", "must be at least 1".into());
    }
    if let Some(i) = suite.repeats_of.iter().position(|rule| rule.repeats == 0) {
        return err(&format!("repeats_of[{i}].repeats"), "must be at least 1 (`exclude` drops cells)".into());
    }
    if suite.link.is_empty() {
        return err("link", "empty axis; give `loopback` or links such as {bandwidth: 1 Gbit/s, latency: 1 ms}".into());
    }
    if !(suite.timeout_s.is_finite() && suite.timeout_s > 0.0) {
        return err("timeout_s", format!("must be a finite positive number of seconds, got {}", suite.timeout_s));
    }
    if suite.telemetry_interval_ms == 0 {
        return err("telemetry_interval_ms", "must be at least 1".into());
    }
    if let Some(threads) = &suite.threads {
        let counts = threads.counts();
        if counts.is_empty() || counts.contains(&0) {
            return err("threads", "give a thread count or a list of them, each at least 1".into());
        }
    }
    for (name, target) in &suite.targets {
        if let Err(error) = stratlab_datasets::info(name) {
            return err(&format!("targets.{name}"), error.to_string());
        }
        if !(0.0..=1.0).contains(target) {
            return err(&format!("targets.{name}"), format!("an accuracy between 0 and 1, got {target}"));
        }
    }
    check_train_config(suite, path)?;
    check_computes(suite, path)?;
    for (i, entry) in suite.strategies.iter().enumerate() {
        let outside = [
            outside_axis(entry.precision.as_deref(), &suite.precision, "precision"),
            outside_axis(entry.memory_format.as_deref(), &suite.memory_format, "memory_format"),
        ];
        if let Some((name, message)) = outside.into_iter().flatten().next() {
            return err(&format!("strategies[{i}].{name}"), message);
        }
    }
    let batches: Vec<(String, usize)> = suite
        .datasets
        .iter()
        .flat_map(|dataset| {
            let given: Vec<usize> = given_sizes(&batches_for(suite, dataset)).collect();
            given.into_iter().map(move |batch| (dataset.to_string(), batch))
        })
        .collect();
    for (i, strategy) in suite.strategies.iter().enumerate() {
        if let Err(error) = strategy.validate(&batches) {
            return err(&format!("strategies[{i}].{}", error.field), error.message);
        }
    }
    for dataset in &suite.datasets {
        let info = dataset.info().expect("validated while parsing");
        let sizes = batches_for(suite, dataset);
        if sizes.contains(&BatchSize::Largest)
            && suite.memory_limit_mib.is_none()
            && !matches!(suite.device, stratlab_strategies::DeviceChoice::Cuda(_))
        {
            return err(
                "batch_size",
                "`max` is the largest batch under a memory limit, and this suite sets none: give \
                 memory_limit_mib (each worker's tensor storage on a CPU, in MiB), or train on a \
                 `cuda:N` device, whose own memory (or device_memory_limit_mib) is the limit"
                    .into(),
            );
        }
        for batch in given_sizes(&sizes) {
            if batch > info.train_len {
                return err(
                    "batch_size",
                    format!("{batch} exceeds the {} training samples of {dataset}", info.train_len),
                );
            }
        }
    }
    Ok(())
}

/// Checks the suite's `precision` and `memory_format` axes: not empty, and each value one
/// this build trains on the suite's device.
fn check_computes(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    if suite.precision.is_empty() {
        return Err(field_error(path, "precision", "empty axis; give at least one of: fp32, bf16, tf32, auto"));
    }
    if suite.memory_format.is_empty() {
        let message = "empty axis; give at least one of: contiguous, channels_last, auto";
        return Err(field_error(path, "memory_format", message));
    }
    for precision in suite.precision.iter().filter_map(|p| p.given()) {
        check_trainable(precision, suite.device)
            .map_err(|refused| field_error(path, "precision", refused.to_string()))?;
    }
    Ok(())
}

/// The per-worker batch sizes of `dataset`'s cells, in the order the suite lists them.
fn batches_for(suite: &SuiteFile, dataset: &DatasetSelector) -> Vec<BatchSize> {
    let info = dataset.info().expect("validated while parsing");
    let default = vec![BatchSize::Samples(info.batch_size)];
    match &suite.batch_size {
        Some(BatchSizes::All(sizes)) => sizes.clone(),
        Some(BatchSizes::PerDataset(sizes)) => sizes.get(info.name).cloned().unwrap_or(default),
        None => default,
    }
}

/// The sizes given as numbers (`max` is searched for, and checked once found).
fn given_sizes(sizes: &[BatchSize]) -> impl Iterator<Item = usize> + '_ {
    sizes.iter().filter_map(|size| match size {
        BatchSize::Samples(batch) => Some(*batch),
        BatchSize::Largest => None,
    })
}

/// The suite-wide training settings, checked by the trainer's own validation so the rules
/// live in one place.
fn check_train_config(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    let kinds = suite.optimizer.name.kinds();
    if kinds.is_empty() {
        return Err(field_error(path, "optimizer.name", "give at least one optimizer (sgd, adam)"));
    }
    for kind in kinds {
        let mut config = TrainConfig {
            budget: suite.budget,
            eval_batch_size: suite.eval.batch_size,
            eval_every_steps: suite.eval.every_steps,
            eval_samples: suite.eval.samples,
            metrics_every_steps: suite.metrics_every_steps,
            loss_scale: suite.loss_scale,
            ..TrainConfig::default()
        };
        suite.optimizer.apply(kind, &mut config);
        config.validate().map_err(|error| match error {
            // Name the field as the suite file spells it.
            stratlab_strategies::TrainError::InvalidConfig { field, reason } => {
                field_error(path, suite_field(field, kind), reason)
            }
            other => field_error(path, "budget", other.to_string()),
        })?;
    }
    Ok(())
}

/// The suite-file spelling of a [`TrainConfig`] field, for a cell training with `kind`.
fn suite_field(field: &'static str, kind: OptimizerKind) -> &'static str {
    match field {
        "lr" if kind == OptimizerKind::Adam => "optimizer.adam.lr",
        "lr" => "optimizer.lr",
        "momentum" => "optimizer.momentum",
        "weight_decay" => "optimizer.weight_decay",
        "adam.betas" => "optimizer.adam.betas",
        "adam.eps" => "optimizer.adam.eps",
        "eval_batch_size" => "eval.batch_size",
        "eval_every_steps" => "eval.every_steps",
        "eval_samples" => "eval.samples",
        other => other,
    }
}

#[cfg(test)]
mod tests;
