//! What a timed event was (`events.kind`) and which thread ran it (`events.lane`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use stratlab_strategy_spec::UnknownName;
use strum::VariantArray;

/// The kind of a timed event of one rank, as stored in `events.kind`.
///
/// One closed vocabulary so the breakdown can tell communication from computation and a
/// trace viewer colours the same work the same way across strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum EventKind {
    /// Waiting for the data loader.
    DataWait,
    /// Host-to-device copy of a batch.
    H2d,
    /// Forward pass (of a stage or micro-batch in a pipeline).
    Forward,
    /// Backward pass.
    Backward,
    /// The input's gradient of a split backward (zero-bubble's `I`).
    BackwardInput,
    /// The weights' gradients of a split backward (zero-bubble's `W`).
    BackwardWeight,
    /// Forward pass run again during backward because its activations were not kept
    /// (activation checkpointing, PipeDream's weight stashing).
    Recompute,
    /// All-reduce of gradients (a bucket, or everything).
    AllReduce,
    /// Broadcast (initial parameters, buffers).
    Broadcast,
    /// Reduce to one rank.
    Reduce,
    /// All-gather.
    AllGather,
    /// Reduce-scatter: each rank keeps its chunk of the reduction (sharded data parallelism's
    /// gradients).
    ReduceScatter,
    /// Point-to-point send (activations or gradients between pipeline stages).
    Send,
    /// Point-to-point receive.
    Recv,
    /// Barrier across ranks.
    Barrier,
    /// Optimizer step.
    Optimizer,
    /// Explicitly recorded idle time (a pipeline bubble).
    Idle,
    /// A straggler's added wait after a forward or backward: its slowdown, apart from its
    /// compute and its communication.
    StragglerWait,
    /// Evaluation.
    Eval,
}

stratlab_columns::text_column!(EventKind, Lane);

impl EventKind {
    /// Every kind, in the order of a training step (declaration order).
    pub const ALL: &'static [EventKind] = Self::VARIANTS;

    /// The name stored in `events.kind`.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the event is a pass's compute (a forward, a backward or either half of a
    /// split one, a recomputed forward): what a pipeline's bubble is measured against.
    pub fn is_pass(self) -> bool {
        matches!(
            self,
            EventKind::Forward
                | EventKind::Backward
                | EventKind::BackwardInput
                | EventKind::BackwardWeight
                | EventKind::Recompute
        )
    }

    /// Whether the event moves data between ranks (collectives, point-to-point, barriers):
    /// the time the breakdown counts as communication.
    pub fn is_communication(self) -> bool {
        matches!(
            self,
            EventKind::AllReduce
                | EventKind::Broadcast
                | EventKind::Reduce
                | EventKind::AllGather
                | EventKind::ReduceScatter
                | EventKind::Send
                | EventKind::Recv
                | EventKind::Barrier
        )
    }
}

impl FromStr for EventKind {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("event kind", name)
    }
}

/// The thread an event ran on, as stored in `events.lane`.
///
/// Communication runs on a thread of its own so it can overlap computation; keeping the
/// two apart is what lets a trace show the overlap and the breakdown measure it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Lane {
    /// The training thread: loading, copies, forward, backward, optimizer.
    Compute,
    /// The communication thread.
    Comm,
}

impl Lane {
    /// Both lanes, compute first (declaration order).
    pub const ALL: &'static [Lane] = Self::VARIANTS;

    /// The name stored in `events.lane`.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Thread id of the lane in a Chrome trace (compute 0, comm 1).
    pub fn trace_tid(self) -> u32 {
        match self {
            Lane::Compute => 0,
            Lane::Comm => 1,
        }
    }
}

impl FromStr for Lane {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("event lane", name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_round_trip_and_match_serde() {
        let names: Vec<&str> = EventKind::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(
            names.join(" "),
            "data_wait h2d forward backward backward_input backward_weight recompute all_reduce broadcast reduce all_gather reduce_scatter send recv \
             barrier optimizer idle straggler_wait eval"
        );
        for &kind in EventKind::ALL {
            assert_eq!(kind.name().parse::<EventKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{}\"", kind.name()));
        }
        let unknown = "matmul".parse::<EventKind>().unwrap_err().to_string();
        assert!(unknown.starts_with("unknown event kind `matmul`; valid: data_wait, h2d, forward,"), "{unknown}");
        assert!(unknown.ends_with(", optimizer, idle, straggler_wait, eval"), "{unknown}");
    }

    #[test]
    fn only_data_movement_between_ranks_is_communication() {
        let communication: Vec<&str> =
            EventKind::ALL.iter().copied().filter(|kind| kind.is_communication()).map(EventKind::name).collect();
        assert_eq!(
            communication,
            ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "send", "recv", "barrier"]
        );
    }

    #[test]
    fn lane_names_round_trip_and_match_serde() {
        let names: Vec<&str> = Lane::ALL.iter().map(|lane| lane.name()).collect();
        assert_eq!(names, ["compute", "comm"]);
        for &lane in Lane::ALL {
            assert_eq!(lane.name().parse::<Lane>(), Ok(lane));
            assert_eq!(lane.to_string(), lane.name());
            assert_eq!(serde_json::to_string(&lane).unwrap(), format!("\"{}\"", lane.name()));
        }
        assert_eq!("gpu".parse::<Lane>().unwrap_err().to_string(), "unknown event lane `gpu`; valid: compute, comm");
    }
}
