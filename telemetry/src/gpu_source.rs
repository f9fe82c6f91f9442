//! The NVML queries GPU telemetry makes, as a trait, so they can be scripted in tests.

use nvml_wrapper::error::NvmlError;

/// Exactly the per-board queries the GPU sampler and the ordinal mapping make, by NVML index.
///
/// [`super::NvmlSource`] answers them from the driver; [`super::ScriptedSource`] answers
/// them from a script, so that mapping, sampling and summaries run on machines without a
/// GPU. Every query may fail: boards differ in what they support (power sensors, the
/// energy counter) and a board can fall off the bus mid-run. Callers decide which
/// failures are fatal; none may panic.
pub trait GpuSource: Send {
    /// Called once at the start of every sampling tick, before that tick's queries. NVML
    /// reads live values and ignores it; a scripted source moves to its next frame here.
    fn begin_tick(&mut self) {}

    /// Short name of the source for logs and the run's fingerprint (`nvml`, `scripted`).
    fn source_name(&self) -> &'static str;

    /// How many boards the source sees, NVML indices `0..count`.
    fn device_count(&self) -> Result<u32, SourceError>;

    /// The board's product name (`NVIDIA H100 80GB HBM3`).
    fn name(&self, index: u32) -> Result<String, SourceError>;

    /// The board's UUID as NVML and `CUDA_VISIBLE_DEVICES` write it (`GPU-8932f937-…`).
    fn uuid(&self, index: u32) -> Result<String, SourceError>;

    /// The board's PCI bus id (`00000000:3B:00.0`); see [`super::normalize_pci_bus_id`]
    /// for the forms accepted.
    fn pci_bus_id(&self, index: u32) -> Result<String, SourceError>;

    /// Percent of the last sample period in which a kernel ran, 0–100.
    fn utilization_pct(&self, index: u32) -> Result<u32, SourceError>;

    /// Framebuffer memory in use by everyone, and installed.
    fn memory(&self, index: u32) -> Result<BoardMemory, SourceError>;

    /// Board power draw in watts; [`SourceError::NotSupported`] on boards without a sensor.
    fn power_w(&self, index: u32) -> Result<f64, SourceError>;

    /// The board's total-energy counter, millijoules since the driver loaded
    /// (`nvmlDeviceGetTotalEnergyConsumption`, Volta and newer).
    fn total_energy_mj(&self, index: u32) -> Result<u64, SourceError>;

    /// Streaming-multiprocessor clock in MHz.
    fn sm_clock_mhz(&self, index: u32) -> Result<u32, SourceError>;

    /// Processes holding a compute context on the board, with their GPU memory.
    fn running_compute_processes(&self, index: u32) -> Result<Vec<GpuProcess>, SourceError>;

    /// The board's CUDA compute capability (`8.0` for an A100, `7.0` for a V100): which
    /// lower-precision types its tensor cores compute (float16 from 7.0; bfloat16 and TF32
    /// from 8.0).
    fn compute_capability(&self, index: u32) -> Result<ComputeCapability, SourceError>;
}

/// A CUDA compute capability, major and minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ComputeCapability {
    /// The architecture generation (7 Volta/Turing, 8 Ampere/Ada, 9 Hopper).
    pub major: u32,
    /// The revision within it.
    pub minor: u32,
}

impl ComputeCapability {
    /// Whether the tensor cores compute bfloat16 and TF32 (Ampere, 8.0, and later).
    pub fn has_bfloat16(self) -> bool {
        self.major >= 8
    }

    /// Whether the tensor cores compute float16 (Volta, 7.0, and later).
    pub fn has_float16(self) -> bool {
        self.major >= 7
    }
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A board's framebuffer memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoardMemory {
    /// Bytes allocated by all processes and the driver.
    pub used_bytes: u64,
    /// Bytes installed.
    pub total_bytes: u64,
}

/// One process with a compute context on a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProcess {
    /// Its pid, in the pid namespace NVML sees (the host's; see [`super::GpuSampler`]).
    pub pid: u32,
    /// GPU memory it holds, bytes; `None` where the driver does not say (Windows WDDM).
    pub used_bytes: Option<u64>,
}

/// Why a query failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The board or driver does not offer this reading (no power sensor, pre-Volta energy
    /// counter): expected, and reported as a missing value rather than a problem.
    #[error("not supported by this board")]
    NotSupported,
    /// Anything else (lost board, driver error), with the library's message.
    #[error("{0}")]
    Failed(String),
}

impl From<NvmlError> for SourceError {
    fn from(error: NvmlError) -> SourceError {
        match error {
            NvmlError::NotSupported => SourceError::NotSupported,
            other => SourceError::Failed(other.to_string()),
        }
    }
}
