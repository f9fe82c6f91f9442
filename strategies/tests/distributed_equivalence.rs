//! Without batch norm, data-parallel and parameter-server training on several processes
//! must give the weights single-device training gives on the same global batch (SPEC §5),
//! up to float rounding: 5 steps from the same seed, compared to 1e-5 relative.
//!
//! The ranks are child processes of this test binary (re-run with `--exact` on the child
//! entry point and the role in the environment), joined over loopback by c10d Gloo.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use stratlab_comm::{Backend, GroupOptions, Launch, ProcessGroup};
use stratlab_strategies::parameter_server::ServerPlacement;
use stratlab_strategies::{data_parallel, parameter_server, TrainContext};
use tch::Tensor;

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
        save_weights(&weights, &weights_path(Path::new(&std::env::var(OUT).unwrap()), 0));
    }
}

/// Runs `role` on `world_size` ranks; returns rank 0's weights (every rank holds them all).
fn rank0_weights(role: &str, world_size: usize, out: &Path) -> Vec<(String, Tensor)> {
    run_ranks("child_rank", role, world_size, out);
    load_weights(out, [0])
}

#[test]
fn data_parallel_on_two_processes_matches_single_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let got = rank0_weights("data-parallel", 2, dir.path());
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
    let got = rank0_weights("ps-colocated", 2, dir.path());
    assert_same_weights("parameter-server (colocated)", &got, &single_weights(2 * PER_RANK_BATCH));
}

#[test]
fn parameter_server_with_a_dedicated_server_rank_matches_single() {
    let dir = tempfile::tempdir().unwrap();
    // Two training ranks and the server: the global batch is two ranks' batches.
    let got = rank0_weights("ps-dedicated", 3, dir.path());
    assert_same_weights("parameter-server (dedicated)", &got, &single_weights(2 * PER_RANK_BATCH));
}
