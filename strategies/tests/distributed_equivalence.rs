//! Without batch norm, data-parallel and parameter-server training on several processes
//! must give the weights single-device training gives on the same global batch (SPEC §5),
//! up to float rounding: 5 steps from the same seed, compared to 1e-5 relative.
//!
//! The ranks are child processes of this test binary (re-run with `--exact` on the child
//! entry point and the role in the environment), joined over loopback by c10d Gloo.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use stratlab_comm::{free_port, Backend, GroupOptions, Launch, ProcessGroup};
use stratlab_datasets::{open, DataCache, Dataset, DatasetSelector, OpenOptions, Split};
use stratlab_networks::{InputShape, NetworkSpec};
use stratlab_strategies::parameter_server::ServerPlacement;
use stratlab_strategies::{
    data_parallel, parameter_server, single, Budget, DeviceChoice, TrainConfig, TrainContext, TrainObserver,
};
use tch::Tensor;

const ROLE: &str = "STRATLAB_EQUIVALENCE_ROLE";
const OUT: &str = "STRATLAB_EQUIVALENCE_OUT";
const PER_RANK_BATCH: usize = 16;
const STEPS: usize = 5;

fn config(batch_size: usize) -> TrainConfig {
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
        ..TrainConfig::default()
    }
}

fn data() -> (Arc<dyn Dataset>, Arc<dyn Dataset>) {
    let selector = DatasetSelector::synthetic("mnist").unwrap();
    let options = OpenOptions { seed: 11, allow_fetch: false };
    let cache = DataCache::from_env();
    (open(&selector, Split::Train, &cache, &options).unwrap(), open(&selector, Split::Test, &cache, &options).unwrap())
}

fn network(train: &Arc<dyn Dataset>) -> NetworkSpec {
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
struct Weights(Vec<(String, Tensor)>);

impl TrainObserver for Weights {
    fn on_trained(&mut self, variables: &tch::nn::VarStore) {
        let mut named: Vec<(String, Tensor)> =
            variables.variables().into_iter().map(|(name, t)| (name, t.detach().copy())).collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        self.0 = named;
    }
}

/// The child side: one rank of the role named in the environment; rank 0 saves its weights.
#[test]
fn child_rank() {
    let Ok(role) = std::env::var(ROLE) else {
        return; // only meaningful when started by a parent test below
    };
    let launch = Launch::from_env().unwrap();
    let group = ProcessGroup::init(&launch, &GroupOptions::for_launch(&launch, Backend::Gloo, Duration::from_secs(60)))
        .unwrap();
    let (train, test) = data();
    let spec = network(&train);
    let config = config(PER_RANK_BATCH);
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    let report = match role.as_str() {
        "data-parallel" => data_parallel::train(&context, &group, 1 << 20, &mut weights),
        "ps-colocated" => parameter_server::train(&context, &group, ServerPlacement::Colocated, &mut weights),
        "ps-dedicated" => parameter_server::train(&context, &group, ServerPlacement::Dedicated, &mut weights),
        other => panic!("unknown role {other}"),
    }
    .unwrap();
    if launch.rank == 0 {
        assert_eq!(report.steps.len(), STEPS);
        let out = std::env::var(OUT).unwrap();
        Tensor::save_multi(&weights.0.iter().map(|(n, t)| (n.as_str(), t)).collect::<Vec<_>>(), out).unwrap();
    }
}

/// Runs `role` on `world_size` child processes; returns rank 0's weights.
fn run_ranks(role: &str, world_size: usize, out: &Path) -> Vec<(String, Tensor)> {
    let port = free_port(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
    let children: Vec<_> = (0..world_size)
        .map(|rank| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child_rank", "--test-threads=1"])
                .envs(Launch::local_env(rank, world_size, IpAddr::V4(Ipv4Addr::LOCALHOST), port))
                .env(ROLE, role)
                .env(OUT, out)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a {role} rank failed");
    }
    let mut named = Tensor::load_multi(out).unwrap();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}

/// libtorch's seed is process-global: tests training in this process take turns, or one
/// test's initialisation would draw from another's random stream.
static IN_PROCESS_TRAINING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn single_weights(global_batch: usize) -> Vec<(String, Tensor)> {
    let _turn = IN_PROCESS_TRAINING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (train, test) = data();
    let spec = network(&train);
    let config = config(global_batch);
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    single::train(&context, &mut weights).unwrap();
    weights.0
}

fn assert_same_weights(strategy: &str, got: &[(String, Tensor)], expected: &[(String, Tensor)]) {
    assert_eq!(got.len(), expected.len());
    let initial_scale = 1e-3;
    for ((name, a), (other, b)) in got.iter().zip(expected) {
        assert_eq!(name, other);
        let difference = (a - b).norm().double_value(&[]);
        let scale = b.norm().double_value(&[]).max(initial_scale);
        assert!(difference / scale <= 1e-5, "{strategy}: {name} differs by {:.3e} relative", difference / scale);
    }
}

#[test]
fn data_parallel_on_two_processes_matches_single_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let got = run_ranks("data-parallel", 2, &dir.path().join("dp.pt"));
    let expected = single_weights(2 * PER_RANK_BATCH);
    assert_same_weights("data-parallel", &got, &expected);
    // And the comparison can fail: the weights moved away from one step's worth of training.
    let one_step_off = single_weights(PER_RANK_BATCH);
    let moved = got.iter().zip(&one_step_off).any(|((_, a), (_, b))| (a - b).norm().double_value(&[]) > 1e-3);
    assert!(moved, "the check must distinguish a different batch");
}

#[test]
fn parameter_server_colocated_on_two_processes_matches_single() {
    let dir = tempfile::tempdir().unwrap();
    let got = run_ranks("ps-colocated", 2, &dir.path().join("ps.pt"));
    assert_same_weights("parameter-server (colocated)", &got, &single_weights(2 * PER_RANK_BATCH));
}

#[test]
fn parameter_server_with_a_dedicated_server_rank_matches_single() {
    let dir = tempfile::tempdir().unwrap();
    // Two training ranks and the server: the global batch is two ranks' batches.
    let got = run_ranks("ps-dedicated", 3, &dir.path().join("ps.pt"));
    assert_same_weights("parameter-server (dedicated)", &got, &single_weights(2 * PER_RANK_BATCH));
}
