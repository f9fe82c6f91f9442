//! What each pipeline stage of a cut costs per micro-batch, read off the profile: its
//! passes (and, where every network stage of it had them timed, its backward's two halves),
//! what it sends on, its gradients and its share of the update.

use std::ops::Range;

use super::StepQuestion;
use crate::pipeline::{SplitBackward, StageCost};
use crate::profile::curve;

impl StepQuestion<'_> {
    /// What each part of `partition` costs per micro-batch of `samples`, from the profile.
    pub(super) fn stage_costs(&self, partition: &[Range<usize>], samples: usize) -> Vec<StageCost> {
        let total_parameters = self.gradient_bytes(0..self.profile.stages.len());
        partition
            .iter()
            .map(|range| {
                let (forward_s, backward_s) = range
                    .clone()
                    .map(|stage| self.stage_s(stage, samples))
                    .fold((0.0, 0.0), |(forward, backward), (f, b)| (forward + f, backward + b));
                let gradient_bytes = self.gradient_bytes(range.clone());
                // The split where every network stage of the range had its halves timed.
                let halves = |stage: usize| {
                    let stage = &self.profile.stages[stage];
                    let measured = !stage.input_backward_s.is_empty() && !stage.weight_backward_s.is_empty();
                    measured.then(|| {
                        (curve(&stage.input_backward_s).at(samples), curve(&stage.weight_backward_s).at(samples))
                    })
                };
                let split_backward = range
                    .clone()
                    .map(halves)
                    .try_fold((0.0, 0.0), |(input, weight), halves| halves.map(|(i, w)| (input + i, weight + w)));
                StageCost {
                    forward_s,
                    backward_s,
                    split_backward: split_backward.map(|(input_s, weight_s)| SplitBackward { input_s, weight_s }),
                    output_bytes: (self.profile.stages[range.end - 1].output_bytes_per_sample * samples as u64) as f64,
                    gradient_bytes: gradient_bytes as f64,
                    optimizer_s: self.profile.optimizer_s * gradient_bytes as f64 / total_parameters.max(1) as f64,
                }
            })
            .collect()
    }
}
