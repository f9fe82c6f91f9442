//! Errors in suite files: always naming the file and the field (or line) at fault.

use std::path::PathBuf;

use thiserror::Error;

/// A suite file that cannot be read or does not describe a runnable matrix.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// Malformed YAML, an unknown key or name, or a wrong type (serde's message carries the
    /// field path and line).
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    /// A field whose value is well-formed but unusable.
    #[error("{}: {field}: {message}", path.display())]
    Field { path: PathBuf, field: String, message: String },
}
