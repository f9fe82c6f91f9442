//! Evaluation through a pipeline: no rank holds the whole model, so the test batches flow
//! through the stages as in training, forward only.

use std::collections::VecDeque;
use std::sync::Arc;

use stratlab_comm::{ReduceOp, Work};
use stratlab_datasets::{Dataset, Loader};
use tch::{Device, Tensor};

use super::links::EVAL_TAG;
use super::stage_worker::StageWorker;
use crate::evaluate::correct_on_device;
use crate::{PrecisionOps, TrainConfig, TrainError};

impl StageWorker<'_> {
    /// Evaluation through the pipeline: the first stage reads the test batches, each stage
    /// runs its layers and passes the activations on, the last computes the sums; then a
    /// world all-reduce gives every rank the totals (only last stages contribute).
    pub(super) fn evaluate_through(
        &self,
        test: &Arc<dyn Dataset>,
        config: &TrainConfig,
    ) -> Result<[f64; 3], TrainError> {
        let layout = self.layout;
        let replicas = layout.replicas;
        let loader = Loader::new(test.clone(), config.eval_loader(layout.replica, replicas))?;
        let limit = config.eval_limit(replicas);
        let _no_grad = tch::no_grad_guard();
        let mut sums = [0.0f64; 3];
        let mut seen = 0usize;
        let mut sends: VecDeque<(Work, Tensor)> = VecDeque::new();
        for (index, batch) in loader.epoch(0).enumerate() {
            if seen >= limit {
                break;
            }
            let batch = batch?;
            let take = (limit - seen).min(batch.labels.size()[0] as usize);
            let tag = EVAL_TAG + index as u32;
            let input = if layout.is_first() {
                config.precision.input(&batch.images.narrow(0, 0, take as i64), self.device, config.memory_format)?
            } else {
                let mut buffer = Tensor::empty(self.input_shape(take), (self.kind, self.comm_device()));
                self.world.recv_async(&mut buffer, layout.rank_of(layout.stage - 1), tag)?.wait()?;
                buffer.to_device(self.device)
            };
            let output = self.forward_local(&input, false)?;
            if layout.is_last() {
                let labels = batch.labels.narrow(0, 0, take as i64).to_device(self.device);
                sums[0] += f64::try_from(output.cross_entropy_for_logits(&labels))? * take as f64;
                sums[1] += i64::try_from(correct_on_device(&output, &labels))? as f64;
                sums[2] += take as f64;
            } else {
                let buffer = output.to_device(self.comm_device()).contiguous();
                sends.push_back((self.world.send_async(&buffer, layout.rank_of(layout.stage + 1), tag)?, buffer));
                // Two batches in flight keep the next stage busy without holding the whole split.
                while sends.len() > 2 {
                    sends.pop_front().expect("non-empty").0.wait()?;
                }
            }
            seen += take;
        }
        for (work, _) in sends {
            work.wait()?;
        }
        let mut totals = Tensor::from_slice(&sums).to_device(self.comm_device());
        self.world.all_reduce(&mut totals, ReduceOp::Sum)?;
        let totals = Vec::<f64>::try_from(totals.to_device(Device::Cpu))?;
        Ok([totals[0], totals[1], totals[2]])
    }
}
