//! The performance model's simulated step of each pipeline cell, block by block, made before
//! any trial trained: the predicted timeline the report draws beside a trial's measured
//! one (thesis fig. 7.1 against 7.2), and the predicted bubble of each stage.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::{EventKind, Table};

/// One block of one rank's predicted step: a pass (`forward`, `recompute`, `backward`), an
/// update (`optimizer`) or the replicas' `all_reduce` after the flush.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct PredictedPassRow {
    /// The run the prediction belongs to.
    pub run_id: String,
    /// The cell's first repeat (`predictions.trial_id`): every repeat of the cell shares it.
    pub trial_id: String,
    /// Rank within one pipeline, from 0 (hybrid's replicas are predicted alike).
    pub rank: u32,
    /// What the block is; only pass, update and all-reduce kinds occur.
    pub kind: EventKind,
    /// The pipeline stage of a pass; null for the flush's all-reduce and update.
    pub pipeline_stage: Option<u32>,
    /// The micro-batch of a pass within its step; null for the flush.
    pub micro_batch: Option<u32>,
    /// Seconds from the predicted step's first pass.
    pub start_s: f64,
    /// Seconds from the predicted step's first pass.
    pub end_s: f64,
}

impl Table for PredictedPassRow {
    const NAME: &'static str = crate::table_names::PREDICTED_PASSES;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}
