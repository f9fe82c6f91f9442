//! `stratlab validate`'s table: one row per published measurement, the performance model,
//! the thesis's closed forms and the null model each predicting it from the table's
//! single-device row, with the signed errors the judgement reads.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::Table;

/// One published row, predicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct ValidationRow {
    /// The published table's name.
    pub table: String,
    /// The row as the source names it.
    pub label: String,
    /// The strategy and its parameters, as stratlab labels them.
    pub strategy: String,
    /// Devices the row used.
    pub workers: u32,
    /// Samples per optimizer step over all devices.
    pub global_batch: u64,
    /// Whether the row is the model's input (its predictions equal it by construction).
    pub input: bool,
    /// Seconds per step, published (or from the published throughput).
    pub published_step_s: f64,
    /// Samples per second, published.
    pub published_samples_per_s: f64,
    /// Throughput per device over the input row's: scaling efficiency, 0–1.
    pub published_efficiency: f64,
    /// The performance model's seconds per step.
    pub model_step_s: Option<f64>,
    /// Its samples per second.
    pub model_samples_per_s: Option<f64>,
    /// Its scaling efficiency.
    pub model_efficiency: Option<f64>,
    /// Its step's exposed communication, seconds.
    pub model_exposed_comm_s: Option<f64>,
    /// Its step's pipeline bubble, seconds.
    pub model_bubble_s: Option<f64>,
    /// Why the model has no prediction.
    pub model_unavailable: Option<String>,
    /// The thesis's closed forms' seconds per step.
    pub thesis_step_s: Option<f64>,
    /// Their samples per second.
    pub thesis_samples_per_s: Option<f64>,
    /// Their scaling efficiency.
    pub thesis_efficiency: Option<f64>,
    /// The null model's seconds per step (perfect scaling; ideal bubble).
    pub null_step_s: f64,
    /// Its samples per second.
    pub null_samples_per_s: f64,
    /// Its scaling efficiency.
    pub null_efficiency: f64,
}

impl Table for ValidationRow {
    const NAME: &'static str = crate::table_names::VALIDATION;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}
