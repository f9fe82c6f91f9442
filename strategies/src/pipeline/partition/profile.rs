//! The `time` balance's measurement: every stage's forward+backward on the device that
//! will train, timed one stage at a time on synthetic inputs.

use std::time::Instant;

use stratlab_networks::NetworkSpec;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::partition_error::PartitionError;
use crate::autograd::backward_with_grad;
use crate::device::synchronize;

/// Timed passes per stage after the warm-up; the cost is their median.
pub const PROFILE_REPEATS: usize = 5;

/// Median seconds of one forward+backward of each stage of `spec` for `micro_batch`
/// samples on `device` (see [`super::stage_costs`] for the method and its caveats).
pub(super) fn stage_seconds(spec: &NetworkSpec, micro_batch: i64, device: Device) -> Result<Vec<f64>, PartitionError> {
    let vs = VarStore::new(device);
    let network = spec.build(&vs.root());
    let dims: Vec<i64> = std::iter::once(micro_batch).chain(spec.input.sample_dims()).collect();
    // Ones, not random numbers: only the generator's use for the weights is unavoidable.
    let mut input = Tensor::ones(dims, (Kind::Float, device));
    let mut seconds = Vec::with_capacity(spec.stages.len());
    for (i, stage) in spec.stages.iter().enumerate() {
        let fail = |error: crate::TrainError| PartitionError(format!("profiling stage `{}`: {error}", stage.name));
        // Later stages receive activations and must send their gradient back.
        let x = input.detach().set_requires_grad(i > 0);
        let warm_up = network.forward_stage(i, &x, true);
        let grad = Tensor::ones_like(&warm_up);
        backward_with_grad(&warm_up, &grad).map_err(fail)?;
        let mut times = Vec::with_capacity(PROFILE_REPEATS);
        for _ in 0..PROFILE_REPEATS {
            synchronize(device);
            let start = Instant::now();
            let output = network.forward_stage(i, &x, true);
            backward_with_grad(&output, &grad).map_err(fail)?;
            synchronize(device);
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        seconds.push(times[times.len() / 2]);
        input = warm_up.detach();
    }
    Ok(seconds)
}
