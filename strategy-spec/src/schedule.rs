//! The order in which one pipeline stage runs its micro-batches' forwards and backwards.
//!
//! The synchronous schedules are per batch: `micro_batches` forwards and as many
//! backwards, then the stage's update. PipeDream updates after each backward instead
//! ([`Schedule::updates_per_micro_batch`]) and never flushes ([`pipedream_actions`]). The
//! orders are the ones the GPipe, PipeDream and PipeDream-2BW papers give:
//!
//! - **model-parallel**: the whole batch as one micro-batch, `F0 B0`; at most one stage
//!   busy at a time.
//! - **GPipe** (fill and drain): `F0 … F(m−1)` then `B(m−1) … B0`. Backwards run last
//!   micro-batch first, as torchgpipe does: the last micro-batch's activations are the
//!   freshest, which is why `except_last` checkpointing keeps exactly that one.
//! - **1F1B** (PipeDream-flush): stage `s` of `p` runs `min(p − s − 1, m)` warm-up
//!   forwards, then alternates one forward and one backward, then drains the remaining
//!   backwards, oldest first. At most `p − s` micro-batches are in flight on stage `s`
//!   (GPipe holds `m`), which is its memory advantage; the bubble is the same.

use serde::Serialize;

use crate::StrategyKind;

/// One unit of a stage's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Action {
    /// Forward pass of a micro-batch through this stage.
    Forward(usize),
    /// Backward pass of a micro-batch through this stage.
    Backward(usize),
}

impl Action {
    /// The micro-batch the action works on.
    pub fn micro_batch(self) -> usize {
        match self {
            Action::Forward(micro_batch) | Action::Backward(micro_batch) => micro_batch,
        }
    }
}

/// How a pipeline orders its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// One micro-batch per batch.
    ModelParallel,
    /// Fill and drain.
    GPipe,
    /// One forward, one backward.
    OneFOneB,
    /// 1F1B order with an update after every micro-batch's backward (weight stashing).
    PipeDream,
}

impl Schedule {
    /// The schedule of a pipeline strategy (`hybrid` replicates 1F1B pipelines); `None`
    /// for strategies that do not pipeline.
    pub fn of(kind: StrategyKind) -> Option<Schedule> {
        match kind {
            StrategyKind::ModelParallel => Some(Schedule::ModelParallel),
            StrategyKind::Gpipe => Some(Schedule::GPipe),
            StrategyKind::OneFOneB | StrategyKind::Hybrid => Some(Schedule::OneFOneB),
            StrategyKind::PipeDream => Some(Schedule::PipeDream),
            StrategyKind::Single
            | StrategyKind::DataParallel
            | StrategyKind::ParameterServer
            | StrategyKind::ShardedDataParallel => None,
        }
    }

    /// Micro-batches per batch: model-parallel always runs the batch whole.
    pub fn micro_batches(self, requested: usize) -> usize {
        match self {
            Schedule::ModelParallel => 1,
            _ => requested.max(1),
        }
    }

    /// Whether every micro-batch's backward is followed by its own optimizer step.
    pub fn updates_per_micro_batch(self) -> bool {
        self == Schedule::PipeDream
    }

    /// The order of stage `stage` (0-based) of `stages` for `micro_batches` micro-batches.
    pub fn actions(self, stage: usize, stages: usize, micro_batches: usize) -> Vec<Action> {
        let m = self.micro_batches(micro_batches);
        match self {
            Schedule::ModelParallel | Schedule::GPipe => {
                (0..m).map(Action::Forward).chain((0..m).rev().map(Action::Backward)).collect()
            }
            Schedule::OneFOneB | Schedule::PipeDream => {
                let warm_up = (stages - stage - 1).min(m);
                let mut actions: Vec<Action> = (0..warm_up).map(Action::Forward).collect();
                for i in 0..m - warm_up {
                    actions.push(Action::Forward(warm_up + i));
                    actions.push(Action::Backward(i));
                }
                actions.extend((m - warm_up..m).map(Action::Backward));
                actions
            }
        }
    }
}

/// PipeDream's work on stage `stage` of `stages` in optimizer step `step`, by global
/// micro-batch id (`step × m + i`). It never flushes: stage `s` keeps `k = stages − s − 1`
/// micro-batches in flight across batch boundaries, each forward `F(g)` followed by the
/// backward of the micro-batch `k` before it, `B(g − k)`, once there is one. The first step
/// holds the warm-up; what is still in flight when training ends is drained by the worker.
pub fn pipedream_actions(stage: usize, stages: usize, micro_batches: usize, step: usize) -> Vec<Action> {
    let depth = stages - stage - 1;
    let first = step * micro_batches;
    let mut actions = Vec::with_capacity(2 * micro_batches);
    for id in first..first + micro_batches {
        actions.push(Action::Forward(id));
        if id >= depth {
            actions.push(Action::Backward(id - depth));
        }
    }
    actions
}

/// The sizes of `micro_batches` micro-batches of a batch of `batch` samples, as
/// `torch.tensor_split` cuts it: the first `batch % m` get one sample more.
pub fn micro_batch_sizes(batch: usize, micro_batches: usize) -> Vec<usize> {
    let m = micro_batches.max(1);
    (0..m).map(|i| batch / m + usize::from(i < batch % m)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{Backward as B, Forward as F};

    #[test]
    fn gpipe_fills_then_drains_last_micro_batch_first() {
        assert_eq!(Schedule::GPipe.actions(0, 2, 3), vec![F(0), F(1), F(2), B(2), B(1), B(0)]);
        assert_eq!(Schedule::ModelParallel.actions(1, 2, 8), vec![F(0), B(0)], "model-parallel ignores m");
    }

    #[test]
    fn one_f_one_b_warms_up_by_depth_then_alternates_then_drains() {
        // Four stages, six micro-batches: warm-up forwards 3, 2, 1, 0.
        assert_eq!(
            Schedule::OneFOneB.actions(0, 4, 6),
            vec![F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5), B(2), B(3), B(4), B(5)]
        );
        assert_eq!(
            Schedule::OneFOneB.actions(3, 4, 6),
            vec![F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3), F(4), B(4), F(5), B(5)]
        );
        // Fewer micro-batches than stages: all forwards are warm-up.
        assert_eq!(Schedule::OneFOneB.actions(0, 4, 2), vec![F(0), F(1), B(0), B(1)]);
    }

    #[test]
    fn every_schedule_runs_each_micro_batch_forward_before_backward_exactly_once() {
        for schedule in [Schedule::ModelParallel, Schedule::GPipe, Schedule::OneFOneB, Schedule::PipeDream] {
            for stages in 1..5 {
                for m in 1..9 {
                    for stage in 0..stages {
                        let actions = schedule.actions(stage, stages, m);
                        let m = schedule.micro_batches(m);
                        assert_eq!(actions.len(), 2 * m);
                        for mb in 0..m {
                            let forward = actions.iter().position(|&a| a == F(mb)).expect("forward");
                            let backward = actions.iter().position(|&a| a == B(mb)).expect("backward");
                            assert!(forward < backward, "{schedule:?} stage {stage}/{stages} m {m}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pipedream_keeps_its_depth_in_flight_across_batches() {
        // Stage 0 of 3: two micro-batches in flight; step 1 backs up step 0's last two.
        assert_eq!(pipedream_actions(0, 3, 4, 0), vec![F(0), F(1), F(2), B(0), F(3), B(1)]);
        assert_eq!(pipedream_actions(0, 3, 4, 1), vec![F(4), B(2), F(5), B(3), F(6), B(4), F(7), B(5)]);
        // The last stage runs each micro-batch's backward right after its forward.
        assert_eq!(pipedream_actions(2, 3, 2, 1), vec![F(2), B(2), F(3), B(3)]);
    }

    #[test]
    fn micro_batches_split_like_tensor_split() {
        assert_eq!(micro_batch_sizes(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(micro_batch_sizes(8, 1), vec![8]);
    }
}
