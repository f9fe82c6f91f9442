//! Zero-bubble's split backward on a stage: `I`, the input's gradient, sent back at once to
//! the stage before; `W`, the weights' gradients, run later where the schedule puts it.
//! The first stage has no input gradient to send, so its `I` only takes the output's
//! gradient and its `W` is the whole backward, as PyTorch's pipelining stages run it.

use stratlab_strategy_spec::Action;
use tch::Tensor;

use super::passes::stage_name;
use super::{Carried, StageWorker};
use crate::autograd::backward_with_grad;
use crate::loss_scale;
use crate::split_backward::backward_input;
use crate::timeline::{EventKind, Timeline};
use crate::traffic::Traffic;
use crate::TrainError;

impl StageWorker<'_> {
    /// `I` of `action`'s micro-batch (of `m` per batch).
    pub(super) fn backward_input(
        &mut self,
        action: Action,
        m: usize,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        let (stage, id) = (action.stage, action.micro_batch);
        let (label, mut slot) = self.slot_for_backward(action, m);
        let gradient = self.take_gradient(&mut slot, &label, timeline, traffic)?;
        if stage == 0 {
            // Recorded as the (empty) pass it is, so the timeline lists every action.
            let now = timeline.now();
            timeline.record(EventKind::BackwardInput, stage_name(stage), now, now, None);
            slot.output_gradient = gradient;
            self.in_flight.insert((stage, id), slot);
            return Ok(());
        }
        // The root of the backward and the gradient it starts from: the (scaled) loss and
        // one, or the output and the gradient received for it.
        let (root, root_gradient) = match (&slot.loss, &slot.output, gradient) {
            (Some(loss), _, _) => {
                let scaled = match &self.loss_scaler {
                    Some(scaler) => scaler.scaled(loss),
                    None => loss.shallow_clone(),
                };
                let one = scaled.ones_like();
                (scaled, one)
            }
            (None, Some(output), Some(gradient)) => (output.shallow_clone(), gradient),
            _ => unreachable!("zero-bubble keeps every output, and a stage before the last receives its gradient"),
        };
        let input = slot.input.as_ref().expect("a micro-batch's forward runs before its backward");
        let start = timeline.now();
        let pass = crate::memory::in_pass(EventKind::BackwardInput, Some(stage));
        let (input_gradient, weights) = backward_input(&root, &root_gradient, input)?;
        drop(pass);
        timeline.record(EventKind::BackwardInput, stage_name(stage), start, timeline.now(), None);
        slot.weights = Some(weights);
        self.pass_on(&input_gradient, Carried::Gradient, stage, id, format!("gradient {label}"))?;
        self.in_flight.insert((stage, id), slot);
        Ok(())
    }

    /// `W` of `action`'s micro-batch: its weights' gradients, accumulated for the step's
    /// update; the micro-batch is then done on this stage.
    pub(super) fn backward_weight(&mut self, action: Action, timeline: &mut Timeline) -> Result<(), TrainError> {
        let (stage, id) = (action.stage, action.micro_batch);
        let mut slot = self.in_flight.remove(&(stage, id)).expect("a micro-batch's I runs before its W");
        let start = timeline.now();
        let pass = crate::memory::in_pass(EventKind::BackwardWeight, Some(stage));
        match (slot.weights.take(), slot.loss.take(), slot.output.take(), slot.output_gradient.take()) {
            (Some(weights), ..) => weights.compute()?,
            (None, Some(loss), _, _) => loss_scale::backward(self.loss_scaler.as_ref(), &loss)?,
            (None, None, Some(output), Some(gradient)) => backward_with_grad(&output, &gradient)?,
            _ => unreachable!("the first stage keeps its output's gradient from I to W"),
        }
        drop(pass);
        timeline.record(EventKind::BackwardWeight, stage_name(stage), start, timeline.now(), None);
        drop::<Option<Tensor>>(slot.input.take());
        Ok(())
    }
}
