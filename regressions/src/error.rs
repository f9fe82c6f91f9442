//! What can go wrong comparing runs, naming the run folder or file.

use std::path::PathBuf;

use stratlab_results::StoreError;
use stratlab_strategy_spec::ColumnsError;

/// A comparison or history failure.
#[derive(Debug, thiserror::Error)]
pub enum RegressionError {
    /// A run could not be read (not a run folder, a corrupt table, …).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A threshold the user gave is out of range (significance, noise, resamples).
    #[error("{0}")]
    Thresholds(String),
    /// A filesystem call failed on `path`.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing JSON failed.
    #[error("{path}: {source}")]
    Json {
        /// The file involved.
        path: PathBuf,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// Writing the history table failed.
    #[error("{path}: {source}")]
    Polars {
        /// The file involved.
        path: PathBuf,
        /// The polars error.
        #[source]
        source: polars::prelude::PolarsError,
    },
    /// A trial row whose strategy columns do not read (a corrupt or foreign run).
    #[error("run {run}: {source}")]
    Strategy {
        /// The run id.
        run: String,
        /// What does not read.
        #[source]
        source: ColumnsError,
    },
    /// Two runs share no cell: a gate that compared nothing must not pass.
    #[error(
        "nothing to compare: {baseline} and {new} have no cell in common ({only_in_baseline} cells only in the \
         baseline, {only_in_new} only in the new run)"
    )]
    NothingToCompare {
        /// The baseline run id.
        baseline: String,
        /// The new run id.
        new: String,
        /// Cells the baseline has.
        only_in_baseline: usize,
        /// Cells the new run has.
        only_in_new: usize,
    },
    /// The runs folder holds no run of the suite asked for.
    #[error("{folder} holds no run of suite {suite:?}; it holds runs of: {available}")]
    NoSuchSuite {
        /// The runs folder.
        folder: PathBuf,
        /// The suite asked for.
        suite: String,
        /// The suites found, comma separated (or "none").
        available: String,
    },
}
