//! What can go wrong comparing runs, naming the run folder or file.

use std::path::PathBuf;

use stratlab_results::StoreError;

/// A comparison or history failure.
#[derive(Debug, thiserror::Error)]
pub enum RegressionError {
    /// A run could not be read (not a run folder, a corrupt table, …).
    #[error(transparent)]
    Store(#[from] StoreError),
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
