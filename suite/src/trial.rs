//! One cell of the matrix: as planned and then resolved by the runner ([`TrialSpec`]: what
//! the suite asked and what the machine gave it, everything the results record about its
//! parameters), and what its worker processes are handed ([`WorkerTrial`]).

use serde::{Deserialize, Serialize};
use stratlab_datasets::DatasetSelector;
use stratlab_perf_model::Link;
use stratlab_results::CellKey;
use stratlab_strategies::precision::check_trainable;
use stratlab_strategies::{Numerics, TrainConfig};
use stratlab_strategy_spec::{threads_label, AutoOr, MemoryFormat, Precision, Strategy};

use crate::link_axis::TrialLink;

/// A planned trial: the suite's requests (`auto`, `max`) beside what the runner resolved
/// them to in `train`. Its workers get [`TrialSpec::for_worker`].
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
    /// Nodes its workers span, `workers / nodes` ranks on each, rank-major.
    #[serde(default = "one")]
    pub nodes: usize,
    /// The precision the suite asked for; `train.precision` holds what it trains in (`auto`
    /// resolved by the runner before the trials).
    #[serde(default = "float32")]
    pub precision: AutoOr<Precision>,
    /// The memory format the suite asked for; `train.memory_format` holds the resolved one.
    #[serde(default = "contiguous")]
    pub memory_format: AutoOr<MemoryFormat>,
    /// Whether `train.batch_size` is the suite's or the largest that fits (`batch_size:
    /// max`, searched for by the runner before the trials).
    #[serde(default)]
    pub batch_request: BatchRequest,
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

/// What a trial's worker process is handed: the trial with every choice made, nothing left
/// for the runner to resolve (no `auto`, no `max`), and nothing it does not train by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerTrial {
    /// The trial's id (a test fault is keyed by it).
    pub trial_id: String,
    /// Network name.
    pub network: String,
    /// Data set and source.
    pub dataset: DatasetSelector,
    /// Strategy and its parameters.
    pub strategy: Strategy,
    /// Training configuration of each worker, in the precision, memory format and batch
    /// the runner resolved.
    pub train: TrainConfig,
    /// Address-space limit per worker process.
    pub memory_limit_bytes: Option<u64>,
    /// Started by srun as one rank of a Slurm job step, on a node the runner cannot watch:
    /// the worker then enforces its memory limit itself, samples its own telemetry every
    /// this many milliseconds, and reports its node's fingerprint. `None` for a worker the
    /// runner started on its own machine.
    #[serde(default)]
    pub job_step_telemetry_ms: Option<u64>,
}

/// A trial that is not ready for its workers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    /// `batch_size: max` before the search for the largest batch.
    #[error("trial {0}: `batch_size: max` has not been searched for yet")]
    LargestBatchNotSearched(String),
    /// `batch_size: max`, and nothing fits.
    #[error("trial {0}: no batch fits: {1}")]
    NoBatchFits(String, String),
}

/// What the suite asked of a trial's batch.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchRequest {
    /// The batch the suite gave.
    #[default]
    Given,
    /// `max`, not yet searched for: `train.batch_size` is one step (a micro-batch per
    /// pipeline, a sample per worker).
    Largest,
    /// `max`, found: `train.batch_size` is the largest batch that trained.
    LargestFound,
    /// `max`, and not even one step trained; why.
    NoneFits(String),
}

fn one() -> usize {
    1
}

fn float32() -> AutoOr<Precision> {
    AutoOr::Given(Precision::Float32)
}

fn contiguous() -> AutoOr<MemoryFormat> {
    AutoOr::Given(MemoryFormat::Contiguous)
}

impl TrialSpec {
    /// The Slurm allocation its workers run in as a job step: inside one, every trial but
    /// one over an emulated link (which joins ranks on the runner's machine only); `None`
    /// where the runner starts them on its own machine.
    pub(crate) fn job_step_allocation(&self) -> Option<crate::slurm_step::Allocation> {
        crate::slurm_step::Allocation::from_env().filter(|_| self.link.emulated().is_none())
    }

    /// What its workers train, once the runner has resolved its batch (`auto` precision and
    /// memory format are resolved into `train` before any trial: `auto_compute`).
    pub fn for_worker(&self) -> Result<WorkerTrial, Unresolved> {
        match &self.batch_request {
            BatchRequest::Largest => return Err(Unresolved::LargestBatchNotSearched(self.trial_id.clone())),
            BatchRequest::NoneFits(why) => return Err(Unresolved::NoBatchFits(self.trial_id.clone(), why.clone())),
            BatchRequest::Given | BatchRequest::LargestFound => {}
        }
        Ok(WorkerTrial {
            trial_id: self.trial_id.clone(),
            network: self.network.clone(),
            dataset: self.dataset.clone(),
            strategy: self.strategy.clone(),
            train: self.train.clone(),
            memory_limit_bytes: self.memory_limit_bytes,
            // Set by the runner where it starts the workers as a job step.
            job_step_telemetry_ms: None,
        })
    }

    /// Whether its precision or memory format waits for the runner to resolve `auto`.
    pub fn awaits_resolution(&self) -> bool {
        self.precision == AutoOr::Auto || self.memory_format == AutoOr::Auto
    }

    /// Trains in `precision` and `memory_format`, what `auto` resolved to on this device,
    /// with the TF32 switches the precision decides.
    pub fn resolve_compute(&mut self, precision: Precision, memory_format: MemoryFormat, suite_numerics: Numerics) {
        self.train.precision = precision;
        self.train.memory_format = memory_format;
        self.train.numerics = suite_numerics.for_precision(precision);
    }

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

    /// The cell the trial measures, as its row will key it: what reports, `compare` and
    /// the predicted speedups group by (the link as its row stores it).
    pub fn cell_key(&self) -> CellKey {
        CellKey {
            network: self.network.clone(),
            dataset: self.dataset.name.to_owned(),
            data_source: self.dataset.source,
            strategy: self.strategy.clone(),
            workers: self.workers as u32,
            batch_size: self.train.batch_size as u32,
            swept_threads: self.swept_threads.map(|threads| threads as u32),
            link: self.link.emulated().map(Link::as_stored),
            nodes: self.nodes as u32,
            straggler: self.train.straggler.clone(),
            precision: self.train.precision,
            memory_format: self.train.memory_format,
            optimizer: self.train.optimizer,
        }
    }

    /// A short human label for progress bars.
    pub fn label(&self) -> String {
        let threads =
            self.swept_threads.map(|threads| format!(" · {}", threads_label(threads as i64))).unwrap_or_default();
        let link = self.link.emulated().map(|_| format!(" · {}", self.link)).unwrap_or_default();
        let nodes = if self.nodes > 1 { format!(" · {} nodes", self.nodes) } else { String::new() };
        let straggler =
            self.train.straggler.as_ref().map(|straggler| format!(" · straggler {straggler}")).unwrap_or_default();
        let batch = match self.batch_request {
            BatchRequest::Given => format!("b{}", self.train.batch_size),
            BatchRequest::LargestFound => format!("b{} (max)", self.train.batch_size),
            BatchRequest::Largest | BatchRequest::NoneFits(_) => "bmax".to_owned(),
        };
        // The strategy's parameters too: cells of one strategy that differ only in them
        // (ZeRO stages, micro-batch counts) must not read alike.
        let parameters: String =
            self.strategy.labelled_parameters().into_iter().map(|(_, text)| format!(" {text}")).collect();
        format!(
            "{} · {} · {}×{}{parameters} · {batch}{}{threads}{link}{nodes}{straggler}",
            self.network,
            self.dataset,
            self.strategy.name(),
            self.workers,
            self.compute_label() + &self.train.optimizer.label(),
        )
    }

    /// What the trial computes in, for labels: nothing for float32 on contiguous tensors,
    /// ` · bf16`, ` · channels_last`, each marked where `auto` chose it.
    pub fn compute_label(&self) -> String {
        stratlab_strategy_spec::compute_label_chosen(
            self.train.precision,
            self.precision == AutoOr::Auto,
            self.train.memory_format,
            self.memory_format == AutoOr::Auto,
        )
    }

    /// Why this trial cannot run as configured, if it cannot: an `infeasible` outcome is
    /// recorded instead of starting processes.
    pub fn infeasibility(&self) -> Option<String> {
        if let BatchRequest::NoneFits(reason) = &self.batch_request {
            return Some(reason.clone());
        }
        if let Err(reason) = self.strategy.kind().check_workers(self.workers) {
            return Some(reason.to_string());
        }
        let ranks_per_node = self.workers / self.nodes.max(1);
        let allocation = self.job_step_allocation();
        if let Some(reason) = crate::slurm_step::infeasibility(self.nodes, ranks_per_node, allocation.as_ref()) {
            return Some(reason);
        }
        // The runner has resolved the device by now: a suite's `auto` that found no GPU
        // cannot train in tf32.
        if let Err(refused) = check_trainable(self.train.precision, self.train.device)
            .and_then(|()| self.train.precision.check_strategy(self.strategy.kind()))
        {
            return Some(refused.to_string());
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
