//! Training strategies: how one trial's training is spread over workers, and the shared
//! training loop, timing and metrics every strategy reports in the same shape.
//!
//! `single` is the baseline every speedup divides by; `data-parallel` and `parameter-server`
//! run over libtorch's c10d (`stratlab-comm`). Each strategy lives in a folder of its own;
//! what they share (the training loop, configuration, device handling, evaluation, records,
//! timelines) sits at the top level.

pub mod autocast;
mod autograd;
pub mod contention;
pub mod data_parallel;
pub mod device;
pub mod device_double;
pub mod device_memory;
mod dispatch;
pub mod evaluate;
mod flat;
pub mod heap;
pub mod loss_scale;
pub mod memory;
pub mod memory_format;
pub mod model_inputs;
/// The serde helpers that keep NaN and infinity through JSON (records carry diverged losses).
pub use stratlab_results::nonfinite;
pub mod numerics;
pub mod observer;
pub mod optimizer;
pub mod parameter_server;
pub mod pipeline;
pub mod precision;
pub mod profile;
pub mod record;
mod replica_sync;
pub mod schedule;
pub mod setup;
pub mod sharded_data_parallel;
mod shim_call;

pub mod single;
pub mod split_backward;
pub mod split_profile;
mod staged_model;
mod staged_pass;
pub mod stored_profile;
/// Order statistics of timings; they live in `stratlab-results` so libtorch-free readers of
/// the tables (regression comparisons) compute them the same way.
pub use stratlab_results::stats;
pub mod timeline;
mod traffic;
pub mod train_config;
pub mod train_error;
pub mod train_loop;
pub mod training_steps;

pub use device::{DeviceChoice, DeviceError};
pub use dispatch::train;
pub use numerics::{LibtorchBuild, MatmulPrecision, Numerics};
pub use observer::{NoObserver, TrainObserver};
pub use precision::{Precision, PrecisionOps};
pub use record::{EpochRecord, StepRecord, TrainOutcome, TrainReport};
pub use schedule::LrSchedule;
pub use stratlab_strategy_spec::{AutoOr, MemoryFormat, OptimizerKind};
pub use timeline::{EventKind, Timeline, TimelineEvent};
pub use train_config::{Budget, TrainConfig, DEFAULT_METRICS_EVERY_STEPS};
pub use train_error::TrainError;
pub use train_loop::TrainContext;
