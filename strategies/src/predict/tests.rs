//! What the workers sharing one machine cost each other, on hand-made profiles.

use stratlab_networks::{spec, InputShape};
use stratlab_perf_model::{Contention, Link};
use stratlab_strategy_spec::{Balance, Parameters, Strategy, StrategyKind};

use super::*;
use crate::profile::StageProfile;

/// Every stage of small-cnn at 16 samples: 10 ms forward, 20 ms backward, 1 MB of
/// parameters, no update time.
fn profile(spec: &NetworkSpec, contention: Option<Contention>) -> NetworkProfile {
    let stages = spec
        .stages
        .iter()
        .map(|stage| StageProfile {
            name: stage.name.clone(),
            forward_s: vec![(16, 0.010)],
            backward_s: vec![(16, 0.020)],
            parameter_bytes: vec![1_000_000],
            output_bytes_per_sample: 1000,
            kept_bytes: vec![(16, 1e5)],
            transient_bytes: vec![(16, 1e4)],
        })
        .collect();
    NetworkProfile {
        stages,
        optimizer_s: 0.0,
        flatten_s: 0.0,
        contention,
        training_step_s: Vec::new(),
        training_step_peak_bytes: Vec::new(),
    }
}

fn question<'a>(
    strategy: &'a Strategy,
    spec: &'a NetworkSpec,
    profile: &'a NetworkProfile,
    link: &'a Link,
    host_copy_bandwidth: Option<f64>,
) -> StepQuestion<'a> {
    StepQuestion {
        strategy,
        workers: 2,
        batch: 16,
        spec,
        profile,
        link: Some(link),
        all_reduce: None,
        momentum: 0.0,
        prefetch: 0,
        threads: 1,
        cores: 2,
        host_copy_bandwidth,
    }
}

#[test]
fn transfers_the_host_copies_take_core_time_from_workers_that_fill_the_cores() {
    let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
    let profile = profile(&spec, None);
    let stages = spec.stages.len() as f64;
    let strategy = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    // A link so fast the all-reduce is all but free: the step is the compute.
    let link = Link::new(1e15, 0.0);
    let compute_s = stages * 0.030;
    let apart = question(&strategy, &spec, &profile, &link, None).predict();
    assert_eq!(apart.core_sharing, 1.0, "two 1-thread workers on two cores");
    // The ring all-reduce of 2 workers sends every gradient byte once each way: 2 × G bytes
    // between workers, each copied at both ends, at 2 × G × 100 bytes per second: 1 % of a
    // second per step of core time over two cores.
    let gradients = stages * 1e6;
    let shared = question(&strategy, &spec, &profile, &link, Some(2.0 * gradients * 100.0)).predict();
    let copying_s = 2.0 * 2.0 * gradients / (2.0 * gradients * 100.0);
    let expected = (2.0 + copying_s / compute_s) / 2.0;
    assert!((shared.core_sharing - expected).abs() < 1e-6, "{} vs {expected}", shared.core_sharing);
    assert!(shared.model_s().unwrap() > apart.model_s().unwrap());
}

#[test]
fn contention_slows_workers_that_compute_at_once_not_those_that_take_turns() {
    let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
    let contention = Contention { copies: 2, ratio: vec![(16, 1.5)] };
    let (alone, contended) = (profile(&spec, None), profile(&spec, Some(contention)));
    let link = Link::new(1e15, 0.0);
    let data_parallel = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    let step = |strategy: &Strategy, profile: &NetworkProfile| {
        question(strategy, &spec, profile, &link, None).predict().model_s().unwrap()
    };
    let ratio = step(&data_parallel, &contended) / step(&data_parallel, &alone);
    assert!((ratio - 1.5).abs() < 1e-6, "every data-parallel worker computes at once: {ratio}");
    let parameters = Parameters { balance: Some(Balance::Parameters), ..Parameters::default() };
    let model_parallel = Strategy::new(StrategyKind::ModelParallel, parameters).unwrap();
    let ratio = step(&model_parallel, &contended) / step(&model_parallel, &alone);
    assert!((ratio - 1.0).abs() < 1e-6, "model-parallel's stages take turns: {ratio}");
}

#[test]
fn single_is_its_measured_training_step_where_there_is_one_and_its_stages_elsewhere() {
    let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
    let link = Link::new(1e15, 0.0);
    let single = Strategy::new(StrategyKind::Single, Parameters::default()).unwrap();
    let stages_only = profile(&spec, None);
    let summed = question(&single, &spec, &stages_only, &link, None).predict();
    let stages_s = spec.stages.len() as f64 * 0.030;
    assert!((summed.model_s().unwrap() - stages_s).abs() < 1e-12);
    // Steps trained at 16 samples (the question's batch) answer for it, in both predictors.
    // So does their measured peak for its memory, whatever the stages' counts say.
    let stepped = NetworkProfile {
        training_step_s: vec![(8, 0.5), (16, 0.25)],
        training_step_peak_bytes: vec![(16, 5e7)],
        ..profile(&spec, None)
    };
    let measured = question(&single, &spec, &stepped, &link, None).predict();
    assert_eq!(measured.model_s().unwrap(), 0.25);
    assert_eq!(measured.thesis_s.unwrap(), 0.25);
    let memory = measured.memory.unwrap();
    assert!((memory.total_bytes() - 5e7).abs() < 1.0, "{memory:?}");
    assert!(memory.transient_bytes > 0.0 && memory.weights_bytes > 0.0, "{memory:?}");
    assert_ne!(summed.memory.unwrap().total_bytes(), memory.total_bytes());
    // Data parallelism still times its stages: the steps say nothing of their split.
    let data_parallel = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    let step = |profile: &NetworkProfile| question(&data_parallel, &spec, profile, &link, None).predict().model_s();
    assert_eq!(step(&stepped).unwrap(), step(&stages_only).unwrap());
}

#[test]
fn the_parameter_server_pays_its_whole_model_copies() {
    let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
    let link = Link::new(1e15, 0.0);
    let server = Strategy::new(StrategyKind::ParameterServer, Parameters::default()).unwrap();
    let step = |flatten_s: f64| {
        let profile = NetworkProfile { flatten_s, ..profile(&spec, None) };
        question(&server, &spec, &profile, &link, None).predict().model.unwrap()
    };
    let (free, copying) = (step(0.0), step(0.01));
    // Two workers, the server colocated: one remote worker, seven copies in the round.
    assert!((copying.exposed_comm_s - free.exposed_comm_s - 0.07).abs() < 1e-9, "{copying:?} vs {free:?}");
}

/// What the colocated server's round holds, as `parameter_server` allocates it: every
/// remote worker's gradients received into buffers allocated up front beside its own
/// flattened ones, then (the averaging division consuming the sum) the mean and the
/// weights it sends. With activations far smaller than the weights, that is the peak.
#[test]
fn a_colocated_server_holds_every_workers_gradients_at_once_then_two_buffers() {
    let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
    let profile = profile(&spec, None);
    let link = Link::new(1e15, 0.0);
    let server = Strategy::new(StrategyKind::ParameterServer, Parameters::default()).unwrap();
    let parameter_bytes = spec.stages.len() as f64 * 1e6;
    let buffers_over_parameters = |workers: usize| {
        let question = StepQuestion { workers, ..question(&server, &spec, &profile, &link, None) };
        let memory = question.predict().memory.unwrap();
        // The loader's batches (two at a time without prefetch) are the rest.
        let loader_bytes = 2.0 * 16.0 * (28.0 * 28.0 * 4.0 + 8.0);
        (memory.activations_bytes, (memory.buffers_bytes - loader_bytes) / parameter_bytes)
    };
    for (workers, buffers) in [(2, 2.0), (4, 4.0)] {
        let (activations, measured) = buffers_over_parameters(workers);
        assert_eq!(activations, 0.0, "after the backward no activation is alive");
        assert!((measured - buffers).abs() < 1e-9, "{workers} workers: {measured} weights' worth");
    }
}
