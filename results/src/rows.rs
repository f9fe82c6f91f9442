//! The four row types every trial writes: one row per trial, per epoch, per step, per
//! telemetry sample. (Timeline and probe rows live in `event_row.rs`, `rank_breakdown.rs`
//! and `probe_row.rs`, under the same schema rules.)
//!
//! Each derives serde and [`Columns`], and implements [`Table`]: the Parquet schema is the
//! fields in declaration order, each with its type's column type (`stratlab_columns`), so
//! a typed field (a precision, an outcome, a time) is stored as the text older readers
//! know and read back as its type.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use stratlab_strategy_spec::{
    ColumnsError, MatmulPrecision, MemoryFormat, OptimizerKind, ParameterColumns, Precision, StragglerColumns,
    Strategy, StrategyKind,
};
use stratlab_units::Link;

use crate::{
    DataSource, DeviceLoad, EpochRecord, EvalRecord, Outcome, Sample, StepRecord, Table, TrainingSummary, TrialDevice,
    UtcTime,
};

/// One trial: its configuration, its outcome and its headline metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct TrialRow {
    /// The run this trial belongs to (`20261122T214501Z-default`).
    pub run_id: String,
    /// Stable id of the trial within the suite; also its part files' name.
    pub trial_id: String,
    /// Position of the trial in the expanded matrix, from 0.
    pub index: i64,
    /// Network name (`resnet18`, …).
    pub network: String,
    /// Data set name (`cifar10`, …).
    pub dataset: String,
    /// Where the data came from: its `real` files or their `synthetic` twin.
    pub data_source: DataSource,
    /// The strategy (`single`, `data-parallel`, `gpipe`, …); its parameters are
    /// [`TrialRow::parameters`].
    pub strategy: StrategyKind,
    /// Number of workers W.
    pub workers: i64,
    /// Samples per worker per step.
    pub batch_size: i64,
    /// Samples per optimiser step over all workers.
    pub global_batch: i64,
    /// The strategy's parameters: columns `micro_batches`, `balance`, `checkpoint`,
    /// `pipeline_stages`, `fusion_threshold_bytes`, `server`, `zero_stage`, `shard_unit`.
    #[serde(flatten)]
    pub parameters: ParameterColumns,
    /// Epoch budget, when the trial was bounded by epochs.
    pub epochs_budget: Option<i64>,
    /// Step budget, when the trial was bounded by steps.
    pub steps_budget: Option<i64>,
    /// Wall-time budget in seconds, when the trial was bounded by time.
    pub seconds_budget: Option<f64>,
    /// Steps after the warm-up the time limit waited for, when the budget set a floor
    /// (absent in runs before it existed).
    pub min_timed_steps_budget: Option<i64>,
    /// Repeat number of an otherwise identical trial, from 0.
    pub repeat: i64,
    /// Random seed.
    pub seed: i64,
    /// Device the workers ran on (`cpu`, `cuda:0`), after `auto` was resolved.
    pub device: TrialDevice,
    /// Model of that device: the CPU model, or the GPU board name(s) from NVML.
    pub device_name: Option<String>,
    /// Identity of the board(s) sampled: PCI bus ids from NVML (`00000000:3B:00.0`), comma
    /// separated; `None` on the CPU.
    pub device_ids: Option<String>,
    /// Host the trial ran on (`uname -n`).
    pub host_name: Option<String>,
    /// Intra-op threads per worker.
    pub threads: i64,
    /// The trial's threads (all its workers together) when its suite swept threads, which
    /// makes them part of the cell; null when threads were one setting for the whole suite,
    /// and for runs stored before the column existed.
    #[serde(default)]
    pub swept_threads: Option<i64>,
    /// The emulated link the workers talked over, stored by its name (`1 Gbit/s`,
    /// `100 Mbit/s · 1 ms`), part of the cell; null on loopback, and for runs stored before
    /// the column existed.
    #[serde(default, with = "stratlab_units::stored_link")]
    pub link: Option<Link>,
    /// Nodes the trial's ranks were spread over, rank-major (ranks 0..k−1 on the first), part
    /// of the cell; null on one node and for runs stored before the column existed
    /// ([`TrialRow::nodes`]).
    #[serde(default)]
    pub nodes: Option<i64>,
    /// The ranks slowed as stragglers and by how much: columns `straggler_ranks`,
    /// `straggler_slowdown`, `straggler_jitter`, null without a straggler (and in runs stored
    /// before the axis).
    #[serde(flatten)]
    pub straggler: StragglerColumns,
    /// What the trial computed in (`fp32`, `bf16`, `tf32`), part of the cell; null for runs
    /// stored before the column existed, which all computed in fp32 ([`TrialRow::precision`]).
    #[serde(default, rename = "precision")]
    pub stored_precision: Option<Precision>,
    /// How its four-dimensional tensors were laid out (`contiguous`, `channels_last`), part
    /// of the cell; null for runs stored before the column existed (contiguous).
    #[serde(default, rename = "memory_format")]
    pub stored_memory_format: Option<MemoryFormat>,
    /// Whether the suite left the precision to `auto` (the column then holds what the
    /// runner's measurement chose); null for runs stored before the column existed.
    #[serde(default)]
    pub precision_auto: Option<bool>,
    /// Whether the suite left the memory format to `auto`.
    #[serde(default)]
    pub memory_format_auto: Option<bool>,
    /// The optimizer it trained with (`sgd`, `adam`), part of the cell; null for runs
    /// stored before the column existed, which all trained with SGD
    /// ([`TrialRow::optimizer`]).
    #[serde(default, rename = "optimizer")]
    pub stored_optimizer: Option<OptimizerKind>,
    /// CPU seconds the link's emulation took in user space during the trial (the delay
    /// line's threads, on the cores the workers train on); `None` where nothing ran in user
    /// space (loopback; veth and tbf work in the kernel, inside the workers' own time).
    #[serde(default)]
    pub link_emulation_cpu_s: Option<f64>,
    /// Seconds of the runner's fixed reference work (`stratlab::speed_reference`) timed just
    /// before the trial: beside the same figure taken with the cell's profile it says how
    /// much slower or faster the machine ran than when the prediction was calibrated. Null
    /// for runs stored before the column existed.
    #[serde(default)]
    pub speed_reference_s: Option<f64>,
    /// Each worker's `memory_limit_mib` in bytes (a CPU worker's tensor storage, a CUDA
    /// worker's resident memory); null where none was set, and for runs stored before the
    /// column existed.
    #[serde(default)]
    pub memory_limit_bytes: Option<u64>,
    /// Each CUDA worker's cap on its device's caching allocator (`device_memory_limit_mib`)
    /// in bytes; null where none was set, and for runs stored before the column existed.
    #[serde(default)]
    pub device_memory_limit_bytes: Option<u64>,
    /// `torch.backends.cudnn.benchmark` in force during the trial.
    pub cudnn_benchmark: Option<bool>,
    /// float32 matmul precision in force (`highest`, `high`, `medium`).
    pub matmul_precision: Option<MatmulPrecision>,
    /// `torch.backends.cudnn.allow_tf32` in force.
    pub cudnn_tf32: Option<bool>,
    /// Losses and accuracies were read back from the device every this many steps.
    pub metrics_every_steps: i64,
    /// Test accuracy that counts as "reached" for time-to-accuracy, 0–1.
    pub target_accuracy: f64,
    /// How the trial ended (`ok`, `oom`, `crashed`, `diverged`, `timeout`, …).
    pub outcome: Outcome,
    /// Why it ended that way, for anything but success, in one line.
    pub reason: Option<String>,
    /// The whole error behind `reason` where it said more (libtorch's text with its C++
    /// backtrace); null in runs stored before the column.
    pub reason_detail: Option<String>,
    /// Epochs the lead worker finished (0 for a trial that never started).
    pub epochs_completed: i64,
    /// Optimizer steps the lead worker took.
    pub steps_completed: i64,
    /// Leading steps excluded from step-time statistics.
    pub warmup_steps: i64,
    /// What the training measured: progress, pace, throughput and accuracy.
    #[serde(flatten)]
    pub training: TrainingSummary,
    /// Mean and peak load of the trial's devices and the energy they drew, from telemetry.
    #[serde(flatten)]
    pub load: DeviceLoad,
    /// Wall time of the whole trial including setup, seconds.
    pub wall_time_s: f64,
    /// When the trial started, stored as RFC 3339 UTC.
    pub started_at: UtcTime,
    /// When the trial finished, stored as RFC 3339 UTC.
    pub finished_at: UtcTime,
}

impl Table for TrialRow {
    const NAME: &'static str = crate::table_names::TRIALS;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

impl TrialRow {
    /// The strategy with its parameters, or the rule its columns break (a corrupt or
    /// foreign table).
    pub fn strategy(&self) -> Result<Strategy, ColumnsError> {
        self.parameters.strategy(self.strategy, &self.trial_id)
    }

    /// What the trial computed in: float32 for runs stored before the column existed.
    pub fn precision(&self) -> Precision {
        self.stored_precision.unwrap_or_default()
    }

    /// Nodes its ranks spanned: 1 where the column is null (one node, or a run stored before
    /// the column existed).
    pub fn nodes(&self) -> i64 {
        self.nodes.unwrap_or(1)
    }

    /// How its tensors were laid out: contiguous for runs stored before the column existed.
    pub fn memory_format(&self) -> MemoryFormat {
        self.stored_memory_format.unwrap_or_default()
    }

    /// The optimizer the trial trained with: SGD for runs stored before the column existed.
    pub fn optimizer(&self) -> OptimizerKind {
        self.stored_optimizer.unwrap_or_default()
    }
}

/// One epoch of one worker: the learning curve and per-epoch throughput.
///
/// Loss and accuracy are optional because not every worker sees them: in a pipeline only
/// the last stage computes the loss, and evaluation may run on one rank only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct EpochRow {
    /// The run this epoch belongs to.
    pub run_id: String,
    /// The trial this epoch belongs to.
    pub trial_id: String,
    /// Worker rank, from 0.
    pub worker: i64,
    /// What the worker measured.
    #[serde(flatten)]
    pub record: EpochRecord,
}

impl Table for EpochRow {
    const NAME: &'static str = crate::table_names::EPOCHS;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// One evaluation on the test split by one rank: every epoch's, every `eval.every_steps`
/// steps', and a parameter server's own, of the weights it holds, every `eval.every_steps`
/// updates (`by_server`; `after_step` then counts updates applied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct EvaluationRow {
    /// The run this evaluation belongs to.
    pub run_id: String,
    /// The trial this evaluation belongs to.
    pub trial_id: String,
    /// Rank that evaluated, from 0.
    pub worker: i64,
    /// Whether it evaluated as the parameter server (the weights it serves).
    pub by_server: bool,
    /// What the rank measured.
    #[serde(flatten)]
    pub record: EvalRecord,
}

impl Table for EvaluationRow {
    const NAME: &'static str = crate::table_names::EVALUATIONS;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// One optimiser step of one worker: the raw series behind step-time statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct StepRow {
    /// The run this step belongs to.
    pub run_id: String,
    /// The trial this step belongs to.
    pub trial_id: String,
    /// Worker rank, from 0.
    pub worker: i64,
    /// What the worker measured.
    #[serde(flatten)]
    pub record: StepRecord,
}

impl Table for StepRow {
    const NAME: &'static str = crate::table_names::STEPS;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// One telemetry sample of one device during a trial (the binary's telemetry sampler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct TelemetryRow {
    /// The run this sample belongs to.
    pub run_id: String,
    /// The trial this sample belongs to.
    pub trial_id: String,
    /// The node a rank of a trial across nodes sampled itself on; null where the runner
    /// sampled the trial on its own machine (and in runs stored before the column).
    #[serde(default)]
    pub host_name: Option<String>,
    /// The reading (its `t_s` counts from the trial's recorder start).
    #[serde(flatten)]
    pub sample: Sample,
}

impl Table for TelemetryRow {
    const NAME: &'static str = crate::table_names::TELEMETRY;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}
