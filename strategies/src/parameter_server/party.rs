//! What a parameter server's ranks share: the group, the roles, the replica's parameters
//! and the whole-model buffers, and the messages' tags. The lockstep rounds (`mod.rs`) and
//! the per-worker server (`event_server.rs`) both speak through it.

use stratlab_comm::ProcessGroup;
use tch::nn;
use tch::{Device, Kind, Tensor};

use crate::flat::{buffer_for, pack};
use crate::loss_scale::LossScaler;
use crate::TrainError;

pub(super) const TAG_CONTROL: u32 = 1;
pub(super) const TAG_GRADIENTS: u32 = 2;
pub(super) const TAG_PARAMETERS: u32 = 3;

/// What workers and server share: the group, the roles and the replica's parameters.
pub(super) struct Party<'a> {
    pub(super) group: &'a ProcessGroup,
    pub(super) server: usize,
    /// Ranks that train, in order (the server among them when colocated).
    pub(super) workers: Vec<usize>,
    pub(super) params: Vec<Tensor>,
    pub(super) optimizer: nn::Optimizer,
    /// Every rank's copy moves alike: the server's verdict travels with the weights.
    pub(super) loss_scaler: Option<LossScaler>,
    pub(super) device: Device,
    pub(super) buffers: FlatBuffers,
}

/// The whole-model buffers a rank keeps from round to round, on the communication device.
pub(super) struct FlatBuffers {
    /// Every parameter's element count, then two: a worker's gradients go out of the first
    /// part and its new weights and the two flags come back into the whole; the server sums
    /// and averages the gradients in the first part, then writes the weights and the flags.
    pub(super) flat: Tensor,
    /// The server's: one per remote worker, its gradients received into it.
    pub(super) received: Vec<Tensor>,
}

impl FlatBuffers {
    pub(super) fn new(params: &[Tensor], remote_workers: usize, comm: Device) -> FlatBuffers {
        FlatBuffers {
            flat: buffer_for(params, 2, comm),
            received: (0..remote_workers).map(|_| buffer_for(params, 0, comm)).collect(),
        }
    }

    /// The part the gradients and the weights take: all but the flags.
    pub(super) fn values(&self) -> Tensor {
        self.flat.narrow(0, 0, self.flat.numel() as i64 - 2)
    }

    /// The stop flag's element.
    pub(super) fn flag(&self) -> Tensor {
        self.flat.narrow(0, self.flat.numel() as i64 - 2, 1)
    }

    /// The overflow flag's element.
    pub(super) fn overflow(&self) -> Tensor {
        self.flat.narrow(0, self.flat.numel() as i64 - 1, 1)
    }
}

impl Party<'_> {
    pub(super) fn is_server(&self) -> bool {
        self.group.rank() == self.server
    }

    /// Host-side buffers for Gloo; device-side for NCCL.
    pub(super) fn comm_device(&self) -> Device {
        self.group.tensor_device(self.device)
    }

    /// The element type of the weights, and so of every gradient and weight message.
    pub(super) fn kind(&self) -> Kind {
        self.params.first().map_or(Kind::Float, Tensor::kind)
    }

    /// This rank's gradients into the first part of its flat buffer, which it returns.
    pub(super) fn pack_gradients(&self) -> Tensor {
        let values = self.buffers.values();
        pack(self.params.iter().map(Tensor::grad), &values);
        values
    }

    pub(super) fn param_numel(&self) -> i64 {
        self.params.iter().map(Tensor::numel).sum::<usize>() as i64
    }

    pub(super) fn send_control(&self, go_on: bool, lr: f64, out_of_time: bool) -> Result<(), TrainError> {
        let control = Tensor::from_slice(&[go_on as i32 as f64, lr, out_of_time as i32 as f64]);
        self.group.send(&control.to_device(self.comm_device()), self.server, TAG_CONTROL)?;
        Ok(())
    }

    /// Gives every parameter its (zero) gradient tensor, which updates then overwrite: a
    /// dedicated server never runs a forward pass, so a backward of zero does it.
    pub(super) fn give_gradients(&self) -> Result<(), TrainError> {
        let zero = self.params.iter().map(|p| p.sum(Kind::Float) * 0.0).fold(Tensor::from(0f32), |a, b| a + b);
        Ok(zero.f_backward()?)
    }
}
