//! Errors in suite files: always naming the file and the field (or line) at fault.

use std::path::PathBuf;

use thiserror::Error;

/// A suite file that cannot be read or does not describe a runnable matrix.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The suite file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// Malformed YAML, an unknown key or name, or a wrong type (serde's message carries the
    /// field path and line).
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The suite file.
        path: PathBuf,
        /// What is wrong, with the valid choices where there is a list of them.
        message: String,
    },
    /// A field whose value is well-formed but unusable.
    #[error("{}: {field}: {message}", path.display())]
    Field {
        /// The suite file.
        path: PathBuf,
        /// The field at fault.
        field: String,
        /// What is wrong, with the valid choices where there is a list of them.
        message: String,
    },
}
