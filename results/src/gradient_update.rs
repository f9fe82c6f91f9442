//! What a parameter server did with each gradient a worker pushed: applied it (as its own
//! update, or within a round) or dropped it (a backup worker's late gradient), and how
//! stale it was: the updates the server applied between the worker's pull of the weights
//! and this gradient's arrival.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::Table;

/// One pushed gradient, as the server recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct GradientRecord {
    /// The rank that computed it.
    pub worker: u32,
    /// The server's version (updates applied) of the weights the worker computed it on.
    pub pulled_version: u64,
    /// The server's version when it arrived: the update it went into is this version + 1.
    pub arrived_version: u64,
    /// Whether it was applied (`false`: dropped as a backup worker's late gradient).
    pub applied: bool,
    /// Seconds since the server started serving, when it arrived.
    pub time_s: f64,
}

impl GradientRecord {
    /// Updates applied between the worker's pull and this gradient's arrival (0 in `sync`
    /// for every gradient applied).
    pub fn staleness(&self) -> u64 {
        self.arrived_version.saturating_sub(self.pulled_version)
    }
}

/// A [`GradientRecord`] of one trial, as stored in `gradient_updates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct GradientUpdateRow {
    /// The run this row belongs to.
    pub run_id: String,
    /// The trial this row belongs to.
    pub trial_id: String,
    /// What the server recorded; stored as columns `worker`, `pulled_version`, ….
    #[serde(flatten)]
    pub record: GradientRecord,
    /// `arrived_version − pulled_version`, stored so tables read it without arithmetic.
    pub staleness: u64,
}

impl GradientUpdateRow {
    /// `record` of trial `trial_id` of run `run_id`.
    pub fn new(run_id: &str, trial_id: &str, record: GradientRecord) -> GradientUpdateRow {
        let staleness = record.staleness();
        GradientUpdateRow { run_id: run_id.to_owned(), trial_id: trial_id.to_owned(), record, staleness }
    }
}

impl Table for GradientUpdateRow {
    const NAME: &'static str = crate::table_names::GRADIENT_UPDATES;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}
