//! Device telemetry sampled beside a trial: utilisation, memory, power, energy and clocks.
//!
//! A [`Sampler`] reads the devices once per call; a [`TelemetryRecorder`] calls it on a
//! background thread at a fixed interval and hands back typed [`Sample`]s, which
//! [`TelemetrySummary`] reduces to the per-trial device load (mean and peak utilisation
//! and memory, energy) the `trials` table stores. Both shapes belong to `stratlab-results`.
//!
//! GPUs are read through a [`GpuSource`]: NVML on real machines ([`NvmlSource`]), a script
//! in tests ([`ScriptedSource`]), so the mapping from CUDA ordinals to boards
//! ([`map_cuda_ordinals`]), the sampling ([`GpuSampler`]) and the summaries are tested on
//! machines without a GPU. Without a driver, or when the boards cannot be identified, the
//! same numbers come from `/proc` for the trial's process tree ([`ProcSampler`]), so every
//! trial carries utilisation and memory either way.

mod board_mapping;
mod cuda_env;
mod energy;
mod gpu_sampler;
mod gpu_source;
mod nvml_source;
mod proc_sampler;
mod process_tree;
mod recorder;
mod sampler;
mod scripted_source;
mod summary;
mod telemetry_error;

pub use board_mapping::{map_cuda_ordinals, normalize_pci_bus_id, BoardMapping, GpuBoard};
pub use cuda_env::CudaEnv;
pub use gpu_sampler::GpuSampler;
pub use gpu_source::{BoardMemory, ComputeCapability, GpuProcess, GpuSource, SourceError};
pub use nvml_source::NvmlSource;
pub use proc_sampler::ProcSampler;
pub use process_tree::process_tree_pids;
pub use recorder::TelemetryRecorder;
pub use sampler::Sampler;
pub use scripted_source::{BoardFrame, ScriptedBoard, ScriptedSource};
pub use summary::TelemetrySummary;
pub use telemetry_error::TelemetryError;

use std::collections::BTreeSet;
use std::sync::Mutex;

pub use stratlab_results::{EnergySource, Sample};

/// Picks the sampler for a trial whose workers use `cuda_ordinals`: NVML on the boards
/// those ordinals are, else a [`ProcSampler`] on the process tree rooted at `root_pid`.
///
/// Ordinals are mapped with `env`, the `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` the
/// workers were started with ([`CudaEnv::for_workers`] for the runner's own workers). It is
/// passed in rather than read from `/proc/<pid>/environ`, because right after a spawn that
/// file can still show the parent's environment: the child has not exec'd yet.
/// An empty `cuda_ordinals` means a CPU trial and gives the [`ProcSampler`] directly (on a
/// GPU node the GPUs' numbers would not describe it). See [`choose_sampler_with`] for the
/// fallbacks. To cover every worker of a trial, root the tree at the launcher (or the
/// runner itself) rather than at one worker. Never panics.
pub fn choose_sampler(root_pid: u32, cuda_ordinals: &[usize], env: &CudaEnv) -> Box<dyn Sampler> {
    if cuda_ordinals.is_empty() {
        return Box::new(ProcSampler::new(root_pid));
    }
    match NvmlSource::init() {
        Ok(source) => choose_sampler_with(source, root_pid, cuda_ordinals, env),
        Err(reason) => fall_back(root_pid, &reason),
    }
}

/// [`choose_sampler`] over an explicit `source` and environment, for tests and for callers
/// that know the workers' environment better than `/proc` does.
///
/// When the ordinals cannot be mapped (a board's identity unreadable, an ordinal past
/// `CUDA_VISIBLE_DEVICES`, a MIG instance) the fallback to `/proc` is announced once per
/// process on stderr with the reason: a silent switch would let CPU numbers pass for GPU
/// numbers, and repeating it every trial would only be noise. A mapping that had to guess
/// CUDA's device order (not `PCI_BUS_ID`, several boards) is used, with its own one-time
/// warning, because bus order is what CUDA does for identical boards in practice.
pub fn choose_sampler_with<S: GpuSource + 'static>(
    source: S,
    root_pid: u32,
    cuda_ordinals: &[usize],
    env: &CudaEnv,
) -> Box<dyn Sampler> {
    if cuda_ordinals.is_empty() {
        return Box::new(ProcSampler::new(root_pid));
    }
    match map_cuda_ordinals(&source, cuda_ordinals, env) {
        Ok(mapping) => {
            if mapping.order_guessed {
                warn_once("device-order", || {
                    format!(
                        "warning: CUDA_DEVICE_ORDER is {} for the trial's workers, not PCI_BUS_ID; assuming \
                         CUDA numbers the GPUs in PCI bus order, so telemetry may sample the wrong boards",
                        env.device_order.as_deref().unwrap_or("unset (FASTEST_FIRST)")
                    )
                });
            }
            Box::new(GpuSampler::new(source, mapping.boards, root_pid))
        }
        Err(reason) => fall_back(root_pid, &reason),
    }
}

/// The compute capability of the board that CUDA numbers `ordinal` in a process started
/// with `env`, read from NVML.
pub fn cuda_compute_capability(ordinal: usize, env: &CudaEnv) -> Result<ComputeCapability, TelemetryError> {
    cuda_compute_capability_with(&NvmlSource::init()?, ordinal, env)
}

/// [`cuda_compute_capability`] through `source` (a [`ScriptedSource`] in tests).
pub fn cuda_compute_capability_with(
    source: &dyn GpuSource,
    ordinal: usize,
    env: &CudaEnv,
) -> Result<ComputeCapability, TelemetryError> {
    let mapping = map_cuda_ordinals(source, &[ordinal], env)?;
    let index = mapping.boards[0].nvml_index;
    source.compute_capability(index).map_err(|error| TelemetryError::Query { index, what: "compute capability", error })
}

/// The `/proc` sampler, after warning (once per process) why GPU telemetry is unavailable.
fn fall_back(root_pid: u32, reason: &TelemetryError) -> Box<dyn Sampler> {
    warn_once("gpu-fallback", || {
        format!("warning: GPU telemetry unavailable ({reason}); sampling CPU and memory of the process tree from /proc instead")
    });
    Box::new(ProcSampler::new(root_pid))
}

/// Prints the message for `key` on stderr the first time `key` is seen in this process;
/// returns whether it printed. The message is only built when printed.
fn warn_once(key: &'static str, message: impl FnOnce() -> String) -> bool {
    static WARNED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    // A poisoned lock only means another thread panicked mid-insert; the set is still usable.
    let first = WARNED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(key);
    if first {
        eprintln!("{}", message());
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choose_sampler_falls_back_to_proc_without_a_driver() {
        // This machine has no NVIDIA driver; on a GPU node NVML wins and that is fine too.
        let mut sampler = choose_sampler(std::process::id(), &[0], &CudaEnv::from_env());
        let samples = sampler.sample();
        if sampler.name() == "proc" {
            assert!(!samples.is_empty());
            assert_eq!(samples[0].device, "cpu");
            assert!(samples[0].memory_used_bytes > 0);
        }
        // A second call must not panic either (and prints no second warning).
        let _ = choose_sampler(std::process::id(), &[0, 1], &CudaEnv::from_env()).sample();
    }

    #[test]
    fn cpu_trials_get_the_proc_sampler_even_where_nvml_works() {
        assert_eq!(choose_sampler(std::process::id(), &[], &CudaEnv::from_env()).name(), "proc");
        let scripted = ScriptedSource::new(vec![ScriptedBoard::new("0000:01:00.0", "GPU-1")]);
        assert_eq!(choose_sampler_with(scripted, std::process::id(), &[], &CudaEnv::default()).name(), "proc");
    }

    #[test]
    fn a_cuda_ordinal_reads_the_compute_capability_of_the_board_it_is() {
        // A V100 at bus 0x3B listed first by NVML, an A100 at 0x1A: CUDA counts in bus order.
        let v100 = ScriptedBoard {
            compute_capability: ComputeCapability { major: 7, minor: 0 },
            ..ScriptedBoard::new("0000:3b:00.0", "GPU-v100")
        };
        let a100 = ScriptedBoard {
            compute_capability: ComputeCapability { major: 8, minor: 0 },
            ..ScriptedBoard::new("0000:1a:00.0", "GPU-a100")
        };
        let source = ScriptedSource::new(vec![v100, a100]);
        let read = |ordinal, visible: Option<&str>| {
            let env = CudaEnv { visible_devices: visible.map(str::to_owned), device_order: Some("PCI_BUS_ID".into()) };
            cuda_compute_capability_with(&source, ordinal, &env).map(|capability| capability.to_string())
        };
        assert_eq!(read(0, None).unwrap(), "8.0");
        assert_eq!(read(1, None).unwrap(), "7.0");
        assert_eq!(read(0, Some("GPU-v100")).unwrap(), "7.0");
        assert!(read(1, Some("GPU-v100")).is_err(), "one board visible");
        let (volta, ampere) = (ComputeCapability { major: 7, minor: 0 }, ComputeCapability { major: 8, minor: 6 });
        assert!(volta.has_float16() && !volta.has_bfloat16() && ampere.has_bfloat16());
    }

    fn two_boards() -> ScriptedSource {
        let counter = |mj: u64| BoardFrame { power_w: Some(100.0), energy_mj: Some(mj), ..BoardFrame::default() };
        let no_counter = BoardFrame { power_w: Some(100.0), ..BoardFrame::default() };
        ScriptedSource::new(vec![
            ScriptedBoard::new("0000:02:00.0", "GPU-b").with_frames(vec![no_counter]),
            ScriptedBoard::new("0000:01:00.0", "GPU-a").with_frames(vec![counter(1_000_000), counter(1_250_000)]),
        ])
    }

    /// Two ticks one second apart through the boxed sampler, summarised.
    fn two_ticks(sampler: &mut Box<dyn Sampler>) -> TelemetrySummary {
        let mut samples = Vec::new();
        for t_s in [0.0, 1.0] {
            samples.extend(sampler.sample().into_iter().map(|sample| Sample { t_s, ..sample }));
        }
        TelemetrySummary::from_samples(&samples)
    }

    #[test]
    fn a_mappable_trial_gets_the_gpu_sampler_and_counter_energy() {
        let env = CudaEnv { visible_devices: Some("GPU-a".into()), device_order: None };
        let mut sampler = choose_sampler_with(two_boards(), std::process::id(), &[0], &env);
        assert_eq!(sampler.name(), "scripted");
        assert_eq!(sampler.boards().iter().map(|b| b.nvml_index).collect::<Vec<_>>(), [1]);
        let summary = two_ticks(&mut sampler);
        assert_eq!(summary.device_ids, ["00000000:01:00.0"]);
        // 1 000 000 mJ → 1 250 000 mJ is 250 J, although power says 100 W × 1 s.
        assert_eq!((summary.load.energy_j, summary.load.energy_source), (Some(250.0), Some(EnergySource::Counter)));
    }

    #[test]
    fn a_board_without_a_counter_makes_the_trial_integrate_power() {
        let env = CudaEnv { visible_devices: None, device_order: Some("PCI_BUS_ID".into()) };
        let mut sampler = choose_sampler_with(two_boards(), std::process::id(), &[0, 1], &env);
        let summary = two_ticks(&mut sampler);
        assert_eq!(summary.device_ids, ["00000000:01:00.0", "00000000:02:00.0"]);
        assert_eq!(
            (summary.load.energy_j, summary.load.energy_source),
            (Some(200.0), Some(EnergySource::PowerIntegration))
        );
    }

    #[test]
    fn unmappable_ordinals_fall_back_to_proc() {
        let me = std::process::id();
        for visible in ["MIG-GPU-a/1/0", "", "GPU-zzz"] {
            let env = CudaEnv { visible_devices: Some(visible.into()), device_order: Some("PCI_BUS_ID".into()) };
            assert_eq!(choose_sampler_with(two_boards(), me, &[0], &env).name(), "proc", "{visible:?}");
        }
        let env = CudaEnv::default();
        assert_eq!(choose_sampler_with(two_boards(), me, &[2], &env).name(), "proc");
        let broken = ScriptedSource::new(vec![ScriptedBoard::new("bus?", "GPU-a")]);
        assert_eq!(choose_sampler_with(broken, me, &[0], &env).name(), "proc");
    }

    #[test]
    fn warnings_print_once_per_kind() {
        assert!(warn_once("test-only", || "warning: test".into()));
        assert!(!warn_once("test-only", || unreachable!("built only when printed")));
    }
}
