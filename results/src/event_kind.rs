//! What a timed event was (`events.kind`) and which thread ran it (`events.lane`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The kind of a timed event of one rank, as stored in `events.kind`.
///
/// One closed vocabulary so the breakdown can tell communication from computation and a
/// trace viewer colours the same work the same way across strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Waiting for the data loader.
    DataWait,
    /// Host-to-device copy of a batch.
    H2d,
    /// Forward pass (of a stage or micro-batch in a pipeline).
    Forward,
    /// Backward pass.
    Backward,
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
    /// Evaluation.
    Eval,
}

impl EventKind {
    /// Every kind, in the order of a training step.
    pub const ALL: [EventKind; 15] = [
        EventKind::DataWait,
        EventKind::H2d,
        EventKind::Forward,
        EventKind::Backward,
        EventKind::Recompute,
        EventKind::AllReduce,
        EventKind::Broadcast,
        EventKind::Reduce,
        EventKind::AllGather,
        EventKind::Send,
        EventKind::Recv,
        EventKind::Barrier,
        EventKind::Optimizer,
        EventKind::Idle,
        EventKind::Eval,
    ];

    /// The name stored in `events.kind`.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::DataWait => "data_wait",
            EventKind::H2d => "h2d",
            EventKind::Forward => "forward",
            EventKind::Backward => "backward",
            EventKind::Recompute => "recompute",
            EventKind::AllReduce => "all_reduce",
            EventKind::Broadcast => "broadcast",
            EventKind::Reduce => "reduce",
            EventKind::AllGather => "all_gather",
            EventKind::Send => "send",
            EventKind::Recv => "recv",
            EventKind::Barrier => "barrier",
            EventKind::Optimizer => "optimizer",
            EventKind::Idle => "idle",
            EventKind::Eval => "eval",
        }
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
                | EventKind::Send
                | EventKind::Recv
                | EventKind::Barrier
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stored event kind that is not one of [`EventKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event kind {0:?} (expected one of: data_wait, h2d, forward, backward, recompute, all_reduce, broadcast, reduce, all_gather, send, recv, barrier, optimizer, idle, eval)")]
pub struct UnknownEventKind(pub String);

impl FromStr for EventKind {
    type Err = UnknownEventKind;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        EventKind::ALL.into_iter().find(|kind| kind.name() == name).ok_or_else(|| UnknownEventKind(name.to_owned()))
    }
}

/// The thread an event ran on, as stored in `events.lane`.
///
/// Communication runs on a thread of its own so it can overlap computation; keeping the
/// two apart is what lets a trace show the overlap and the breakdown measure it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// The training thread: loading, copies, forward, backward, optimizer.
    Compute,
    /// The communication thread.
    Comm,
}

impl Lane {
    /// Both lanes, compute first.
    pub const ALL: [Lane; 2] = [Lane::Compute, Lane::Comm];

    /// The name stored in `events.lane`.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Compute => "compute",
            Lane::Comm => "comm",
        }
    }

    /// Thread id of the lane in a Chrome trace (compute 0, comm 1).
    pub fn trace_tid(self) -> u32 {
        match self {
            Lane::Compute => 0,
            Lane::Comm => 1,
        }
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stored lane that is neither `compute` nor `comm`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event lane {0:?} (expected compute or comm)")]
pub struct UnknownLane(pub String);

impl FromStr for Lane {
    type Err = UnknownLane;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Lane::ALL.into_iter().find(|lane| lane.name() == name).ok_or_else(|| UnknownLane(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_round_trip_and_match_serde() {
        for kind in EventKind::ALL {
            assert_eq!(kind.name().parse::<EventKind>(), Ok(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{kind}\""));
        }
        assert!("matmul".parse::<EventKind>().unwrap_err().to_string().contains("expected one of"));
    }

    #[test]
    fn only_data_movement_between_ranks_is_communication() {
        let communication: Vec<&str> =
            EventKind::ALL.into_iter().filter(|kind| kind.is_communication()).map(EventKind::name).collect();
        assert_eq!(communication, ["all_reduce", "broadcast", "reduce", "all_gather", "send", "recv", "barrier"]);
    }

    #[test]
    fn lane_names_round_trip_and_match_serde() {
        for lane in Lane::ALL {
            assert_eq!(lane.name().parse::<Lane>(), Ok(lane));
            assert_eq!(serde_json::to_string(&lane).unwrap(), format!("\"{lane}\""));
        }
        assert!("gpu".parse::<Lane>().is_err());
    }
}
