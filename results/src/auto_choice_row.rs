//! What `auto` chose for a group of cells on this machine, kept in the store beside the
//! profiles and reused while everything it depends on matches (folded into `choice_key`):
//! one row per candidate timed, the chosen one marked.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::Table;

/// One candidate of one choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct AutoChoiceRow {
    /// Everything the choice must match to be reused (network, data set, batch, threads,
    /// device, what the suite asked, libtorch, the binary); its rows share it.
    pub choice_key: String,
    /// The candidate's precision (`fp32`, `bf16`, `tf32`).
    pub precision: String,
    /// The candidate's memory format (`contiguous`, `channels_last`).
    pub memory_format: String,
    /// Seconds of its training step as timed (10th percentile of two after one untimed).
    pub step_s: f64,
    /// Whether it was the fastest, the one the cells train in.
    pub chosen: bool,
    /// When the candidates were timed (UTC, RFC 3339), shared by a choice's rows.
    pub taken_at: String,
}

impl Table for AutoChoiceRow {
    const NAME: &'static str = crate::table_names::AUTO_CHOICES;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}
