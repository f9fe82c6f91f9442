//! One reading of one device.

use serde::{Deserialize, Serialize};

/// One reading of one device at one instant, typed so reports never parse strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the recorder started; stamped by [`super::TelemetryRecorder`]
    /// (samplers used on their own leave it at 0).
    pub t_s: f64,
    /// Which device: `gpu0`, `gpu1`, … for NVML, `cpu` for the process-tree sampler.
    pub device: String,
    /// Busy share in percent, 0–100 (GPU: NVML kernel-active time; CPU: share of all cores).
    pub utilization_pct: f64,
    /// Memory in use: GPU framebuffer used, or summed resident set of the process tree.
    pub memory_used_bytes: u64,
    /// Board power draw in watts, when the device reports it.
    pub power_w: Option<f64>,
    /// Streaming-multiprocessor clock in MHz, when the device reports it.
    pub sm_clock_mhz: Option<u32>,
}
