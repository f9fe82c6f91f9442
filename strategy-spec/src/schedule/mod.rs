//! The order in which one pipeline rank runs its micro-batches' forwards and backwards.
//!
//! Every action names the pipeline stage it runs: with one stage per rank that is the
//! rank's stage; interleaved schedules cut the network into `v` times as many stages as
//! ranks and give rank `r` of `p` the stages `r, r + p, …, r + (v − 1)p` (PyTorch's "loop"
//! placement), so a micro-batch passes through every rank `v` times.
//!
//! The synchronous schedules are per batch: `micro_batches` forwards and as many
//! backwards per stage, then the update. PipeDream updates after each backward instead
//! ([`Schedule::updates_per_micro_batch`]) and never flushes ([`pipedream_actions`]). The
//! orders are the ones the GPipe, PipeDream, PipeDream-2BW and Megatron papers give:
//!
//! - **model-parallel**: the whole batch as one micro-batch, `F0 B0`; at most one stage
//!   busy at a time.
//! - **GPipe** (fill and drain): `F0 … F(m−1)` then `B(m−1) … B0`. Backwards run last
//!   micro-batch first, as torchgpipe does: the last micro-batch's activations are the
//!   freshest, which is why `except_last` checkpointing keeps exactly that one.
//! - **1F1B** (PipeDream-flush): stage `s` of `p` runs `min(p − s − 1, m)` warm-up
//!   forwards, then alternates one forward and one backward, then drains the remaining
//!   backwards, oldest first. At most `p − s` micro-batches are in flight on stage `s`
//!   (GPipe holds `m`), which is its memory advantage; the bubble is the same.
//! - **1F1B with replicated stages** (PipeDream's layouts such as 2-1; [`StageReplicas`]):
//!   a stage on several workers, micro-batches round robin over them, each replica 1F1B
//!   over its share.
//! - **interleaved 1F1B** (Megatron-LM; [`interleaved`]): 1F1B over `v` stages per rank,
//!   in rounds of micro-batches, as `torch.distributed.pipelining.ScheduleInterleaved1F1B`
//!   orders it; the bubble shrinks to `(p − 1)/(v·m + p − 1)`.
//! - **zero-bubble** (ZB1P in the loop placement, ZB-V in the V; [`zero_bubble`]): every
//!   backward split into the input's gradient `I` and the weights' `W`, the `W`s filling
//!   the bubble, as PyTorch's `ScheduleInterleavedZeroBubble` and `ScheduleZBVZeroBubble`
//!   order them.

mod action;
mod interleaved;
pub mod pytorch;
mod replicated;
mod zero_bubble;

use crate::StrategyKind;
pub use action::{Action, Pass};
pub use replicated::StageReplicas;

/// How a zero-bubble pipeline places its stages on the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum Placement {
    /// Rank `r` of `p` holds stages `r, r + p, …` (ZB1P; ZB-H1 with one stage per rank).
    #[default]
    Loop,
    /// Rank `r` holds stages `r` and `2p − 1 − r` (ZB-V): exactly two per rank.
    V,
}

impl std::str::FromStr for Placement {
    type Err = crate::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::UnknownName::parse("placement", text)
    }
}

stratlab_columns::text_column!(Placement);

/// How a pipeline orders its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// One micro-batch per batch.
    ModelParallel,
    /// Fill and drain.
    GPipe,
    /// One forward, one backward.
    OneFOneB,
    /// 1F1B order with an update after every micro-batch's backward (weight stashing).
    PipeDream,
    /// 1F1B over `virtual_stages` stages per rank, looped placement.
    Interleaved {
        /// Stages each rank holds (`v`, at least 2).
        virtual_stages: usize,
    },
    /// Split backwards, the weights' halves filling the bubble.
    ZeroBubble {
        /// How the stages sit on the ranks.
        placement: Placement,
        /// Stages each rank holds (2 under the V placement).
        virtual_stages: usize,
    },
}

impl Schedule {
    /// The schedule of a pipeline strategy with one stage per rank (`hybrid` replicates
    /// 1F1B pipelines); `None` for strategies that do not pipeline or that need more than
    /// their kind to say how ([`crate::Strategy::schedule`] knows them all).
    pub fn of(kind: StrategyKind) -> Option<Schedule> {
        match kind {
            StrategyKind::ModelParallel => Some(Schedule::ModelParallel),
            StrategyKind::Gpipe => Some(Schedule::GPipe),
            StrategyKind::OneFOneB | StrategyKind::Hybrid => Some(Schedule::OneFOneB),
            StrategyKind::PipeDream => Some(Schedule::PipeDream),
            StrategyKind::Interleaved1F1B
            | StrategyKind::ZeroBubble
            | StrategyKind::Single
            | StrategyKind::DataParallel
            | StrategyKind::ParameterServer
            | StrategyKind::ShardedDataParallel => None,
        }
    }

    /// Micro-batches per batch: model-parallel always runs the batch whole.
    pub fn micro_batches(self, requested: usize) -> usize {
        match self {
            Schedule::ModelParallel => 1,
            _ => requested.max(1),
        }
    }

    /// Whether every micro-batch's backward is followed by its own optimizer step.
    pub fn updates_per_micro_batch(self) -> bool {
        self == Schedule::PipeDream
    }

    /// Pipeline stages each rank holds.
    pub fn virtual_stages(self) -> usize {
        match self {
            Schedule::Interleaved { virtual_stages } | Schedule::ZeroBubble { virtual_stages, .. } => virtual_stages,
            _ => 1,
        }
    }

    /// Whether backwards run split into `I` and `W` passes.
    pub fn splits_backward(self) -> bool {
        matches!(self, Schedule::ZeroBubble { .. })
    }

    /// Pipeline stages of a pipeline of `ranks` ranks: what the network is cut into.
    pub fn stage_count(self, ranks: usize) -> usize {
        ranks * self.virtual_stages()
    }

    /// The rank (within its pipeline of `ranks`) that holds `stage`.
    pub fn rank_of_stage(self, stage: usize, ranks: usize) -> usize {
        match self {
            Schedule::ZeroBubble { placement: Placement::V, .. } if stage >= ranks => 2 * ranks - 1 - stage,
            _ => stage % ranks.max(1),
        }
    }

    /// The stages rank `rank` of `ranks` holds, first to last.
    pub fn stages_of_rank(self, rank: usize, ranks: usize) -> Vec<usize> {
        match self {
            Schedule::ZeroBubble { placement: Placement::V, .. } => vec![rank, 2 * ranks - 1 - rank],
            _ => (0..self.virtual_stages()).map(|chunk| chunk * ranks + rank).collect(),
        }
    }

    /// Why `ranks` ranks cannot run `micro_batches` micro-batches in this order, if they
    /// cannot (interleaved runs whole rounds).
    pub fn check(self, ranks: usize, micro_batches: usize) -> Result<(), String> {
        match self {
            Schedule::Interleaved { .. } => interleaved::check(ranks, micro_batches),
            Schedule::ZeroBubble { placement: Placement::Loop, .. } => zero_bubble::check_loop(ranks, micro_batches),
            _ => Ok(()),
        }
    }

    /// The order of rank `rank` (0-based) of `ranks` for `micro_batches` micro-batches.
    pub fn actions(self, rank: usize, ranks: usize, micro_batches: usize) -> Vec<Action> {
        let m = self.micro_batches(micro_batches);
        let forward = |mb| Action::forward(rank, mb);
        let backward = |mb| Action::backward(rank, mb);
        match self {
            Schedule::ModelParallel | Schedule::GPipe => {
                (0..m).map(forward).chain((0..m).rev().map(backward)).collect()
            }
            Schedule::OneFOneB | Schedule::PipeDream => {
                let warm_up = (ranks - rank - 1).min(m);
                let mut actions: Vec<Action> = (0..warm_up).map(forward).collect();
                for i in 0..m - warm_up {
                    actions.push(forward(warm_up + i));
                    actions.push(backward(i));
                }
                actions.extend((m - warm_up..m).map(backward));
                actions
            }
            Schedule::Interleaved { virtual_stages } => interleaved::actions(rank, ranks, virtual_stages, m),
            Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages } => {
                zero_bubble::loop_actions(rank, ranks, virtual_stages, m)
            }
            Schedule::ZeroBubble { placement: Placement::V, .. } => zero_bubble::v_actions(rank, ranks, m),
        }
    }
}

/// PipeDream's work on stage `stage` of `stages` in optimizer step `step`, by global
/// micro-batch id (`step × m + i`). It never flushes: stage `s` keeps `k = stages − s − 1`
/// micro-batches in flight across batch boundaries, each forward `F(g)` followed by the
/// backward of the micro-batch `k` before it, `B(g − k)`, once there is one. The first step
/// holds the warm-up; what is still in flight when training ends is drained by the worker.
pub fn pipedream_actions(stage: usize, stages: usize, micro_batches: usize, step: usize) -> Vec<Action> {
    let depth = stages - stage - 1;
    let first = step * micro_batches;
    let mut actions = Vec::with_capacity(2 * micro_batches);
    for id in first..first + micro_batches {
        actions.push(Action::forward(stage, id));
        if id >= depth {
            actions.push(Action::backward(stage, id - depth));
        }
    }
    actions
}

/// The sizes of `micro_batches` micro-batches of a batch of `batch` samples, as
/// `torch.tensor_split` cuts it: the first `batch % m` get one sample more.
pub fn micro_batch_sizes(batch: usize, micro_batches: usize) -> Vec<usize> {
    let m = micro_batches.max(1);
    (0..m).map(|i| batch / m + usize::from(i < batch % m)).collect()
}

#[cfg(test)]
mod tests;
