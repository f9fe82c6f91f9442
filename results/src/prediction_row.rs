//! What the performance model predicted for each cell of a run, before any trial trained:
//! the step split into its parts, the fullest worker's peak memory, and the thesis's
//! closed forms beside it. Stored with the run so the report judges the prediction against
//! the measurement ex ante; nothing in it is fitted to the run's trials.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::Table;

/// One cell's prediction (keyed by its first repeat's trial id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct PredictionRow {
    /// The run the prediction belongs to.
    pub run_id: String,
    /// The cell's first repeat: `trials.trial_id` where `repeat` is 0.
    pub trial_id: String,
    /// The cell's label (network · data set · strategy×workers · batch).
    pub label: String,
    /// Predicted seconds per step; null where the model has none.
    pub step_s: Option<f64>,
    /// Forward and backward of the busiest worker.
    pub compute_s: Option<f64>,
    /// Communication not hidden behind compute.
    pub exposed_comm_s: Option<f64>,
    /// A pipeline's idle time on its busiest stage.
    pub bubble_s: Option<f64>,
    /// The update.
    pub optimizer_s: Option<f64>,
    /// Why there is no step prediction, when there is none.
    pub step_unavailable: Option<String>,
    /// The thesis's closed forms (eq. 5.1, 6.1 + 6.2, the sequential step); null where they
    /// have no form for the strategy.
    pub thesis_step_s: Option<f64>,
    /// Predicted peak bytes of the fullest worker.
    pub peak_memory_bytes: Option<f64>,
    /// Why there is no memory prediction, when there is none.
    pub memory_unavailable: Option<String>,
    /// How much slower compute was predicted to run for the workers' threads outnumbering
    /// the cores (1 when they do not).
    pub core_sharing: f64,
    /// Bytes per second of the link the prediction used (null: none needed).
    pub link_bandwidth_bytes_per_s: Option<f64>,
    /// One-way latency of that link, seconds.
    pub link_latency_s: Option<f64>,
    /// Where the link came from (`probe` of this run, a probe run's path, …).
    pub link_source: Option<String>,
    /// Seconds spent profiling the network for this cell's prediction (0 when its
    /// profile had been taken for an earlier cell).
    pub profile_s: f64,
    /// The reference work's seconds timed with the profile the prediction rests on (see
    /// `ProfileRow::speed_reference_s`); null where it was not timed.
    #[serde(default)]
    pub speed_reference_s: Option<f64>,
    /// Why the stored profile the prediction would have reused was taken again (it was
    /// profiled in a slow spell); null where it was reused, taken new, or in runs before
    /// stale profiles were retaken.
    #[serde(default)]
    pub profile_retaken: Option<String>,
}

impl Table for PredictionRow {
    const NAME: &'static str = crate::table_names::PREDICTIONS;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}
