//! What travels between a rank's stage and its neighbours: sent to the rank that runs the
//! neighbouring stage, or, where that is this rank too (zero-bubble's V turns on the last
//! rank), handed over in place; and taken once it is here.

use tch::Tensor;

use super::{Carried, Incoming, MicroBatch, StageWorker};
use crate::pipeline::links::{activation_tag, gradient_tag};
use crate::timeline::Timeline;
use crate::traffic::Traffic;
use crate::TrainError;

impl StageWorker<'_> {
    /// `tensor`, carried from stage `stage` for micro-batch `id` to the neighbouring stage:
    /// sent to the rank that runs it, or handed over in place where that is this rank.
    pub(super) fn pass_on(
        &mut self,
        tensor: &Tensor,
        carried: Carried,
        stage: usize,
        id: usize,
        what: String,
    ) -> Result<(), TrainError> {
        let (to_stage, tag) = match carried {
            Carried::Activation => (stage + 1, activation_tag(stage + 1, id)),
            Carried::Gradient => (stage - 1, gradient_tag(stage - 1, id)),
        };
        let to = self.rank_of_stage(to_stage, id);
        if to != self.world.rank() {
            let endpoint = self.endpoint();
            return self.sends.push(endpoint, tensor, to, tag, what);
        }
        // A copy, as a message would be: the next stage's in-place ops must not reach back.
        let handed = Some(Incoming::HandedOver(tch::no_grad(|| tensor.detach().copy())));
        let slot = self.in_flight.entry((to_stage, id)).or_default();
        match carried {
            Carried::Activation => slot.activation = handed,
            Carried::Gradient => slot.gradient = handed,
        }
        Ok(())
    }

    /// What a neighbouring stage sent or handed over, once it is here.
    pub(super) fn take_incoming(
        &self,
        incoming: Incoming,
        what: &str,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<Tensor, TrainError> {
        match incoming {
            Incoming::Posted(pending) => self.endpoint().complete_recv(pending, what, timeline, traffic),
            Incoming::HandedOver(tensor) => Ok(tensor),
        }
    }

    /// The gradient of `slot`'s output, sent or handed over by the stage after, once it is
    /// here (`label` names the pass waiting for it); `None` on the last stage.
    pub(super) fn take_gradient(
        &self,
        slot: &mut MicroBatch,
        label: &str,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<Option<Tensor>, TrainError> {
        let what = format!("gradient {label}");
        slot.gradient.take().map(|incoming| self.take_incoming(incoming, &what, timeline, traffic)).transpose()
    }
}
