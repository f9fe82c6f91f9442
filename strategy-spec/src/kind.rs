//! The strategies stratlab knows, by name alone (their parameters are [`crate::Strategy`]'s).

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use strum::VariantArray;

use crate::{Infeasible, UnknownName};

/// A way of spreading training over workers (the thesis's *distribution model*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "kebab-case")]
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
    #[strum(serialize = "1f1b")]
    OneFOneB,
    /// PipeDream: asynchronous 1F1B with weight stashing and no flush; every stage updates
    /// after every micro-batch's backward, so stage s's updates are p − s − 1 steps stale.
    #[strum(serialize = "pipedream")]
    PipeDream,
    /// Interleaved 1F1B (Megatron-LM's, as `torch.distributed.pipelining` runs it): every
    /// worker holds v non-adjacent stages of a network cut into v × workers, shrinking the
    /// bubble v-fold for v times the messages; one optimizer step per batch.
    #[strum(serialize = "interleaved-1f1b")]
    Interleaved1F1B,
    /// Zero-bubble pipelines (Qi et al., ICLR 2024, as `torch.distributed.pipelining` runs
    /// them): every backward split into the input's gradient and the weights', the
    /// weights' halves filling the bubble; ZB1P in the loop placement, ZB-V in the V. One
    /// optimizer step per batch.
    #[strum(serialize = "zero-bubble")]
    ZeroBubble,
    /// dp data-parallel replicas of a pp-stage 1F1B pipeline; each stage's gradients are
    /// all-reduced among its replicas.
    Hybrid,
    /// Data parallelism whose ranks each keep a 1/N shard of the optimizer state, and from
    /// ZeRO stage 2 of the gradients, from stage 3 of the weights (ZeRO; PyTorch FSDP):
    /// gradients reduce-scattered, weights all-gathered.
    ShardedDataParallel,
}

impl StrategyKind {
    /// Every strategy this build can train, in the order reports list them (declaration
    /// order).
    pub const ALL: &'static [StrategyKind] = Self::VARIANTS;

    /// The strategies that cut the network into stages (and take micro-batches, balance
    /// and checkpoint parameters).
    pub const PIPELINES: &'static [StrategyKind] = &[
        StrategyKind::ModelParallel,
        StrategyKind::Gpipe,
        StrategyKind::OneFOneB,
        StrategyKind::PipeDream,
        StrategyKind::Interleaved1F1B,
        StrategyKind::ZeroBubble,
        StrategyKind::Hybrid,
    ];

    /// The name used in suite files and results.
    pub fn name(self) -> &'static str {
        self.into()
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
            StrategyKind::ShardedDataParallel if workers >= 1 => Ok(()),
            StrategyKind::ParameterServer if workers >= 2 => Ok(()),
            StrategyKind::ParameterServer => {
                fail(format!("parameter-server needs at least 2 workers (a server and a worker), not {workers}"))
            }
            StrategyKind::Interleaved1F1B if workers < 2 => fail(format!(
                "interleaved-1f1b interleaves stages over at least 2 workers, not {workers} (on one, it is 1f1b's \
                 one-stage pipeline)"
            )),
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
        matches!(self, StrategyKind::DataParallel | StrategyKind::ParameterServer | StrategyKind::ShardedDataParallel)
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

stratlab_columns::text_column!(StrategyKind);

impl FromStr for StrategyKind {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("strategy", text)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_stored_ones_and_serde_uses_them() {
        let names: Vec<&str> = StrategyKind::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(
            names,
            [
                "single",
                "data-parallel",
                "parameter-server",
                "model-parallel",
                "gpipe",
                "1f1b",
                "pipedream",
                "interleaved-1f1b",
                "zero-bubble",
                "hybrid",
                "sharded-data-parallel"
            ]
        );
        for &kind in StrategyKind::ALL {
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(kind.name().parse::<StrategyKind>(), Ok(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<StrategyKind>(&format!("\"{}\"", kind.name())).unwrap(), kind);
        }
        assert_eq!(
            "ring".parse::<StrategyKind>().unwrap_err().to_string(),
            "unknown strategy `ring`; valid: single, data-parallel, parameter-server, model-parallel, gpipe, 1f1b, \
             pipedream, interleaved-1f1b, zero-bubble, hybrid, sharded-data-parallel"
        );
    }
}
