//! A plotted value or the reason there is none: failed trials are data, not gaps.

use crate::Stat;

/// Why a trial produced no value. Figures draw it as a hatched grey stub with this label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The device ran out of memory.
    OutOfMemory,
    /// The worker process crashed or was killed.
    Crashed,
    /// The loss became NaN or infinite.
    Diverged,
    /// The trial exceeded its time limit.
    TimedOut,
    /// Any other recorded reason, shown verbatim (keep it short).
    Other(String),
}

impl Failure {
    /// The short label drawn on the figure.
    pub fn label(&self) -> &str {
        match self {
            Failure::OutOfMemory => "OOM",
            Failure::Crashed => "crashed",
            Failure::Diverged => "diverged",
            Failure::TimedOut => "timeout",
            Failure::Other(reason) => reason,
        }
    }
}

/// What a figure shows for one cell: a measured statistic, or a failure with its reason.
/// One enum instead of a value plus a flag, so a failed trial cannot carry a stale number.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The trial ran; its metric over the repeats.
    Measured(Stat),
    /// The trial failed; no metric exists.
    Failed(Failure),
}

impl Outcome {
    /// A measured value from a single run (`n = 1`).
    pub fn single(value: f64) -> Self {
        Outcome::Measured(Stat::single(value))
    }

    /// The statistic, if the trial was measured.
    pub fn stat(&self) -> Option<&Stat> {
        match self {
            Outcome::Measured(stat) => Some(stat),
            Outcome::Failed(_) => None,
        }
    }

    /// The same outcome in another unit (a failure stays a failure).
    pub fn scaled(&self, factor: f64) -> Self {
        match self {
            Outcome::Measured(stat) => Outcome::Measured(stat.scaled(factor)),
            Outcome::Failed(failure) => Outcome::Failed(failure.clone()),
        }
    }
}
