//! A plotted value or the reason there is none: failed trials are data, not gaps.

use stratlab_results::Outcome;

use crate::Stat;

/// What a figure or table shows for one cell: a measured statistic, the trial outcome that
/// left none, or why there is none although the trials ran. One enum instead of a value
/// plus a flag, so a failed trial cannot carry a stale number.
#[derive(Debug, Clone, PartialEq)]
pub enum Plotted {
    /// The trials ran; their metric over the repeats.
    Measured(Stat),
    /// Every repeat ended this way (never [`Outcome::Ok`]); no metric exists.
    Failed(Outcome),
    /// The trials ran but give no value here, and why (`not recorded`, `no baseline`).
    Missing(String),
}

/// Label of a metric that `ok` repeats did not record (e.g. utilisation without NVML): the
/// cell ran, but there is nothing to plot and nothing is made up.
pub const NOT_RECORDED: &str = "not recorded";

impl Plotted {
    /// A measured value from a single run (`n = 1`).
    pub fn single(value: f64) -> Self {
        Plotted::Measured(Stat::single(value))
    }

    /// A value that `ok` trials did not record.
    pub fn not_recorded() -> Self {
        Plotted::Missing(NOT_RECORDED.into())
    }

    /// The statistic, if measured.
    pub fn stat(&self) -> Option<&Stat> {
        match self {
            Plotted::Measured(stat) => Some(stat),
            Plotted::Failed(_) | Plotted::Missing(_) => None,
        }
    }

    /// The short label a figure draws where there is no value (`OOM`, `no baseline`);
    /// `None` when measured.
    pub fn gap_label(&self) -> Option<String> {
        match self {
            Plotted::Measured(_) => None,
            Plotted::Failed(outcome) => Some(outcome_mark(*outcome).to_owned()),
            Plotted::Missing(why) => Some(why.clone()),
        }
    }

    /// The same value in another unit (a failure stays a failure).
    pub fn scaled(&self, factor: f64) -> Self {
        match self {
            Plotted::Measured(stat) => Plotted::Measured(stat.scaled(factor)),
            other => other.clone(),
        }
    }
}

/// How figures mark a trial's outcome where it left no value: short, the way a reader says it.
pub(crate) fn outcome_mark(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "ok",
        Outcome::Oom => "OOM",
        Outcome::Crashed => "crashed",
        Outcome::Timeout => "timeout",
        Outcome::Diverged => "diverged",
        Outcome::Infeasible => "infeasible",
    }
}
