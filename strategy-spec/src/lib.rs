//! The vocabulary of training strategies, libtorch-free: what a strategy is and which
//! parameters it takes ([`Strategy`]), how a suite sweeps them ([`StrategySweep`]), how a
//! results table stores them ([`ParameterColumns`]) and in which order a pipeline stage
//! works ([`Schedule`]) and which gradients data-parallel fuses ([`buckets`]). See the crate
//! README.

pub mod buckets;
mod columns;
mod data_source;
mod error;
mod kind;
mod optimizer;
mod parameters;
mod precision;
pub mod schedule;
mod search;
mod server;
mod sharding;
mod straggler;
mod strategy;
mod sweep;

pub use columns::ParameterColumns;
pub use data_source::DataSource;
pub use error::{ColumnsError, Infeasible, PartitionError, SweepError, UnknownName};
pub use kind::StrategyKind;
pub use optimizer::{OptimizerFootprint, OptimizerKind};
pub use parameters::{check_balance, micro_batches_fit, Balance, Checkpoint, ServerPlacement};
pub use precision::{
    compute_label, compute_label_chosen, AutoOr, MatmulPrecision, MemoryFormat, Precision, PrecisionRefused,
};
pub use schedule::{micro_batch_sizes, pipedream_actions, Action, Pass, Placement, Schedule, StageReplicas};
pub use search::{search_space, SearchedStrategy};
pub use server::{check_backup_workers, Consistency, LearningRate, ServerMode, ServerSettings};
pub use sharding::{ShardUnit, ZeroStage};
pub use straggler::{Straggler, StragglerColumns, StragglerEntry};
pub use strategy::names::threads_label;
pub use strategy::{Parameters, Strategy, DEFAULT_FUSION_THRESHOLD_MIB};
pub use sweep::StrategySweep;
