//! What telemetry measures, in the shape the tables store: a device reading ([`Sample`],
//! one `telemetry` row with its run and trial) and a trial's device load ([`DeviceLoad`],
//! columns of the `trials` row). The telemetry crate produces these; the rows carry them
//! flattened, so a new reading is one field here.

use std::fmt;

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

/// One reading of one device at one instant, typed so reports never parse strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct Sample {
    /// Seconds since the recorder started; stamped by the telemetry recorder (samplers used
    /// on their own leave it at 0).
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

/// Where a trial's energy figure comes from; stored next to it so readers know its quality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnergySource {
    /// Differences of the boards' total-energy counters (NVML, Volta and newer): the
    /// driver's own accumulation, exact however coarse the sampling interval.
    Counter,
    /// Trapezoidal integral of sampled power: misses whatever happens between samples.
    PowerIntegration,
}

stratlab_columns::text_column!(EnergySource);

impl EnergySource {
    /// The stored spelling: `counter` or `power-integration`.
    pub fn as_str(self) -> &'static str {
        match self {
            EnergySource::Counter => "counter",
            EnergySource::PowerIntegration => "power-integration",
        }
    }
}

impl fmt::Display for EnergySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Mean and peak load of a trial's devices and the energy they drew.
///
/// Means and maxima are over all samples of all devices, i.e. per device: with two GPUs
/// at 40 % and 60 % the mean is 50 %, not 100 %. Fields are `None` without samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Columns)]
pub struct DeviceLoad {
    /// Mean utilisation over all samples, percent.
    pub utilization_mean_pct: Option<f64>,
    /// Highest utilisation seen, percent.
    pub utilization_max_pct: Option<f64>,
    /// Mean memory in use over all samples, bytes.
    pub memory_mean_bytes: Option<f64>,
    /// Highest memory in use seen, bytes.
    pub memory_max_bytes: Option<u64>,
    /// Mean GPU memory held by the trial's own processes, over the samples that report it,
    /// bytes; unlike `memory_mean_bytes` it leaves out other jobs on a shared board.
    pub process_memory_mean_bytes: Option<f64>,
    /// Highest GPU memory held by the trial's own processes on one board, bytes.
    pub process_memory_max_bytes: Option<u64>,
    /// Energy drawn by all devices together between their first and last sample, joules:
    /// from the boards' energy counters when every device has one, else the trapezoidal
    /// integral of each device's power over time; summed over devices. `None` when no
    /// sample reports either.
    pub energy_j: Option<f64>,
    /// How `energy_j` was measured (`counter`, `power-integration`); `None` exactly when
    /// `energy_j` is.
    pub energy_source: Option<EnergySource>,
}
