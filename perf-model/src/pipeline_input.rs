//! What a pipeline simulation is given ([`crate::pipeline::simulate`]): each stage's costs,
//! the schedule, the link, and where each rank sits (which stages it holds, which worker of
//! a replicated stage runs a micro-batch, whose gradients it all-reduces with), so the
//! simulator and the memory model read one answer.

use serde::Serialize;
use stratlab_strategy_spec::{pipedream_actions, Action, Checkpoint, Schedule, StageReplicas};

use crate::{CollectiveCurve, Link};

/// What one pipeline stage costs, per micro-batch of the size the step runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageCost {
    /// Forward seconds of one micro-batch.
    pub forward_s: f64,
    /// Backward seconds of one micro-batch (without recomputing its forward).
    pub backward_s: f64,
    /// Bytes of the activation this stage sends on per micro-batch (and of the gradient it
    /// gets back for it).
    pub output_bytes: f64,
    /// Bytes of this stage's gradients (all-reduced across replicas in hybrid).
    pub gradient_bytes: f64,
    /// Seconds of this stage's optimizer step.
    pub optimizer_s: f64,
    /// The backward split into its input's and its weights' gradients (zero-bubble's `I`
    /// and `W`), as measured; `None` where it was not.
    pub split_backward: Option<SplitBackward>,
}

/// One micro-batch's backward through a stage, split in two passes. Splitting costs: the
/// two together take longer than the whole backward (each walks part of the graph again).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SplitBackward {
    /// Seconds of the input's gradient (`I`).
    pub input_s: f64,
    /// Seconds of the weights' gradients (`W`).
    pub weight_s: f64,
}

impl StageCost {
    /// The same stage with its compute (passes and update) `slowdown` times longer.
    pub fn slowed(&self, slowdown: f64) -> StageCost {
        StageCost {
            forward_s: self.forward_s * slowdown,
            backward_s: self.backward_s * slowdown,
            optimizer_s: self.optimizer_s * slowdown,
            split_backward: self
                .split_backward
                .map(|split| SplitBackward { input_s: split.input_s * slowdown, weight_s: split.weight_s * slowdown }),
            ..self.clone()
        }
    }

    /// Seconds of `I` and `W` for this stage at `stage` in the pipeline: the first stage has
    /// no input gradient to send, so its `I` does nothing and its `W` is the whole backward
    /// (as the stage workers and PyTorch's stages run it); elsewhere the measured split, or
    /// where none was measured, half the backward each, the ideal with no splitting cost.
    pub fn split_s(&self, stage: usize) -> SplitBackward {
        match (stage, self.split_backward) {
            (0, _) => SplitBackward { input_s: 0.0, weight_s: self.backward_s },
            (_, Some(split)) => split,
            (_, None) => SplitBackward { input_s: self.backward_s / 2.0, weight_s: self.backward_s / 2.0 },
        }
    }
}

/// The pipeline to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline<'a> {
    /// The order every rank runs.
    pub schedule: Schedule,
    /// Micro-batches per batch as requested (model-parallel runs 1).
    pub micro_batches: usize,
    /// Which micro-batches recompute their forward in the backward.
    pub checkpoint: Checkpoint,
    /// One entry per pipeline stage, first to last (`v` per rank when interleaved).
    pub stages: &'a [StageCost],
    /// The link between neighbouring stages.
    pub link: Link,
    /// Pipelines side by side (hybrid's data parallelism; 1 otherwise), all-reducing each
    /// rank's gradients over the same link.
    pub replicas: usize,
    /// Workers per stage where stages are replicated (1F1B's PipeDream layouts): each
    /// micro-batch runs on its stage's replica `id mod r`, and a stage's replicas
    /// all-reduce their gradients before the update.
    pub stage_replicas: Option<&'a StageReplicas>,
    /// The probe's all-reduce against size on that link, where measured.
    pub measured_all_reduce: Option<&'a CollectiveCurve>,
}

impl Pipeline<'_> {
    /// Ranks per pipeline: the stages ÷ the stages each rank holds, or the workers of
    /// replicated stages.
    pub fn ranks(&self) -> usize {
        match self.stage_replicas {
            Some(layout) => layout.workers(),
            None => self.stages.len() / self.schedule.virtual_stages().max(1),
        }
    }

    /// The rank that runs micro-batch `id` (a global id) on `stage`.
    pub fn rank_for(&self, stage: usize, id: usize) -> usize {
        match self.stage_replicas {
            Some(layout) => layout.rank_for(stage, id),
            None => self.schedule.rank_of_stage(stage, self.ranks()),
        }
    }

    /// The pipeline stages rank `rank` holds.
    pub fn stages_of_rank(&self, rank: usize) -> Vec<usize> {
        match self.stage_replicas {
            Some(layout) => vec![layout.place_of(rank).0],
            None => self.schedule.stages_of_rank(rank, self.ranks()),
        }
    }

    /// Ranks whose gradients rank `rank` all-reduces with, itself included: hybrid's
    /// pipelines, times its stage's replicas.
    pub fn gradient_peers(&self, rank: usize) -> usize {
        let stage_replicas = self.stage_replicas.map_or(1, |layout| layout.replicas_of(layout.place_of(rank).0));
        self.replicas * stage_replicas
    }

    /// Rank `rank`'s PipeDream order in step `step` of `m` micro-batches (global ids).
    pub(crate) fn pipedream_actions(&self, rank: usize, m: usize, step: usize) -> Vec<Action> {
        match self.stage_replicas {
            Some(layout) => {
                let (stage, replica) = layout.place_of(rank);
                layout.pipedream_actions(stage, replica, m, step)
            }
            None => pipedream_actions(rank, self.ranks(), m, step),
        }
    }

    /// Rank `rank`'s order for `m` micro-batches (one step).
    pub(crate) fn actions(&self, rank: usize, m: usize) -> Vec<Action> {
        match self.stage_replicas {
            Some(layout) => {
                let (stage, replica) = layout.place_of(rank);
                layout.actions(stage, replica, m)
            }
            None => self.schedule.actions(rank, self.ranks(), m),
        }
    }
}
