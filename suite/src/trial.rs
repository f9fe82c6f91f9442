//! One cell of the matrix, fully resolved: everything a worker process needs to train it
//! and everything the results record about its parameters.

use serde::{Deserialize, Serialize};
use stratlab_datasets::DatasetSelector;
use stratlab_strategies::TrainConfig;
use stratlab_strategy_spec::{threads_label, Strategy};

use crate::link_axis::TrialLink;

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
    /// Strategy and its parameters.
    pub strategy: Strategy,
    /// Workers (processes or devices).
    pub workers: usize,
    /// The trial's libtorch threads (shared among its workers) when the suite sweeps
    /// threads, making them part of the cell; `None` when they are a suite-wide setting.
    pub swept_threads: Option<usize>,
    /// Where the workers talk.
    #[serde(default)]
    pub link: TrialLink,
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
    /// The trial's network, shaped for its data set's samples.
    pub fn network_spec(&self) -> anyhow::Result<stratlab_networks::NetworkSpec> {
        Ok(stratlab_networks::spec(&self.network, &crate::shapes::input_shape(self.dataset.info()?))?)
    }

    /// Puts the trial's numerics (matmul precision, cuDNN benchmark and TF32) in force in this process.
    pub fn apply_numerics(&self) -> anyhow::Result<()> {
        self.train.numerics.apply().map_err(|error| anyhow::anyhow!("{}", error.0))
    }

    /// Samples per optimizer step over all workers.
    pub fn global_batch(&self) -> usize {
        self.strategy.global_batch(self.train.batch_size, self.workers)
    }

    /// A short human label for progress bars.
    pub fn label(&self) -> String {
        let threads =
            self.swept_threads.map(|threads| format!(" · {}", threads_label(threads as i64))).unwrap_or_default();
        let link = self.link.emulated().map(|_| format!(" · {}", self.link)).unwrap_or_default();
        format!(
            "{} · {} · {}×{} · b{}{threads}{link}",
            self.network,
            self.dataset,
            self.strategy.name(),
            self.workers,
            self.train.batch_size
        )
    }

    /// Why this trial cannot run as configured, if it cannot: an `infeasible` outcome is
    /// recorded instead of starting processes.
    pub fn infeasibility(&self) -> Option<String> {
        if let Err(reason) = self.strategy.kind().check_workers(self.workers) {
            return Some(reason.to_string());
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
        if let Err(reason) = self.strategy.check(self.workers, self.train.batch_size, &self.network, spec.stages.len())
        {
            return Some(reason.to_string());
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
