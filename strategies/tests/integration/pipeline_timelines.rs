//! Each pipeline schedule's recorded timeline follows its definition: GPipe's and 1F1B's
//! compute order is their action lists and the performance model's simulation of them,
//! causal on the shared clock; PipeDream never flushes, its stages keeping their depth in
//! flight across batches.

use crate::common::*;
use crate::pipeline_ranks::{compute_order, events_of, simulated_orders, Run, CHILD};
use stratlab_strategies::{EventKind, TimelineEvent};
use stratlab_strategy_spec::{pipedream_actions, Action, Pass, Schedule, StrategyKind};

#[test]
fn each_schedule_runs_in_the_order_it_defines_as_recorded_on_its_timeline() {
    let stages = 3;
    let m = 4;
    for (kind, schedule) in [(StrategyKind::Gpipe, Schedule::GPipe), (StrategyKind::OneFOneB, Schedule::OneFOneB)] {
        let dir = tempfile::tempdir().unwrap();
        run_ranks(CHILD, &Run::new(kind, m).role(), stages, dir.path());
        let timelines: Vec<Vec<TimelineEvent>> = (0..stages).map(|rank| events_of(dir.path(), rank)).collect();
        // What the performance model simulates for the same pipeline, rank by rank.
        let simulated = simulated_orders(schedule, stages, m, None);
        for (stage, events) in timelines.iter().enumerate() {
            let simulated_order = &simulated[stage];
            for step in 0..STEPS as u64 {
                assert_eq!(
                    compute_order(events, step),
                    schedule.actions(stage, stages, m),
                    "{kind} stage {stage} step {step}"
                );
                assert_eq!(
                    &compute_order(events, step),
                    simulated_order,
                    "{kind} stage {stage}: recorded vs simulated"
                );
            }
            let order = compute_order(events, 1);
            let warm_up = order.iter().take_while(|a| a.pass == Pass::Forward).count();
            let expected_warm_up = match kind {
                // 1F1B: p − s − 1 forwards before the first backward, plus the steady state's first forward.
                StrategyKind::OneFOneB => (stages - stage - 1).min(m) + 1,
                _ => m,
            };
            assert_eq!(
                warm_up.min(m),
                expected_warm_up.min(m),
                "{kind} stage {stage}: forwards before the first backward"
            );
        }
        // Causality on the shared clock: a micro-batch's forward on stage s + 1 starts after it
        // ends on stage s, and its backward on stage s starts after it ends on stage s + 1.
        let find = |rank: usize, kind: EventKind, mb: u32| {
            timelines[rank].iter().find(|e| e.step == 2 && e.kind == kind && e.micro_batch == Some(mb)).unwrap().clone()
        };
        for stage in 0..stages - 1 {
            for mb in 0..m as u32 {
                assert!(find(stage + 1, EventKind::Forward, mb).start_ns >= find(stage, EventKind::Forward, mb).end_ns);
                assert!(
                    find(stage, EventKind::Backward, mb).start_ns >= find(stage + 1, EventKind::Backward, mb).end_ns
                );
            }
        }
    }
}

#[test]
fn pipedream_never_flushes_its_stages_keep_their_depth_in_flight_across_batches() {
    let (stages, m) = (3, 4);
    let dir = tempfile::tempdir().unwrap();
    run_ranks(CHILD, &Run::new(StrategyKind::PipeDream, m).role(), stages, dir.path());
    for stage in 0..stages {
        let events = events_of(dir.path(), stage);
        for step in 0..STEPS {
            let expected: Vec<Action> = pipedream_actions(stage, stages, m, step)
                .into_iter()
                .map(|action| Action { micro_batch: action.micro_batch % m, ..action })
                .collect();
            assert_eq!(compute_order(&events, step as u64), expected, "pipedream stage {stage} step {step}");
        }
        // What was in flight at the end is drained: every forward has its backward.
        let count = |kind| events.iter().filter(|e| e.kind == kind).count();
        assert_eq!(count(EventKind::Forward), STEPS * m);
        assert_eq!(count(EventKind::Backward), STEPS * m, "stage {stage} drains its {} in flight", stages - stage - 1);
    }
}
