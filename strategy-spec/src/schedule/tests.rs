//! The one-stage-per-rank schedules against hand-worked lists; interleaved is checked
//! against PyTorch's own in `interleaved.rs` and `tests/pytorch_schedules.rs`.

use super::*;

fn f(mb: usize) -> Action {
    Action::forward(0, mb)
}
fn b(mb: usize) -> Action {
    Action::backward(0, mb)
}

#[test]
fn gpipe_fills_then_drains_last_micro_batch_first() {
    assert_eq!(Schedule::GPipe.actions(0, 2, 3), vec![f(0), f(1), f(2), b(2), b(1), b(0)]);
    let model_parallel = Schedule::ModelParallel.actions(1, 2, 8);
    assert_eq!(model_parallel, vec![Action::forward(1, 0), Action::backward(1, 0)], "model-parallel ignores m");
}

#[test]
fn one_f_one_b_warms_up_by_depth_then_alternates_then_drains() {
    // Four stages, six micro-batches: warm-up forwards 3, 2, 1, 0.
    assert_eq!(
        Schedule::OneFOneB.actions(0, 4, 6),
        vec![f(0), f(1), f(2), f(3), b(0), f(4), b(1), f(5), b(2), b(3), b(4), b(5)]
    );
    let last: Vec<Action> = Schedule::OneFOneB.actions(3, 4, 6).into_iter().map(|a| Action { stage: 0, ..a }).collect();
    assert_eq!(last, vec![f(0), b(0), f(1), b(1), f(2), b(2), f(3), b(3), f(4), b(4), f(5), b(5)]);
    // Fewer micro-batches than stages: all forwards are warm-up.
    assert_eq!(Schedule::OneFOneB.actions(0, 4, 2), vec![f(0), f(1), b(0), b(1)]);
}

#[test]
fn every_schedule_runs_each_micro_batch_forward_before_backward_exactly_once_per_stage() {
    let schedules = [
        Schedule::ModelParallel,
        Schedule::GPipe,
        Schedule::OneFOneB,
        Schedule::PipeDream,
        Schedule::Interleaved { virtual_stages: 2 },
        Schedule::Interleaved { virtual_stages: 3 },
        Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages: 1 },
        Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages: 2 },
        Schedule::ZeroBubble { placement: Placement::V, virtual_stages: 2 },
    ];
    for schedule in schedules {
        for ranks in 1..5 {
            for m in 1..9 {
                if schedule.check(ranks, m).is_err() {
                    continue;
                }
                for rank in 0..ranks {
                    let actions = schedule.actions(rank, ranks, m);
                    let m = schedule.micro_batches(m);
                    let stages = schedule.stages_of_rank(rank, ranks);
                    // A split backward is two passes, each in the order F, I, W.
                    let passes: &[Pass] = match schedule.splits_backward() {
                        true => &[Pass::Forward, Pass::InputBackward, Pass::WeightBackward],
                        false => &[Pass::Forward, Pass::Backward],
                    };
                    let what = format!("{schedule:?} rank {rank}/{ranks} m {m}");
                    assert_eq!(actions.len(), passes.len() * m * stages.len(), "{what}");
                    for &stage in &stages {
                        assert_eq!(schedule.rank_of_stage(stage, ranks), rank);
                        for mb in 0..m {
                            let at = |&pass| actions.iter().position(|&a| a == Action::new(pass, stage, mb));
                            let order: Vec<usize> = passes.iter().map(|pass| at(pass).expect("every pass")).collect();
                            assert!(order.is_sorted(), "{what}: stage {stage} micro-batch {mb} runs {order:?}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn pipedream_keeps_its_depth_in_flight_across_batches() {
    // Stage 0 of 3: two micro-batches in flight; step 1 backs up step 0's last two.
    assert_eq!(pipedream_actions(0, 3, 4, 0), vec![f(0), f(1), f(2), b(0), f(3), b(1)]);
    assert_eq!(pipedream_actions(0, 3, 4, 1), vec![f(4), b(2), f(5), b(3), f(6), b(4), f(7), b(5)]);
    // The last stage runs each micro-batch's backward right after its forward.
    let last = pipedream_actions(2, 3, 2, 1);
    assert_eq!(
        last,
        vec![Action::forward(2, 2), Action::backward(2, 2), Action::forward(2, 3), Action::backward(2, 3)]
    );
}

#[test]
fn micro_batches_split_like_tensor_split() {
    assert_eq!(micro_batch_sizes(10, 4), vec![3, 3, 2, 2]);
    assert_eq!(micro_batch_sizes(8, 1), vec![8]);
}
