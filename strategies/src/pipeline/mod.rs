//! Pipeline strategies: the network cut into consecutive stages, one per worker process,
//! activations sent forward and gradients backward with c10d send/receive.
//!
//! - [`partition`] turns a network's stages into a stage plan (`balance`);
//! - [`schedule`] says, per stage, in which order its forwards and backwards run
//!   (model-parallel, GPipe, 1F1B, PipeDream);
//! - the stage worker runs that order, overlapping sends and receives with compute.

pub mod memory;
pub mod partition;
pub mod schedule;

use serde::{Deserialize, Serialize};
use std::fmt;

pub use partition::{check_balance, plan_stages, Balance, PartitionError, StagePlan};

/// GPipe's activation checkpointing mode (torchgpipe's `checkpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Checkpoint {
    /// Recompute every micro-batch's activations in the backward pass.
    Always,
    /// All but the last micro-batch (torchgpipe's default: the last one's backward
    /// starts right after its forward, so keeping it costs no extra memory at the peak).
    ExceptLast,
    /// Keep all activations.
    #[default]
    Never,
}

impl Checkpoint {
    /// Whether micro-batch `micro_batch` of `micro_batches` keeps only its input in the
    /// forward pass and recomputes the rest in backward.
    pub fn recomputes(self, micro_batch: usize, micro_batches: usize) -> bool {
        match self {
            Checkpoint::Always => true,
            Checkpoint::ExceptLast => micro_batch + 1 < micro_batches,
            Checkpoint::Never => false,
        }
    }
}

impl fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Checkpoint::Always => "always",
            Checkpoint::ExceptLast => "except_last",
            Checkpoint::Never => "never",
        })
    }
}
