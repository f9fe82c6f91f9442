//! A [`GpuSource`] that plays back a script, for tests on machines without a GPU.

use super::{BoardMemory, ComputeCapability, GpuProcess, GpuSource, SourceError};

/// Boards whose readings follow a script: deterministic, changing from tick to tick.
///
/// Identity queries (name, UUID, PCI bus id) always answer. Live readings come from the
/// board's frame for the current tick: frame 0 before the first tick and on tick 1, frame
/// 1 on tick 2, and so on, the last frame repeating. A tick starts at
/// [`GpuSource::begin_tick`], which the GPU sampler calls once per sample.
#[derive(Debug, Clone)]
pub struct ScriptedSource {
    /// The boards in NVML index order.
    boards: Vec<ScriptedBoard>,
    /// Ticks begun so far.
    ticks: usize,
}

/// One scripted board.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedBoard {
    /// Product name.
    pub name: String,
    /// UUID (`GPU-…`).
    pub uuid: String,
    /// PCI bus id, in any form [`super::normalize_pci_bus_id`] accepts.
    pub pci_bus_id: String,
    /// Installed memory, bytes.
    pub memory_total_bytes: u64,
    /// Its CUDA compute capability.
    pub compute_capability: ComputeCapability,
    /// Readings per tick; the last repeats. With no frames every live query fails.
    pub frames: Vec<BoardFrame>,
}

/// What a scripted board reads during one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoardFrame {
    /// Kernel-active percent.
    pub utilization_pct: u32,
    /// Framebuffer in use by everyone, bytes.
    pub memory_used_bytes: u64,
    /// Power draw in watts; `None` answers [`SourceError::NotSupported`].
    pub power_w: Option<f64>,
    /// Total-energy counter in millijoules; `None` answers [`SourceError::NotSupported`].
    pub energy_mj: Option<u64>,
    /// SM clock in MHz; `None` answers [`SourceError::NotSupported`].
    pub sm_clock_mhz: Option<u32>,
    /// Processes with a compute context; `None` answers [`SourceError::NotSupported`].
    pub processes: Option<Vec<GpuProcess>>,
    /// The board is lost this tick: every live query fails, as NVML's `GpuLost` does.
    pub lost: bool,
}

impl ScriptedBoard {
    /// A board at `pci_bus_id` with `uuid`, 80 GiB, compute capability 9.0 (an H100),
    /// idle, with power, counter and clock.
    pub fn new(pci_bus_id: &str, uuid: &str) -> ScriptedBoard {
        ScriptedBoard {
            name: "Scripted GPU".to_owned(),
            uuid: uuid.to_owned(),
            pci_bus_id: pci_bus_id.to_owned(),
            memory_total_bytes: 80 << 30,
            compute_capability: ComputeCapability { major: 9, minor: 0 },
            frames: vec![BoardFrame {
                power_w: Some(60.0),
                energy_mj: Some(0),
                sm_clock_mhz: Some(1410),
                processes: Some(Vec::new()),
                ..BoardFrame::default()
            }],
        }
    }

    /// The same board reading `frames` tick by tick.
    pub fn with_frames(mut self, frames: Vec<BoardFrame>) -> ScriptedBoard {
        self.frames = frames;
        self
    }
}

impl ScriptedSource {
    /// A source seeing `boards` at NVML indices 0, 1, … in the order given.
    pub fn new(boards: Vec<ScriptedBoard>) -> ScriptedSource {
        ScriptedSource { boards, ticks: 0 }
    }

    /// How many ticks have begun (how often the sampler has read the boards).
    pub fn ticks(&self) -> usize {
        self.ticks
    }

    /// The board at `index`, or the error NVML gives for an index past the end.
    fn board(&self, index: u32) -> Result<&ScriptedBoard, SourceError> {
        self.boards
            .get(index as usize)
            .ok_or_else(|| SourceError::Failed(format!("no board at index {index} (invalid argument)")))
    }

    /// The current frame of the board at `index`; an error while it is lost.
    fn frame(&self, index: u32) -> Result<&BoardFrame, SourceError> {
        let board = self.board(index)?;
        let frame = board
            .frames
            .get(self.ticks.saturating_sub(1).min(board.frames.len().saturating_sub(1)))
            .ok_or_else(|| SourceError::Failed(format!("board {index} has no scripted frames")))?;
        if frame.lost {
            return Err(SourceError::Failed(format!("board {index} has fallen off the bus (GPU is lost)")));
        }
        Ok(frame)
    }
}

impl GpuSource for ScriptedSource {
    fn begin_tick(&mut self) {
        self.ticks += 1;
    }

    fn source_name(&self) -> &'static str {
        "scripted"
    }

    fn device_count(&self) -> Result<u32, SourceError> {
        Ok(self.boards.len() as u32)
    }

    fn name(&self, index: u32) -> Result<String, SourceError> {
        Ok(self.board(index)?.name.clone())
    }

    fn uuid(&self, index: u32) -> Result<String, SourceError> {
        Ok(self.board(index)?.uuid.clone())
    }

    fn pci_bus_id(&self, index: u32) -> Result<String, SourceError> {
        Ok(self.board(index)?.pci_bus_id.clone())
    }

    fn compute_capability(&self, index: u32) -> Result<ComputeCapability, SourceError> {
        Ok(self.board(index)?.compute_capability)
    }

    fn utilization_pct(&self, index: u32) -> Result<u32, SourceError> {
        Ok(self.frame(index)?.utilization_pct)
    }

    fn memory(&self, index: u32) -> Result<BoardMemory, SourceError> {
        let used_bytes = self.frame(index)?.memory_used_bytes;
        Ok(BoardMemory { used_bytes, total_bytes: self.board(index)?.memory_total_bytes })
    }

    fn power_w(&self, index: u32) -> Result<f64, SourceError> {
        self.frame(index)?.power_w.ok_or(SourceError::NotSupported)
    }

    fn total_energy_mj(&self, index: u32) -> Result<u64, SourceError> {
        self.frame(index)?.energy_mj.ok_or(SourceError::NotSupported)
    }

    fn sm_clock_mhz(&self, index: u32) -> Result<u32, SourceError> {
        self.frame(index)?.sm_clock_mhz.ok_or(SourceError::NotSupported)
    }

    fn running_compute_processes(&self, index: u32) -> Result<Vec<GpuProcess>, SourceError> {
        self.frame(index)?.processes.clone().ok_or(SourceError::NotSupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_advance_per_tick_and_the_last_repeats() {
        let frame = |utilization_pct| BoardFrame { utilization_pct, ..BoardFrame::default() };
        let board = ScriptedBoard::new("0000:3b:00.0", "GPU-a").with_frames(vec![frame(10), frame(20)]);
        let mut source = ScriptedSource::new(vec![board]);
        assert_eq!(source.utilization_pct(0), Ok(10));
        let mut seen = Vec::new();
        for _ in 0..3 {
            source.begin_tick();
            seen.push(source.utilization_pct(0).unwrap_or(0));
        }
        assert_eq!(seen, [10, 20, 20]);
        assert_eq!(source.ticks(), 3);
        assert_eq!(source.power_w(0), Err(SourceError::NotSupported));
        assert!(source.name(1).is_err());
    }
}
