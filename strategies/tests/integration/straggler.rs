//! A straggler is slowed where its compute is, and nowhere else: with rank 1 of two slowed
//! 3×, data parallelism and the parameter server still give single-device training's
//! weights (a straggler changes time, not arithmetic); rank 1 follows every forward and
//! backward with a wait of at least twice its own time, recorded as its own event kind;
//! rank 0 waits for nothing of its own. Judged by counts, order and lower bounds (a sleep
//! never ends early), not by wall-clock rates.

use std::path::Path;

use crate::common::*;
use stratlab_strategies::timeline::{EventKind, TimelineEvent};
use stratlab_strategies::{data_parallel, parameter_server, TrainContext};
use stratlab_strategy_spec::{ServerPlacement, Straggler};

const SLOWDOWN: f64 = 3.0;

/// The child side: one rank of the role named in the environment, with rank 1 slowed;
/// rank 0 saves its weights, every rank its events.
#[test]
#[ignore = "entry point of the child ranks the straggler tests start"]
fn child_rank() {
    let role = std::env::var(ROLE).expect("started by a parent test, with the role in the environment");
    let (launch, group) = child_group();
    let (train, test) = data();
    let spec = network(&train);
    let mut config = config(PER_RANK_BATCH);
    config.straggler = Some(Straggler { ranks: vec![1], slowdown: SLOWDOWN, jitter: 0.0 });
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    let report = match role.as_str() {
        "data-parallel" => data_parallel::train(&context, &group, 1 << 20, &mut weights),
        "ps-colocated" => parameter_server::train(&context, &group, ServerPlacement::Colocated.into(), &mut weights),
        other => panic!("unknown role {other}"),
    }
    .unwrap();
    let out = std::env::var(OUT).unwrap();
    if launch.rank == 0 {
        save_weights(&weights, &weights_path(Path::new(&out), 0));
    }
    let events = serde_json::to_vec(&report.events).unwrap();
    std::fs::write(Path::new(&out).join(format!("events{}.json", launch.rank)), events).unwrap();
}

fn events(out: &Path, rank: usize) -> Vec<TimelineEvent> {
    serde_json::from_slice(&std::fs::read(out.join(format!("events{rank}.json"))).unwrap()).unwrap()
}

fn is_compute(kind: EventKind) -> bool {
    matches!(kind, EventKind::Forward | EventKind::Backward | EventKind::Recompute)
}

#[test]
fn a_slowed_rank_waits_after_its_own_compute_and_trains_the_same_weights() {
    let expected = single_weights(2 * PER_RANK_BATCH);
    for role in ["data-parallel", "ps-colocated"] {
        let dir = tempfile::tempdir().unwrap();
        run_ranks("straggler::child_rank", role, 2, dir.path());
        assert_same_weights(role, &load_weights(dir.path(), [0]), &expected);

        let fast = events(dir.path(), 0);
        assert!(fast.iter().any(|event| is_compute(event.kind)), "{role}: rank 0 computed");
        assert!(fast.iter().all(|event| event.kind != EventKind::StragglerWait), "{role}: rank 0 is not slowed");

        let slow = events(dir.path(), 1);
        let computed: Vec<usize> = (0..slow.len()).filter(|&i| is_compute(slow[i].kind)).collect();
        let waits = slow.iter().filter(|event| event.kind == EventKind::StragglerWait).count();
        assert!(!computed.is_empty(), "{role}: rank 1 computed");
        assert_eq!(waits, computed.len(), "{role}: one wait per forward and backward of rank 1");
        for &i in &computed {
            let (pass, wait) = (&slow[i], &slow[i + 1]);
            assert_eq!(wait.kind, EventKind::StragglerWait, "{role}: {pass:?} is followed by its wait");
            assert_eq!((wait.step, &wait.name), (pass.step, &pass.name), "{role}: the wait names its pass");
            assert!(wait.start_ns >= pass.end_ns, "{role}: the wait starts after its pass");
            let (pass_ns, wait_ns) = (pass.end_ns - pass.start_ns, wait.end_ns - wait.start_ns);
            let least = ((SLOWDOWN - 1.0) * pass_ns as f64) as i64;
            assert!(wait_ns >= least, "{role}: a {pass_ns} ns pass waited {wait_ns} ns, under {least}");
        }
        // The waits are not communication: the step breakdown counts them apart.
        assert!(!EventKind::StragglerWait.is_communication());
    }
}
