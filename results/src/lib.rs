//! The results store: every run's tables on disk, as Parquet parts written atomically.
//!
//! Layout (see `results/README.md`): `runs/<run_id>/` holds `fingerprint.json`,
//! `suite.yaml` and one folder per table (`trials/`, `epochs/`, `steps/`, `telemetry/`)
//! with one `<trial_id>.parquet` per finished trial. A trial is finished exactly when its
//! `trials/` part exists, so an interrupted run can resume by skipping those trials.
//!
//! No libtorch here: the binary writes through this crate and the reports read through it.

#![warn(missing_docs)]

mod export_format;
mod fingerprint;
pub mod nonfinite;
mod outcome;
mod rows;
mod run_store;
mod store_error;
mod table;
mod utc_time;

pub use export_format::ExportFormat;
pub use fingerprint::Fingerprint;
pub use outcome::{Outcome, UnknownOutcome};
pub use rows::{EpochRow, StepRow, TelemetryRow, TrialRow};
pub use run_store::{RunStore, DEFAULT_STORE_DIR, TABLE_NAMES};
pub use store_error::StoreError;
pub use table::{from_frame, to_frame, Table};
pub use utc_time::UtcTime;
