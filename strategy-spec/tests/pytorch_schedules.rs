//! The interleaved and zero-bubble schedules' action lists against PyTorch's own: `fixtures/
//! pytorch_schedules.json` holds `torch.distributed.pipelining`'s order for every rank
//! of a grid of (ranks, stages per rank, micro-batches), dumped by
//! `fixtures/dump_pytorch_schedules.py`, and the cases it refuses.

use serde::Deserialize;
use stratlab_strategy_spec::schedule::pytorch::pytorch_order;
use stratlab_strategy_spec::{Action, Placement, Schedule};

#[derive(Deserialize)]
struct Fixture {
    torch: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    schedule: String,
    ranks: usize,
    virtual_stages: usize,
    micro_batches: usize,
    #[serde(default)]
    orders: Option<Vec<String>>,
    #[serde(default)]
    refused: Option<String>,
}

fn fixture() -> Fixture {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pytorch_schedules.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture parses")
}

/// Compares every case of the fixture's `name` schedule with `schedule` at its stages per
/// rank; returns how many were compared and how many both refused.
fn compare(name: &str, schedule: impl Fn(usize) -> Schedule) -> (usize, usize) {
    let fixture = fixture();
    assert!(fixture.torch.starts_with("2."), "dumped from PyTorch {}", fixture.torch);
    let (mut compared, mut refused) = (0, 0);
    for case in fixture.cases.iter().filter(|case| case.schedule == name) {
        let schedule = schedule(case.virtual_stages);
        let what = format!("p{} v{} m{}", case.ranks, case.virtual_stages, case.micro_batches);
        match (&case.orders, &case.refused) {
            (Some(orders), None) => {
                assert_eq!(schedule.check(case.ranks, case.micro_batches), Ok(()), "{what}");
                assert_eq!(orders.len(), case.ranks, "{what}");
                for (rank, order) in orders.iter().enumerate() {
                    let ours = schedule.actions(rank, case.ranks, case.micro_batches);
                    assert_eq!(&pytorch_order(&ours), order, "{what} rank {rank}");
                    let read: Vec<Action> = order.split(',').map(|item| Action::from_pytorch(item).unwrap()).collect();
                    assert_eq!(read, ours, "{what} rank {rank}");
                }
                compared += 1;
            }
            (None, Some(reason)) => {
                assert!(schedule.check(case.ranks, case.micro_batches).is_err(), "{what}: PyTorch refuses: {reason}");
                refused += 1;
            }
            _ => panic!("{what}: a case holds orders or a refusal"),
        }
    }
    (compared, refused)
}

#[test]
fn interleaved_1f1b_runs_pytorch_order_on_every_rank_and_refuses_what_it_refuses() {
    let (compared, refused) = compare("interleaved-1f1b", |virtual_stages| Schedule::Interleaved { virtual_stages });
    assert!(compared >= 60 && refused >= 5, "{compared} compared, {refused} refused");
}

#[test]
fn zero_bubble_loop_runs_zb1p_order_from_one_stage_per_rank_up() {
    let schedule = |virtual_stages| Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages };
    let (compared, refused) = compare("zero-bubble-loop", schedule);
    assert!(compared >= 100 && refused >= 10, "{compared} compared, {refused} refused");
}

#[test]
fn zero_bubble_v_runs_zbv_order_with_fewer_micro_batches_than_its_warm_up_too() {
    let schedule = |virtual_stages| Schedule::ZeroBubble { placement: Placement::V, virtual_stages };
    let (compared, refused) = compare("zero-bubble-v", schedule);
    assert!(compared >= 40 && refused == 0, "{compared} compared, {refused} refused");
}
