//! One reading of one device.

use serde::{Deserialize, Serialize};

/// One reading of one device at one instant, typed so reports never parse strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the recorder started; stamped by [`super::TelemetryRecorder`]
    /// (samplers used on their own leave it at 0).
    pub t_s: f64,
    /// Which device: `gpu<NVML index>` (`gpu0`, `gpu1`, …, the numbering `nvidia-smi`
    /// shows, not the worker's CUDA ordinal) for GPUs, `cpu` for the process-tree sampler.
    pub device: String,
    /// The board's identity, stable across reboots and independent of any device
    /// numbering: its PCI bus id as NVML writes it (`00000000:3B:00.0`). `None` on the CPU.
    pub device_id: Option<String>,
    /// Busy share in percent, 0–100 (GPU: NVML kernel-active time; CPU: share of all cores).
    pub utilization_pct: f64,
    /// Memory in use: GPU framebuffer used by everyone on the board, or summed resident
    /// set of the process tree.
    pub memory_used_bytes: u64,
    /// GPU memory held by the trial's own processes on this board (NVML's running-process
    /// list, summed over the process tree), so a neighbour's job on a shared board is not
    /// charged to the trial. `None` on the CPU or when the board cannot list processes.
    pub process_memory_bytes: Option<u64>,
    /// Board power draw in watts, when the device reports it.
    pub power_w: Option<f64>,
    /// The board's total-energy counter in millijoules since the driver loaded (NVML,
    /// Volta and newer). Only differences mean anything; `None` where there is no counter.
    pub energy_counter_mj: Option<u64>,
    /// Streaming-multiprocessor clock in MHz, when the device reports it.
    pub sm_clock_mhz: Option<u32>,
}
