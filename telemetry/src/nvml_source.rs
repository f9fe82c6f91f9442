//! [`GpuSource`] over NVML, the library behind `nvidia-smi`.

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::{Device, Nvml};

use super::{BoardMemory, ComputeCapability, GpuProcess, GpuSource, SourceError, TelemetryError};

/// The real driver: every query goes to NVML.
///
/// Device handles borrow the loaded library, so each query looks its board up by index
/// again; that lookup is a table read in the driver, negligible at telemetry rates.
pub struct NvmlSource {
    /// The loaded library.
    nvml: Nvml,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource").finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// Loads NVML; fails cleanly (no panic) where there is no driver or library.
    pub fn init() -> Result<NvmlSource, TelemetryError> {
        Ok(NvmlSource { nvml: Nvml::init().map_err(TelemetryError::NvmlInit)? })
    }

    /// The board at NVML index `index`.
    fn device(&self, index: u32) -> Result<Device<'_>, SourceError> {
        Ok(self.nvml.device_by_index(index)?)
    }
}

impl GpuSource for NvmlSource {
    fn source_name(&self) -> &'static str {
        "nvml"
    }

    fn device_count(&self) -> Result<u32, SourceError> {
        Ok(self.nvml.device_count()?)
    }

    fn name(&self, index: u32) -> Result<String, SourceError> {
        Ok(self.device(index)?.name()?)
    }

    fn uuid(&self, index: u32) -> Result<String, SourceError> {
        Ok(self.device(index)?.uuid()?)
    }

    fn pci_bus_id(&self, index: u32) -> Result<String, SourceError> {
        // `bus_id` is NVML's `busId` ("00000000:3B:00.0"); the mapping normalises it anyway.
        Ok(self.device(index)?.pci_info()?.bus_id)
    }

    fn compute_capability(&self, index: u32) -> Result<ComputeCapability, SourceError> {
        let capability = self.device(index)?.cuda_compute_capability()?;
        Ok(ComputeCapability { major: capability.major as u32, minor: capability.minor as u32 })
    }

    fn utilization_pct(&self, index: u32) -> Result<u32, SourceError> {
        Ok(self.device(index)?.utilization_rates()?.gpu)
    }

    fn memory(&self, index: u32) -> Result<BoardMemory, SourceError> {
        let memory = self.device(index)?.memory_info()?;
        Ok(BoardMemory { used_bytes: memory.used, total_bytes: memory.total })
    }

    fn power_w(&self, index: u32) -> Result<f64, SourceError> {
        // NVML reports milliwatts.
        Ok(f64::from(self.device(index)?.power_usage()?) / 1000.0)
    }

    fn total_energy_mj(&self, index: u32) -> Result<u64, SourceError> {
        Ok(self.device(index)?.total_energy_consumption()?)
    }

    fn sm_clock_mhz(&self, index: u32) -> Result<u32, SourceError> {
        Ok(self.device(index)?.clock_info(Clock::SM)?)
    }

    fn running_compute_processes(&self, index: u32) -> Result<Vec<GpuProcess>, SourceError> {
        let processes = self.device(index)?.running_compute_processes()?;
        Ok(processes
            .into_iter()
            .map(|process| GpuProcess {
                pid: process.pid,
                used_bytes: match process.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some(bytes),
                    UsedGpuMemory::Unavailable => None,
                },
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_without_a_driver_is_an_error_not_a_panic() {
        // On a GPU node this loads and lists at least one board; both outcomes are fine.
        match NvmlSource::init() {
            Ok(source) => assert!(source.device_count().is_ok()),
            Err(error) => assert!(error.to_string().contains("NVML")),
        }
    }
}
