//! Behaviour of the single-device trainer on small real networks and synthetic data, on the CPU.

use std::sync::Arc;

use stratlab_datasets::{open, DataCache, Dataset, DatasetSelector, OpenOptions, Split};
use stratlab_networks::InputShape;
use stratlab_strategies::single::{train, TrainContext};
use stratlab_strategies::{Budget, DeviceChoice, NoObserver, TrainConfig, TrainOutcome, TrainReport};

fn open_synthetic(name: &str, seed: u64) -> (Arc<dyn Dataset>, Arc<dyn Dataset>) {
    let selector = DatasetSelector::synthetic(name).unwrap();
    let cache = DataCache::from_env();
    let options = OpenOptions { seed, allow_fetch: false };
    (open(&selector, Split::Train, &cache, &options).unwrap(), open(&selector, Split::Test, &cache, &options).unwrap())
}

fn small_config(steps: usize) -> TrainConfig {
    TrainConfig {
        batch_size: 32,
        eval_batch_size: 500,
        budget: Budget { steps: Some(steps), ..Budget::default() },
        lr: 0.01,
        warmup_steps: 2,
        eval_samples: Some(1000),
        target_accuracy: 0.5,
        seed: 7,
        device: DeviceChoice::Cpu,
        threads: 2,
        ..TrainConfig::default()
    }
}

fn train_small_cnn(dataset: &str, config: &TrainConfig) -> TrainReport {
    let (train_split, test_split) = open_synthetic(dataset, config.seed);
    train_network("small-cnn", train_split, test_split, config)
}

fn train_network(
    network: &str,
    train_split: Arc<dyn Dataset>,
    test_split: Arc<dyn Dataset>,
    config: &TrainConfig,
) -> TrainReport {
    let info = train_split.info();
    let input = InputShape {
        channels: info.channels as i64,
        height: info.height as i64,
        width: info.width as i64,
        classes: info.classes as i64,
    };
    let network = stratlab_networks::spec(network, &input).unwrap();
    let context = TrainContext { network: &network, train: train_split, test: test_split, config };
    let _turn = crate::common::training_turn();
    train(&context, &mut NoObserver).unwrap()
}

#[test]
fn same_seed_gives_the_same_loss_sequence_on_the_cpu() {
    let config = small_config(12);
    let first = train_small_cnn("mnist", &config);
    let second = train_small_cnn("mnist", &config);
    let losses = |report: &TrainReport| report.steps.iter().map(|step| step.loss).collect::<Vec<_>>();
    assert_eq!(losses(&first).len(), 12);
    assert_eq!(losses(&first), losses(&second));
    assert_eq!(first.final_accuracy(), second.final_accuracy());

    let other_seed = train_small_cnn("mnist", &TrainConfig { seed: 8, ..config });
    assert_ne!(losses(&first), losses(&other_seed), "a different seed must change the run");
}

#[test]
fn synthetic_small_image_data_sets_train_above_chance() {
    // The fewest steps that show it with a wide margin. Measured (seed 7, batch 32): after 50
    // steps mnist 0.72, fashion-mnist 0.67, cifar10 0.87; cifar100 0.02 after 50 steps, 0.30
    // after 120 (its 100 classes need more steps before the small CNN separates them).
    for (dataset, classes, steps) in
        [("mnist", 10.0, 50), ("fashion-mnist", 10.0, 50), ("cifar10", 10.0, 50), ("cifar100", 100.0, 120)]
    {
        let report = train_small_cnn(dataset, &small_config(steps));
        let accuracy = report.final_accuracy().unwrap();
        let chance = 1.0 / classes;
        assert!(accuracy > 3.0 * chance, "{dataset}: accuracy {accuracy} is not clearly above chance {chance}");
        assert_eq!(report.outcome, TrainOutcome::Completed);
    }
}

#[test]
fn budget_warmup_and_epoch_records_add_up() {
    let config = TrainConfig { eval_every_steps: Some(10), ..small_config(25) };
    let report = train_small_cnn("mnist", &config);
    assert_eq!(report.steps.len(), 25);
    assert_eq!(report.steps.iter().filter(|step| step.warmup).count(), 2);
    assert_eq!(report.timed_step_times().len(), 23);
    assert!(report.steps.iter().all(|step| step.step_time_s > 0.0 && step.samples == 32));
    // Every step's peak tensor memory is counted, and holds at least the weights and their
    // gradients (small CNN on MNIST: 1,199,882 float32 parameters, twice) and the batch, but
    // not a gigabyte.
    let weights_and_gradients = 2 * 1_199_882 * 4;
    for step in &report.steps {
        let peak = step.peak_memory_bytes.expect("the CPU counts its tensor memory");
        assert!(peak > weights_and_gradients && peak < 1 << 30, "step {}: {peak} bytes", step.step);
    }
    assert_eq!(
        report.peak_memory_bytes(),
        report.steps.iter().filter(|s| !s.warmup).filter_map(|s| s.peak_memory_bytes).max()
    );
    // Evaluations after steps 10 and 20, then one closing the (partial) epoch at step 25.
    let after: Vec<usize> = report.evaluations.iter().map(|eval| eval.after_step).collect();
    assert_eq!(after, vec![10, 20, 25]);
    assert_eq!(report.epochs.len(), 1);
    assert_eq!(report.epochs[0].steps, Some(25));
    // Time-to-accuracy, when reached, is the elapsed time of the first evaluation at target.
    if let Some(tta) = report.time_to_accuracy_s {
        let first = report.evaluations.iter().find(|eval| eval.accuracy >= config.target_accuracy).unwrap();
        assert_eq!(tta, first.elapsed_s);
    }
}

#[test]
fn a_time_limit_ends_training_only_after_the_floor_of_timed_steps() {
    // A limit spent before the first step: alone it trains nothing.
    let spent = Budget { seconds: Some(1e-9), ..Budget::default() };
    let floor = Budget { min_timed_steps: Some(4), ..spent };
    let report = train_small_cnn("mnist", &TrainConfig { budget: floor, ..small_config(1) });
    assert_eq!(report.steps.len(), 2 + 4, "2 warm-up steps, then the 4 timed ones the floor asks for");
    assert_eq!(report.timed_step_times().len(), 4);
    // A step limit still ends the run first.
    let capped = Budget { steps: Some(3), ..floor };
    assert_eq!(train_small_cnn("mnist", &TrainConfig { budget: capped, ..small_config(1) }).steps.len(), 3);
}

#[test]
fn exploding_loss_ends_training_as_diverged_not_as_an_error() {
    // A learning rate this large makes the loss overflow within a few steps.
    let config = TrainConfig { lr: 1e12, momentum: 0.0, weight_decay: 0.0, ..small_config(40) };
    let report = train_small_cnn("mnist", &config);
    assert_eq!(report.outcome, TrainOutcome::Diverged);
    assert!(report.steps.len() < 40);
    assert!(!report.steps.last().unwrap().loss.is_some_and(f64::is_finite));
    assert!(report.reason.as_deref().unwrap().contains("loss became"));
    // Losses are read back every `metrics_every_steps`: divergence is noticed within that many.
    let first_bad = report.steps.iter().position(|step| !step.loss.is_some_and(f64::is_finite)).unwrap();
    assert!(report.steps.len() - first_bad <= config.metrics_every_steps, "{} steps recorded", report.steps.len());
    assert!(report.reason.as_deref().unwrap().contains(&format!("at step {first_bad}")));
}

#[test]
fn frequent_evaluation_stays_out_of_epoch_time() {
    // Two full epochs of 20 steps, evaluating 320 test samples every 4 steps: evaluation
    // takes longer than training (measured 1.5–1.8×), so a clock that included it would be
    // far off.
    const STEPS: usize = 20;
    let (train_split, test_split) = open_synthetic("mnist", 7);
    let train_split: Arc<dyn Dataset> = Arc::new(Prefix { inner: train_split, len: STEPS * 32 });
    let config = TrainConfig {
        budget: Budget { epochs: Some(2), ..Budget::default() },
        eval_every_steps: Some(4),
        eval_samples: Some(320),
        ..small_config(1)
    };
    let report = train_network("small-cnn", train_split, test_split, &config);
    assert_eq!(report.epochs.len(), 2);
    for epoch in &report.epochs {
        let steps: Vec<_> = report.steps.iter().filter(|step| step.epoch == epoch.epoch).collect();
        assert_eq!(steps.len(), STEPS);
        let waits_and_steps: f64 = steps.iter().map(|step| step.wall_time_s()).sum();
        let evals: f64 = report
            .evaluations
            .iter()
            .filter(|eval| eval.after_step > epoch.epoch * STEPS && eval.after_step <= (epoch.epoch + 1) * STEPS)
            .map(|eval| eval.time_s)
            .sum();
        assert!(evals > 0.3 * waits_and_steps, "the test needs evaluation to weigh: {evals} vs {waits_and_steps}");
        // Bookkeeping between steps (metric reads, progress) is the only other cost.
        let slack = 0.1 * waits_and_steps + 0.05;
        assert!(
            (epoch.epoch_time_s - waits_and_steps).abs() < slack,
            "epoch {}: epoch time {} s, steps and waits {} s, evaluations {} s",
            epoch.epoch,
            epoch.epoch_time_s,
            waits_and_steps,
            evals
        );
        assert!((epoch.eval_time_s - evals).abs() < 1e-9, "{} vs {}", epoch.eval_time_s, evals);
        assert!((epoch.wall_samples_per_s.unwrap() - (STEPS * 32) as f64 / epoch.epoch_time_s).abs() < 1e-6);
    }
}

#[test]
fn reading_metrics_every_n_steps_records_the_same_values_as_every_step() {
    let every_step = train_small_cnn("mnist", &TrainConfig { metrics_every_steps: 1, ..small_config(17) });
    let every_seventh = train_small_cnn("mnist", &TrainConfig { metrics_every_steps: 7, ..small_config(17) });
    let losses = |report: &TrainReport| report.steps.iter().map(|step| step.loss).collect::<Vec<_>>();
    assert_eq!(losses(&every_step).len(), 17);
    assert_eq!(losses(&every_step), losses(&every_seventh));
    assert_eq!(every_step.epochs[0].train_loss, every_seventh.epochs[0].train_loss);
    assert_eq!(every_step.epochs[0].train_accuracy, every_seventh.epochs[0].train_accuracy);
    assert_eq!(every_step.final_accuracy(), every_seventh.final_accuracy());
}

#[test]
fn the_numerics_in_force_are_reported() {
    let numerics = stratlab_strategies::Numerics {
        cudnn_benchmark: false,
        matmul_precision: stratlab_strategies::MatmulPrecision::High,
        cudnn_tf32: false,
    };
    let report = train_small_cnn("mnist", &TrainConfig { numerics, ..small_config(3) });
    assert_eq!(report.numerics, numerics);
}

/// The first `len` samples of a data set: a short epoch for tests.
struct Prefix {
    inner: Arc<dyn Dataset>,
    len: usize,
}

impl Dataset for Prefix {
    fn info(&self) -> &'static stratlab_datasets::DatasetInfo {
        self.inner.info()
    }
    fn source(&self) -> stratlab_datasets::Source {
        self.inner.source()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn batch(&self, indices: &[usize]) -> Result<stratlab_datasets::Batch, stratlab_datasets::DataError> {
        self.inner.batch(indices)
    }
}

/// ImageNet and Highres have 1000 classes at 224 and 512 pixels: too large for the small
/// CNN, so a linear probe on 8×8 average-pooled images stands in as the small network.
#[test]
fn synthetic_large_image_data_sets_are_learnable_by_a_linear_probe() {
    use tch::nn::{self, Module, OptimizerConfig};
    let _turn = crate::common::training_turn();
    for dataset in ["imagenet", "highres"] {
        tch::manual_seed(0);
        let (train_split, test_split) = open_synthetic(dataset, 3);
        let store = nn::VarStore::new(tch::Device::Cpu);
        let probe = nn::linear(store.root(), 3 * 8 * 8, 1000, Default::default());
        let features = |images: &tch::Tensor| images.adaptive_avg_pool2d([8, 8]).flatten(1, -1);
        let mut optimizer = nn::Adam::default().build(&store, 1e-2).unwrap();
        // Generate each sample once (a highres image is 3×512×512: generating them is most of
        // the test's time) and train on its features. 600 samples, 10 passes: accuracy 0.43
        // on both sets (2000 samples and 5 passes gave 0.80 in three times as long).
        let train_indices: Vec<usize> = (0..600).collect();
        let pooled: Vec<(tch::Tensor, tch::Tensor)> = train_indices
            .chunks(100)
            .map(|chunk| {
                let batch = train_split.batch(chunk).unwrap();
                (features(&batch.images), batch.labels)
            })
            .collect();
        for _ in 0..10 {
            for (inputs, labels) in &pooled {
                let loss = probe.forward(inputs).cross_entropy_for_logits(labels);
                optimizer.backward_step(&loss);
            }
        }
        let test = test_split.batch(&(0..300).collect::<Vec<_>>()).unwrap();
        let predicted = probe.forward(&features(&test.images)).argmax(-1, false);
        let accuracy =
            f64::try_from(predicted.eq_tensor(&test.labels).to_kind(tch::Kind::Float).mean(tch::Kind::Float)).unwrap();
        assert!(accuracy > 0.01, "{dataset}: probe accuracy {accuracy} is not above chance 0.001");
    }
}
