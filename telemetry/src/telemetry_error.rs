//! Why GPU telemetry could not be set up.

use nvml_wrapper::error::NvmlError;

use super::SourceError;

/// Why GPU telemetry is unavailable for a trial; shown in the fallback warning.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The NVML library is missing or the driver refused to initialise.
    #[error("NVML did not initialise: {0}")]
    NvmlInit(#[source] NvmlError),
    /// NVML works but could not count the boards.
    #[error("NVML could not count the GPUs: {0}")]
    DeviceCount(#[source] SourceError),
    /// A board's identity could not be read, so CUDA's numbering cannot be reproduced.
    #[error("NVML could not read the {what} of GPU {index}: {error}")]
    Query {
        /// The board's NVML index.
        index: u32,
        /// What was asked (`PCI bus id`, `UUID`, `name`).
        what: &'static str,
        /// Why it failed.
        #[source]
        error: SourceError,
    },
    /// NVML gave a PCI bus id that does not parse, so bus order is unknown.
    #[error("GPU {index} has an unreadable PCI bus id {bus_id:?}")]
    BadPciBusId {
        /// The board's NVML index.
        index: u32,
        /// What NVML said.
        bus_id: String,
    },
    /// `CUDA_VISIBLE_DEVICES` names a MIG instance; NVML's board readings would describe
    /// the whole board and every other instance on it.
    #[error("CUDA_VISIBLE_DEVICES names a MIG instance ({entry}); per-instance GPU telemetry is not supported")]
    MigUnsupported {
        /// The entry, as written.
        entry: String,
    },
    /// The trial uses a CUDA ordinal that `CUDA_VISIBLE_DEVICES` does not reach.
    #[error(
        "CUDA ordinal {ordinal} is not visible: {visible} visible GPU(s) \
         (CUDA_VISIBLE_DEVICES={cuda_visible_devices:?})"
    )]
    OrdinalNotVisible {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many boards CUDA would show.
        visible: usize,
        /// The variable's value (`None`: unset).
        cuda_visible_devices: Option<String>,
    },
}
