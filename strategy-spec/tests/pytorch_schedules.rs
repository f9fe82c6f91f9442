//! The interleaved schedule's action lists against PyTorch's own: `fixtures/
//! pytorch_schedules.json` holds `torch.distributed.pipelining`'s order for every rank
//! of a grid of (ranks, stages per rank, micro-batches), dumped by
//! `fixtures/dump_pytorch_schedules.py`, and the cases it refuses.

use serde::Deserialize;
use stratlab_strategy_spec::schedule::pytorch::pytorch_order;
use stratlab_strategy_spec::{Action, Schedule};

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

#[test]
fn interleaved_1f1b_runs_pytorch_order_on_every_rank_and_refuses_what_it_refuses() {
    let fixture = fixture();
    assert!(fixture.torch.starts_with("2."), "dumped from PyTorch {}", fixture.torch);
    let (mut compared, mut refused) = (0, 0);
    for case in fixture.cases.iter().filter(|case| case.schedule == "interleaved-1f1b") {
        let schedule = Schedule::Interleaved { virtual_stages: case.virtual_stages };
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
    assert!(compared >= 60 && refused >= 5, "{compared} compared, {refused} refused");
}
