//! GPU readings through NVML, the library behind `nvidia-smi`.

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;

use super::{Sample, Sampler, TelemetryError};

/// Reads utilisation, memory, power and SM clock of chosen GPUs through NVML.
///
/// Only the trial's GPUs are read, so a trial on `gpu1` is not charged for a neighbour's
/// job on `gpu0`. Indices are NVML's (PCI bus order), which matches CUDA's order when
/// `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
pub struct NvmlSampler {
    /// The loaded library; `Device` handles borrow it, so they are looked up per tick.
    nvml: Nvml,
    /// NVML indices of the GPUs to read.
    indices: Vec<u32>,
}

impl std::fmt::Debug for NvmlSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSampler").field("indices", &self.indices).finish()
    }
}

impl NvmlSampler {
    /// Loads NVML and keeps the requested GPUs that exist (all GPUs when `gpus` is empty).
    pub fn new(gpus: &[u32]) -> Result<NvmlSampler, TelemetryError> {
        let nvml = Nvml::init().map_err(TelemetryError::NvmlInit)?;
        let found = nvml.device_count().map_err(TelemetryError::NvmlDeviceCount)?;
        let indices: Vec<u32> =
            if gpus.is_empty() { (0..found).collect() } else { gpus.iter().copied().filter(|&i| i < found).collect() };
        if indices.is_empty() {
            return Err(TelemetryError::NoDevices { requested: gpus.to_vec(), found });
        }
        Ok(NvmlSampler { nvml, indices })
    }

    /// The NVML indices this sampler reads.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
}

impl Sampler for NvmlSampler {
    fn name(&self) -> &str {
        "nvml"
    }

    fn sample(&mut self) -> Vec<Sample> {
        let mut samples = Vec::with_capacity(self.indices.len());
        for &index in &self.indices {
            // A GPU that falls off the bus mid-run is skipped, not fatal: the trial's own
            // error says what happened to it.
            let Ok(device) = self.nvml.device_by_index(index) else {
                continue;
            };
            let Ok(utilization) = device.utilization_rates() else {
                continue;
            };
            let Ok(memory) = device.memory_info() else {
                continue;
            };
            samples.push(Sample {
                t_s: 0.0,
                device: format!("gpu{index}"),
                utilization_pct: f64::from(utilization.gpu),
                memory_used_bytes: memory.used,
                // NVML reports milliwatts; boards without a sensor return NotSupported.
                power_w: device.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
                sm_clock_mhz: device.clock_info(Clock::SM).ok(),
            });
        }
        samples
    }
}
