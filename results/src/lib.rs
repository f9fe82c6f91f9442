//! The results store: every run's tables on disk, as Parquet parts written atomically.
//!
//! Layout (see `results/README.md`): `runs/<run_id>/` holds `fingerprint.json`,
//! `suite.yaml` and one folder per table (`trials/`, `epochs/`, `steps/`, `telemetry/`,
//! `events/`, `rank_breakdown/`, `pipeline_stages/`, `gradient_updates/`, `trial_nodes/`) with one `<trial_id>.parquet` per finished trial, plus
//! `traces/<trial_id>.json` for trials with events. A trial is finished exactly when its
//! `trials/` part exists, so an interrupted run can resume by skipping those trials.
//! Probe runs (`<UTC>-probe`) hold link bandwidths in `probes/` instead. Run-level tables
//! (`probes/`, `predictions/`, `predicted_passes/`, `batch_probes/`) hold parts that are not a trial's.
//!
//! No libtorch here: the binary writes through this crate and the reports read through it.

mod atomic_file;
mod auto_choice_row;
mod batch_probe_row;
mod cell_key;
mod chrome_trace;
mod device_load;
mod event_kind;
mod event_row;
mod export_format;
mod fingerprint;
mod gradient_update;
mod intervals;
pub mod nonfinite;
mod outcome;
mod paper;
mod pipeline_stage;
mod predicted_pass_row;
mod prediction_row;
mod probe_row;
mod profile_row;
mod profile_store;
mod rank_breakdown;
mod records;
mod rows;
mod run_store;
mod run_view;
pub mod stats;
mod store_error;
mod table;
mod table_names;
mod trial_device;
mod trial_node_row;
mod trial_tables;
mod utc_time;
mod validation_row;

pub use atomic_file::write_file_atomically;
pub use auto_choice_row::AutoChoiceRow;
pub use batch_probe_row::{bisection_resolution, BatchProbeRow};
pub use cell_key::CellKey;
pub use chrome_trace::chrome_trace;
pub use device_load::{DeviceLoad, EnergySource, Sample};
pub use event_kind::{EventKind, Lane};
pub use event_row::EventRow;
pub use export_format::ExportFormat;
pub use fingerprint::Fingerprint;
pub use gradient_update::{GradientRecord, GradientUpdateRow};
pub use outcome::Outcome;
pub use paper::{regenerated_by, ExpectedMinutes, PaperFigure, Regenerates, UnknownPaperFigure};
pub use pipeline_stage::{
    pipeline_stage_rows, theoretical_bubble, zero_bubble_h1_bubble, PipelineStageInfo, PipelineStageRow,
};
pub use predicted_pass_row::PredictedPassRow;
pub use prediction_row::PredictionRow;
pub use probe_row::{algorithm_gbps, point_to_point_link, ProbeError, ProbeKind, ProbeRow, ProbeSpec};
pub use profile_row::ProfileRow;
pub use profile_store::{PartStore, ProfileStore};
pub use rank_breakdown::{rank_breakdown, RankBreakdownRow};
pub use records::{EpochRecord, EvalRecord, StepRecord, TrainingSummary};
pub use rows::EvaluationRow;
pub use rows::{EpochRow, StepRow, TelemetryRow, TrialRow};
pub use run_store::{RunStore, DEFAULT_STORE_DIR};
pub use run_view::RunView;
pub use store_error::StoreError;
/// Where a trial's samples came from, the strategy vocabulary's.
pub use stratlab_strategy_spec::DataSource;
/// The parse error of every named enum here ([`Outcome`], [`EventKind`], [`Lane`],
/// [`ProbeKind`], [`ExportFormat`]): the same one as the strategy vocabulary's names.
pub use stratlab_strategy_spec::UnknownName;
pub use table::{decode_rows, from_frame, to_frame, write_csv, Table};
pub use table_names::TABLE_NAMES;
pub use trial_device::{TrialDevice, UnknownDevice};
pub use trial_node_row::TrialNodeRow;
pub use trial_tables::TrialTables;
pub use utc_time::UtcTime;
pub use validation_row::ValidationRow;
