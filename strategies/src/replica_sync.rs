//! Collectives every multi-worker strategy shares: replicas start from rank 0's weights,
//! metrics are summed over the group, and ranks agree when to stop.

use stratlab_comm::{ProcessGroup, ReduceOp};
use tch::nn;
use tch::{Device, Kind, Tensor};

use crate::timeline::{EventKind, Timeline};
use crate::TrainError;

/// Every variable of rank 0 (parameters and buffers such as batch-norm statistics, in name
/// order so all ranks agree), so the replicas start identical whatever each rank drew.
pub(crate) fn broadcast_variables(
    group: &ProcessGroup,
    store: &nn::VarStore,
    timeline: &mut Timeline,
) -> Result<(), TrainError> {
    let mut variables: Vec<(String, Tensor)> = store.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, mut variable) in variables {
        // c10d sends dense tensors in their logical order: a channels-last weight travels
        // through a contiguous copy.
        let laid_out = !variable.is_contiguous();
        let mut message = if laid_out { variable.contiguous() } else { variable.shallow_clone() };
        let work = tch::no_grad(|| group.broadcast_async(&mut message, 0))?;
        let done = work.wait()?;
        if laid_out {
            tch::no_grad(|| variable.copy_(&message));
        }
        timeline.communication(EventKind::Broadcast, name, &done);
    }
    Ok(())
}

/// Sums `values` over every rank of `group`, in place (float64 on the backend's device).
pub(crate) fn sum_over_group(group: &ProcessGroup, device: Device, values: &mut [f64]) -> Result<(), TrainError> {
    if group.world_size() == 1 {
        return Ok(());
    }
    let mut tensor = Tensor::from_slice(values).to_device(group.tensor_device(device));
    group.all_reduce(&mut tensor, ReduceOp::Sum)?;
    let summed = Vec::<f64>::try_from(tensor.to_device(Device::Cpu))?;
    values.copy_from_slice(&summed);
    Ok(())
}

/// Whether any rank wants to stop. Only a wall-time budget can differ between ranks (step
/// and epoch budgets end every rank at the same step), so only then does it cost a
/// collective: a one-element all-reduce with max.
pub(crate) fn agree_any(
    group: &ProcessGroup,
    device: Device,
    local_stop: bool,
    wall_time_budget: bool,
) -> Result<bool, TrainError> {
    if !wall_time_budget || group.world_size() == 1 {
        return Ok(local_stop);
    }
    let mut flag = Tensor::from_slice(&[local_stop as i32 as f32]).to_device(group.tensor_device(device));
    group.all_reduce(&mut flag, ReduceOp::Max)?;
    Ok(flag.to_kind(Kind::Float).double_value(&[0]) > 0.0)
}
