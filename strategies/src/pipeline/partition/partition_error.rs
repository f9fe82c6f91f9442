//! Why a balance cannot split a network (its own module so the profiler can fail with it).

use stratlab_strategy_spec::Infeasible;

/// Why a balance cannot split a network into the requested parts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PartitionError(pub String);

impl From<Infeasible> for PartitionError {
    fn from(infeasible: Infeasible) -> PartitionError {
        PartitionError(infeasible.0)
    }
}
