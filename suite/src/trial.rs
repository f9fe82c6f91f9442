//! One cell of the matrix, fully resolved: everything a worker process needs to train it
//! and everything the results record about its parameters.

use serde::{Deserialize, Serialize};
use stratlab_datasets::DatasetSelector;
use stratlab_strategies::parameter_server::ServerPlacement;
use stratlab_strategies::{StrategyKind, TrainConfig};

use crate::suite_file::{Balance, Checkpoint};
use stratlab_strategies::pipeline::{check_balance, PipelineOptions};

/// A resolved trial, handed to the worker process as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialSpec {
    /// Stable identifier (the same for the same cell in every run, so `--resume` can match).
    pub trial_id: String,
    /// Position in the plan.
    pub index: usize,
    /// Network name.
    pub network: String,
    /// Data set and source.
    pub dataset: DatasetSelector,
    /// Strategy.
    pub strategy: StrategyKind,
    /// Workers (processes or devices).
    pub workers: usize,
    /// Micro-batches per batch (pipelines).
    pub micro_batches: Option<usize>,
    /// Pipeline partitioning.
    pub balance: Option<Balance>,
    /// Pipeline checkpoint mode.
    pub checkpoint: Option<Checkpoint>,
    /// Gradient fusion bucket size (data parallel).
    pub fusion_threshold_bytes: Option<u64>,
    /// Parameter-server placement.
    #[serde(default)]
    pub server: Option<ServerPlacement>,
    /// Stages per pipeline of `hybrid` (pp).
    #[serde(default)]
    pub pipeline_stages: Option<usize>,
    /// Which repeat of the cell (0-based).
    pub repeat: usize,
    /// Training configuration of each worker (batch size per worker, seed, budget, device …).
    pub train: TrainConfig,
    /// Seconds before the runner kills the trial.
    pub timeout_s: f64,
    /// Address-space limit per worker process.
    pub memory_limit_bytes: Option<u64>,
    /// Telemetry sampling interval.
    pub telemetry_interval_ms: u64,
}

impl TrialSpec {
    /// Samples per optimizer step over all workers: every data-parallel worker trains on
    /// its own batch; a pipeline's stages share one (hybrid: one per replica).
    pub fn global_batch(&self) -> usize {
        if self.strategy.shards_batch() {
            self.train.batch_size * self.workers
        } else {
            self.train.batch_size * self.pipeline_options().shape(self.workers).map_or(1, |(_, replicas)| replicas)
        }
    }

    /// The pipeline parameters, for the pipeline strategies (defaults: 1 micro-batch,
    /// uniform balance, no checkpointing).
    pub fn pipeline_options(&self) -> PipelineOptions {
        PipelineOptions {
            kind: self.strategy,
            micro_batches: self.micro_batches.unwrap_or(1),
            balance: self.balance.clone().unwrap_or(Balance::Uniform),
            checkpoint: self.checkpoint.unwrap_or_default(),
            stages: self.pipeline_stages,
        }
    }

    /// A short human label for progress bars.
    pub fn label(&self) -> String {
        format!("{} · {} · {}×{} · b{}", self.network, self.dataset, self.strategy, self.workers, self.train.batch_size)
    }

    /// Why this trial cannot run as configured, if it cannot: an `infeasible` outcome is
    /// recorded instead of starting processes.
    pub fn infeasibility(&self) -> Option<String> {
        if let Err(reason) = self.strategy.check_workers(self.workers) {
            return Some(reason);
        }
        let info = match self.dataset.info() {
            Ok(info) => info,
            Err(error) => return Some(error.to_string()),
        };
        let shape = crate::shapes::input_shape(info);
        let spec = match stratlab_networks::spec(&self.network, &shape) {
            Ok(spec) => spec,
            Err(error) => return Some(error.to_string()),
        };
        if let Some(micro_batches) = self.micro_batches {
            if micro_batches > self.train.batch_size {
                return Some(format!("{micro_batches} micro-batches exceed the batch of {}", self.train.batch_size));
            }
        }
        if self.strategy.is_pipeline() {
            let options = self.pipeline_options();
            let stages = match options.shape(self.workers) {
                Ok((stages, _)) => stages,
                Err(reason) => return Some(reason),
            };
            if let Err(error) = check_balance(spec.stages.len(), &options.balance, stages) {
                return Some(format!("{}: {error}", self.network));
            }
        }
        if self.global_batch() > info.train_len {
            return Some(format!(
                "global batch {} exceeds the {} training samples",
                self.global_batch(),
                info.train_len
            ));
        }
        None
    }
}
