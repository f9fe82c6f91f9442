//! Device telemetry sampled beside a trial: utilisation, memory, power and clocks.
//!
//! A [`Sampler`] reads the devices once per call; a [`TelemetryRecorder`] calls it on a
//! background thread at a fixed interval and hands back typed [`Sample`]s, which
//! [`TelemetrySummary`] reduces to the per-trial numbers of SPEC §7. GPUs are read through
//! NVML; without a driver (CPU machines, CI) the same numbers come from `/proc` for the
//! trial's process tree, so every trial carries utilisation and memory either way.

mod nvml_sampler;
mod proc_sampler;
mod recorder;
mod sample;
mod sampler;
mod summary;
mod telemetry_error;

pub use nvml_sampler::NvmlSampler;
pub use proc_sampler::ProcSampler;
pub use recorder::TelemetryRecorder;
pub use sample::Sample;
pub use sampler::Sampler;
pub use summary::TelemetrySummary;
pub use telemetry_error::TelemetryError;

use std::sync::Once;

/// Picks the sampler for a trial: NVML on `gpus` if the driver loads and at least one of
/// them exists, else a [`ProcSampler`] on the process tree rooted at `root_pid`.
///
/// An empty `gpus` means a CPU trial and gives the [`ProcSampler`] directly (on a GPU node
/// the GPUs' numbers would not describe it). When GPUs were asked for but NVML cannot serve
/// them, the fallback is announced once per process on stderr with the reason: a silent
/// switch would let CPU numbers pass for GPU numbers, and repeating it every trial would
/// only be noise. To cover every worker of a trial, root the tree at the launcher (or the
/// runner itself) rather than at one worker. Never panics.
pub fn choose_sampler(root_pid: u32, gpus: &[u32]) -> Box<dyn Sampler> {
    if gpus.is_empty() {
        return Box::new(ProcSampler::new(root_pid));
    }
    match NvmlSampler::new(gpus) {
        Ok(sampler) => Box::new(sampler),
        Err(reason) => {
            static WARNED: Once = Once::new();
            WARNED.call_once(|| {
                eprintln!(
                    "warning: GPU telemetry unavailable ({reason}); \
                     sampling CPU and memory of the process tree from /proc instead"
                );
            });
            Box::new(ProcSampler::new(root_pid))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choose_sampler_falls_back_to_proc_without_a_driver() {
        // This machine has no NVIDIA driver; on a GPU node NVML wins and that is fine too.
        let mut sampler = choose_sampler(std::process::id(), &[0]);
        let samples = sampler.sample();
        assert!(!samples.is_empty());
        if sampler.name() == "proc" {
            assert_eq!(samples[0].device, "cpu");
            assert!(samples[0].memory_used_bytes > 0);
        }
        // A second call must not panic either (and prints no second warning).
        assert!(!choose_sampler(std::process::id(), &[0, 1]).sample().is_empty());
    }

    #[test]
    fn cpu_trials_get_the_proc_sampler_even_where_nvml_works() {
        assert_eq!(choose_sampler(std::process::id(), &[]).name(), "proc");
    }
}
