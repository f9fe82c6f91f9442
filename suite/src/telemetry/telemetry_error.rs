//! Why a sampler could not be built.

use nvml_wrapper::error::NvmlError;

/// Why GPU telemetry is unavailable; shown in the fallback warning.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The NVML library is missing or the driver refused to initialise.
    #[error("NVML did not initialise: {0}")]
    NvmlInit(#[source] NvmlError),
    /// NVML works but could not count the devices.
    #[error("NVML could not count devices: {0}")]
    NvmlDeviceCount(#[source] NvmlError),
    /// None of the requested GPU indices exist on this machine.
    #[error("none of the requested GPUs {requested:?} exist (NVML sees {found} devices)")]
    NoDevices {
        /// The indices asked for (empty means all).
        requested: Vec<u32>,
        /// How many devices NVML reports.
        found: u32,
    },
}
