//! How a stage talks to its neighbours: message tags, receives posted ahead, sends that
//! complete in the background, the replicas' gradient all-reduce and the step's loss. What
//! is sent when is the stage worker's business; this module only moves tensors.

use std::collections::VecDeque;

use stratlab_comm::{ProcessGroup, ReduceOp, Work};
use tch::{Device, Kind, Tensor};

use super::layout::Layout;
use crate::flat;
use crate::timeline::{EventKind, Timeline};
use crate::traffic::Traffic;
use crate::TrainError;

// Tags keep a pipeline's messages apart: activations and gradients per receiving stage
// and micro-batch (an interleaved rank receives from the same neighbour for each of its
// stages), the step's loss, and evaluation batches. Ids wrap at 2¹², stages at 2⁷, so
// tags stay below LOSS_TAG; at most one pipeline's depth of micro-batches is in flight.
pub(super) fn activation_tag(stage: usize, id: usize) -> u32 {
    2 * (((id % (1 << 12)) << 7) | (stage % (1 << 7))) as u32
}
pub(super) fn gradient_tag(stage: usize, id: usize) -> u32 {
    activation_tag(stage, id) + 1
}
pub(super) const LOSS_TAG: u32 = 1 << 20;
pub(super) const EVAL_TAG: u32 = 1 << 21;

/// A receive in flight into its buffer.
pub(super) struct PendingRecv {
    buffer: Tensor,
    work: Work,
}

/// A send in flight with its buffer (which must live until it completes).
struct PendingSend {
    work: Work,
    _buffer: Tensor,
    what: String,
    /// The step it was sent in.
    step: usize,
}

/// Sends not known to be complete, oldest first. Gloo completes a send when its receive is
/// posted, which under PipeDream can be in the next step, so they are carried across steps.
///
/// Gloo's send work reports itself completed only once it is waited for, so sends that are
/// only polled ([`Sends::settle`] without waiting) are never dropped: under PipeDream, which
/// never flushes, every step's messages stayed allocated (the peak memory grew by the step's
/// traffic each step). [`Sends::settle_earlier_steps`] waits for them one step later, when
/// the peer has posted their receives.
#[derive(Default)]
pub(super) struct Sends {
    queue: VecDeque<PendingSend>,
    step: usize,
}

impl Sends {
    /// Sends pushed from now on belong to step `step`.
    pub(super) fn begin_step(&mut self, step: usize) {
        self.step = step;
    }

    /// Waits for every send of the steps before the current one. The peer posts their
    /// receives within its own step of the same number or the next, which needs only sends
    /// this rank has already made, so the wait cannot deadlock.
    pub(super) fn settle_earlier_steps(
        &mut self,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        while self.queue.front().is_some_and(|send| send.step < self.step) {
            self.settle_oldest(timeline, traffic)?;
        }
        Ok(())
    }

    fn settle_oldest(&mut self, timeline: &mut Timeline, traffic: &mut Traffic) -> Result<(), TrainError> {
        let send = self.queue.pop_front().expect("checked by the callers");
        let done = send.work.wait()?;
        timeline.communication(EventKind::Send, send.what, &done);
        traffic.add(&done);
        Ok(())
    }

    /// Sends `tensor` to rank `dst` in the background.
    pub(super) fn push(
        &mut self,
        endpoint: Endpoint<'_>,
        tensor: &Tensor,
        dst: usize,
        tag: u32,
        what: String,
    ) -> Result<(), TrainError> {
        let buffer = tensor.detach().to_device(endpoint.comm_device()).contiguous();
        let work = endpoint.world.send_async(&buffer, dst, tag)?;
        self.queue.push_back(PendingSend { work, _buffer: buffer, what, step: self.step });
        Ok(())
    }

    /// Records the sends that have completed (all of them when `wait`), oldest first.
    pub(super) fn settle(
        &mut self,
        wait: bool,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        while self.queue.front().is_some_and(|send| wait || send.work.is_completed()) {
            self.settle_oldest(timeline, traffic)?;
        }
        Ok(())
    }
}

/// How a rank reaches the others: the world group, where the rank sits in it, and the
/// element type and device of what it computes.
#[derive(Clone, Copy)]
pub(super) struct Endpoint<'a> {
    pub(super) world: &'a ProcessGroup,
    pub(super) layout: Layout,
    /// The element type of activations and gradients, and so of every receive buffer.
    pub(super) kind: Kind,
    /// Where the stage computes (messages may travel through another device, see
    /// [`Endpoint::comm_device`]).
    pub(super) device: Device,
    /// The pipeline position of the rank that holds the last stage and so the loss: the
    /// last rank, or the first under zero-bubble's V placement.
    pub(super) loss_holder: usize,
}

impl Endpoint<'_> {
    /// Where messages are staged: the backend's device for the stage's device.
    pub(super) fn comm_device(&self) -> Device {
        self.world.tensor_device(self.device)
    }

    pub(super) fn post_recv(&self, shape: &[i64], src: usize, tag: u32) -> Result<PendingRecv, TrainError> {
        self.post_recv_of(shape, self.kind, src, tag)
    }

    /// [`Self::post_recv`] of a message in `kind` rather than the activations' type.
    fn post_recv_of(&self, shape: &[i64], kind: Kind, src: usize, tag: u32) -> Result<PendingRecv, TrainError> {
        let mut buffer = Tensor::empty(shape, (kind, self.comm_device()));
        let work = self.world.recv_async(&mut buffer, src, tag)?;
        Ok(PendingRecv { buffer, work })
    }

    /// Waits for a receive, recording the wait (idle) and the transfer.
    pub(super) fn complete_recv(
        &self,
        pending: PendingRecv,
        what: &str,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<Tensor, TrainError> {
        let waited = timeline.now();
        let done = pending.work.wait()?;
        timeline.record(EventKind::Idle, format!("waiting for {what}"), waited, timeline.now(), None);
        timeline.communication(EventKind::Recv, what, &done);
        traffic.add(&done);
        Ok(pending.buffer.to_device(self.device))
    }

    /// Reduces this stage's gradients over its replicas with `op`, in one fused buffer.
    pub(super) fn all_reduce_gradients(
        &self,
        group: &ProcessGroup,
        params: &[Tensor],
        op: ReduceOp,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        if params.is_empty() {
            return Ok(());
        }
        // Through the flat helpers, which copy in each gradient's logical order whatever its
        // layout (a channels-last gradient has no flat view).
        let mut flat = flat::buffer_for(params, 0, self.device);
        flat::pack(params.iter().map(Tensor::grad), &flat);
        flat = flat.to_device(group.tensor_device(self.device));
        let done = group.all_reduce_async(&mut flat, op)?.wait()?;
        timeline.communication(EventKind::AllReduce, format!("stage {} replicas", self.layout.stage), &done);
        traffic.add(&done);
        flat::unpack(&flat.to_device(self.device), params.iter().map(Tensor::grad));
        Ok(())
    }

    /// Posts the receive of the step's loss and correct count from the last stage, which
    /// sends them in float32 whatever the activations' type.
    pub(super) fn post_loss_recv(&self) -> Result<PendingRecv, TrainError> {
        self.post_recv_of(&[2], Kind::Float, self.layout.rank_of(self.loss_holder), LOSS_TAG)
    }

    /// The last stage sends the batch's loss and correct count to the other stages of its
    /// pipeline, so every rank records the same metrics.
    pub(super) fn share_loss(
        &self,
        loss: Tensor,
        correct: Tensor,
        pending: Option<PendingRecv>,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(Tensor, Tensor), TrainError> {
        let layout = self.layout;
        match pending {
            None => {
                let metrics = Tensor::stack(&[loss.to_kind(Kind::Float), correct.to_kind(Kind::Float)], 0);
                let buffer = metrics.to_device(self.comm_device());
                let works: Vec<Work> = (0..layout.stages)
                    .filter(|&stage| stage != self.loss_holder)
                    .map(|stage| self.world.send_async(&buffer, layout.rank_of(stage), LOSS_TAG))
                    .collect::<Result<_, _>>()?;
                for work in works {
                    traffic.add(&work.wait()?);
                }
                Ok((loss, correct))
            }
            Some(pending) => {
                let metrics = self.complete_recv(pending, "loss", timeline, traffic)?;
                Ok((metrics.get(0), metrics.get(1).to_kind(Kind::Int64)))
            }
        }
    }
}
