//! A network's profile as the model reads it: every stage's forward and backward seconds
//! at a few sample counts, with what the stage holds (parameters), keeps and sends on (its
//! output), the update, and what sharing a machine costs. Plain data: `stratlab_strategies`
//! measures it with libtorch (or puts it on a device's roofline), the profile store keeps
//! it, and `stratlab_perf_model::predict` predicts from it.

use serde::{Deserialize, Serialize};

use crate::{Contention, CostCurve};

/// One network stage, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageProfile {
    /// The stage's name in the network.
    pub name: String,
    /// `(samples, forward seconds)` of the faster timed pass, one per profiled size.
    pub forward_s: Vec<(usize, f64)>,
    /// `(samples, backward seconds)` of the same pass: the gradient of the stage's parameters
    /// and of its input (a pipeline stage's received activation), as a stage worker computes
    /// it.
    pub backward_s: Vec<(usize, f64)>,
    /// Bytes of each trainable parameter of the stage, in the network's order.
    pub parameter_bytes: Vec<u64>,
    /// Bytes of the stage's output per sample (what a pipeline sends on, and the size of
    /// the gradient it gets back).
    pub output_bytes_per_sample: u64,
    /// `(samples, bytes)` the forward leaves allocated until its backward: what autograd
    /// keeps, and the output. Counted by the allocator (empty where it cannot count).
    #[serde(default)]
    pub kept_bytes: Vec<(usize, f64)>,
    /// `(samples, bytes)` the passes allocate above what is kept, at their high-water mark:
    /// the forward's workspace, or the backward's gradients of the input and temporaries.
    #[serde(default)]
    pub transient_bytes: Vec<(usize, f64)>,
    /// `(samples, seconds)` of the backward split in two (zero-bubble's `I`): the input's
    /// gradient alone, saving the gradients where the weights' paths leave it. Empty where
    /// not measured (no zero-bubble cell asked, or a profile stored before).
    #[serde(default)]
    pub input_backward_s: Vec<(usize, f64)>,
    /// `(samples, seconds)` of the other half (`W`): the weights' gradients from those saved
    /// gradients. With `input_backward_s`, what splitting costs over `backward_s`.
    #[serde(default)]
    pub weight_backward_s: Vec<(usize, f64)>,
}

/// Every stage of a network on one device at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkProfile {
    /// Stages in order.
    pub stages: Vec<StageProfile>,
    /// Median seconds of one optimizer step over all the network's parameters (the
    /// trial's optimizer; a stage's share is proportional to its parameters).
    pub optimizer_s: f64,
    /// Median seconds of one whole-model copy between the gradients and a flat buffer
    /// allocated before (packing them into it, or unpacking it into them), as a parameter
    /// server's round makes them (0 where not measured).
    #[serde(default)]
    pub whole_model_copy_s: f64,
    /// How much slower the passes run while the machine's other workers compute, measured
    /// apart (`stratlab_strategies::contention`); `None` where no two workers share a machine.
    #[serde(default)]
    pub contention: Option<Contention>,
    /// `(samples, seconds)`: the 10th percentile of a few real training steps of the whole
    /// network by one worker at this thread count, on the trial's data with its optimizer,
    /// measured apart at the batches single cells train; the sequential step as the trials
    /// time it (empty where not measured).
    #[serde(default)]
    pub training_step_s: Vec<(usize, f64)>,
    /// `(samples, bytes)`: the largest peak of allocated bytes over those steps (empty
    /// where not measured, or where the allocator cannot count).
    #[serde(default)]
    pub training_step_peak_bytes: Vec<(usize, f64)>,
}

impl NetworkProfile {
    /// The same profile with every time multiplied by `factor`: a roofline's split of a
    /// step kept, its total made a measured one (`stratlab validate`).
    pub fn scaled(&self, factor: f64) -> NetworkProfile {
        let scale = |points: &[(usize, f64)]| points.iter().map(|&(samples, s)| (samples, s * factor)).collect();
        NetworkProfile {
            stages: self
                .stages
                .iter()
                .map(|stage| StageProfile {
                    forward_s: scale(&stage.forward_s),
                    backward_s: scale(&stage.backward_s),
                    input_backward_s: scale(&stage.input_backward_s),
                    weight_backward_s: scale(&stage.weight_backward_s),
                    ..stage.clone()
                })
                .collect(),
            optimizer_s: self.optimizer_s * factor,
            whole_model_copy_s: self.whole_model_copy_s * factor,
            contention: self.contention.clone(),
            training_step_s: scale(&self.training_step_s),
            training_step_peak_bytes: self.training_step_peak_bytes.clone(),
        }
    }

    /// Seconds of every stage's forward and backward at exactly `samples`, where profiled.
    pub fn stage_sum_s(&self, samples: usize) -> Option<f64> {
        let at = |points: &[(usize, f64)]| value_at(points, samples);
        self.stages.iter().map(|stage| Some(at(&stage.forward_s)? + at(&stage.backward_s)?)).sum()
    }
}

/// The value measured at exactly `samples` among `(samples, value)` points.
pub fn value_at(points: &[(usize, f64)], samples: usize) -> Option<f64> {
    points.iter().find(|&&(at, _)| at == samples).map(|&(_, value)| value)
}

/// Seconds of each network stage's forward and backward on `samples` samples, read off
/// `profile` (interpolated between the sizes it timed): what a `time` balance cuts, in the
/// model and, handed to a trial, in the trial itself.
pub fn stage_seconds(profile: &NetworkProfile, samples: usize) -> Vec<f64> {
    profile
        .stages
        .iter()
        .map(|stage| curve(&stage.forward_s).at(samples) + curve(&stage.backward_s).at(samples))
        .collect()
}

/// The cost curve of measured `(samples, value)` points (zero where there are none).
pub fn curve(points: &[(usize, f64)]) -> CostCurve {
    CostCurve::new(points.to_vec()).unwrap_or_else(|_| CostCurve::proportional(0.0))
}
