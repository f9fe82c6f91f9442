//! The search for a cell's largest batch (`batch_size: max`): one row per probe, a few real
//! training steps at one batch in fresh worker processes under the trial's memory limit,
//! with how they ended and the peak they reached. The cell then trains at the largest
//! batch that fitted, and the report's frontier reads these rows beside the model's
//! predicted largest batch.

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::Table;

/// One probe of one cell's search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct BatchProbeRow {
    /// The run the search belongs to.
    pub run_id: String,
    /// The cell searched, by its first repeat's trial id (`…__bmax…__r0`).
    pub trial_id: String,
    /// The cell's label (its batch shown as `bmax`).
    pub label: String,
    /// Network name.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// The strategy.
    pub strategy: stratlab_strategy_spec::StrategyKind,
    /// Workers.
    pub workers: i64,
    /// The strategy with the parameters given (`gpipe m4 ckpt always`): a frontier has a
    /// row per strategy, workers, micro-batches and checkpointing.
    pub strategy_label: String,
    /// The search's step: batches are whole multiples of it (a pipeline's micro-batches,
    /// else 1), and it closes to a sixteenth of the answer or this, whichever is larger.
    pub batch_step: i64,
    /// Position of this probe in the cell's search (0 first).
    pub probe: i64,
    /// Per-worker (per-pipeline) batch the probe trained.
    pub batch_size: i64,
    /// Samples per optimizer step over all workers at that batch.
    pub global_batch: i64,
    /// How the probe ended (`ok`, `oom`, `crashed`, `timeout`, …).
    pub outcome: crate::Outcome,
    /// Whether it fitted: trained its steps to the end.
    pub fits: bool,
    /// The one-line reason of a probe that did not.
    pub reason: Option<String>,
    /// The highest step peak of tensor memory of the fullest worker (null where the
    /// device cannot count, or no step finished).
    pub peak_memory_bytes: Option<u64>,
    /// The limit the probes ran under, per worker.
    pub memory_limit_bytes: Option<u64>,
    /// The model's largest per-worker batch under that limit, where it could predict one
    /// (the search's first probe, rounded to whole micro-batches).
    pub predicted_batch_size: Option<i64>,
    /// Seconds the probe took, processes' start included.
    pub wall_time_s: f64,
}

/// How close a search for the largest batch closes around an answer near `batch`: a
/// sixteenth of it or one `step` (a pipeline's micro-batches, else a sample), whichever is
/// larger. The search stops there, and a prediction within it counts as right.
pub fn bisection_resolution(batch: usize, step: usize) -> usize {
    (batch / 16).max(step)
}

impl Table for BatchProbeRow {
    const NAME: &'static str = crate::table_names::BATCH_PROBES;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}
