//! One timed event of one rank: the raw timeline behind traces and the rank breakdown.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::{EventKind, Lane, Table};

/// One timed event (a forward pass, a gradient bucket's all-reduce, a send) of one rank in
/// a multi-worker trial, as stored in the `events` table.
///
/// Times are seconds since the trial's rank-0 start on one monotonic clock shared by the
/// ranks of a machine, so events of different ranks line up on one time axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct EventRow {
    /// The run this event belongs to.
    pub run_id: String,
    /// The trial this event belongs to.
    pub trial_id: String,
    /// Rank of the worker that ran it, from 0.
    pub rank: u32,
    /// Optimizer step it belongs to, from 0 (the step counter of `steps.step`).
    pub step: u64,
    /// Micro-batch within the step, for pipeline strategies.
    pub micro_batch: Option<u32>,
    /// The pipeline stage a pipeline's pass ran (an interleaved rank holds several); null
    /// for other events and in runs stored before the column existed.
    #[serde(default)]
    pub pipeline_stage: Option<u32>,
    /// What it was (`forward`, `all_reduce`, …).
    pub kind: EventKind,
    /// A free label within the kind, e.g. `stage 3` or `bucket 2`; may be empty.
    pub name: String,
    /// Start, seconds since the trial's rank-0 start.
    pub start_s: f64,
    /// End, seconds since the trial's rank-0 start.
    pub end_s: f64,
    /// Bytes moved, for communication events.
    pub bytes: Option<u64>,
    /// The thread it ran on: `compute` or `comm`.
    pub lane: Lane,
}

impl EventRow {
    /// `end_s − start_s`.
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

impl Table for EventRow {
    const NAME: &'static str = crate::table_names::EVENTS;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}
