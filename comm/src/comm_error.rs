use std::time::Duration;

/// What went wrong in communication. A peer that disappears or does not answer in time is
/// an error of the operation that needed it, never a panic or a hang past the timeout.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// A launch variable is missing or malformed.
    #[error("launch variable {name}: {reason}")]
    Launch {
        /// The variable, e.g. `WORLD_SIZE`.
        name: &'static str,
        /// Why it is unusable.
        reason: String,
    },
    /// Rendezvous through the TCP store failed (no server, peers missing at the timeout).
    #[error("rendezvous at {address} as rank {rank} of {world_size} failed within {timeout:?}: {message}")]
    Rendezvous {
        /// `host:port` of the store.
        address: String,
        /// This process's rank.
        rank: usize,
        /// Ranks expected.
        world_size: usize,
        /// The rendezvous timeout.
        timeout: Duration,
        /// libtorch's message.
        message: String,
    },
    /// A collective or point-to-point operation failed: a peer closed its connection,
    /// the collective timeout passed, or the tensors were unsuitable.
    #[error("{operation} on rank {rank} of {world_size} failed: {message}")]
    Operation {
        /// `all_reduce`, `send`, …
        operation: &'static str,
        /// This process's rank.
        rank: usize,
        /// Ranks in the group.
        world_size: usize,
        /// libtorch's message.
        message: String,
    },
    /// The backend is not in this build (NCCL with a CPU-only libtorch).
    #[error("{0}")]
    Unavailable(String),
}

impl CommError {
    /// Whether the failure looks like a peer that went away or a timeout (as opposed to
    /// a misuse such as mismatched tensor sizes): how a surviving rank tells a dead peer.
    pub fn is_peer_failure(&self) -> bool {
        let message = match self {
            CommError::Operation { message, .. } | CommError::Rendezvous { message, .. } => message,
            _ => return false,
        };
        let lower = message.to_lowercase();
        ["connection", "timed out", "timeout", "closed", "reset", "broken pipe", "eof", "peer"]
            .iter()
            .any(|pattern| lower.contains(pattern))
    }
}
