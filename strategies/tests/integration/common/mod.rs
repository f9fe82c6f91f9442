//! What the equivalence tests of multi-process strategies share: the configuration, data
//! and network they train, a weight-collecting observer, child-process ranks and the
//! comparison with single-device training.
//!
//! They train in float64. In float32 the single-device reference and a strategy round
//! differently (libtorch picks its kernels, and so the order of a gradient's reduction, by
//! batch size and CPU): on an AVX-512/AMX Xeon the first layer's bias differed by 1.3e-4
//! relative, so a float32 tolerance passed or failed with the machine. In float64 those
//! reorderings move weights by ~1e-15, and [`TOLERANCE`] checks the algorithm itself.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use stratlab_comm::{free_port, Launch};
use stratlab_datasets::{open, DataCache, Dataset, DatasetSelector, OpenOptions, Split};
use stratlab_networks::{InputShape, NetworkSpec};
use stratlab_strategies::{
    single, Budget, DeviceChoice, Precision, TrainConfig, TrainContext, TrainObserver, TrainReport,
};
use tch::Tensor;

pub const ROLE: &str = "STRATLAB_EQUIVALENCE_ROLE";
pub const OUT: &str = "STRATLAB_EQUIVALENCE_OUT";
pub const PER_RANK_BATCH: usize = 16;
pub const STEPS: usize = 5;
/// Largest relative difference of a weight tensor (norm of the difference ÷ norm of the
/// reference) that counts as equal. Reordered float64 sums stay below ~1e-14 after 5 steps;
/// an update off by one part in a million moves weights by far more than this (tested).
pub const TOLERANCE: f64 = 1e-9;

pub fn config(batch_size: usize) -> TrainConfig {
    TrainConfig {
        batch_size,
        eval_batch_size: 500,
        budget: Budget { steps: Some(STEPS), ..Budget::default() },
        lr: 0.05,
        warmup_steps: 1,
        eval_samples: Some(200),
        seed: 11,
        device: DeviceChoice::Cpu,
        threads: 1,
        precision: Precision::Float64,
        ..TrainConfig::default()
    }
}

/// [`config`] in `precision`, for the steps that precision trains ([`steps_in`]). In
/// float16 the loss scale starts at 2¹⁰: from PyTorch's 2¹⁶ the second step's gradients
/// overflow on this network and data, and a skipped update would make a comparison about
/// skipping, not rounding (skipping has its own tests, from [`OVERFLOWING_SCALE`]). float16
/// also trains a [`FLOAT16_BATCH_DIVISOR`]th of `batch_size`.
pub fn config_in(precision: Precision, batch_size: usize) -> TrainConfig {
    let batch_size = if precision == Precision::Float16 { batch_size / FLOAT16_BATCH_DIVISOR } else { batch_size };
    let mut config = TrainConfig { precision, ..config(batch_size) };
    config.budget.steps = Some(steps_in(precision));
    config.loss_scale.initial = 1024.0;
    config
}

/// float16 equivalence runs train this fraction of the batch: libtorch computes a float16
/// convolution's weight gradient on a CPU in oneDNN's reference kernel (92 % of such a
/// test's time under `perf`), whose cost grows with the batch, while rounding shows at any
/// batch. Every batch the tests use stays divisible into its ranks and micro-batches.
pub const FLOAT16_BATCH_DIVISOR: usize = 4;

/// The steps an equivalence run trains in `precision`: [`STEPS`], but 2 in float16, whose
/// convolution backward libtorch runs in a generic kernel on a CPU (87 times float32's time
/// for a 32-to-64-channel 3×3 layer on a Xeon with AVX-512 FP16), and in bfloat16, which a
/// CPU without bfloat16 instructions emulates: 2 steps already carry an update's rounding
/// and the scale's state forward, and a rank computing outside autocast still lands as far
/// from single as float64 does.
pub fn steps_in(precision: Precision) -> usize {
    match precision {
        Precision::Float16 | Precision::Bfloat16 => 2,
        _ => STEPS,
    }
}

/// A float16 loss scale under which every backward overflows: the loss times it is finite
/// in float32, but the first gradient cast to float16 (largest 65504) is not.
pub const OVERFLOWING_SCALE: f64 = 1e30;

/// [`config`] in float16 from [`OVERFLOWING_SCALE`].
pub fn overflowing_float16(batch_size: usize) -> TrainConfig {
    let mut config = config_in(Precision::Float16, batch_size);
    config.loss_scale.initial = OVERFLOWING_SCALE;
    config
}

/// Every step `report` trained skipped its update, with the scale halving from
/// [`OVERFLOWING_SCALE`] (a dedicated parameter server's report trains no step).
pub fn assert_every_update_skipped(report: &TrainReport) {
    for (index, step) in report.steps.iter().enumerate() {
        let expected = OVERFLOWING_SCALE * 0.5f64.powi(index as i32);
        assert_eq!((step.loss_scale, step.skipped_update), (Some(expected), Some(true)), "step {index}");
    }
    assert_eq!(report.skipped_updates(), (!report.steps.is_empty()).then_some(report.steps.len() as i64));
}

pub fn data() -> (Arc<dyn Dataset>, Arc<dyn Dataset>) {
    let selector = DatasetSelector::synthetic("mnist").unwrap();
    let options = OpenOptions { seed: 11, allow_fetch: false };
    let cache = DataCache::from_env();
    (open(&selector, Split::Train, &cache, &options).unwrap(), open(&selector, Split::Test, &cache, &options).unwrap())
}

pub fn network(train: &Arc<dyn Dataset>) -> NetworkSpec {
    let info = train.info();
    let input = InputShape {
        channels: info.channels as i64,
        height: info.height as i64,
        width: info.width as i64,
        classes: info.classes as i64,
    };
    let spec = stratlab_networks::spec("small-cnn", &input).unwrap();
    assert!(!spec.has_batch_norm(), "the equivalence holds only without batch norm");
    spec
}

/// Keeps the final weights.
#[derive(Default)]
pub struct Weights(pub Vec<(String, Tensor)>);

impl TrainObserver for Weights {
    fn on_trained(&mut self, variables: &tch::nn::VarStore) {
        let mut named: Vec<(String, Tensor)> =
            variables.variables().into_iter().map(|(name, t)| (name, t.detach().copy())).collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        self.0 = named;
    }
}

/// This child rank's launch variables and its Gloo group with the other ranks (60 s timeout).
pub fn child_group() -> (Launch, stratlab_comm::ProcessGroup) {
    use stratlab_comm::{Backend, GroupOptions, ProcessGroup};
    let launch = Launch::from_env().unwrap();
    let options = GroupOptions::for_launch(&launch, Backend::Gloo, std::time::Duration::from_secs(60));
    let group = ProcessGroup::init(&launch, &options).unwrap();
    (launch, group)
}

/// Runs `role` on `world_size` child processes, each this test binary re-run on the ignored
/// entry point `child_test` (its full path, `module::name`) with the role and the output
/// folder `out` in its environment.
pub fn run_ranks(child_test: &str, role: &str, world_size: usize, out: &Path) {
    let port = free_port(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
    let children: Vec<_> = (0..world_size)
        .map(|rank| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", child_test, "--ignored", "--test-threads=1"])
                .envs(Launch::local_env(rank, world_size, IpAddr::V4(Ipv4Addr::LOCALHOST), port))
                .env(ROLE, role)
                .env(OUT, out)
                // Kept for the failure message: a passing rank's harness lines are noise.
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (rank, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "rank {rank} of {role} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Where rank `rank` saves its weights under `out`.
pub fn weights_path(out: &Path, rank: usize) -> PathBuf {
    out.join(format!("rank{rank}.pt"))
}

/// Saves `weights` (what a rank holds) for the parent.
pub fn save_weights(weights: &Weights, path: &Path) {
    Tensor::save_multi(&weights.0.iter().map(|(n, t)| (n.as_str(), t)).collect::<Vec<_>>(), path).unwrap();
}

/// The weights saved by `ranks` under `out`, merged by name (replicas hold the same names;
/// the first rank's copy is kept) and sorted.
pub fn load_weights(out: &Path, ranks: impl IntoIterator<Item = usize>) -> Vec<(String, Tensor)> {
    let mut merged: Vec<(String, Tensor)> = Vec::new();
    for rank in ranks {
        for (name, tensor) in Tensor::load_multi(weights_path(out, rank)).unwrap() {
            if !merged.iter().any(|(known, _)| *known == name) {
                merged.push((name, tensor));
            }
        }
    }
    merged.sort_by(|a, b| a.0.cmp(&b.0));
    merged
}

/// libtorch's seed and thread count are process-global: tests training in this process
/// take turns, or one test's initialisation would draw from another's random stream.
pub static IN_PROCESS_TRAINING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds this process's turn at libtorch's global state until dropped.
pub fn training_turn() -> std::sync::MutexGuard<'static, ()> {
    IN_PROCESS_TRAINING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn single_weights(global_batch: usize) -> Vec<(String, Tensor)> {
    single_weights_after(global_batch, STEPS)
}

/// Single-device weights after `steps` steps of `batch` samples.
pub fn single_weights_after(batch: usize, steps: usize) -> Vec<(String, Tensor)> {
    single_weights_with(TrainConfig { budget: Budget { steps: Some(steps), ..Budget::default() }, ..config(batch) })
}

/// Single-device weights trained under `config`.
pub fn single_weights_with(config: TrainConfig) -> Vec<(String, Tensor)> {
    single_run(config).0
}

/// Single-device training with `config`: its final weights and its report.
pub fn single_run(config: TrainConfig) -> (Vec<(String, Tensor)>, TrainReport) {
    let _turn = training_turn();
    let (train, test) = data();
    let spec = network(&train);
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    let report = single::train(&context, &mut weights).unwrap();
    (weights.0, report)
}

/// The largest relative difference between same-named tensors of `got` and `expected`, and
/// that tensor's name: ‖a − b‖ ÷ max(‖b‖, 1e-3), so a tensor near zero is not judged
/// relative to nothing.
pub fn largest_difference(got: &[(String, Tensor)], expected: &[(String, Tensor)]) -> (f64, String) {
    assert_eq!(got.len(), expected.len());
    assert!(!expected.is_empty(), "there are weights to compare");
    let initial_scale = 1e-3;
    let mut largest = (0.0, String::new());
    for ((name, a), (other, b)) in got.iter().zip(expected) {
        assert_eq!(name, other);
        assert_eq!(a.kind(), tch::Kind::Double, "{name}: the equivalence tests compare float64 weights");
        let difference = (a - b).norm().double_value(&[]);
        let relative = difference / b.norm().double_value(&[]).max(initial_scale);
        if relative.is_nan() || relative > largest.0 {
            largest = (relative, name.clone());
        }
    }
    largest
}

pub fn assert_same_weights(strategy: &str, got: &[(String, Tensor)], expected: &[(String, Tensor)]) {
    let (relative, name) = largest_difference(got, expected);
    eprintln!("{strategy}: largest relative difference {relative:.2e} ({name})");
    assert!(relative <= TOLERANCE, "{strategy}: {name} differs by {relative:.3e} relative (tolerance {TOLERANCE:.0e})");
}

/// The distance between two sets of same-named weights: the norm of every difference
/// together, in float64.
pub fn distance(a: &[(String, tch::Tensor)], b: &[(String, tch::Tensor)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((name, a), (other, b))| {
            assert_eq!(name, other);
            (a.to_kind(tch::Kind::Double) - b.to_kind(tch::Kind::Double))
                .square()
                .sum(tch::Kind::Double)
                .double_value(&[])
        })
        .sum::<f64>()
        .sqrt()
}
