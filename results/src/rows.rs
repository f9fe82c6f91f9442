//! The four row types every trial writes: one row per trial, per epoch, per step, per
//! telemetry sample. (Timeline and probe rows live in `event_row.rs`, `rank_breakdown.rs`
//! and `probe_row.rs`, under the same schema rules.)
//!
//! Each derives serde and implements [`Table`] with its Parquet schema; the schema lists
//! the fields in declaration order with the dtype of their Rust type (`i64`→Int64,
//! `u64`→UInt64, `u32`→UInt32, `f64`→Float64, `bool`→Boolean, `String`→String; `Option`
//! makes the column nullable). A unit test checks the two agree.

use polars::prelude::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use stratlab_strategy_spec::{stored_compute, ColumnsError, MemoryFormat, OptimizerKind, Precision, StrategyColumns};

use crate::{DeviceLoad, EpochRecord, Sample, StepRecord, Table, TrainingSummary};

/// Builds a schema from `(name, dtype)` pairs.
pub(crate) fn schema_of(fields: &[(&str, DataType)]) -> Schema {
    fields.iter().map(|(name, dtype)| Field::new((*name).into(), dtype.clone())).collect()
}

/// One trial: its configuration, its outcome and its headline metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Where the data came from (`real`, `synthetic`, a path).
    pub data_source: String,
    /// The strategy and its parameters: columns `strategy`, `micro_batches`, `balance`,
    /// `checkpoint`, `pipeline_stages`, `fusion_threshold_bytes`, `server`, `zero_stage`,
    /// `shard_unit`.
    #[serde(flatten)]
    pub strategy: StrategyColumns,
    /// Number of workers W.
    pub workers: i64,
    /// Samples per worker per step.
    pub batch_size: i64,
    /// Samples per optimiser step over all workers.
    pub global_batch: i64,
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
    pub device: String,
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
    /// The emulated link the workers talked over (`1 Gbit/s`, `100 Mbit/s · 1 ms`), part of
    /// the cell; null on loopback, and for runs stored before the column existed.
    #[serde(default)]
    pub link: Option<String>,
    /// What the trial computed in (`fp32`, `bf16`, `tf32`), part of the cell; null for runs
    /// stored before the column existed, which all computed in fp32 ([`TrialRow::compute`]).
    #[serde(default)]
    pub precision: Option<String>,
    /// How its four-dimensional tensors were laid out (`contiguous`, `channels_last`), part
    /// of the cell; null for runs stored before the column existed (contiguous).
    #[serde(default)]
    pub memory_format: Option<String>,
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
    #[serde(default)]
    pub optimizer: Option<String>,
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
    pub matmul_precision: Option<String>,
    /// `torch.backends.cudnn.allow_tf32` in force.
    pub cudnn_tf32: Option<bool>,
    /// Losses and accuracies were read back from the device every this many steps.
    pub metrics_every_steps: i64,
    /// Test accuracy that counts as "reached" for time-to-accuracy, 0–1.
    pub target_accuracy: f64,
    /// How the trial ended (`ok`, `oom`, `crashed`, `diverged`, `timeout`, …).
    pub outcome: String,
    /// Why it ended that way, for anything but success, in one line.
    pub reason: Option<String>,
    /// The whole error behind `reason` where it said more (libtorch's text with its C++
    /// backtrace); null in runs stored before the column.
    pub reason_detail: Option<String>,
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
    /// When the trial started, RFC 3339 UTC.
    pub started_at: String,
    /// When the trial finished, RFC 3339 UTC.
    pub finished_at: String,
}

impl Table for TrialRow {
    const NAME: &'static str = crate::table_names::TRIALS;

    fn schema() -> Schema {
        use DataType::*;
        schema_of(&[
            ("run_id", String),
            ("trial_id", String),
            ("index", Int64),
            ("network", String),
            ("dataset", String),
            ("data_source", String),
            ("strategy", String),
            ("workers", Int64),
            ("batch_size", Int64),
            ("global_batch", Int64),
            ("micro_batches", Int64),
            ("balance", String),
            ("checkpoint", String),
            ("pipeline_stages", Int64),
            ("fusion_threshold_bytes", Int64),
            ("server", String),
            ("zero_stage", Int64),
            ("shard_unit", String),
            ("epochs_budget", Int64),
            ("steps_budget", Int64),
            ("seconds_budget", Float64),
            ("min_timed_steps_budget", Int64),
            ("repeat", Int64),
            ("seed", Int64),
            ("device", String),
            ("device_name", String),
            ("device_ids", String),
            ("host_name", String),
            ("threads", Int64),
            ("swept_threads", Int64),
            ("link", String),
            ("precision", String),
            ("memory_format", String),
            ("precision_auto", Boolean),
            ("memory_format_auto", Boolean),
            ("optimizer", String),
            ("link_emulation_cpu_s", Float64),
            ("speed_reference_s", Float64),
            ("memory_limit_bytes", UInt64),
            ("device_memory_limit_bytes", UInt64),
            ("cudnn_benchmark", Boolean),
            ("matmul_precision", String),
            ("cudnn_tf32", Boolean),
            ("metrics_every_steps", Int64),
            ("target_accuracy", Float64),
            ("outcome", String),
            ("reason", String),
            ("reason_detail", String),
            ("epochs_completed", Int64),
            ("steps_completed", Int64),
            ("warmup_steps", Int64),
            ("seconds_per_epoch_mean", Float64),
            ("seconds_per_epoch_estimate", Float64),
            ("step_time_median_s", Float64),
            ("step_time_p10_s", Float64),
            ("step_time_p90_s", Float64),
            ("data_wait_median_s", Float64),
            ("h2d_median_s", Float64),
            ("step_samples_per_s", Float64),
            ("wall_samples_per_s", Float64),
            ("val_samples_per_s", Float64),
            ("time_to_accuracy_s", Float64),
            ("final_accuracy", Float64),
            ("final_loss", Float64),
            ("eval_time_s", Float64),
            ("peak_memory_bytes", UInt64),
            ("skipped_updates", Int64),
            ("utilization_mean_pct", Float64),
            ("utilization_max_pct", Float64),
            ("memory_mean_bytes", Float64),
            ("memory_max_bytes", UInt64),
            ("process_memory_mean_bytes", Float64),
            ("process_memory_max_bytes", UInt64),
            ("energy_j", Float64),
            ("energy_source", String),
            ("wall_time_s", Float64),
            ("started_at", String),
            ("finished_at", String),
        ])
    }

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

impl TrialRow {
    /// The precision and memory format the trial computed in: float32 and contiguous for
    /// runs stored before the columns existed, an error naming the trial for a value this
    /// build does not know.
    pub fn compute(&self) -> Result<(Precision, MemoryFormat), ColumnsError> {
        stored_compute(&self.trial_id, self.precision.as_deref(), self.memory_format.as_deref())
    }

    /// The optimizer the trial trained with: SGD for runs stored before the column existed.
    pub fn optimizer(&self) -> Result<OptimizerKind, ColumnsError> {
        OptimizerKind::stored(&self.trial_id, self.optimizer.as_deref())
    }
}

/// One epoch of one worker: the learning curve and per-epoch throughput.
///
/// Loss and accuracy are optional because not every worker sees them: in a pipeline only
/// the last stage computes the loss, and evaluation may run on one rank only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    fn schema() -> Schema {
        use DataType::*;
        schema_of(&[
            ("run_id", String),
            ("trial_id", String),
            ("worker", Int64),
            ("epoch", Int64),
            ("train_loss", Float64),
            ("train_accuracy", Float64),
            ("test_loss", Float64),
            ("test_accuracy", Float64),
            ("epoch_time_s", Float64),
            ("eval_time_s", Float64),
            ("wall_samples_per_s", Float64),
            ("val_samples_per_s", Float64),
            ("elapsed_s", Float64),
            ("steps", Int64),
        ])
    }

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// One optimiser step of one worker: the raw series behind step-time statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    fn schema() -> Schema {
        use DataType::*;
        schema_of(&[
            ("run_id", String),
            ("trial_id", String),
            ("worker", Int64),
            ("epoch", Int64),
            ("step", Int64),
            ("loss", Float64),
            ("step_time_s", Float64),
            ("data_wait_s", Float64),
            ("h2d_s", Float64),
            ("samples", Int64),
            ("lr", Float64),
            ("warmup", Boolean),
            ("comm_bytes", Int64),
            ("comm_s", Float64),
            ("peak_memory_bytes", UInt64),
            ("loss_scale", Float64),
            ("skipped_update", Boolean),
        ])
    }

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// One telemetry sample of one device during a trial (the binary's telemetry sampler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRow {
    /// The run this sample belongs to.
    pub run_id: String,
    /// The trial this sample belongs to.
    pub trial_id: String,
    /// The reading (its `t_s` counts from the trial's recorder start).
    #[serde(flatten)]
    pub sample: Sample,
}

impl Table for TelemetryRow {
    const NAME: &'static str = crate::table_names::TELEMETRY;

    fn schema() -> Schema {
        use DataType::*;
        schema_of(&[
            ("run_id", String),
            ("trial_id", String),
            ("t_s", Float64),
            ("device", String),
            ("device_id", String),
            ("utilization_pct", Float64),
            ("memory_used_bytes", UInt64),
            ("process_memory_bytes", UInt64),
            ("power_w", Float64),
            ("energy_counter_mj", UInt64),
            ("sm_clock_mhz", UInt32),
        ])
    }

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}
