//! Why a training run could not be carried out at all (as opposed to a run that diverged,
//! which is an outcome and recorded as data).

use thiserror::Error;

/// A failure that stops training before it produces a result.
#[derive(Debug, Error)]
pub enum TrainError {
    /// The configuration cannot be trained as given (names the field and why).
    #[error("invalid training configuration: {field}: {reason}")]
    InvalidConfig {
        /// The configuration's field.
        field: &'static str,
        /// Why it cannot be trained.
        reason: String,
    },
    /// The requested device does not exist here.
    #[error("device: {0}")]
    Device(String),
    /// Reading a batch failed (a corrupt file met mid-epoch, say).
    #[error("data: {0}")]
    Data(#[from] stratlab_datasets::DataError),
    /// The network could not be built for this input.
    #[error("network: {0}")]
    Network(#[from] stratlab_networks::NetworkError),
    /// libtorch reported an error (out of memory among them: see [`TrainError::is_out_of_memory`]).
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A collective or point-to-point transfer failed: a peer died, or the collective
    /// timeout passed.
    #[error("communication: {0}")]
    Comm(#[from] stratlab_comm::CommError),
}

impl TrainError {
    /// Whether libtorch failed to allocate memory: the CPU allocator and the CUDA caching
    /// allocator both say so in their messages, which is all tch hands us.
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            TrainError::Torch(error) => {
                let message = error.to_string();
                message.contains("can't allocate memory")
                    || message.contains("out of memory")
                    || message.contains("CUDA out of memory")
                    || message.contains("Cannot allocate memory")
            }
            _ => false,
        }
    }
}
