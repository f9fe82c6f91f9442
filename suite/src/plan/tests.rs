//! The plan's expansion and its errors, on suite text.

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
    // Repeats run in rounds, each with the next seed; indices follow plan order; ids are unique.
    assert!(trials[..4].iter().all(|t| t.repeat == 0 && t.train.seed == 10));
    assert!(trials[4..].iter().all(|t| t.repeat == 1 && t.train.seed == 11));
    assert_eq!(trials[0].trial_id.replace("__r0", "__r1"), trials[4].trial_id);
    assert!(trials.iter().enumerate().all(|(i, t)| t.index == i));
    let ids: BTreeSet<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(ids.len(), trials.len());
}

#[test]
fn repeats_of_gives_matching_cells_their_own_count_and_the_first_matching_rule_decides() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single, {name: data-parallel, workers: [2]}]
threads: [1, 2]
budget: {steps: 1}
repeats: 1
repeats_of:
  - {cells: {strategy: single, threads: 2}, repeats: 3}
  - {cells: {strategy: single}, repeats: 5}
",
    );
    let count = |needle: &str| trials.iter().filter(|t| t.trial_id.contains(needle)).count();
    assert_eq!(count("single__w1__b128__t2__"), 3, "the first rule");
    assert_eq!(count("single__w1__b128__t1__"), 5, "the second rule, the first not matching 1 thread");
    assert_eq!(count("data-parallel"), 1, "no rule: `repeats`");
    // Rounds: every cell once before any cell's second trial.
    let rounds: Vec<usize> = trials.iter().map(|t| t.repeat).collect();
    assert_eq!(rounds, [0, 0, 0, 1, 1, 2, 2, 3, 4]);
}

#[test]
fn a_repeats_of_rule_of_zero_names_its_field() {
    let suite = SuiteFile::parse(
        "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nstrategies: [single]\nbudget: {steps: 1}\n\
         repeats_of: [{cells: {strategy: single}, repeats: 2}, {cells: {network: small-cnn}, repeats: 0}]\n",
    )
    .unwrap();
    let error = plan(&suite, Path::new("r.yaml")).unwrap_err().to_string();
    assert!(
        error.contains("r.yaml") && error.contains("repeats_of[1].repeats") && error.contains("exclude"),
        "{error}"
    );
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
fn fp16_trains_with_every_strategy_whose_stages_update_together() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies:
  - single
  - {name: data-parallel, workers: [2]}
  - {name: parameter-server, workers: [2]}
  - {name: gpipe, workers: [2]}
  - {name: 1f1b, workers: [2]}
  - {name: pipedream, workers: [2]}
precision: [fp16]
budget: {steps: 1}
",
    );
    for trial in &trials {
        assert!(trial.trial_id.contains("fp16"), "{}", trial.trial_id);
        let reason = trial.infeasibility();
        if trial.strategy.name() == "pipedream" {
            let reason = reason.expect("pipedream refuses fp16");
            assert!(reason.contains("loss scale") && reason.contains("valid for pipedream: fp32, bf16"), "{reason}");
        } else {
            assert_eq!(reason, None, "{}", trial.trial_id);
        }
    }
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
fn batch_size_max_is_a_cell_of_its_own_waiting_for_the_runner_to_find_its_batch() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single, {name: gpipe, workers: [2], micro_batches: [4]}]
budget: {steps: 1}
batch_size: [64, max]
memory_limit_mib: 64
exclude: [{batch_size: 64, strategy: gpipe}]
",
    );
    let ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "small-cnn__mnist-synthetic__single__w1__b64__r0",
            "small-cnn__mnist-synthetic__single__w1__bmax__r0",
            "small-cnn__mnist-synthetic__gpipe__w2__bmax__m4__r0",
        ]
    );
    assert_eq!(trials[0].batch_request, BatchRequest::Given);
    // One step until the search: a micro-batch per pipeline, a sample elsewhere.
    let waiting: Vec<(usize, &BatchRequest)> =
        trials[1..].iter().map(|t| (t.train.batch_size, &t.batch_request)).collect();
    assert_eq!(waiting, [(1, &BatchRequest::Largest), (4, &BatchRequest::Largest)]);
    assert_eq!(trials[2].label(), "small-cnn · mnist:synthetic · gpipe×2 m4 · bmax");
    assert!(trials[2].infeasibility().is_none());
    // A cell where nothing fits is infeasible, with the search's reason.
    let mut none = trials[1].clone();
    none.batch_request = BatchRequest::NoneFits("no batch trains: 1 per worker did not (oom)".into());
    assert_eq!(none.infeasibility().as_deref(), Some("no batch trains: 1 per worker did not (oom)"));
    // Workers get only a trial whose batch is known.
    assert_eq!(trials[0].for_worker().unwrap().train.batch_size, 64);
    let not_searched = trials[1].for_worker().unwrap_err();
    assert_eq!(not_searched, crate::trial::Unresolved::LargestBatchNotSearched(trials[1].trial_id.clone()));
    assert!(none.for_worker().unwrap_err().to_string().contains("no batch fits"));
    let mut found = trials[2].clone();
    (found.batch_request, found.train.batch_size) = (BatchRequest::LargestFound, 96);
    assert_eq!(found.for_worker().unwrap().train.batch_size, 96);
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
device_memory_limit_mib: 4096
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
    assert_eq!(trial.train.device_memory_limit_bytes, Some(4096 << 20));
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
    // 2 data sets × (2 or 1 batch sizes) × (single at 2 thread counts + data-parallel at
    // 2 threads: one thread cannot be shared by two workers).
    assert_eq!(trials.len(), 9);
    assert!(trials.iter().all(|t| t.workers == 1 || t.swept_threads == Some(2)), "no worker goes without a thread");
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
    let cifar: Vec<usize> =
        trials.iter().filter(|t| t.dataset.to_string() == "cifar10:synthetic").map(|t| t.train.batch_size).collect();
    assert_eq!(cifar, [64, 64, 64], "data sets the map leaves out keep their default");
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
fn precision_and_memory_format_are_axes_a_strategy_narrows_and_fp32_contiguous_keeps_old_ids() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single, {name: gpipe, workers: [2], micro_batches: [2], precision: [bf16], memory_format: [auto]}]
precision: [fp32, bf16]
memory_format: [contiguous, auto]
budget: {steps: 1}
exclude: [{strategy: single, precision: bf16, memory_format: auto}]
",
    );
    let ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "small-cnn__mnist-synthetic__single__w1__b128__r0",
            "small-cnn__mnist-synthetic__single__w1__b128__format-auto__r0",
            "small-cnn__mnist-synthetic__single__w1__b128__bf16__r0",
            "small-cnn__mnist-synthetic__gpipe__w2__b128__m2__bf16__format-auto__r0",
        ]
    );
    let bf16 = &trials[2];
    assert_eq!((bf16.train.precision, bf16.precision), (Precision::Bfloat16, AutoOr::Given(Precision::Bfloat16)));
    assert!(trials[1].awaits_resolution() && !bf16.awaits_resolution());
    // fp32 is float32 on every device: TF32 off, whatever cuDNN's default.
    assert!(!trials[0].train.numerics.cudnn_tf32);
    assert_eq!(trials[0].label(), "small-cnn · mnist:synthetic · single×1 · b128");
    assert_eq!(bf16.label(), "small-cnn · mnist:synthetic · single×1 · b128 · bf16");
    // An entry narrows the axes; it cannot add to them.
    let wider = SuiteFile::parse(
        "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nbudget: {steps: 1}\n\
         strategies: [single, {name: gpipe, workers: [2], precision: [bf16]}]\n",
    )
    .unwrap();
    let error = plan(&wider, Path::new("w.yaml")).unwrap_err().to_string();
    assert!(error.contains("strategies[1].precision: `bf16` is not on the suite's `precision` axis (fp32)"), "{error}");
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
        ("batch_size: [64, largest]\n", "a positive integer or `max`, got `largest`"),
        ("batch_size: max\n", "batch_size: `max` is the largest batch under a memory limit"),
        ("link: []\n", "link: empty axis"),
        ("link: [ethernet]\n", "unknown link `ethernet`: valid are `loopback` and a map"),
        ("link: [{bandwidth: 1 Gbit}]\n", "Gbit/s"),
        ("link: [{bandwidth: 1 Gbit/s, jitter: 1 ms}]\n", "jitter"),
        ("precision: []\n", "precision: empty axis"),
        ("memory_format: []\n", "memory_format: empty axis"),
        ("precision: [bf17]\n", "unknown variant `bf17`"),
        ("memory_format: [nhwc]\n", "channels_last"),
        ("device: cpu\nprecision: [fp32, tf32]\n", "tf32 is a CUDA tensor-core mode"),
        ("loss_scale: {backoff_factor: 2}\n", "loss_scale.backoff_factor: must lie strictly between 0 and 1"),
        ("loss_scale: {initial: 1024, growth: 2}\n", "unknown field `growth`"),
        ("optimizer: {name: []}\n", "optimizer.name: give at least one optimizer (sgd, adam)"),
        ("optimizer: {name: [sgd, lamb]}\n", "unknown optimizer `lamb`"),
        ("optimizer: {name: lamb}\n", "sgd, adam"),
        ("optimizer: {name: adam, adam: {lr: 0}}\n", "optimizer.adam.lr: must be a positive number"),
        ("optimizer: {name: adam, adam: {betas: [0.9, 1.0]}}\n", "optimizer.adam.betas: each must lie in [0, 1)"),
        ("optimizer: {adam: {beta1: 0.9}}\n", "unknown field `beta1`"),
    ] {
        let text = format!("{base}{extra}");
        let error = match SuiteFile::parse(&text) {
            Err(error) => error.to_string(),
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

#[test]
fn multi_worker_cells_run_once_per_link_and_single_once_on_loopback() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single, {name: data-parallel, workers: [2]}]
budget: {steps: 1}
link: [loopback, {bandwidth: 1 Gbit/s}, {bandwidth: 100 Mbit/s, latency: 1 ms}]
",
    );
    let ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "small-cnn__mnist-synthetic__single__w1__b128__r0",
            // Loopback keeps the id runs made before the axis existed gave the cell.
            "small-cnn__mnist-synthetic__data-parallel__w2__b128__r0",
            "small-cnn__mnist-synthetic__data-parallel__w2__b128__link-1Gbit__r0",
            "small-cnn__mnist-synthetic__data-parallel__w2__b128__link-100Mbit-1ms__r0",
        ]
    );
    let slow = &trials[3];
    let link = slow.link.emulated().expect("an emulated link");
    assert_eq!((link.bandwidth.0, link.latency.0), (12.5e6, 1e-3));
    assert!(slow.label().ends_with("· 100 Mbit/s · 1 ms"), "{}", slow.label());
    assert!(trials[..2].iter().all(|t| t.link == TrialLink::Loopback));
}

#[test]
fn exclude_rules_match_batch_sizes_and_links() {
    let trials = planned(
        "name: t
networks: [small-cnn, resnet18]
datasets: [mnist:synthetic]
strategies: [single, {name: data-parallel, workers: [2]}]
budget: {steps: 1}
batch_size: [16, 64]
link: [loopback, {bandwidth: 1 Gbit/s}]
exclude:
  - {network: resnet18, link: {bandwidth: 1 Gbit/s}}
  - {batch_size: 64, link: {bandwidth: 1 Gbit/s}}
",
    );
    let shaped: Vec<&str> =
        trials.iter().filter(|t| t.link != TrialLink::Loopback).map(|t| t.trial_id.as_str()).collect();
    assert_eq!(shaped, ["small-cnn__mnist-synthetic__data-parallel__w2__b16__link-1Gbit__r0"]);
    // 2 networks × 2 batches × (single + data-parallel on loopback), and the one shaped cell.
    assert_eq!(trials.len(), 9);
}

#[test]
fn the_optimizer_is_an_axis_with_each_optimizers_settings_and_sgd_keeps_old_ids() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single, {name: data-parallel, workers: [2]}]
optimizer: {name: [sgd, adam], lr: 0.05, momentum: 0.8, weight_decay: 0.001, adam: {lr: 0.002, betas: [0.8, 0.99]}}
budget: {steps: 1}
exclude: [{strategy: data-parallel, optimizer: sgd}]
",
    );
    let ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "small-cnn__mnist-synthetic__single__w1__b128__r0",
            "small-cnn__mnist-synthetic__single__w1__b128__adam__r0",
            "small-cnn__mnist-synthetic__data-parallel__w2__b128__adam__r0",
        ]
    );
    let (sgd, adam) = (&trials[0].train, &trials[1].train);
    assert_eq!((sgd.optimizer, sgd.lr, sgd.momentum, sgd.weight_decay), (OptimizerKind::Sgd, 0.05, 0.8, 0.001));
    assert_eq!((adam.optimizer, adam.lr, adam.weight_decay), (OptimizerKind::Adam, 0.002, 0.001));
    assert_eq!((adam.adam.betas, adam.adam.eps), ([0.8, 0.99], 1e-8));
    assert_eq!(trials[1].label(), "small-cnn · mnist:synthetic · single×1 · b128 · adam");
    // A suite without the block, or with one name, trains every cell with that one.
    let one = planned(
        "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nstrategies: [single]\nbudget: {steps: 1}\n\
         optimizer: {name: adam}\n",
    );
    assert_eq!(one.iter().map(|t| (t.train.optimizer, t.train.lr)).collect::<Vec<_>>(), [(OptimizerKind::Adam, 1e-3)]);
}
