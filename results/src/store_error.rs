//! What can go wrong reading or writing a run, always naming the file or table.

use std::path::PathBuf;

use polars::prelude::PolarsError;

/// A results-store failure, with the file (or table) it concerns.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem call failed on `path`.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing a Parquet/CSV/JSON file failed in polars.
    #[error("{path}: {source}")]
    Polars {
        /// The file involved.
        path: PathBuf,
        /// The polars error.
        #[source]
        source: PolarsError,
    },
    /// A table part of a run could not be read as Parquet (truncated, overwritten, not
    /// Parquet at all).
    #[error("{path}: not a readable table part: {source}")]
    CorruptPart {
        /// The part file.
        path: PathBuf,
        /// The polars error.
        #[source]
        source: PolarsError,
    },
    /// A run's fingerprint.json is not a fingerprint.
    #[error("{path}: not a readable fingerprint: {source}")]
    CorruptFingerprint {
        /// The file.
        path: PathBuf,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// Rows of `table` could not be turned into a frame.
    #[error("building the {table} frame: {source}")]
    Frame {
        /// The table name.
        table: &'static str,
        /// The polars error.
        #[source]
        source: PolarsError,
    },
    /// Rows of `table` could not be serialised.
    #[error("encoding {table} rows: {source}")]
    Encode {
        /// The table name.
        table: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A frame of `table` could not be read back as rows.
    #[error("decoding {table} rows: {source}")]
    Decode {
        /// The table name.
        table: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A frame column has a dtype no row type uses (a hand-built frame, or a newer store).
    #[error("{table} column {column:?} has dtype {dtype}, which rows cannot hold")]
    UnsupportedDtype {
        /// The table name.
        table: &'static str,
        /// The column.
        column: String,
        /// Its dtype.
        dtype: String,
    },
    /// The fingerprint could not be written as JSON.
    #[error("{path}: {source}")]
    Json {
        /// The file involved.
        path: PathBuf,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A part's columns differ from its table's schema (written by another version?).
    #[error("{path}: schema differs from the {table} table: expected {expected}, found {found}")]
    SchemaMismatch {
        /// The part file.
        path: PathBuf,
        /// The table name.
        table: &'static str,
        /// The expected `name: dtype` list.
        expected: String,
        /// The `name: dtype` list found in the file.
        found: String,
    },
    /// `load` or `export` was asked for a table that does not exist.
    #[error("no table named {name:?} (tables: {})", crate::TABLE_NAMES.join(", "))]
    UnknownTable {
        /// The name asked for.
        name: String,
    },
    /// A trial id that cannot be a file name.
    #[error("trial id {id:?} cannot name a file: use letters, digits, '-', '_', '.' and no leading '.'")]
    InvalidTrialId {
        /// The offending id.
        id: String,
    },
    /// A row handed to `write_trial` belongs to another trial.
    #[error("{table} row of trial {found:?} given for trial {expected:?}")]
    ForeignRow {
        /// The table of the row.
        table: &'static str,
        /// The trial being written.
        expected: String,
        /// The trial the row names.
        found: String,
    },
    /// A trial row whose columns make no cell (a strategy with a parameter it does not
    /// take, a negative count): a corrupt or foreign `trials` table.
    #[error("{run}: {source}")]
    Cell {
        /// The run folder.
        run: PathBuf,
        /// What does not make a cell.
        #[source]
        source: stratlab_strategy_spec::ColumnsError,
    },
    /// `open` was pointed at a folder that is not a run.
    #[error("{path}: not a run folder (no fingerprint.json)")]
    NotARun {
        /// The folder.
        path: PathBuf,
    },
}

impl StoreError {
    /// Whether the run folder itself is at fault, not this machine's reading or writing of
    /// it: no fingerprint, a fingerprint or table part that does not parse, columns of
    /// another shape. Commands that read runs report these as bad input (exit 2).
    pub fn is_unreadable_run(&self) -> bool {
        matches!(
            self,
            StoreError::NotARun { .. }
                | StoreError::CorruptPart { .. }
                | StoreError::CorruptFingerprint { .. }
                | StoreError::SchemaMismatch { .. }
                | StoreError::Decode { .. }
                | StoreError::UnsupportedDtype { .. }
                | StoreError::Cell { .. }
        )
    }
}
