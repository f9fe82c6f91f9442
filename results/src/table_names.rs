//! The names of a run's tables (their Parquet folders), in one place with no dependencies:
//! each row type's `Table::NAME` is one of these, and errors can list them all.

/// One row per trial.
pub const TRIALS: &str = "trials";
/// One row per epoch and worker.
pub const EPOCHS: &str = "epochs";
/// One row per step and worker.
pub const STEPS: &str = "steps";
/// One row per telemetry sample and device.
pub const TELEMETRY: &str = "telemetry";
/// One row per timeline event.
pub const EVENTS: &str = "events";
/// One row per rank of a trial: its step time split into compute, communication and idle.
pub const RANK_BREAKDOWN: &str = "rank_breakdown";
/// One row per pipeline stage of a trial.
pub const PIPELINE_STAGES: &str = "pipeline_stages";
/// One row per evaluation of a rank (every epoch's, every N steps', a server's own).
pub const EVALUATIONS: &str = "evaluations";
/// One row per gradient a parameter server was pushed (asynchronous modes, backup workers).
pub const GRADIENT_UPDATES: &str = "gradient_updates";
/// One row per rank of a trial across nodes: the node it ran on.
pub const TRIAL_NODES: &str = "trial_nodes";
/// One row per link-probe measurement.
pub const PROBES: &str = "probes";

/// One row per cell: the performance model's prediction, made before any trial trained.
pub const PREDICTIONS: &str = "predictions";

/// One row per block of each pipeline cell's predicted step (the predicted timeline), made
/// with the predictions.
pub const PREDICTED_PASSES: &str = "predicted_passes";

/// Store-level, beside the runs: networks' profiles, reused by every run and prediction
/// that matches them.
pub const PROFILES: &str = "profiles";

/// Store-level, beside the runs: what `auto` chose for each group of cells, reused while
/// it matches.
pub const AUTO_CHOICES: &str = "auto_choices";

/// One row per probe of a `batch_size: max` cell's search for its largest batch.
pub const BATCH_PROBES: &str = "batch_probes";

/// The run's tables, in the order they are exported: the per-trial ones, then the
/// run-level `probes`, `predictions`, `predicted_passes` and `batch_probes`.
pub const TABLE_NAMES: [&str; 14] = [
    TRIALS,
    EPOCHS,
    STEPS,
    TELEMETRY,
    EVENTS,
    RANK_BREAKDOWN,
    PIPELINE_STAGES,
    EVALUATIONS,
    GRADIENT_UPDATES,
    TRIAL_NODES,
    PROBES,
    PREDICTIONS,
    PREDICTED_PASSES,
    BATCH_PROBES,
];

/// Written by `stratlab validate`, outside any run: one row per published measurement,
/// predicted three ways against what was published.
pub const VALIDATION: &str = "validation";
