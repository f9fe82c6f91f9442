//! `single`: one worker trains the whole network on its device. The baseline every speedup
//! divides by.

use tch::nn::{self, ModuleT};
use tch::{Device, Tensor};

use crate::evaluate::correct_on_device;
use crate::loss_scale::{self, LossScaler};
use crate::setup::{self, Replica};
use crate::timeline::{EventKind, Timeline};
pub use crate::train_loop::TrainContext;
use crate::train_loop::{self, StepOutput, StepRunner};
use crate::{Precision, PrecisionOps, TrainError, TrainObserver, TrainReport};

/// Trains `context.network` from a fresh seeded initialisation and reports what it measured.
pub fn train(context: &TrainContext<'_>, observer: &mut dyn TrainObserver) -> Result<TrainReport, TrainError> {
    let config = context.config;
    let device = setup::prepare(config)?;
    let Replica { store, model, optimizer, loss_scaler } =
        setup::replica(config, device, |store| Ok(context.network.build(&store.root())))?;
    let params = store.trainable_variables();
    let mut runner =
        SingleStep { model: Box::new(model), optimizer, params, device, precision: config.precision, loss_scaler };
    let mut timeline = Timeline::new(device, false);
    let report = train_loop::run(context, device, &mut runner, &mut timeline, observer)?;
    observer.on_trained(&store);
    Ok(report)
}

struct SingleStep {
    model: Box<dyn ModuleT>,
    optimizer: nn::Optimizer,
    params: Vec<Tensor>,
    device: Device,
    precision: Precision,
    loss_scaler: Option<LossScaler>,
}

impl StepRunner for SingleStep {
    fn model(&self) -> &dyn ModuleT {
        self.model.as_ref()
    }

    fn step(
        &mut self,
        images: &Tensor,
        labels: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<StepOutput, TrainError> {
        self.optimizer.set_lr(lr);
        let (logits, loss) = self.precision.autocast(self.device, || {
            let logits = timeline.span(EventKind::Forward, "network", || self.model.forward_t(images, true));
            let loss = logits.cross_entropy_for_logits(labels);
            (logits, loss)
        })?;
        self.optimizer.zero_grad();
        let pass = crate::memory::in_pass(EventKind::Backward, None);
        loss_scale::backward(self.loss_scaler.as_ref(), &loss)?;
        drop(pass);
        let optimizer = &mut self.optimizer;
        let scaling = loss_scale::step(self.loss_scaler.as_mut(), &self.params, Ok, || optimizer.step())?;
        Ok(StepOutput { correct: correct_on_device(&logits, labels), loss, comm_bytes: 0, comm_s: 0.0, scaling })
    }
}
