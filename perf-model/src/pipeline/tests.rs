//! The simulator against hand-worked schedules.

use stratlab_strategy_spec::{Action, Checkpoint, Placement, Schedule, StageReplicas};

use super::*;

/// A link that costs nothing: every transfer arrives as it is sent.
fn free_link() -> Link {
    Link::new(1e30, 0.0)
}

fn equal_stages(p: usize, forward_s: f64, backward_s: f64) -> Vec<StageCost> {
    (0..p)
        .map(|_| StageCost {
            forward_s,
            backward_s,
            output_bytes: 1e6,
            gradient_bytes: 1e6,
            optimizer_s: 0.0,
            split_backward: None,
        })
        .collect()
}

fn pipeline(schedule: Schedule, stages: &[StageCost], micro_batches: usize, link: Link) -> Pipeline<'_> {
    Pipeline {
        schedule,
        micro_batches,
        checkpoint: Checkpoint::Never,
        stages,
        link,
        replicas: 1,
        stage_replicas: None,
        measured_all_reduce: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn equal_stages_give_gpipe_and_1f1b_exactly_the_bubble_p_minus_1_over_m_plus_p_minus_1() {
    for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
        for p in 1..6 {
            for m in 1..10 {
                let stages = equal_stages(p, 1.0, 2.0);
                let step = simulate(&pipeline(schedule, &stages, m, free_link())).unwrap();
                let bubble = (p - 1) as f64 / (m + p - 1) as f64;
                assert!(close(step.step_s, (m + p - 1) as f64 * 3.0), "{schedule:?} p{p} m{m}: {}", step.step_s);
                for stage in &step.ranks {
                    assert!(close(stage.bubble, bubble), "{schedule:?} p{p} m{m}: {} vs {bubble}", stage.bubble);
                    assert!(close(stage.compute_s, m as f64 * 3.0));
                }
            }
        }
    }
}

/// The recommender's pipelines at 16 devices: GPipe and 1F1B at p = 16, m = 32 idle
/// (p − 1)/(m + p − 1) = 15/47 of the step on every stage when stages are equal and links
/// free, and take the same (m + p − 1)(f + b).
#[test]
fn sixteen_stages_and_32_micro_batches_give_both_schedules_the_same_arithmetic_bubble() {
    let (p, m) = (16, 32);
    let stages = equal_stages(p, 1.0, 2.0);
    for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
        let step = simulate(&pipeline(schedule, &stages, m, free_link())).unwrap();
        assert!(close(step.step_s, 47.0 * 3.0), "{schedule:?}: {}", step.step_s);
        assert!(close(step.bubble(), 15.0 / 47.0), "{schedule:?}: {}", step.bubble());
    }
}

/// Why `recommend` can rank 1F1B far behind GPipe at the same m: 1F1B keeps at most p − s
/// micro-batches in flight on stage s, so each micro-batch's backward must come back over
/// every hop before the stage takes another, and a transfer longer than a pass is paid in
/// every round trip; GPipe keeps all m in flight and pays the hops once in its fill and
/// drain. With free links the two are equal (above); with a hop of 5 passes they are not.
#[test]
fn one_f_one_b_exposes_transfers_longer_than_a_pass_that_gpipe_hides() {
    let (p, m) = (4, 16);
    let stages = equal_stages(p, 1.0, 2.0);
    let slow_hop = Link::new(1e30, 5.0);
    let gpipe = simulate(&pipeline(Schedule::GPipe, &stages, m, slow_hop)).unwrap();
    let one_f_one_b = simulate(&pipeline(Schedule::OneFOneB, &stages, m, slow_hop)).unwrap();
    // GPipe: the m micro-batches' compute plus the fill and drain, each hop paid once per
    // direction: (m + p − 1)(f + b) + 2(p − 1) × 5.
    assert!(close(gpipe.step_s, 19.0 * 3.0 + 30.0), "{}", gpipe.step_s);
    assert!(one_f_one_b.step_s > 1.5 * gpipe.step_s, "1F1B {} against GPipe {}", one_f_one_b.step_s, gpipe.step_s);
}

#[test]
fn each_stage_runs_its_schedules_action_list_in_order() {
    let interleaved = Schedule::Interleaved { virtual_stages: 2 };
    for schedule in [Schedule::ModelParallel, Schedule::GPipe, Schedule::OneFOneB, interleaved] {
        let stages = equal_stages(4 * schedule.virtual_stages(), 0.3, 0.7);
        let step = simulate(&pipeline(schedule, &stages, 6, free_link())).unwrap();
        for stage in 0..4 {
            let ran: Vec<Action> =
                step.actions.iter().filter(|action| action.rank == stage).map(|action| action.action).collect();
            let listed: Vec<Action> = schedule.actions(stage, 4, 6);
            assert_eq!(ran, listed, "{schedule:?} stage {stage}");
            let times: Vec<(f64, f64)> = step
                .actions
                .iter()
                .filter(|action| action.rank == stage)
                .map(|action| (action.start_s, action.end_s))
                .collect();
            assert!(times.windows(2).all(|pair| pair[0].1 <= pair[1].0 + 1e-12), "one pass at a time: {times:?}");
        }
    }
}

#[test]
fn transfers_delay_the_neighbour_and_the_loss_reaches_every_stage() {
    // Two stages, one micro-batch, 0.5 s per message: F0 0–1, F1 1.5–2.5, B1 2.5–3.5,
    // B0 4–5; the last stage's loss reaches stage 0 at 4, before it is done.
    let stages = equal_stages(2, 1.0, 1.0);
    let step = simulate(&pipeline(Schedule::ModelParallel, &stages, 8, Link::new(1e30, 0.5))).unwrap();
    assert!(close(step.step_s, 5.0), "{}", step.step_s);
    let b0 = step.actions.iter().find(|a| a.rank == 0 && a.action == Action::backward(0, 0)).unwrap();
    assert!(close(b0.start_s, 4.0));
    // Bandwidth counts too: 1 MB at 1 MB/s is another second each way.
    let slow = simulate(&pipeline(Schedule::ModelParallel, &stages, 1, Link::new(1e6, 0.5))).unwrap();
    assert!(close(slow.step_s, 7.0), "{}", slow.step_s);
}

#[test]
fn checkpointing_recomputes_the_forward_of_the_micro_batches_it_drops() {
    let stages = equal_stages(1, 1.0, 2.0);
    let mut always = pipeline(Schedule::GPipe, &stages, 4, free_link());
    always.checkpoint = Checkpoint::Always;
    let step = simulate(&always).unwrap();
    assert!(close(step.step_s, 4.0 * (1.0 + 2.0 + 1.0)));
    assert!(close(step.ranks[0].recompute_s, 4.0));
    let mut except_last = always.clone();
    except_last.checkpoint = Checkpoint::ExceptLast;
    assert!(close(simulate(&except_last).unwrap().ranks[0].recompute_s, 3.0));
}

#[test]
fn pipedream_reaches_a_steady_state_without_flushes() {
    // Equal stages, no flush: in steady state every stage is busy all the time. Stages but
    // the last recompute the stashed forward and every backward is followed by an update.
    let (p, m, f, b, u) = (3, 4, 1.0, 2.0, 0.5);
    let stages: Vec<StageCost> =
        equal_stages(p, f, b).into_iter().map(|stage| StageCost { optimizer_s: u, ..stage }).collect();
    let step = simulate(&pipeline(Schedule::PipeDream, &stages, m, free_link())).unwrap();
    assert!(close(step.step_s, m as f64 * (f + b + f + u)), "{}", step.step_s);
    // GPipe with the same stages pays its fill and drain every step, and sits idle in them.
    let gpipe = simulate(&pipeline(Schedule::GPipe, &stages, m, free_link())).unwrap();
    assert!(close(gpipe.step_s, (m + p - 1) as f64 * (f + b) + u));
    assert!(step.bubble() < gpipe.bubble(), "{} vs {}", step.bubble(), gpipe.bubble());
}

#[test]
fn hybrid_replicas_all_reduce_each_stages_gradients_before_the_update() {
    let stages = equal_stages(2, 1.0, 1.0);
    let link = Link::new(1e6, 0.0);
    let single = simulate(&pipeline(Schedule::OneFOneB, &stages, 2, link)).unwrap();
    let mut hybrid = pipeline(Schedule::OneFOneB, &stages, 2, link);
    hybrid.replicas = 2;
    let replicated = simulate(&hybrid).unwrap();
    // 1 MB over 2 replicas: 2 steps of 0.5 MB at 1 MB/s.
    assert!(close(replicated.ranks[0].all_reduce_s, 1.0));
    assert!(close(replicated.step_s - single.step_s, 1.0), "{} {}", replicated.step_s, single.step_s);
}

#[test]
fn every_schedule_completes_for_any_depth_and_micro_batch_count() {
    let schedules = [
        Schedule::ModelParallel,
        Schedule::GPipe,
        Schedule::OneFOneB,
        Schedule::PipeDream,
        Schedule::Interleaved { virtual_stages: 2 },
        Schedule::Interleaved { virtual_stages: 3 },
    ];
    for schedule in schedules {
        for p in 1..6 {
            for m in (1..9).filter(|&m| schedule.check(p, m).is_ok()) {
                let stages: Vec<StageCost> = (0..p * schedule.virtual_stages())
                    .map(|s| StageCost {
                        forward_s: 0.1 * (s + 1) as f64,
                        backward_s: 0.2,
                        output_bytes: 1e5,
                        gradient_bytes: 0.0,
                        optimizer_s: 0.01,
                        split_backward: None,
                    })
                    .collect();
                let step = simulate(&pipeline(schedule, &stages, m, Link::new(1e7, 1e-4))).unwrap();
                assert!(step.step_s > 0.0 && step.step_s.is_finite(), "{schedule:?} p{p} m{m}");
            }
        }
    }
    assert_eq!(simulate(&pipeline(Schedule::GPipe, &[], 2, free_link())), Err(SimulationError::NoStages));
    let three = equal_stages(3, 1.0, 1.0);
    let uneven = simulate(&pipeline(Schedule::Interleaved { virtual_stages: 2 }, &three, 2, free_link()));
    assert_eq!(uneven, Err(SimulationError::Uneven { stages: 3, per_rank: 2 }));
}

/// Megatron's interleaved bubble: each rank's work cut into v stages of 1/v the passes
/// idles (p − 1)/(v·m + p − 1) of the step with equal stages, free links and m a multiple
/// of p, against 1F1B's (p − 1)/(m + p − 1); the step is (m + (p − 1)/v)(f + b).
#[test]
fn interleaving_v_stages_per_rank_divides_the_bubble_by_about_v() {
    for p in 2..5 {
        for v in 2..4 {
            for m in [p, 2 * p, 4 * p] {
                let schedule = Schedule::Interleaved { virtual_stages: v };
                let stages = equal_stages(p * v, 1.0 / v as f64, 2.0 / v as f64);
                let step = simulate(&pipeline(schedule, &stages, m, free_link())).unwrap();
                let what = format!("p{p} v{v} m{m}");
                let bubble = (p - 1) as f64 / (v * m + p - 1) as f64;
                let step_s = (m as f64 + (p - 1) as f64 / v as f64) * 3.0;
                assert!(close(step.step_s, step_s), "{what}: {} vs {step_s}", step.step_s);
                for rank in &step.ranks {
                    assert!(close(rank.compute_s, m as f64 * 3.0), "{what}");
                    assert!(close(rank.bubble, bubble), "{what}: {} vs {bubble}", rank.bubble);
                }
            }
        }
    }
}

/// Interleaving's price: v times the messages. With a hop as long as a pass, each extra
/// crossing is exposed somewhere, so the gain over 1F1B shrinks.
#[test]
fn interleaving_pays_for_its_extra_hops_on_a_slow_link() {
    let (p, m) = (4, 8);
    let one_f_one_b = simulate(&pipeline(Schedule::OneFOneB, &equal_stages(p, 1.0, 2.0), m, free_link())).unwrap();
    let schedule = Schedule::Interleaved { virtual_stages: 2 };
    let halves = equal_stages(2 * p, 0.5, 1.0);
    let free = simulate(&pipeline(schedule, &halves, m, free_link())).unwrap();
    let slow = simulate(&pipeline(schedule, &halves, m, Link::new(1e30, 0.5))).unwrap();
    assert!(free.step_s < one_f_one_b.step_s, "{} vs {}", free.step_s, one_f_one_b.step_s);
    assert!(slow.step_s > free.step_s + 0.5, "{} vs {}", slow.step_s, free.step_s);
}

#[test]
fn concurrency_is_one_where_stages_take_turns_and_grows_with_the_overlap() {
    // Model-parallel: one micro-batch travels, so one stage computes at a time.
    let stages = equal_stages(2, 1.0, 1.0);
    let turns = simulate(&pipeline(Schedule::ModelParallel, &stages, 1, free_link())).unwrap();
    assert_eq!(turns.concurrency(), vec![1.0, 1.0]);
    // GPipe, 2 stages, 2 micro-batches of F = B = 1: stage 0 runs F0 0–1, F1 1–2, B1 4–5,
    // B0 5–6; stage 1 runs F0 1–2, F1 2–3, B1 3–4, B0 4–5. Stage 0 computes beside stage 1
    // over 1–2 and 4–5, 2 of its 4 busy seconds; stage 1 over 1–2 and 4–5 as well.
    let gpipe = simulate(&pipeline(Schedule::GPipe, &stages, 2, free_link())).unwrap();
    assert_eq!(gpipe.concurrency(), vec![1.5, 1.5]);
}

/// Micro-batches in flight share the hop between two stages: each direction carries one
/// message at a time, so four 10 ms activations arrive 10 ms apart, not all 10 ms after
/// they were sent, and so do their four gradients. Stage 0's forwards end at 1, 2, 3 and
/// 4 ms; the activations arrive at 11, 21, 31 and 41 ms; stage 1's last forward ends at
/// 42 ms and its backwards at 43 to 46 ms; the gradients arrive at 53, 63, 73 and 83 ms,
/// and stage 0's last backward ends at 84 ms.
#[test]
fn messages_over_one_hop_queue_for_its_bandwidth() {
    let stages = equal_stages(2, 0.001, 0.001);
    let link = Link::new(1e8, 0.0);
    let step = simulate(&pipeline(Schedule::GPipe, &stages, 4, link)).unwrap();
    assert!(close(step.step_s, 0.084), "{}", step.step_s);
    // A latency delays each message without holding the wire: 4 × 1 ms more at most.
    let slow = simulate(&pipeline(Schedule::GPipe, &stages, 4, Link::new(1e8, 1e-3))).unwrap();
    assert!(close(slow.step_s, 0.086), "{}", slow.step_s);
}

fn layout(counts: &[usize]) -> StageReplicas {
    StageReplicas::try_from(counts.to_vec()).unwrap()
}

/// PipeDream's 2-1 on a first stage twice as slow as the second (F 2 s, B 4 s against
/// 1 s and 2 s), m = 4 on free links. Unreplicated, stage 0 runs all 24 s of its passes
/// and the step is 25 s. Replicated, each stage-0 replica runs micro-batches 0, 2 or 1, 3
/// (F0 F2 B0 B2 and F1 F3 B1 B3, two in flight each), stage 1 all four, and the step ends
/// when replica 1's B3 does, at 18 s: its gradient arrives at 14 s, after stage 1's F3
/// (11–12 s) and B3 (12–14 s).
#[test]
fn replicating_the_slow_stage_shares_its_micro_batches_round_robin() {
    let stages = [
        StageCost {
            forward_s: 2.0,
            backward_s: 4.0,
            output_bytes: 0.0,
            gradient_bytes: 1e6,
            optimizer_s: 0.0,
            split_backward: None,
        },
        StageCost {
            forward_s: 1.0,
            backward_s: 2.0,
            output_bytes: 0.0,
            gradient_bytes: 1e6,
            optimizer_s: 0.0,
            split_backward: None,
        },
    ];
    let plain = simulate(&pipeline(Schedule::OneFOneB, &stages, 4, free_link())).unwrap();
    assert!(close(plain.step_s, 25.0), "{}", plain.step_s);
    let two_one = layout(&[2, 1]);
    let replicated =
        simulate(&Pipeline { stage_replicas: Some(&two_one), ..pipeline(Schedule::OneFOneB, &stages, 4, free_link()) })
            .unwrap();
    assert!(close(replicated.step_s, 18.0), "{}", replicated.step_s);
    assert_eq!(replicated.ranks.len(), 3);
    let ran = |rank: usize| -> Vec<Action> {
        replicated.actions.iter().filter(|pass| pass.rank == rank).map(|pass| pass.action).collect()
    };
    for rank in 0..3 {
        let (stage, replica) = two_one.place_of(rank);
        assert_eq!(ran(rank), two_one.actions(stage, replica, 4), "rank {rank}");
    }
    assert!(close(replicated.ranks[0].compute_s, 12.0) && close(replicated.ranks[2].compute_s, 12.0));
}

/// A replicated stage's workers all-reduce its gradients before the update (1 MB between
/// two over 1 MB/s: 1 s); an unreplicated stage's worker all-reduces nothing.
#[test]
fn only_a_replicated_stages_workers_all_reduce_its_gradients() {
    let stages = equal_stages(2, 1.0, 1.0);
    let two_one = layout(&[2, 1]);
    let step = simulate(&Pipeline {
        stage_replicas: Some(&two_one),
        ..pipeline(Schedule::OneFOneB, &stages, 4, Link::new(1e6, 0.0))
    })
    .unwrap();
    let all_reduce: Vec<f64> = step.ranks.iter().map(|rank| rank.all_reduce_s).collect();
    assert!(close(all_reduce[0], 1.0) && close(all_reduce[1], 1.0) && all_reduce[2] == 0.0, "{all_reduce:?}");
}

#[test]
fn every_replicated_layout_completes_and_a_layout_of_other_stages_is_refused() {
    for counts in [vec![2, 1], vec![1, 2], vec![3, 2], vec![2, 1, 1], vec![1, 2, 1], vec![1, 1, 3]] {
        let layout = layout(&counts);
        let stages: Vec<StageCost> = (0..layout.stages())
            .map(|s| StageCost {
                forward_s: 0.1 * (s + 1) as f64,
                backward_s: 0.2,
                output_bytes: 1e5,
                gradient_bytes: 1e5,
                optimizer_s: 0.01,
                split_backward: None,
            })
            .collect();
        for m in [layout.cycle(), 2 * layout.cycle(), 4 * layout.cycle()] {
            let step = simulate(&Pipeline {
                stage_replicas: Some(&layout),
                ..pipeline(Schedule::OneFOneB, &stages, m, Link::new(1e7, 1e-4))
            })
            .unwrap();
            assert!(step.step_s > 0.0 && step.step_s.is_finite(), "{counts:?} m{m}");
            assert_eq!(step.actions.len(), 2 * m * layout.stages(), "{counts:?} m{m}");
        }
    }
    let stages = equal_stages(3, 1.0, 1.0);
    let two_one = layout(&[2, 1]);
    let refused =
        simulate(&Pipeline { stage_replicas: Some(&two_one), ..pipeline(Schedule::OneFOneB, &stages, 2, free_link()) });
    assert_eq!(refused, Err(SimulationError::Layout { stages: 3, layout: two_one.clone() }));
}

/// PipeDream over 2-1: each stage-0 worker runs its share of every step, keeping one of its
/// own ahead, and after each backward the pair all-reduce (1 MB between two over 1 MB/s:
/// 1 s) before their update, once both have that round's backward: the pair's all-reduces
/// of a round end together, each at least 1 s after its own backward. The last stage's
/// worker all-reduces nothing.
#[test]
fn pipedream_replicas_all_reduce_after_each_backward() {
    let stages = equal_stages(2, 1.0, 1.0);
    let two_one = layout(&[2, 1]);
    let step = simulate(&Pipeline {
        stage_replicas: Some(&two_one),
        ..pipeline(Schedule::PipeDream, &stages, 4, Link::new(1e6, 0.0))
    })
    .unwrap();
    for rank in 0..3 {
        let (stage, replica) = two_one.place_of(rank);
        let last: Vec<Action> =
            step.actions.iter().filter(|pass| pass.rank == rank && pass.step == 3).map(|pass| pass.action).collect();
        assert_eq!(last, two_one.pipedream_actions(stage, replica, 4, 3), "rank {rank}");
    }
    let all_reduce: Vec<f64> = step.ranks.iter().map(|rank| rank.all_reduce_s).collect();
    // Two backwards per stage-0 worker per step, 1 s each and the wait for the other's.
    assert!(all_reduce[0] >= 2.0 - 1e-9 && all_reduce[1] >= 2.0 - 1e-9 && all_reduce[2] == 0.0, "{all_reduce:?}");
    let round_ends = |rank: usize| -> Vec<f64> {
        let backwards = step.actions.iter().filter(|pass| pass.rank == rank && pass.action.pass == Pass::Backward);
        backwards.map(|pass| pass.end_s - pass.optimizer_s).collect()
    };
    let (one, other) = (round_ends(0), round_ends(1));
    assert_eq!(one.len(), other.len());
    assert!(one.iter().zip(&other).all(|(a, b)| close(*a, *b)), "rounds end together: {one:?} {other:?}");
    assert!(step.ranks.iter().all(|rank| rank.flush_all_reduce_s == 0.0), "PipeDream never flushes");
}

fn split_stages(p: usize, forward_s: f64, input_s: f64, weight_s: f64) -> Vec<StageCost> {
    equal_stages(p, forward_s, input_s + weight_s)
        .into_iter()
        .map(|stage| StageCost { split_backward: Some(SplitBackward { input_s, weight_s }), ..stage })
        .collect()
}

/// ZB-H1 (Qi et al., ICLR 2024, section 3): one stage per rank, `W`s deferred into the
/// cool-down, so each rank idles (p − 1)(T_F + T_I − T_W) of a step of m(T_F + T_I + T_W)
/// plus that. With T_W = T_F = T_I the bubble is a third of 1F1B's.
#[test]
fn zb_h1_idles_p_minus_1_times_f_plus_i_minus_w_on_equal_stages() {
    let schedule = Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages: 1 };
    for (f, i, w) in [(1.0, 1.0, 1.0), (1.0, 1.2, 0.8)] {
        for p in 2..6 {
            for m in (p..12).filter(|&m| schedule.check(p, m).is_ok()) {
                // The first stage's `W` is its whole backward (it has no `I` to send).
                let mut stages = split_stages(p, f, i, w);
                stages[0].backward_s = i + w;
                let step = simulate(&pipeline(schedule, &stages, m, free_link())).unwrap();
                let idle = (p - 1) as f64 * (f + i - w);
                let expected = m as f64 * (f + i + w) + idle;
                assert!(close(step.step_s, expected), "f{f} i{i} w{w} p{p} m{m}: {} vs {expected}", step.step_s);
                let one_f_one_b = (p - 1) as f64 / (m + p - 1) as f64;
                assert!(step.bubble() < one_f_one_b, "p{p} m{m}: {} not below 1F1B's {one_f_one_b}", step.bubble());
                assert!(close(step.ranks[p - 1].bubble, idle / expected), "p{p} m{m}: {:?}", step.ranks[p - 1]);
            }
        }
    }
}

/// Splitting is not free: the model takes the measured halves, so where `I + W` exceeds
/// the whole backward zero-bubble can lose to 1F1B, and every pass of the step runs.
#[test]
fn zero_bubble_pays_for_a_dear_split_and_both_placements_complete() {
    let (p, m) = (4, 8);
    let one_f_one_b = simulate(&pipeline(Schedule::OneFOneB, &equal_stages(p, 1.0, 2.0), m, free_link())).unwrap();
    let h1 = Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages: 1 };
    let dear = simulate(&pipeline(h1, &split_stages(p, 1.0, 2.0, 1.5), m, free_link())).unwrap();
    assert!(dear.step_s > one_f_one_b.step_s, "{} vs {}", dear.step_s, one_f_one_b.step_s);
    for placement in [Placement::Loop, Placement::V] {
        let schedule = Schedule::ZeroBubble { placement, virtual_stages: 2 };
        let stages = split_stages(2 * p, 0.5, 0.5, 0.5);
        let step = simulate(&pipeline(schedule, &stages, m, Link::new(1e8, 1e-4))).unwrap();
        assert_eq!(step.actions.len(), 3 * m * 2 * p, "{placement:?}");
        assert!(step.step_s >= 1.5 * m as f64 * 2.0, "{placement:?}: {}", step.step_s);
    }
}
