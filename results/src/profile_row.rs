//! Networks' profiles on a device, kept in the store and reused: one row per network stage
//! and sample count, with what the profile is valid for (network, data set, device,
//! threads, numerics, libtorch, the binary, the optimizer) folded into `profile_key`. The
//! performance model reads them through `stratlab_strategies::stored_profile`.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::Table;

/// One stage of one profile at one sample count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct ProfileRow {
    /// Everything the profile must match to be reused, as one string; its rows share it.
    pub profile_key: String,
    /// The network's name.
    pub network: String,
    /// The data set whose input shape the network was built for.
    pub dataset: String,
    /// Where it was taken (`cpu`, `cuda:0`).
    pub device: String,
    /// libtorch threads it was taken at.
    pub threads: u32,
    /// The stage, from 0.
    pub stage: u32,
    /// The stage's name in the network.
    pub stage_name: String,
    /// Samples the passes ran.
    pub samples: u64,
    /// Median seconds of the stage's forward; null at a sample count where only whole
    /// training steps were measured.
    pub forward_s: Option<f64>,
    /// Median seconds of its backward; null with the forward.
    pub backward_s: Option<f64>,
    /// Bytes its forward keeps until the backward; null where the allocator cannot count.
    pub kept_bytes: Option<f64>,
    /// Bytes its passes allocate above that at their high-water mark.
    pub transient_bytes: Option<f64>,
    /// Bytes of its output per sample.
    pub output_bytes_per_sample: u64,
    /// Bytes of each of its trainable parameters, in the network's order.
    pub parameter_bytes: Vec<u64>,
    /// Median seconds of the whole network's optimizer step (the same in every row).
    pub optimizer_s: f64,
    /// Median seconds of one whole-model copy between the gradients and a flat buffer
    /// allocated before (the same in every row); null in profiles stored before it was
    /// measured (those stored `flatten_s`, a copy into a new buffer, which no strategy
    /// makes any more).
    pub whole_model_copy_s: Option<f64>,
    /// Workers that ran at once when the contention at `samples` was measured.
    pub contention_copies: Option<u32>,
    /// Their pass over a pass alone, at `samples`; null where not measured.
    pub contention_ratio: Option<f64>,
    /// 10th percentile of a few real training steps of the whole network at `samples` (one
    /// worker, the trial's data and optimizer), on the first stage's row; null where not
    /// measured (and in profiles stored before it was).
    pub training_step_s: Option<f64>,
    /// The largest peak of allocated bytes over those steps, beside it; null where not
    /// measured (and in profiles stored before it was).
    pub training_step_peak_bytes: Option<f64>,
    /// When it was taken (UTC, RFC 3339).
    pub taken_at: String,
    /// Seconds taking the whole profile took.
    pub profile_s: f64,
    /// Seconds of the runner's fixed reference work timed just before the profile (the
    /// machine's speed then); null in profiles stored before it was timed.
    #[serde(default)]
    pub speed_reference_s: Option<f64>,
    /// Seconds of the stage's backward split in two: the input's gradient alone
    /// (zero-bubble's `I`); null where not measured (and in profiles stored before it was).
    #[serde(default)]
    pub input_backward_s: Option<f64>,
    /// Seconds of the other half, the weights' gradients (`W`); null with it.
    #[serde(default)]
    pub weight_backward_s: Option<f64>,
}

impl Table for ProfileRow {
    const NAME: &'static str = crate::table_names::PROFILES;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}
