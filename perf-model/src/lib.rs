//! Predicts a training step and its memory for every strategy, libtorch-free, from what a
//! profile (`stratlab_profile::NetworkProfile`) and a probe measure ([`predict::StepQuestion`]): per-stage forward and backward seconds against the samples
//! ([`CostCurve`]), and the links between workers ([`Link`]) with the collectives' times the
//! probe measured over them ([`MeasuredCollectives`]).
//!
//! The model follows what stratlab's implementation does rather than a textbook formula:
//! pipelines are simulated on the very action lists the stage workers execute
//! ([`pipeline::simulate`]), data parallelism on the same bucket plan the strategy runs
//! ([`data_parallel::data_parallel_step`]). The thesis's closed forms stay beside it
//! ([`closed_forms`]) as the baseline its predictions are judged against.

mod breakdown;
pub mod closed_forms;
pub mod cluster;
mod collective;
pub mod data_parallel;
pub mod memory;
pub mod parameter_server;
pub mod pipeline;
mod pipeline_input;
pub mod predict;
pub mod published;
pub mod recommend;
pub mod sharded_data_parallel;
pub mod simulated_timeline;
mod yaml;

pub use breakdown::StepBreakdown;
pub use cluster::{Cluster, ClusterError, DeviceDescription, DeviceGroups, DeviceSpeed};
pub use collective::{AllReduce, CollectiveCurve, MeasuredCollectives};
// The profile the model reads, on the ground floor (`stratlab-profile`).
use stratlab_profile as profile;
pub use stratlab_profile::{Contention, CostCurve, CurveError};
/// The quantities the model reads, on the ground floor (`stratlab-units`).
pub use stratlab_units::{Bandwidth, ByteSize, FlopRate, Latency, Link, UnitError, BYTE_SIZE_GRAMMAR};
pub use yaml::from_yaml;
