//! A simulated step as the blocks a timeline draws (thesis fig. 7.1, the predicted half of
//! 7.1 against 7.2): each pass split into the recompute it starts with, the backward or
//! forward itself and the update it ends with, and each rank's flush (the replicas'
//! all-reduce, the update) after its last pass.

use serde::Serialize;

use crate::pipeline::PipelineStep;
use stratlab_strategy_spec::Pass;

/// What a block of the simulated timeline is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SimulatedWork {
    /// A forward pass.
    Forward,
    /// A forward recomputed at the start of a checkpointed backward.
    Recompute,
    /// A backward pass (input and weight gradients).
    Backward,
    /// The input's gradient of a split backward (zero-bubble's `I`).
    InputBackward,
    /// The weights' gradients of a split backward (zero-bubble's `W`).
    WeightBackward,
    /// The replicas' gradient all-reduce: after the flush (hybrid, replicated stages), or
    /// after each backward of a replicated stage under PipeDream.
    AllReduce,
    /// An optimizer step: after each backward (PipeDream) or after the flush.
    Optimizer,
}

/// One block of one rank's simulated step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimulatedBlock {
    /// The rank, from 0.
    pub rank: usize,
    /// What it does.
    pub work: SimulatedWork,
    /// The pipeline stage of a pass; `None` for the flush.
    pub stage: Option<usize>,
    /// The micro-batch of a pass within its step (0 to m − 1); `None` for the flush.
    pub micro_batch: Option<usize>,
    /// Seconds from the step's first pass.
    pub start_s: f64,
    /// Seconds from the step's first pass.
    pub end_s: f64,
}

impl PipelineStep {
    /// The step the prediction describes, block by block, from its first pass at 0 s:
    /// PipeDream's last simulated step (its steady state, passes of earlier steps' micro-
    /// batches included, as its workers run them), the one step of a flushed schedule.
    /// Zero-length parts are left out.
    pub fn timeline(&self) -> Vec<SimulatedBlock> {
        let last = self.steps.saturating_sub(1);
        let passes = || self.actions.iter().filter(|pass| pass.step == last);
        let origin = passes().map(|pass| pass.start_s).fold(f64::INFINITY, f64::min);
        if !origin.is_finite() {
            return Vec::new();
        }
        let m = self.micro_batches.max(1);
        let mut blocks = Vec::new();
        let mut push = |rank, work, action: Option<stratlab_strategy_spec::Action>, start_s: f64, end_s: f64| {
            if end_s > start_s {
                blocks.push(SimulatedBlock {
                    rank,
                    work,
                    stage: action.map(|action| action.stage),
                    micro_batch: action.map(|action| action.micro_batch % m),
                    start_s: start_s - origin,
                    end_s: end_s - origin,
                });
            }
        };
        for pass in passes() {
            let action = Some(pass.action);
            match pass.action.pass {
                Pass::Forward => push(pass.rank, SimulatedWork::Forward, action, pass.start_s, pass.end_s),
                Pass::InputBackward => push(pass.rank, SimulatedWork::InputBackward, action, pass.start_s, pass.end_s),
                Pass::WeightBackward => {
                    push(pass.rank, SimulatedWork::WeightBackward, action, pass.start_s, pass.end_s)
                }
                Pass::Backward => {
                    let backward_from = pass.start_s + pass.recompute_s;
                    let update_from = pass.end_s - pass.optimizer_s;
                    let all_reduce_from = update_from - pass.all_reduce_s;
                    push(pass.rank, SimulatedWork::Recompute, action, pass.start_s, backward_from);
                    push(pass.rank, SimulatedWork::Backward, action, backward_from, all_reduce_from);
                    push(pass.rank, SimulatedWork::AllReduce, action, all_reduce_from, update_from);
                    push(pass.rank, SimulatedWork::Optimizer, action, update_from, pass.end_s);
                }
            }
        }
        for (rank, time) in self.ranks.iter().enumerate() {
            let own = passes().filter(|pass| pass.rank == rank);
            let Some(flush_from) = own.map(|pass| pass.end_s).reduce(f64::max) else { continue };
            let update_from = flush_from + time.flush_all_reduce_s;
            push(rank, SimulatedWork::AllReduce, None, flush_from, update_from);
            push(rank, SimulatedWork::Optimizer, None, update_from, update_from + time.flush_optimizer_s);
        }
        blocks
    }
}

#[cfg(test)]
mod tests {
    use stratlab_strategy_spec::{Checkpoint, Schedule};

    use super::SimulatedWork;
    use crate::pipeline::{simulate, Pipeline, StageCost};
    use crate::Link;

    fn stage(forward_s: f64, backward_s: f64, optimizer_s: f64) -> StageCost {
        StageCost { forward_s, backward_s, output_bytes: 0.0, gradient_bytes: 0.0, optimizer_s, split_backward: None }
    }

    fn pipeline(schedule: Schedule, stages: &[StageCost], checkpoint: Checkpoint) -> Pipeline<'_> {
        Pipeline {
            schedule,
            micro_batches: 4,
            checkpoint,
            stages,
            link: Link::new(1e30, 0.0),
            replicas: 1,
            stage_replicas: None,
            measured_all_reduce: None,
        }
    }

    #[test]
    fn a_flushed_step_draws_every_pass_then_each_ranks_update() {
        let stages = [stage(1.0, 2.0, 0.5), stage(1.0, 2.0, 0.25)];
        let step = simulate(&pipeline(Schedule::OneFOneB, &stages, Checkpoint::Never)).unwrap();
        let blocks = step.timeline();
        let passes = blocks.iter().filter(|block| block.stage.is_some()).count();
        assert_eq!(passes, 2 * 2 * 4, "a forward and a backward per micro-batch and stage");
        assert_eq!(blocks.iter().map(|block| block.start_s).fold(f64::INFINITY, f64::min), 0.0);
        // 1F1B at equal stages on a free link: (m + p − 1)(f + b) = 5 × 3 s of passes,
        // then the last stage's update.
        let updates: Vec<_> = blocks.iter().filter(|block| block.work == SimulatedWork::Optimizer).collect();
        assert_eq!(updates.len(), 2);
        assert!(updates.iter().all(|block| block.stage.is_none()));
        let end = blocks.iter().map(|block| block.end_s).fold(0.0, f64::max);
        assert!((end - 15.5).abs() < 1e-9, "rank 0 drains last and updates 0.5 s: {end}");
        assert!((step.step_s - end).abs() < 1e-9, "the drawn step is the predicted one");
    }

    #[test]
    fn a_checkpointed_backward_starts_with_its_recompute() {
        let stages = [stage(1.0, 2.0, 0.0), stage(1.0, 2.0, 0.0)];
        let step = simulate(&pipeline(Schedule::GPipe, &stages, Checkpoint::Always)).unwrap();
        let blocks = step.timeline();
        for recompute in blocks.iter().filter(|block| block.work == SimulatedWork::Recompute) {
            assert!((recompute.end_s - recompute.start_s - 1.0).abs() < 1e-9);
            let backward = blocks
                .iter()
                .find(|block| {
                    block.work == SimulatedWork::Backward
                        && block.stage == recompute.stage
                        && block.micro_batch == recompute.micro_batch
                })
                .expect("each recompute has its backward");
            assert_eq!(backward.start_s, recompute.end_s);
            assert!((backward.end_s - backward.start_s - 2.0).abs() < 1e-9);
        }
        assert_eq!(blocks.iter().filter(|block| block.work == SimulatedWork::Recompute).count(), 2 * 4);
    }

    #[test]
    fn pipedream_draws_its_steady_state_step_with_an_update_after_every_backward() {
        let stages = [stage(1.0, 2.0, 0.5), stage(1.0, 2.0, 0.5)];
        let step = simulate(&pipeline(Schedule::PipeDream, &stages, Checkpoint::Never)).unwrap();
        let blocks = step.timeline();
        let count = |work| blocks.iter().filter(|block| block.work == work).count();
        assert_eq!(count(SimulatedWork::Forward), 2 * 4);
        assert_eq!(count(SimulatedWork::Backward), 2 * 4, "steady state: a backward per forward");
        assert_eq!(count(SimulatedWork::Optimizer), count(SimulatedWork::Backward));
        assert!(blocks.iter().all(|block| block.micro_batch.is_some_and(|mb| mb < 4)));
        assert_eq!(blocks.iter().map(|block| block.start_s).fold(f64::INFINITY, f64::min), 0.0);
    }
}
