//! The parameter server's per-worker modes, judged by counts, order and arithmetic, not by
//! wall-clock rates: `bounded` with k = 0 and plain SGD lands on synchronous training's
//! weights (each round's gradients applied one by one at lr ÷ N, all computed on the same
//! weights); `async` with one worker is single-device training, momentum included; with
//! rank 1 slowed, `async` applies the fast worker's gradients without waiting for it and
//! `bounded` keeps every worker within k pushes of the slowest; every gradient is applied
//! exactly once, or with a backup worker applied or dropped exactly once.

use std::path::Path;

use crate::common::*;
use stratlab_results::GradientRecord;
use stratlab_strategies::{parameter_server, Budget, TrainConfig, TrainContext};
use stratlab_strategy_spec::{Consistency, ServerPlacement, ServerSettings, Straggler};

/// Rank 1's compute, slowed this much, makes the fast worker run ahead.
const SLOWDOWN: f64 = 4.0;

fn plain_sgd(batch: usize) -> TrainConfig {
    TrainConfig { momentum: 0.0, weight_decay: 0.0, ..config(batch) }
}

/// A dedicated server behind the workers, in `consistency`.
fn dedicated(consistency: Consistency) -> ServerSettings {
    ServerSettings { placement: ServerPlacement::Dedicated, consistency, lr_per_update: None }
}

/// The child side: the last rank serves; rank 0 saves its final weights, the server what
/// it was pushed.
#[test]
#[ignore = "entry point of the child ranks the asynchrony tests start"]
fn child_rank() {
    let role = std::env::var(ROLE).expect("started by a parent test, with the role in the environment");
    let (launch, group) = child_group();
    let (train, test) = data();
    let spec = network(&train);
    let slowed = Some(Straggler { ranks: vec![1], slowdown: SLOWDOWN, jitter: 0.0 });
    let (config, settings) = match role.as_str() {
        "bounded0" => (plain_sgd(PER_RANK_BATCH), dedicated(Consistency::PerGradient { staleness: Some(0) })),
        "async-one-worker" => (config(PER_RANK_BATCH), dedicated(Consistency::PerGradient { staleness: None })),
        "async-slowed" => (
            TrainConfig { straggler: slowed, ..config(PER_RANK_BATCH) },
            dedicated(Consistency::PerGradient { staleness: None }),
        ),
        "bounded1-slowed" => (
            TrainConfig { straggler: slowed, ..config(PER_RANK_BATCH) },
            dedicated(Consistency::PerGradient { staleness: Some(1) }),
        ),
        "backup1-slowed" => (
            TrainConfig { straggler: slowed, ..config(PER_RANK_BATCH) },
            dedicated(Consistency::Sync { backup_workers: 1 }),
        ),
        "async-colocated-slowed" => (
            TrainConfig { straggler: slowed, ..config(PER_RANK_BATCH) },
            ServerSettings {
                placement: ServerPlacement::Colocated,
                consistency: Consistency::PerGradient { staleness: None },
                lr_per_update: None,
            },
        ),
        other => panic!("unknown role {other}"),
    };
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    let report = parameter_server::train(&context, &group, settings, &mut weights).unwrap();
    let out = std::env::var(OUT).unwrap();
    if launch.rank == 0 {
        save_weights(&weights, &weights_path(Path::new(&out), 0));
    }
    if !report.gradients.is_empty() {
        std::fs::write(Path::new(&out).join("gradients.json"), serde_json::to_vec(&report.gradients).unwrap()).unwrap();
    }
    let steps = serde_json::to_vec(&report.steps.len()).unwrap();
    std::fs::write(Path::new(&out).join(format!("steps{}.json", launch.rank)), steps).unwrap();
}

fn run(role: &str, world_size: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    run_ranks("asynchrony::child_rank", role, world_size, dir.path());
    dir
}

fn gradients(out: &Path) -> Vec<GradientRecord> {
    serde_json::from_slice(&std::fs::read(out.join("gradients.json")).expect("the server recorded its gradients"))
        .unwrap()
}

fn steps(out: &Path, rank: usize) -> usize {
    serde_json::from_slice(&std::fs::read(out.join(format!("steps{rank}.json"))).unwrap()).unwrap()
}

/// Each worker's pushes and how far the one arriving ran ahead of the slowest worker still
/// training (one that has pushed all `steps` has stopped), at every arrival, in order.
fn leads(records: &[GradientRecord], workers: &[u32], steps: usize) -> Vec<u64> {
    let mut pushes = vec![0u64; workers.len()];
    records
        .iter()
        .map(|record| {
            let index = workers.iter().position(|&rank| rank == record.worker).expect("a training rank");
            pushes[index] += 1;
            let slowest = pushes.iter().copied().filter(|&count| count < steps as u64).min();
            slowest.map_or(0, |slowest| pushes[index].saturating_sub(slowest))
        })
        .collect()
}

/// Every worker's `STEPS` gradients are recorded once, in the order they arrived.
fn assert_each_pushed_gradient_recorded_once(role: &str, records: &[GradientRecord], workers: &[u32]) {
    for &rank in workers {
        let mine = records.iter().filter(|record| record.worker == rank).count();
        assert_eq!(mine, STEPS, "{role}: rank {rank} pushed {STEPS} gradients");
    }
    assert_eq!(records.len(), STEPS * workers.len(), "{role}: no other gradient recorded");
    assert!(records.windows(2).all(|pair| pair[0].time_s <= pair[1].time_s), "{role}: in arrival order");
}

#[test]
fn bounded_with_no_staleness_and_plain_sgd_is_synchronous_training() {
    let dir = run("bounded0", 3);
    let expected = single_weights_with(TrainConfig {
        budget: Budget { steps: Some(STEPS), ..Budget::default() },
        ..plain_sgd(2 * PER_RANK_BATCH)
    });
    assert_same_weights("bounded k=0", &load_weights(dir.path(), [0]), &expected);
    let records = gradients(dir.path());
    assert_each_pushed_gradient_recorded_once("bounded k=0", &records, &[0, 1]);
    // Applied one by one: the first of each round on the round's weights, the second one
    // update later.
    let staleness: Vec<u64> = records.iter().map(GradientRecord::staleness).collect();
    assert_eq!(staleness, [0, 1].repeat(STEPS), "each round's second gradient is one update stale");
    assert!(records.iter().all(|record| record.applied));
}

#[test]
fn async_with_one_worker_is_single_device_training_momentum_included() {
    let dir = run("async-one-worker", 2);
    assert_same_weights("async ×1", &load_weights(dir.path(), [0]), &single_weights(PER_RANK_BATCH));
    let records = gradients(dir.path());
    assert_each_pushed_gradient_recorded_once("async ×1", &records, &[0]);
    assert!(records.iter().all(|record| record.staleness() == 0), "one worker is never stale");
}

#[test]
fn with_a_slowed_worker_async_does_not_wait_for_it_and_bounded_keeps_it_within_k() {
    let dir = run("async-slowed", 3);
    let records = gradients(dir.path());
    assert_each_pushed_gradient_recorded_once("async", &records, &[0, 1]);
    let first_slow = records.iter().position(|record| record.worker == 1).unwrap();
    assert!(
        first_slow >= 2,
        "async: rank 0 pushed {first_slow} gradients before slowed rank 1's first; it waited for it"
    );
    assert!(*leads(&records, &[0, 1], STEPS).iter().max().unwrap() > 2, "async: rank 0 ran more than 2 ahead");

    let dir = run("bounded1-slowed", 3);
    let records = gradients(dir.path());
    assert_each_pushed_gradient_recorded_once("bounded k=1", &records, &[0, 1]);
    let leads = leads(&records, &[0, 1], STEPS);
    // Released only while at most k ahead, a worker arrives at most k + 1 ahead; the
    // straggler makes it get there.
    assert_eq!(leads.iter().max(), Some(&2), "bounded k=1: leads at arrival {leads:?}");

    let dir = run("async-colocated-slowed", 2);
    let records = gradients(dir.path());
    assert_each_pushed_gradient_recorded_once("async colocated", &records, &[0, 1]);
    assert!(
        records.iter().position(|record| record.worker == 1).unwrap() >= 2,
        "async colocated: the server's own rank trained on without waiting for slowed rank 1"
    );
}

#[test]
fn with_a_backup_worker_every_gradient_is_applied_or_dropped_once() {
    let dir = run("backup1-slowed", 3);
    let records = gradients(dir.path());
    // Each worker trains its own budget: the fast one is never held for the slowed one.
    let pushed = steps(dir.path(), 0) + steps(dir.path(), 1);
    assert_eq!(records.len(), pushed, "every pushed gradient recorded once");
    let applied: Vec<&GradientRecord> = records.iter().filter(|record| record.applied).collect();
    let dropped = records.len() - applied.len();
    assert!(dropped >= 1, "the slowed worker's late gradients are dropped: {records:?}");
    // N − b = 1 gradient per round: the applied ones went into updates 1, 2, 3, … in turn.
    let versions: Vec<u64> = applied.iter().map(|record| record.arrived_version).collect();
    assert_eq!(versions, (0..applied.len() as u64).collect::<Vec<_>>());
    assert!(applied.iter().all(|record| record.staleness() == 0), "a round applies fresh gradients only");
    assert!(records.iter().filter(|record| !record.applied).all(|record| record.staleness() > 0));
}
