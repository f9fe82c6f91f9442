//! One training step's forward and backward over a [`StagedModel`], one network stage at a
//! time, with a strategy's hooks between stages: data parallelism launches a stage's
//! gradient buckets when its backward ends, sharded data parallelism also gathers a stage's
//! weights before its forward and its backward and frees them after.
//!
//! Each stage's input is a detached leaf, so when stage *i*'s backward finishes its
//! parameters' gradients are final and its input's gradient seeds stage *i − 1*.

use tch::nn::ModuleT;
use tch::{Device, Tensor};

use crate::autograd::backward_with_grad;
use crate::loss_scale::{self, LossScaler};
use crate::staged_model::StagedModel;
use crate::timeline::{EventKind, Timeline};
use crate::{Precision, PrecisionOps, TrainError};

/// What a strategy does between the stages of a staged step. Every hook defaults to
/// nothing.
pub(crate) trait StageHooks {
    /// Before network stage `stage`'s forward.
    fn before_forward(&mut self, _stage: usize, _timeline: &mut Timeline) -> Result<(), TrainError> {
        Ok(())
    }
    /// After network stage `stage`'s forward.
    fn after_forward(&mut self, _stage: usize, _timeline: &mut Timeline) -> Result<(), TrainError> {
        Ok(())
    }
    /// Before network stage `stage`'s backward.
    fn before_backward(&mut self, _stage: usize, _timeline: &mut Timeline) -> Result<(), TrainError> {
        Ok(())
    }
    /// After network stage `stage`'s backward: its parameters' gradients are final.
    fn after_backward(&mut self, _stage: usize, _timeline: &mut Timeline) -> Result<(), TrainError> {
        Ok(())
    }
}

/// A staged step's model, what it computes in, and its loss scaler (fp16), held by the
/// strategies whose steps run stage by stage.
pub(crate) struct StagedPass {
    pub(crate) model: StagedModel,
    pub(crate) precision: Precision,
    pub(crate) device: Device,
    pub(crate) loss_scaler: Option<LossScaler>,
}

impl StagedPass {
    /// The forward (under the precision's autocast) and the backward of `images` against
    /// `labels`, stage by stage with `hooks` between; returns the logits and the loss.
    pub(crate) fn run(
        &self,
        images: &Tensor,
        labels: &Tensor,
        timeline: &mut Timeline,
        hooks: &mut dyn StageHooks,
    ) -> Result<(Tensor, Tensor), TrainError> {
        let stage_count = self.model.stages.len();
        let forward = self.precision.autocast(self.device, || -> Result<_, TrainError> {
            let mut inputs = Vec::with_capacity(stage_count);
            let mut outputs: Vec<Tensor> = Vec::with_capacity(stage_count);
            for (index, stage) in self.model.stages.iter().enumerate() {
                hooks.before_forward(index, timeline)?;
                let input = match outputs.last() {
                    None => images.shallow_clone(),
                    Some(previous) => previous.detach().set_requires_grad(true),
                };
                let name = stage.stage_names().join("+");
                outputs.push(timeline.span(EventKind::Forward, name, || stage.forward_t(&input, true)));
                inputs.push(input);
                hooks.after_forward(index, timeline)?;
            }
            let loss = outputs.last().expect("a network has stages").cross_entropy_for_logits(labels);
            Ok((inputs, outputs, loss))
        })?;
        let (mut inputs, mut outputs, loss) = forward?;
        let logits = outputs.last().expect("a network has stages").shallow_clone();
        // The gradient of the stage above's input, the one this stage's backward starts from.
        let mut upstream: Option<Tensor> = None;
        for stage in (0..stage_count).rev() {
            hooks.before_backward(stage, timeline)?;
            let name = self.model.stages[stage].stage_names().join("+");
            let start = timeline.now();
            let pass = crate::memory::in_pass(EventKind::Backward, None);
            // Each stage's output and input go as soon as its backward is done, and with the
            // input its gradient once the stage below has used it: kept to the step's end,
            // every stage boundary's activation gradient stayed alive at once, a third more
            // memory per sample than one whole backward (as `single` runs it) holds.
            let output = outputs.pop().expect("a stage's output");
            match upstream.take() {
                None => loss_scale::backward(self.loss_scaler.as_ref(), &loss)?,
                Some(gradient) => backward_with_grad(&output, &gradient)?,
            }
            drop(output);
            let input = inputs.pop().expect("a stage's input");
            upstream = (stage > 0).then(|| input.grad());
            drop(input);
            drop(pass);
            timeline.record(EventKind::Backward, name, start, timeline.now(), None);
            hooks.after_backward(stage, timeline)?;
        }
        Ok((logits, loss))
    }
}
