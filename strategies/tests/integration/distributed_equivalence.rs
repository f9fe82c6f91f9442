//! Without batch norm, data-parallel and parameter-server training on several processes
//! must give the weights single-device training gives on the same global batch,
//! up to rounding: 5 steps in float64 from the same seed, compared to [`TOLERANCE`].
//!
//! The ranks are child processes of this test binary (re-run with `--exact --ignored` on
//! the child entry point and the role in the environment), joined over loopback by c10d Gloo.

use std::path::Path;
use std::time::Duration;

use crate::common::*;
use stratlab_comm::{Backend, GroupOptions, Launch, ProcessGroup};
use stratlab_strategies::{data_parallel, parameter_server, MemoryFormat, Precision, TrainConfig, TrainContext};
use stratlab_strategy_spec::ServerPlacement;
use tch::Tensor;

/// The child side: one rank of the role named in the environment; rank 0 saves its weights.
/// Only the parent tests below start it, each rank in a process of its own.
#[test]
#[ignore = "entry point of the child ranks the equivalence tests start"]
fn child_rank() {
    let role = std::env::var(ROLE).expect("started by a parent test, with the role in the environment");
    let launch = Launch::from_env().unwrap();
    let group = ProcessGroup::init(&launch, &GroupOptions::for_launch(&launch, Backend::Gloo, Duration::from_secs(60)))
        .unwrap();
    let (train, test) = data();
    let spec = network(&train);
    let mut config = config(PER_RANK_BATCH);
    if role.ends_with("+wall-time") {
        // A wall-time budget that never runs out next to the step budget.
        config.budget.seconds = Some(3600.0);
    }
    let role = match role.strip_suffix("+channels-last") {
        Some(role) => {
            config.memory_format = MemoryFormat::ChannelsLast;
            role.to_owned()
        }
        None => role,
    };
    let role = match role.strip_suffix("+bf16") {
        Some(role) => {
            config.precision = Precision::Bfloat16;
            role.to_owned()
        }
        None => role,
    };
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    let report = match role.as_str() {
        "data-parallel" => data_parallel::train(&context, &group, 1 << 20, &mut weights),
        "ps-colocated" | "ps-colocated+wall-time" => {
            parameter_server::train(&context, &group, ServerPlacement::Colocated, &mut weights)
        }
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
    run_ranks("distributed_equivalence::child_rank", role, world_size, out);
    load_weights(out, [0])
}

#[test]
fn data_parallel_on_two_processes_matches_single_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let got = rank0_weights("data-parallel", 2, dir.path());
    let expected = single_weights(2 * PER_RANK_BATCH);
    assert_same_weights("data-parallel", &got, &expected);
    // And the comparison can fail: averaging over one rank's batch instead of the global one.
    let one_rank_only = single_weights(PER_RANK_BATCH);
    assert!(largest_difference(&got, &one_rank_only).0 > 1e-3, "the check must distinguish a different batch");
}

#[test]
fn an_update_off_by_one_part_in_a_million_fails_the_comparison() {
    // A gradient average that is wrong by a factor of 1 + 1e-6 (a divisor off by a hair, a
    // dropped micro-batch in a million) scales every update the way this learning rate does.
    let expected = single_weights(2 * PER_RANK_BATCH);
    let nudged = single_weights_with(TrainConfig { lr: config(0).lr * (1.0 + 1e-6), ..config(2 * PER_RANK_BATCH) });
    let (relative, name) = largest_difference(&nudged, &expected);
    eprintln!("learning rate × (1 + 1e-6): largest relative difference {relative:.2e} ({name})");
    assert!(relative > 100.0 * TOLERANCE, "{name} moved by only {relative:.3e}: the tolerance would hide it");
    // While training the same thing twice is exact to the last bit.
    assert_eq!(largest_difference(&single_weights(2 * PER_RANK_BATCH), &expected).0, 0.0);
}

#[test]
fn on_channels_last_tensors_data_parallel_and_the_parameter_server_match_contiguous_single() {
    // The weights' layout changes the order of the convolutions' sums only: float64 keeps
    // that below the tolerance, while a weight broadcast or a gradient packed in memory
    // order instead of logical order would scramble it far past.
    let expected = single_weights(2 * PER_RANK_BATCH);
    for role in ["data-parallel+channels-last", "ps-colocated+channels-last"] {
        let dir = tempfile::tempdir().unwrap();
        assert_same_weights(role, &rank0_weights(role, 2, dir.path()), &expected);
    }
}

#[test]
fn in_bfloat16_data_parallel_and_the_parameter_server_land_as_near_single_as_bfloat16_lands_from_exact() {
    // Two ranks' half batches change how bfloat16 products are summed, so neither can equal
    // single-device bfloat16 training on the global batch; each must land well inside the
    // distance bfloat16 rounding puts that from the exact (float64) weights. A rank
    // computing outside autocast lands about 1.0 of it (where float64 training lands), and
    // gradients averaged wrongly far past it.
    let exact = single_weights(2 * PER_RANK_BATCH);
    let single = single_weights_with(TrainConfig { precision: Precision::Bfloat16, ..config(2 * PER_RANK_BATCH) });
    let rounding = distance(&single, &exact);
    assert!(rounding > 0.0, "single-device bfloat16 training left float64");
    for role in ["data-parallel+bf16", "ps-colocated+bf16"] {
        let dir = tempfile::tempdir().unwrap();
        let apart = distance(&rank0_weights(role, 2, dir.path()), &single);
        eprintln!("{role}: {:.2} × single's rounding from exact", apart / rounding);
        assert!(apart < 0.4 * rounding, "{role} lands {apart:.3e} from single, rounding {rounding:.3e}");
    }
}

#[test]
fn parameter_server_colocated_on_two_processes_matches_single() {
    let dir = tempfile::tempdir().unwrap();
    let got = rank0_weights("ps-colocated", 2, dir.path());
    assert_same_weights("parameter-server (colocated)", &got, &single_weights(2 * PER_RANK_BATCH));
}

#[test]
fn parameter_server_with_a_wall_time_budget_too_stops_at_its_step_budget() {
    // The child asserts rank 0 ran exactly STEPS steps; it once ran one more, because the
    // reached step budget waited for the server's wall-time verdict a round later.
    let dir = tempfile::tempdir().unwrap();
    let got = rank0_weights("ps-colocated+wall-time", 2, dir.path());
    assert_same_weights("parameter-server (colocated, wall-time budget)", &got, &single_weights(2 * PER_RANK_BATCH));
}

#[test]
fn parameter_server_with_a_dedicated_server_rank_matches_single() {
    let dir = tempfile::tempdir().unwrap();
    // Two training ranks and the server: the global batch is two ranks' batches.
    let got = rank0_weights("ps-dedicated", 3, dir.path());
    assert_same_weights("parameter-server (dedicated)", &got, &single_weights(2 * PER_RANK_BATCH));
}
