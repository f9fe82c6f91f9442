//! The one error type of the crate: every failure names the figure, and the file or field at
//! fault, so a broken report says what to fix.

use std::path::PathBuf;

/// Why a figure could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A trial row's strategy columns do not read (a corrupt or foreign run).
    #[error(transparent)]
    Strategy(#[from] stratlab_strategy_spec::ColumnsError),
    /// The input held nothing to draw (an empty run still yields a figure elsewhere; an empty
    /// slice here is a caller bug).
    #[error("{figure}: no data to plot")]
    Empty {
        /// The figure kind, e.g. `"speedup_bars"`.
        figure: &'static str,
    },
    /// A field of the prepared data is out of range (negative time, NaN, mixed worker counts).
    #[error("{figure}: {field} = {value}: {why}")]
    InvalidInput {
        /// The figure kind.
        figure: &'static str,
        /// The offending field, e.g. `"events[3].end_s"`.
        field: String,
        /// The value found.
        value: String,
        /// What was expected instead.
        why: &'static str,
    },
    /// The bundled font could not be registered with plotters (a corrupt font file).
    #[error("registering the bundled font DejaVu Sans with plotters failed")]
    Font,
    /// plotters failed while drawing (layout, text or backend error).
    #[error("drawing {path}: {message}")]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// plotters' message.
        message: String,
    },
    /// Creating the output folder or writing a file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The folder or file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The run's copy of its suite file does not read as a suite's `regenerates:` block.
    #[error("{path}: {message}")]
    Suite {
        /// The run's `suite.yaml`.
        path: PathBuf,
        /// The parser's message, with the field path and line.
        message: String,
    },
    /// A figure to embed in the HTML report could not be read (missing, unreadable).
    #[error("reading figure {path} for the HTML report: {source}")]
    ReadFigure {
        /// The figure file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A figure to embed in the HTML report is neither `.svg` nor `.png`, so the browser
    /// would not know how to decode it.
    #[error("figure {path}: the HTML report embeds .svg and .png files only")]
    FigureFormat {
        /// The figure file.
        path: PathBuf,
    },
    /// Encoding the rendered pixels as PNG failed.
    #[error("encoding PNG {path}: {source}")]
    Png {
        /// The PNG file.
        path: PathBuf,
        /// The encoder's error.
        source: image::ImageError,
    },
    /// A table of the run could not be loaded from the results store.
    #[error("loading the {table} table of the run: {source}")]
    Load {
        /// The table, e.g. `"trials"`.
        table: &'static str,
        /// The store's error (it names the part file).
        source: stratlab_results::StoreError,
    },
    /// A column of a table is missing, has an unexpected type, or a Polars operation on it
    /// failed.
    #[error("table {table}, column {column}: {source}")]
    Column {
        /// The run's table (`"trials"`) or the summary table (`"speedup"`).
        table: String,
        /// The column at fault.
        column: String,
        /// Polars' error.
        source: polars::prelude::PolarsError,
    },
    /// Writing a summary table as CSV failed.
    #[error("writing CSV {path}: {source}")]
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// Polars' error.
        source: polars::prelude::PolarsError,
    },
    /// The folder is not a readable run (the store's error, its source, names the file).
    #[error("reading the run")]
    Store(#[source] stratlab_results::StoreError),
}

/// Writes `bytes` to `path` through the results crate's one atomic writer (a reader never
/// sees half a page, table or figure), creating its folder.
pub(crate) fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), ReportError> {
    stratlab_results::write_file_atomically(path, bytes).map_err(|error| match error {
        stratlab_results::StoreError::Io { path, source } => ReportError::Io { path, source },
        other => ReportError::Store(other),
    })
}
