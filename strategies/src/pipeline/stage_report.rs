//! What a pipeline rank reports about its stage, kept apart from the schedule's code so the
//! training report can carry it without depending on the pipeline's workers.

use serde::{Deserialize, Serialize};
use stratlab_results::PipelineStageInfo;

use super::partition::StagePlan;

/// What one pipeline rank reports about its stage, next to its timeline: the plan it ran
/// and the memory its activations took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineStageReport {
    /// Position in the pipeline, from 0.
    pub stage: usize,
    /// Stages in the pipeline (pp).
    pub stages: usize,
    /// Which data-parallel replica of the pipeline, from 0 (hybrid; 0 otherwise).
    pub replica: usize,
    /// Replicas of the pipeline (dp).
    pub replicas: usize,
    /// Micro-batches per batch as run (model-parallel runs 1).
    pub micro_batches: usize,
    /// The plan every rank ran (the same on all ranks).
    pub plan: StagePlan,
    /// Names of the network stages this rank holds.
    pub layers: Vec<String>,
    /// Trainable parameters of this rank's stages.
    pub parameters: u64,
    /// Largest growth of allocated memory over a timed step, from the step's start (weights,
    /// gradients and optimizer state already allocated) to its peak: the activations and
    /// buffers in flight. `None` where the allocator cannot tell.
    pub peak_activation_bytes: Option<u64>,
}

impl PipelineStageReport {
    /// What this report says about rank `rank`'s stage, as the `pipeline_stages` table takes
    /// it; `schedule` names the strategy that ran it.
    pub fn info(&self, rank: usize, schedule: &str) -> PipelineStageInfo {
        let layers = self.layer_range();
        PipelineStageInfo {
            rank: rank as u32,
            replica: self.replica as u32,
            stage: self.stage as u32,
            stages: self.stages as u32,
            schedule: schedule.to_string(),
            micro_batches: self.micro_batches as u32,
            balance: self.plan.balance.to_string(),
            layers: self.layers.join("+"),
            first_layer: layers.start as u32,
            layer_count: layers.len() as u32,
            parameters: self.parameters,
            predicted_cost: self.plan.costs[self.stage],
            cost_unit: self.plan.unit.clone(),
            predicted_imbalance: self.plan.predicted_imbalance(),
            peak_activation_bytes: self.peak_activation_bytes,
        }
    }

    /// This rank's range of network stages.
    pub fn layer_range(&self) -> std::ops::Range<usize> {
        self.plan.ranges[self.stage].clone()
    }
}
