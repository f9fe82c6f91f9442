//! The `time` balance's measurement: every stage's forward+backward on the device that
//! will train, timed one stage at a time on noise shaped like its samples.

use stratlab_networks::NetworkSpec;
use stratlab_strategy_spec::PartitionError;
use tch::Device;

use crate::optimizer::UpdateRule;
use crate::precision::Compute;
use crate::profile::{noise_samples, profile_network};

pub use crate::profile::PROFILE_REPEATS;

/// Seconds of one forward plus one backward of each stage of `spec` for
/// `micro_batch` samples on `device` (see [`super::stage_costs`] for the method and its
/// caveats), from the network's profile at that size.
pub(super) fn stage_seconds(spec: &NetworkSpec, micro_batch: i64, device: Device) -> Result<Vec<f64>, PartitionError> {
    // Float32: a pipeline that cuts by time itself (no `stage_seconds` given) is a test's or
    // a probe's; the runner gives every trial seconds profiled in its own precision.
    let size = micro_batch.max(1) as usize;
    let samples = noise_samples(spec, size);
    let profile = profile_network(spec, device, &[size], UpdateRule::plain_sgd(), Compute::default(), &samples)
        .map_err(|error| PartitionError(format!("profiling {}: {error}", spec.name)))?;
    Ok(profile.stages.iter().map(|stage| stage.forward_s[0].1 + stage.backward_s[0].1).collect())
}
