//! Evaluation on the test split: eval mode, no gradients, the whole split (or a prefix).

use std::sync::Arc;

use stratlab_datasets::{Dataset, Loader};
use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use crate::device::synchronize;
use crate::{EventKind, PrecisionOps, TrainConfig, TrainError};

/// Mean loss and accuracy over the evaluated samples, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// Mean cross-entropy.
    pub loss: f64,
    /// Fraction classified correctly.
    pub accuracy: f64,
    /// Samples evaluated.
    pub samples: usize,
    /// Seconds, device synchronised.
    pub time_s: f64,
}

/// Sums over the evaluated samples of one rank, to be added up across ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalSums {
    /// Sum of per-sample cross-entropy.
    pub loss_sum: f64,
    /// Samples classified correctly.
    pub correct: f64,
    /// Samples evaluated.
    pub samples: f64,
}

impl EvalSums {
    /// Mean loss and accuracy of the (possibly all-reduced) sums.
    pub fn into_evaluation(self, time_s: f64) -> Result<Evaluation, TrainError> {
        if self.samples < 1.0 {
            return Err(TrainError::InvalidConfig { field: "test split", reason: "has no samples".into() });
        }
        Ok(Evaluation {
            loss: self.loss_sum / self.samples,
            accuracy: self.correct / self.samples,
            samples: self.samples as usize,
            time_s,
        })
    }
}

/// Evaluates rank `shard.0` of `shard.1`'s share of the first `config.eval_samples` test
/// samples (every `shard.1`-th sample, as the loader shards), so ranks split the evaluation
/// and add up their [`EvalSums`].
pub fn evaluate_shard(
    model: &dyn ModuleT,
    test: &Arc<dyn Dataset>,
    config: &TrainConfig,
    device: Device,
    shard: (usize, usize),
) -> Result<EvalSums, TrainError> {
    let (rank, world_size) = shard;
    let loader = Loader::new(test.clone(), config.eval_loader(rank, world_size))?;
    let limit = config.eval_limit(world_size);
    let mut loss_sum = 0.0;
    let mut correct = 0i64;
    let mut seen = 0usize;
    let _no_grad = tch::no_grad_guard();
    let _pass = crate::memory::in_pass(EventKind::Eval, None);
    for batch in loader.epoch(0) {
        if seen >= limit {
            break;
        }
        let batch = batch?;
        let take = (limit - seen).min(batch.labels.size()[0] as usize) as i64;
        let images = config.precision.input(&batch.images.narrow(0, 0, take), device, config.memory_format)?;
        let labels = batch.labels.narrow(0, 0, take).to_device(device);
        let logits = config.precision.autocast(device, || model.forward_t(&images, false))?;
        let loss = logits.cross_entropy_for_logits(&labels);
        loss_sum += f64::try_from(&loss)? * take as f64;
        correct += correct_predictions(&logits, &labels)?;
        seen += take as usize;
    }
    synchronize(device);
    Ok(EvalSums { loss_sum, correct: correct as f64, samples: seen as f64 })
}

/// Accuracy of `logits` against `labels` as a count of correct predictions.
pub fn correct_predictions(logits: &Tensor, labels: &Tensor) -> Result<i64, TrainError> {
    Ok(i64::try_from(correct_on_device(logits, labels))?)
}

/// The count of correct predictions as a 0-d tensor on the logits' device: reading it is
/// left to the caller, so the training loop can batch its host synchronisations.
pub fn correct_on_device(logits: &Tensor, labels: &Tensor) -> Tensor {
    logits.argmax(-1, false).eq_tensor(labels).sum(Kind::Int64)
}
