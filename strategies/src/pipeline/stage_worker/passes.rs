//! A stage's passes over one micro-batch: the forward (receiving its input, sending its
//! output on or computing the loss) and the backward (recomputing a dropped forward,
//! swapping in PipeDream's stashed weights, sending the input's gradient back).

use stratlab_comm::ReduceOp;
use stratlab_strategy_spec::Action;
use tch::Tensor;

use super::{Carried, MicroBatch, StageWorker, StepBatch, StepSums};
use crate::autograd::backward_with_grad;
use crate::evaluate::correct_on_device;
use crate::loss_scale;
use crate::timeline::{EventKind, Timeline};
use crate::traffic::Traffic;
use crate::TrainError;

/// How timelines name a stage's passes.
pub(super) fn stage_name(stage: usize) -> String {
    format!("stage {stage}")
}

impl StageWorker<'_> {
    /// A pass's name in timelines and messages: `F3`, or `F3 of stage 5` when the rank
    /// holds several stages.
    pub(super) fn pass_label(&self, action: Action) -> String {
        let pass = action.pass.letter();
        match self.chunks.len() {
            1 => format!("{pass}{}", action.micro_batch),
            _ => format!("{pass}{} of stage {}", action.micro_batch, action.stage),
        }
    }

    /// `action`'s micro-batch, taken out of flight for its backward (or its `I`), and the
    /// pass's label (`m` micro-batches per batch).
    pub(super) fn slot_for_backward(&mut self, action: Action, m: usize) -> (String, MicroBatch) {
        let label = self.pass_label(Action { micro_batch: action.micro_batch % m, ..action });
        let slot = self
            .in_flight
            .remove(&(action.stage, action.micro_batch))
            .expect("a micro-batch's forward runs before its backward");
        (label, slot)
    }

    pub(super) fn forward(
        &mut self,
        action: Action,
        keep_only_input: bool,
        step: &StepBatch<'_>,
        sums: &mut StepSums,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        let (stage, id) = (action.stage, action.micro_batch);
        let label = self.pass_label(Action { micro_batch: step.index(id), ..action });
        let mut slot = self.in_flight.remove(&(stage, id)).unwrap_or_default();
        let input = match slot.activation.take() {
            Some(incoming) => {
                self.take_incoming(incoming, &format!("activation {label}"), timeline, traffic)?.set_requires_grad(true)
            }
            None => step.slice(step.images, id),
        };
        if keep_only_input && self.schedule.updates_per_micro_batch() {
            slot.stash = Some(tch::no_grad(|| self.params.iter().map(|p| p.detach().copy()).collect()));
        }
        let start = timeline.now();
        let output = if keep_only_input {
            tch::no_grad(|| self.forward_local(stage, &input, true))
        } else {
            self.forward_local(stage, &input, true)
        }?;
        timeline.record(EventKind::Forward, stage_name(stage), start, timeline.now(), None);
        if self.is_last_stage(stage) {
            let labels = step.slice(step.labels, id);
            let size = step.sizes[step.index(id)];
            let loss = self.scaled_loss(&output, &labels, size, step.batch());
            // The step's loss is the batch mean whatever each micro-batch's scale.
            let share = if self.schedule.updates_per_micro_batch() { size as f64 / step.batch() as f64 } else { 1.0 };
            tch::no_grad(|| {
                sums.loss += loss.detach() * share;
                sums.correct += correct_on_device(&output, &labels);
            });
            if !keep_only_input {
                slot.loss = Some(loss);
            }
            slot.labels = Some(labels);
        } else {
            self.pass_on(&output, Carried::Activation, stage, id, format!("activation {label}"))?;
            if !keep_only_input {
                slot.output = Some(output);
            }
        }
        slot.input = Some(input);
        self.in_flight.insert((stage, id), slot);
        Ok(())
    }

    /// Backward of `action`'s micro-batch (of `m` per batch) through its stage; PipeDream
    /// then updates.
    pub(super) fn backward(
        &mut self,
        action: Action,
        step: Option<&StepBatch<'_>>,
        m: usize,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        let (stage, id) = (action.stage, action.micro_batch);
        let (label, mut slot) = self.slot_for_backward(action, m);
        let input = slot.input.take().expect("a micro-batch's forward runs before its backward");
        let latest = slot.stash.take().map(|stashed| swap_weights(&self.params, &stashed));
        let (mut output, mut loss) = (slot.output.take(), slot.loss.take());
        if output.is_none() && loss.is_none() {
            let start = timeline.now();
            let pass = crate::memory::in_pass(EventKind::Recompute, Some(stage));
            let recomputed = self.forward_local(stage, &input, true)?;
            drop(pass);
            timeline.record(EventKind::Recompute, stage_name(stage), start, timeline.now(), None);
            if self.is_last_stage(stage) {
                let labels = slot.labels.take().expect("the last stage keeps its labels");
                let batch = step.map_or(labels.size()[0] as usize * m, StepBatch::batch);
                loss = Some(self.scaled_loss(&recomputed, &labels, labels.size()[0] as usize, batch));
            } else {
                output = Some(recomputed);
            }
        }
        let gradient = self.take_gradient(&mut slot, &label, timeline, traffic)?;
        let start = timeline.now();
        let pass = crate::memory::in_pass(EventKind::Backward, Some(stage));
        match (loss, output, gradient) {
            (Some(loss), _, _) => loss_scale::backward(self.loss_scaler.as_ref(), &loss)?,
            (None, Some(output), Some(gradient)) => backward_with_grad(&output, &gradient)?,
            _ => unreachable!("a stage before the last receives its output's gradient"),
        }
        drop(pass);
        timeline.record(EventKind::Backward, stage_name(stage), start, timeline.now(), None);
        if stage > 0 {
            self.pass_on(&input.grad(), Carried::Gradient, stage, id, format!("gradient {label}"))?;
        }
        if let Some(latest) = latest {
            swap_weights(&self.params, &latest);
        }
        if self.schedule.updates_per_micro_batch() {
            // A replicated stage's workers each ran one micro-batch of the round: they
            // average its gradients and update together (PipeDream's data-parallel stage).
            if let Some(group) = &self.replica_group {
                let endpoint = self.endpoint();
                endpoint.all_reduce_gradients(group, &self.params, ReduceOp::Average, timeline, traffic)?;
            }
            timeline.span(EventKind::Optimizer, "optimizer step", || self.optimizer.step());
            self.optimizer.zero_grad();
        }
        Ok(())
    }
}

/// Copies `weights` into `params` and returns the values they had.
fn swap_weights(params: &[Tensor], weights: &[Tensor]) -> Vec<Tensor> {
    tch::no_grad(|| {
        params
            .iter()
            .zip(weights)
            .map(|(param, weights)| {
                let previous = param.detach().copy();
                param.detach().copy_(weights);
                previous
            })
            .collect()
    })
}
