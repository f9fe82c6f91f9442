//! The one error type of this crate, so callers can tell a typo in a suite file from an
//! input a network cannot take.

use crate::input_shape::InputShape;

/// Why a network could not be described, analysed or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// The name is not in [`crate::network_names`]; the message lists the valid ones so a
    /// typo in a suite file is fixed without reading code.
    #[error("unknown network `{name}`; valid networks: {}", valid.join(", "))]
    UnknownNetwork {
        /// The name that was asked for.
        name: String,
        /// Every name [`crate::spec`] accepts.
        valid: Vec<String>,
    },
    /// The network exists but not for this input (e.g. `small-cnn` at 224×224, or an image
    /// so small that a stage would shrink it to nothing).
    #[error("network `{network}` does not support input {input}: {reason}")]
    UnsupportedInput {
        /// The network that was asked for.
        network: String,
        /// The input it was asked for.
        input: InputShape,
        /// What goes wrong, naming the stage where it does.
        reason: String,
    },
    /// An analysis was asked for with a batch size that is not positive.
    #[error("network `{network}`: batch size must be positive, got {batch}")]
    InvalidBatch {
        /// The network being analysed.
        network: String,
        /// The batch size given.
        batch: i64,
    },
}
