//! The strategies stratlab knows, by name alone (their parameters are [`crate::Strategy`]'s).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Infeasible, UnknownName};

/// A way of spreading training over workers (the thesis's *distribution model*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum StrategyKind {
    /// One worker; the baseline every speedup divides by.
    Single,
    /// Replicas on every worker, gradients all-reduced (Horovod-style).
    DataParallel,
    /// Workers push gradients to a server rank, which updates and returns the weights.
    ParameterServer,
    /// The network cut into consecutive stages, one per worker, one whole batch at a time
    /// (at most one worker busy at any moment).
    ModelParallel,
    /// GPipe: the batch split into micro-batches, all forwards then all backwards (fill and
    /// drain), one optimizer step per batch.
    Gpipe,
    /// PipeDream-flush (1F1B): warm-up forwards, then one forward and one backward in
    /// turn, then drain; one optimizer step per batch, same updates as GPipe.
    OneFOneB,
    /// PipeDream: asynchronous 1F1B with weight stashing and no flush; every stage updates
    /// after every micro-batch's backward, so stage s's updates are p − s − 1 steps stale.
    PipeDream,
    /// dp data-parallel replicas of a pp-stage 1F1B pipeline; each stage's gradients are
    /// all-reduced among its replicas.
    Hybrid,
}

impl StrategyKind {
    /// Every strategy this build can train, in the order reports list them.
    pub const ALL: &'static [StrategyKind] = &[
        StrategyKind::Single,
        StrategyKind::DataParallel,
        StrategyKind::ParameterServer,
        StrategyKind::ModelParallel,
        StrategyKind::Gpipe,
        StrategyKind::OneFOneB,
        StrategyKind::PipeDream,
        StrategyKind::Hybrid,
    ];

    /// The strategies that cut the network into stages (and take micro-batches, balance
    /// and checkpoint parameters).
    pub const PIPELINES: &'static [StrategyKind] = &[
        StrategyKind::ModelParallel,
        StrategyKind::Gpipe,
        StrategyKind::OneFOneB,
        StrategyKind::PipeDream,
        StrategyKind::Hybrid,
    ];

    /// The name used in suite files and results.
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Single => "single",
            StrategyKind::DataParallel => "data-parallel",
            StrategyKind::ParameterServer => "parameter-server",
            StrategyKind::ModelParallel => "model-parallel",
            StrategyKind::Gpipe => "gpipe",
            StrategyKind::OneFOneB => "1f1b",
            StrategyKind::PipeDream => "pipedream",
            StrategyKind::Hybrid => "hybrid",
        }
    }

    /// Whether the strategy can run with `workers` workers, and if not, why (an
    /// `infeasible` outcome rather than a crash).
    pub fn check_workers(self, workers: usize) -> Result<(), Infeasible> {
        let fail = |reason: String| Err(Infeasible(reason));
        match self {
            StrategyKind::Single if workers == 1 => Ok(()),
            StrategyKind::Single => fail(format!("single trains on exactly 1 worker, not {workers}")),
            StrategyKind::DataParallel if workers >= 1 => Ok(()),
            StrategyKind::DataParallel => fail("data-parallel needs at least 1 worker".into()),
            StrategyKind::ParameterServer if workers >= 2 => Ok(()),
            StrategyKind::ParameterServer => {
                fail(format!("parameter-server needs at least 2 workers (a server and a worker), not {workers}"))
            }
            // A one-stage pipeline is the single-device baseline of a scaling curve.
            kind if kind.is_pipeline() && workers >= 1 => Ok(()),
            kind => fail(format!("{kind} needs at least 1 worker")),
        }
    }

    /// Whether the strategy cuts the network into pipeline stages.
    pub fn is_pipeline(self) -> bool {
        Self::PIPELINES.contains(&self)
    }

    /// Whether every worker trains on its own shard of the batch, so a step consumes
    /// `batch × workers` samples; pipeline stages share one batch (hybrid: one per replica).
    pub fn shards_batch(self) -> bool {
        matches!(self, StrategyKind::DataParallel | StrategyKind::ParameterServer)
    }

    /// Whether the strategy's workers form a process group (and record timelines).
    pub fn is_distributed(self) -> bool {
        !matches!(self, StrategyKind::Single)
    }

    /// The valid names, for error messages.
    pub fn valid_names() -> Vec<&'static str> {
        Self::ALL.iter().map(|kind| kind.name()).collect()
    }
}

impl FromStr for StrategyKind {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL.iter().copied().find(|kind| kind.name() == text).ok_or_else(|| UnknownName {
            what: "strategy",
            name: text.to_owned(),
            valid: Self::valid_names().join(", "),
        })
    }
}

impl TryFrom<String> for StrategyKind {
    type Error = UnknownName;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<StrategyKind> for String {
    fn from(kind: StrategyKind) -> String {
        kind.name().to_string()
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
