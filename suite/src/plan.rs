//! Expands a suite file into its trials: the matrix product of the axes and of each
//! strategy's parameter axes, minus `exclude`, plus `include`, times `repeats`.

use std::collections::BTreeSet;
use std::path::Path;

use stratlab_datasets::DatasetSelector;
use stratlab_strategies::{Precision, TrainConfig};
use stratlab_strategy_spec::{Strategy, StrategyKind};

use crate::suite_error::SuiteError;
use crate::suite_file::{BatchSizes, CellRule, SuiteFile};
use crate::trial::TrialSpec;

/// One cell before repeats: a value of every axis.
struct Cell<'a> {
    network: &'a str,
    dataset: &'a DatasetSelector,
    strategy: Strategy,
    workers: usize,
    batch_size: usize,
    /// The trial's threads when the suite sweeps them; `None` when it gives one count (or
    /// none) for every trial.
    swept_threads: Option<usize>,
}

/// Expands `suite` (read from `path`, named in errors) into trials, in matrix order:
/// networks, data sets, strategies (each entry's workers, then micro-batches), batch
/// sizes, threads.
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
                for (workers, strategy) in expanded {
                    for batch_size in batches_for(suite, dataset) {
                        for &swept_threads in &swept_threads {
                            let cell = Cell {
                                network: &network.0,
                                dataset,
                                strategy: strategy.clone(),
                                workers,
                                batch_size,
                                swept_threads,
                            };
                            if !suite.exclude.iter().any(|rule| matches(rule, &cell)) {
                                cells.push(cell);
                            }
                        }
                    }
                }
            }
        }
    }
    for (i, cell) in suite.include.iter().enumerate() {
        let batch_size = match cell.batch_size {
            Some(batch_size) => batch_size,
            None => batches_for(suite, &cell.dataset)[0],
        };
        let mut sweep = cell.strategy.clone();
        if let Some(workers) = cell.workers {
            sweep.workers = vec![workers];
        }
        sweep
            .validate(&[(cell.dataset.to_string(), batch_size)])
            .map_err(|error| field_error(path, &format!("include[{i}].strategy.{}", error.field), error.message))?;
        let expanded = sweep.expand().expect("validated above");
        for (workers, strategy) in expanded {
            cells.push(Cell {
                network: &cell.network.0,
                dataset: &cell.dataset,
                strategy,
                workers,
                batch_size,
                swept_threads: swept_threads[0],
            });
        }
    }

    let mut trials = Vec::new();
    let mut seen = BTreeSet::new();
    for cell in &cells {
        for repeat in 0..suite.repeats {
            let trial = resolve(suite, cell, repeat, trials.len());
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

fn matches(rule: &CellRule, cell: &Cell<'_>) -> bool {
    rule.network.as_ref().is_none_or(|n| n.0 == cell.network)
        && rule.dataset.as_ref().is_none_or(|d| d == cell.dataset)
        && rule.strategy.is_none_or(|s| s == cell.strategy.kind())
        && rule.workers.is_none_or(|w| w == cell.workers)
}

fn resolve(suite: &SuiteFile, cell: &Cell<'_>, repeat: usize, index: usize) -> TrialSpec {
    let info = cell.dataset.info().expect("selectors are validated while parsing");
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let trial_threads = match (&cell.swept_threads, &suite.threads) {
        (Some(threads), _) => *threads,
        (None, Some(threads)) => threads.counts()[0],
        (None, None) => cores,
    };
    let mut trial_id = format!(
        "{}__{}__{}__w{}__b{}{}",
        cell.network,
        cell.dataset.to_string().replace(':', "-"),
        cell.strategy.name(),
        cell.workers,
        cell.batch_size,
        // Strategy parameters that change what is measured are part of the cell's identity.
        cell.strategy.id_parameters(),
    );
    if let Some(threads) = cell.swept_threads {
        trial_id += &format!("__t{threads}");
    }
    trial_id += &format!("__r{repeat}");
    TrialSpec {
        trial_id,
        index,
        network: cell.network.to_string(),
        dataset: cell.dataset.clone(),
        strategy: cell.strategy.clone(),
        workers: cell.workers,
        swept_threads: cell.swept_threads,
        repeat,
        train: TrainConfig {
            batch_size: cell.batch_size,
            eval_batch_size: suite.eval.batch_size,
            budget: suite.budget,
            lr: suite.optimizer.lr,
            momentum: suite.optimizer.momentum,
            weight_decay: suite.optimizer.weight_decay,
            schedule: suite.optimizer.schedule,
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
            numerics: suite.numerics,
            // Benchmarks train in float32; float64 is for the equivalence tests.
            precision: Precision::Float32,
        },
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
    if let Err(error) = check_train_config(suite) {
        return err(error.0, error.1);
    }
    let batches: Vec<(String, usize)> = suite
        .datasets
        .iter()
        .flat_map(|dataset| batches_for(suite, dataset).into_iter().map(move |batch| (dataset.to_string(), batch)))
        .collect();
    for (i, strategy) in suite.strategies.iter().enumerate() {
        if let Err(error) = strategy.validate(&batches) {
            return err(&format!("strategies[{i}].{}", error.field), error.message);
        }
    }
    for dataset in &suite.datasets {
        let info = dataset.info().expect("validated while parsing");
        for batch in batches_for(suite, dataset) {
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

/// The per-worker batch sizes of `dataset`'s cells, in the order the suite lists them.
fn batches_for(suite: &SuiteFile, dataset: &DatasetSelector) -> Vec<usize> {
    let info = dataset.info().expect("validated while parsing");
    match &suite.batch_size {
        Some(BatchSizes::All(sizes)) => sizes.clone(),
        Some(BatchSizes::PerDataset(sizes)) => sizes.get(info.name).cloned().unwrap_or(vec![info.batch_size]),
        None => vec![info.batch_size],
    }
}

/// The suite-wide training settings, checked by the trainer's own validation so the rules
/// live in one place.
fn check_train_config(suite: &SuiteFile) -> Result<(), (&'static str, String)> {
    let config = TrainConfig {
        budget: suite.budget,
        lr: suite.optimizer.lr,
        momentum: suite.optimizer.momentum,
        weight_decay: suite.optimizer.weight_decay,
        eval_batch_size: suite.eval.batch_size,
        eval_every_steps: suite.eval.every_steps,
        eval_samples: suite.eval.samples,
        metrics_every_steps: suite.metrics_every_steps,
        ..TrainConfig::default()
    };
    config.validate().map_err(|error| match error {
        // Name the field as the suite file spells it.
        stratlab_strategies::TrainError::InvalidConfig { field, reason } => (suite_field(field), reason),
        other => ("budget", other.to_string()),
    })
}

/// The suite-file spelling of a [`TrainConfig`] field.
fn suite_field(field: &'static str) -> &'static str {
    match field {
        "lr" => "optimizer.lr",
        "momentum" => "optimizer.momentum",
        "weight_decay" => "optimizer.weight_decay",
        "eval_batch_size" => "eval.batch_size",
        "eval_every_steps" => "eval.every_steps",
        "eval_samples" => "eval.samples",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(text: &str) -> Vec<TrialSpec> {
        let suite = SuiteFile::parse(text).unwrap();
        plan(&suite, Path::new("test.yaml")).unwrap()
    }

    #[test]
    fn the_matrix_is_the_product_of_its_axes_minus_exclude_plus_include_times_repeats() {
        let trials = planned(
            "name: t
networks: [small-cnn, resnet18]
datasets: [mnist, cifar10:synthetic]
strategies: [single]
budget: {epochs: 1}
repeats: 2
seed: 10
exclude: [{network: resnet18, dataset: mnist}]
include: [{network: vgg11, dataset: cifar10:synthetic, strategy: single, batch_size: 16}]
",
        );
        // (2 × 2 − 1) cells + 1 included cell, each twice.
        assert_eq!(trials.len(), 8);
        assert!(!trials.iter().any(|t| t.network == "resnet18" && t.dataset.to_string() == "mnist"));
        let vgg: Vec<&TrialSpec> = trials.iter().filter(|t| t.network == "vgg11").collect();
        assert_eq!(vgg.len(), 2);
        assert_eq!(vgg[0].train.batch_size, 16);
        // Repeats get consecutive seeds; indices follow plan order; ids are unique.
        assert_eq!(trials[0].train.seed, 10);
        assert_eq!(trials[1].train.seed, 11);
        assert!(trials.iter().enumerate().all(|(i, t)| t.index == i));
        let ids: BTreeSet<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
        assert_eq!(ids.len(), trials.len());
    }

    #[test]
    fn pipeline_cells_carry_their_parameters_and_impossible_ones_are_infeasible_with_the_reason() {
        let trials = planned(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies:
  - {name: gpipe, workers: [2, 8], micro_batches: [1, 4], balance: [2, 3], checkpoint: except_last}
  - {name: hybrid, workers: [4, 6], pipeline_stages: 2, micro_batches: [2]}
  - {name: 1f1b, workers: [3], balance: [2, 2, 2]}
budget: {steps: 1}
batch_size: 32
",
        );
        let by_id =
            |needle: &str| trials.iter().find(|t| t.trial_id.contains(needle)).unwrap_or_else(|| panic!("{needle}"));
        let gpipe = by_id("gpipe__w2__b32__m4__bal-2-3__ckpt-except_last");
        assert_eq!(gpipe.strategy.micro_batches(), 4);
        assert_eq!(gpipe.global_batch(), 32, "pipeline stages share one batch");
        assert_eq!(gpipe.infeasibility(), None);
        // small-cnn has 5 stages: 8 workers cannot each hold one, and [2, 3] lists 2 parts.
        let too_many = by_id("gpipe__w8__b32__m1").infeasibility().unwrap();
        assert!(too_many.contains('8') && too_many.contains('5'), "{too_many}");
        let hybrid = by_id("hybrid__w4__b32__m2__pp2");
        assert_eq!((hybrid.global_batch(), hybrid.infeasibility()), (64, None), "two replicas, one batch each");
        let uneven = by_id("hybrid__w6__b32__m2__pp2").infeasibility();
        assert_eq!(uneven, None, "6 = 3 replicas × 2 stages");
        let wrong_sum = by_id("1f1b__w3").infeasibility().unwrap();
        assert!(wrong_sum.contains("[2,2,2]") && wrong_sum.contains('5'), "{wrong_sum}");
    }

    #[test]
    fn hybrid_workers_must_divide_into_pipelines() {
        let trials = planned(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [{name: hybrid, workers: [3], pipeline_stages: 2}]
budget: {steps: 1}
",
        );
        let reason = trials[0].infeasibility().unwrap();
        assert!(reason.contains("3 workers") && reason.contains("dp × pp"), "{reason}");
    }

    #[test]
    fn batch_sizes_default_to_the_thesis_table_and_can_be_overridden_per_dataset() {
        let text = "name: t
networks: [small-cnn]
datasets: [mnist:synthetic, cifar10:synthetic]
strategies: [single]
budget: {steps: 1}
";
        let batches = |trials: Vec<TrialSpec>| trials.iter().map(|t| t.train.batch_size).collect::<Vec<_>>();
        assert_eq!(batches(planned(text)), vec![128, 64]);
        assert_eq!(batches(planned(&format!("{text}batch_size: {{cifar10: 32}}\n"))), vec![128, 32]);
        assert_eq!(batches(planned(&format!("{text}batch_size: 8\n"))), vec![8, 8]);
    }

    #[test]
    fn suite_settings_reach_every_trial() {
        let trials = planned(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
budget: {steps: 5, seconds: 30}
device: cpu
threads: 1
targets: {mnist: 0.9}
optimizer: {lr: 0.1, schedule: {kind: cosine}}
timeout_s: 42
memory_limit_mib: 512
",
        );
        let trial = &trials[0];
        assert_eq!(trial.train.budget.steps, Some(5));
        assert_eq!(trial.train.budget.seconds, Some(30.0));
        assert_eq!(trial.train.threads, 1);
        assert_eq!(trial.train.target_accuracy, 0.9);
        assert_eq!(trial.train.lr, 0.1);
        assert_eq!(trial.train.schedule, stratlab_strategies::LrSchedule::Cosine);
        assert_eq!(trial.timeout_s, 42.0);
        assert_eq!(trial.memory_limit_bytes, Some(512 << 20));
        assert!(trial.infeasibility().is_none());
    }

    #[test]
    fn batch_sizes_and_threads_sweep_like_any_axis_and_join_the_cell() {
        let trials = planned(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic, cifar10:synthetic]
strategies: [single, {name: data-parallel, workers: [2]}]
budget: {steps: 1}
batch_size: {mnist: [64, 128]}
threads: [1, 2]
",
        );
        // 2 data sets × 2 strategies × (2 or 1 batch sizes) × 2 thread counts.
        assert_eq!(trials.len(), 12);
        let ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
        assert_eq!(
            &ids[..4],
            [
                "small-cnn__mnist-synthetic__single__w1__b64__t1__r0",
                "small-cnn__mnist-synthetic__single__w1__b64__t2__r0",
                "small-cnn__mnist-synthetic__single__w1__b128__t1__r0",
                "small-cnn__mnist-synthetic__single__w1__b128__t2__r0",
            ]
        );
        // A trial's threads are shared by its workers; the swept value is recorded.
        let dp =
            trials.iter().find(|t| t.trial_id == "small-cnn__mnist-synthetic__data-parallel__w2__b64__t2__r0").unwrap();
        assert_eq!((dp.train.threads, dp.swept_threads), (1, Some(2)));
        let cifar: Vec<usize> = trials
            .iter()
            .filter(|t| t.dataset.to_string() == "cifar10:synthetic")
            .map(|t| t.train.batch_size)
            .collect();
        assert_eq!(cifar, [64, 64, 64, 64], "data sets the map leaves out keep their default");
        // One count is a setting, as before: not in the id, not swept.
        let one = planned("name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nstrategies: [single]\nbudget: {steps: 1}\nthreads: [2]\nbatch_size: [32, 16]\n");
        let ids: Vec<&str> = one.iter().map(|t| t.trial_id.as_str()).collect();
        assert_eq!(
            ids,
            ["small-cnn__mnist-synthetic__single__w1__b32__r0", "small-cnn__mnist-synthetic__single__w1__b16__r0"]
        );
        assert!(one.iter().all(|t| t.swept_threads.is_none() && t.train.threads == 2));
    }

    #[test]
    fn empty_or_zero_axes_are_refused_naming_the_field() {
        let base =
            "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nstrategies: [single]\nbudget: {steps: 1}\n";
        for (extra, needle) in [
            ("threads: [1, 0]\n", "threads"),
            ("threads: []\n", "threads"),
            ("batch_size: [64, 0]\n", "batch size must be a positive integer, got 0"),
            ("batch_size: []\n", "an empty list of batch sizes"),
            ("batch_size: {mnist: [8, -1]}\n", "got -1"),
        ] {
            let text = format!("{base}{extra}");
            let error = match SuiteFile::parse(&text) {
                Err(error) => error,
                Ok(suite) => plan(&suite, Path::new("test.yaml")).unwrap_err().to_string(),
            };
            assert!(error.contains(needle), "{extra}: {error}");
        }
    }

    #[test]
    fn an_include_cell_gets_the_rules_of_its_strategy() {
        let suite = SuiteFile::parse(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
budget: {steps: 1}
include: [{network: small-cnn, dataset: mnist:synthetic, strategy: {name: single, micro_batches: [4]}}]
",
        )
        .unwrap();
        let error = plan(&suite, Path::new("s.yaml")).unwrap_err().to_string();
        assert!(
            error.contains("include[0].strategy.micro_batches") && error.contains("does not apply to strategy single"),
            "{error}"
        );
    }

    #[test]
    fn an_include_cell_takes_its_strategy_as_a_strategies_entry() {
        let suite = SuiteFile::parse(
            "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
budget: {steps: 1}
include:
  - {network: small-cnn, dataset: mnist:synthetic, strategy: data-parallel, workers: 2}
  - {network: small-cnn, dataset: mnist:synthetic, strategy: {name: gpipe, workers: [2], micro_batches: [2, 4]}}
",
        )
        .unwrap();
        let trials = plan(&suite, Path::new("s.yaml")).unwrap();
        let included: Vec<(String, usize)> =
            trials[1..].iter().map(|trial| (trial.strategy.name().to_string(), trial.workers)).collect();
        assert_eq!(included.len(), 3, "{included:?}");
        assert_eq!(included[0], ("data-parallel".to_string(), 2));
        assert_eq!(trials[2].strategy.micro_batches(), 2);
        assert_eq!(trials[3].strategy.micro_batches(), 4);
        assert!(trials[2..].iter().all(|trial| trial.workers == 2));
    }
}
