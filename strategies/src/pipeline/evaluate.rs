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
    /// world all-reduce gives every rank the totals (only last stages contribute). A
    /// message is tagged by its batch and the stage that receives it. A replicated stage's
    /// workers take the batches round robin, as they take micro-batches in training.
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
        let stages: Vec<usize> = self.held_stages().collect();
        let pipeline_stages = self.pipeline_stages();
        for (index, batch) in loader.epoch(0).enumerate() {
            if seen >= limit {
                break;
            }
            let batch = batch?;
            let take = (limit - seen).min(batch.labels.size()[0] as usize);
            // Each batch passes every rank once per stage it holds, first stage first; from a
            // stage to the next on this same rank (zero-bubble's V) it is handed over.
            let mut handed: Option<Tensor> = None;
            for &stage in stages.iter().filter(|&&stage| self.rank_of_stage(stage, index) == self.world.rank()) {
                let tag = EVAL_TAG + (index * pipeline_stages + stage) as u32;
                let input = if stage == 0 {
                    let images = batch.images.narrow(0, 0, take as i64);
                    config.precision.input(&images, self.device, config.memory_format)?
                } else if self.rank_of_stage(stage - 1, index) == self.world.rank() {
                    handed.take().expect("the stage before on this rank ran first")
                } else {
                    let mut buffer = Tensor::empty(self.input_shape(stage, take), (self.kind, self.comm_device()));
                    self.world.recv_async(&mut buffer, self.rank_of_stage(stage - 1, index), tag)?.wait()?;
                    buffer.to_device(self.device)
                };
                let output = self.forward_local(stage, &input, false)?;
                if self.is_last_stage(stage) {
                    let labels = batch.labels.narrow(0, 0, take as i64).to_device(self.device);
                    sums[0] += f64::try_from(output.cross_entropy_for_logits(&labels))? * take as f64;
                    sums[1] += i64::try_from(correct_on_device(&output, &labels))? as f64;
                    sums[2] += take as f64;
                } else if self.rank_of_stage(stage + 1, index) == self.world.rank() {
                    handed = Some(output);
                } else {
                    let buffer = output.to_device(self.comm_device()).contiguous();
                    let to = self.rank_of_stage(stage + 1, index);
                    sends.push_back((self.world.send_async(&buffer, to, tag + 1)?, buffer));
                    // Two batches per stage in flight keep the next stage busy without
                    // holding the whole split.
                    while sends.len() > 2 * stages.len() {
                        sends.pop_front().expect("non-empty").0.wait()?;
                    }
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
