//! GPU readings of the boards a trial uses, from any [`GpuSource`].

use std::collections::HashSet;

use super::{process_tree_pids, GpuBoard, GpuProcess, GpuSource, Sampler};
use stratlab_results::Sample;

/// Reads utilisation, memory, power, energy counter and SM clock of chosen boards, and the
/// GPU memory the trial's own processes hold on them.
///
/// Only the trial's boards are read (see [`super::map_cuda_ordinals`]), so a trial on one
/// board is not charged for a neighbour's job on another. Board memory counts everyone on
/// the board; `process_memory_bytes` counts only processes of the tree rooted at
/// `root_pid`, re-read every tick, matched against NVML's running-process list by pid.
/// NVML reports host pids: in a container with its own pid namespace no pid matches and
/// the process figure reads 0 while board memory is still right.
///
/// A board that fails a required reading (utilisation, memory) in a tick, for instance
/// one that fell off the bus, is left out of that tick; optional readings it lacks are
/// `None`. Nothing here panics or fails the trial.
#[derive(Debug)]
pub struct GpuSampler<S: GpuSource> {
    /// Where readings come from.
    source: S,
    /// The boards to read, in PCI bus order.
    boards: Vec<GpuBoard>,
    /// Root of the trial's process tree.
    root_pid: u32,
}

impl<S: GpuSource> GpuSampler<S> {
    /// Reads `boards` of `source`, attributing GPU memory to the tree rooted at `root_pid`.
    pub fn new(source: S, boards: Vec<GpuBoard>, root_pid: u32) -> GpuSampler<S> {
        GpuSampler { source, boards, root_pid }
    }

    /// The boards this sampler reads.
    pub fn boards(&self) -> &[GpuBoard] {
        &self.boards
    }

    /// The source, for tests that inspect a scripted one.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// One board's readings now, or `None` when its required readings fail.
    fn read(&self, board: &GpuBoard, tree: &HashSet<u32>) -> Option<Sample> {
        let index = board.nvml_index;
        let utilization_pct = self.source.utilization_pct(index).ok()?;
        let memory = self.source.memory(index).ok()?;
        Some(Sample {
            t_s: 0.0,
            device: format!("gpu{index}"),
            device_id: Some(board.pci_bus_id.clone()),
            utilization_pct: f64::from(utilization_pct),
            memory_used_bytes: memory.used_bytes,
            process_memory_bytes: self
                .source
                .running_compute_processes(index)
                .ok()
                .and_then(|processes| memory_of(&processes, tree)),
            power_w: self.source.power_w(index).ok(),
            energy_counter_mj: self.source.total_energy_mj(index).ok(),
            sm_clock_mhz: self.source.sm_clock_mhz(index).ok(),
        })
    }
}

/// GPU memory held by the processes of `tree`; `None` if one of them does not say.
fn memory_of(processes: &[GpuProcess], tree: &HashSet<u32>) -> Option<u64> {
    processes.iter().filter(|process| tree.contains(&process.pid)).map(|process| process.used_bytes).sum()
}

impl<S: GpuSource> Sampler for GpuSampler<S> {
    fn name(&self) -> &str {
        self.source.source_name()
    }

    fn sample(&mut self) -> Vec<Sample> {
        self.source.begin_tick();
        let tree: HashSet<u32> = process_tree_pids(self.root_pid).into_iter().collect();
        self.boards.iter().filter_map(|board| self.read(board, &tree)).collect()
    }

    fn boards(&self) -> &[GpuBoard] {
        &self.boards
    }
}

#[cfg(test)]
mod tests {
    use super::super::{map_cuda_ordinals, BoardFrame, CudaEnv, ScriptedBoard, ScriptedSource};
    use super::*;

    /// A pid no Linux process can have (pid_max is at most 2^22): someone else's job.
    const FOREIGN_PID: u32 = 4_000_000_000;

    fn frame(utilization_pct: u32, processes: Vec<GpuProcess>) -> BoardFrame {
        BoardFrame {
            utilization_pct,
            memory_used_bytes: 10 << 30,
            power_w: Some(100.0),
            energy_mj: Some(1_000_000),
            sm_clock_mhz: Some(1980),
            processes: Some(processes),
            lost: false,
        }
    }

    /// Four boards, NVML index = position in the list; bus order is 2, 0, 3, 1.
    fn four_boards(frames: impl Fn(u32) -> Vec<BoardFrame>) -> ScriptedSource {
        let ids = ["0000:3b:00.0", "0000:af:00.0", "0000:1a:00.0", "0000:5e:00.0"];
        ScriptedSource::new(
            (0..4u32)
                .map(|i| ScriptedBoard::new(ids[i as usize], &format!("GPU-{i}")).with_frames(frames(i)))
                .collect(),
        )
    }

    fn sampler_for(source: ScriptedSource, ordinals: &[usize], visible: &str) -> GpuSampler<ScriptedSource> {
        let env = CudaEnv { visible_devices: Some(visible.into()), device_order: Some("PCI_BUS_ID".into()) };
        let mapping = map_cuda_ordinals(&source, ordinals, &env).expect("maps");
        GpuSampler::new(source, mapping.boards, std::process::id())
    }

    #[test]
    fn two_mapped_boards_among_four_are_exactly_the_ones_read() {
        // Each board's utilisation is 10 × its NVML index + 10, so a sample shows its board.
        let source = four_boards(|i| vec![frame(10 * i + 10, Vec::new())]);
        // Bus order is NVML 2, 0, 3, 1; "3,0" shows NVML 1 then NVML 2.
        let mut sampler = sampler_for(source, &[0, 1], "3,0");
        let samples = sampler.sample();
        let read: Vec<(&str, Option<&str>, f64)> =
            samples.iter().map(|s| (s.device.as_str(), s.device_id.as_deref(), s.utilization_pct)).collect();
        assert_eq!(read, [("gpu2", Some("00000000:1A:00.0"), 30.0), ("gpu1", Some("00000000:AF:00.0"), 20.0)]);
        assert_eq!(sampler.name(), "scripted");
        assert_eq!(samples[0].power_w, Some(100.0));
        assert_eq!(samples[0].energy_counter_mj, Some(1_000_000));
        assert_eq!(samples[0].sm_clock_mhz, Some(1980));
        assert_eq!(samples[0].memory_used_bytes, 10 << 30);
    }

    #[test]
    fn process_memory_counts_only_the_trials_process_tree() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep must spawn");
        let (me, kid) = (std::process::id(), child.id());
        let processes = vec![
            GpuProcess { pid: me, used_bytes: Some(1 << 30) },
            GpuProcess { pid: FOREIGN_PID, used_bytes: Some(7 << 30) },
            GpuProcess { pid: kid, used_bytes: Some(512 << 20) },
        ];
        let source = four_boards(|_| vec![frame(50, processes.clone())]);
        let samples = sampler_for(source, &[0], "0").sample();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].process_memory_bytes, Some((1 << 30) + (512 << 20)));
        assert_eq!(samples[0].memory_used_bytes, 10 << 30, "board memory still counts everyone");
    }

    #[test]
    fn a_board_without_a_process_list_or_sensors_still_reports_the_rest() {
        let bare = BoardFrame { utilization_pct: 5, memory_used_bytes: 1, ..BoardFrame::default() };
        let unknown = vec![GpuProcess { pid: std::process::id(), used_bytes: None }];
        let source = four_boards(|i| match i {
            2 => vec![bare.clone()],
            _ => vec![frame(1, unknown.clone())],
        });
        let samples = sampler_for(source, &[0, 1], "0,1").sample();
        assert_eq!(samples.len(), 2);
        assert_eq!(
            (samples[0].process_memory_bytes, samples[0].power_w, samples[0].energy_counter_mj),
            (None, None, None)
        );
        assert_eq!(samples[0].sm_clock_mhz, None);
        assert_eq!(samples[1].process_memory_bytes, None, "a tree process of unknown size makes the sum unknown");
    }

    #[test]
    fn a_board_lost_mid_run_is_skipped_without_a_panic() {
        let lost = BoardFrame { lost: true, ..BoardFrame::default() };
        let source = four_boards(|i| match i {
            0 => vec![frame(1, Vec::new()), lost.clone(), frame(1, Vec::new())],
            _ => vec![frame(2, Vec::new())],
        });
        let mut sampler = sampler_for(source, &[0, 1], "0,1");
        let counts: Vec<usize> = (0..4).map(|_| sampler.sample().len()).collect();
        assert_eq!(counts, [2, 1, 2, 2]);
        assert_eq!(sampler.source().ticks(), 4);
        // A board that vanished entirely (index past the end) reads nothing, still no panic.
        let board = GpuBoard { nvml_index: 9, ..sampler.boards()[0].clone() };
        let mut gone = GpuSampler::new(ScriptedSource::new(Vec::new()), vec![board], std::process::id());
        assert!(gone.sample().is_empty());
    }
}
