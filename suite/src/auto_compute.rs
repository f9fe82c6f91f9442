//! `precision: auto` and `memory_format: auto`, resolved on the device before the trials:
//! the candidates the device can compute are each timed in real training steps of the cell's
//! network (one worker, the cell's batch per worker, data and threads, a fresh process each,
//! as profiles are), and the fastest trains. Measured, not assumed: bfloat16 that a CPU
//! computes natively (AVX-512 BF16) ran ResNet-18 1.85× faster than float32 on one AMD EPYC
//! and slower on an Intel Xeon of the same flags (PyTorch 2.13 both, the same script), and
//! channels-last helps oneDNN's convolutions by a different amount per network.
//!
//! Candidates: on a CPU float32, and bfloat16 where the CPU has native bfloat16 instructions
//! (`avx512_bf16` or `amx_bf16`; elsewhere it is emulated and never faster); on CUDA tf32 and
//! bfloat16. Formats: contiguous and channels-last. float16 is never chosen: it needs a loss
//! scaler to be safe.

use std::collections::BTreeMap;

use stratlab_strategies::stored_profile::ProfileNeeds;
use stratlab_strategies::{DeviceChoice, Numerics};
use stratlab_strategy_spec::{AutoOr, MemoryFormat, Precision};

use crate::profile_worker::measure_apart;
use crate::trial::TrialSpec;

/// What one resolution depends on: the cell's network, data, batch per worker, threads,
/// device, and what the suite asked.
type Group = (String, String, usize, usize, String, AutoOr<Precision>, AutoOr<MemoryFormat>);

fn group_of(trial: &TrialSpec) -> Group {
    (
        trial.network.clone(),
        trial.dataset.to_string(),
        trial.train.batch_size,
        trial.train.threads,
        trial.train.device.to_string(),
        trial.precision,
        trial.memory_format,
    )
}

/// Resolves every trial's `auto`, measuring each group of
/// trials that share a resolution once; `say` hears each choice with its measurements.
pub(crate) fn resolve_auto(
    trials: &mut [TrialSpec],
    suite_numerics: Numerics,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    let mut chosen: BTreeMap<Group, (Precision, MemoryFormat)> = BTreeMap::new();
    for trial in trials.iter_mut().filter(|trial| trial.awaits_resolution()) {
        let group = group_of(trial);
        let choice = match chosen.get(&group) {
            Some(&choice) => choice,
            None => {
                let choice = measure_choice(trial, suite_numerics, say)?;
                chosen.insert(group, choice);
                choice
            }
        };
        trial.resolve_compute(choice.0, choice.1, suite_numerics);
    }
    Ok(())
}

/// The fastest of `trial`'s candidates, timed.
fn measure_choice(
    trial: &TrialSpec,
    suite_numerics: Numerics,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<(Precision, MemoryFormat)> {
    let device = match trial.train.device.resolve() {
        Ok(tch::Device::Cuda(index)) => DeviceChoice::Cuda(index),
        _ => DeviceChoice::Cpu,
    };
    let candidates = candidates(trial.precision, trial.memory_format, device, cpu_computes_bfloat16());
    if let [only] = candidates.as_slice() {
        return Ok(*only);
    }
    let batch = [trial.train.batch_size];
    let needs = ProfileNeeds { sizes: &[], contention: None, training_steps: &batch };
    let mut timed = Vec::with_capacity(candidates.len());
    for &(precision, format) in &candidates {
        let mut candidate = trial.clone();
        candidate.resolve_compute(precision, format, suite_numerics);
        let (profile, _) = measure_apart(&candidate, &needs, &mut |_| {})?;
        if let Some(&(_, step_s)) = profile.training_step_s.first() {
            timed.push(((precision, format), step_s));
        }
    }
    let fastest = timed
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|&(choice, _)| choice)
        .ok_or_else(|| anyhow::anyhow!("no candidate of `auto` trained a step"))?;
    let steps: Vec<String> = timed
        .iter()
        .map(|((precision, format), step_s)| format!("{precision} {format} {:.1} ms", step_s * 1e3))
        .collect();
    say(&format!(
        "auto for {} on {} at batch {} and {} thread(s): {} {} (training steps, 10th percentile: {})",
        trial.network,
        trial.dataset,
        trial.train.batch_size,
        trial.train.threads,
        fastest.0,
        fastest.1,
        steps.join(", ")
    ));
    Ok(fastest)
}

/// What `auto` chooses among on `device`: each axis the suite gave stays as given.
fn candidates(
    precision: AutoOr<Precision>,
    memory_format: AutoOr<MemoryFormat>,
    device: DeviceChoice,
    cpu_bfloat16: bool,
) -> Vec<(Precision, MemoryFormat)> {
    let precisions = match (precision, device) {
        (AutoOr::Given(precision), _) => vec![precision],
        (AutoOr::Auto, DeviceChoice::Cuda(_)) => vec![Precision::Tfloat32, Precision::Bfloat16],
        (AutoOr::Auto, _) if cpu_bfloat16 => vec![Precision::Float32, Precision::Bfloat16],
        (AutoOr::Auto, _) => vec![Precision::Float32],
    };
    let formats = match memory_format {
        AutoOr::Given(format) => vec![format],
        AutoOr::Auto => vec![MemoryFormat::Contiguous, MemoryFormat::ChannelsLast],
    };
    precisions.iter().flat_map(|&precision| formats.iter().map(move |&format| (precision, format))).collect()
}

/// Whether this machine's CPU has bfloat16 instructions (AVX-512 BF16 or AMX), read from
/// the kernel's flags.
fn cpu_computes_bfloat16() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| has_bfloat16_flag(&info))
}

fn has_bfloat16_flag(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|line| line.starts_with("flags"))
        .any(|line| line.split_whitespace().any(|flag| flag == "avx512_bf16" || flag == "amx_bf16"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_chooses_among_what_the_device_computes_and_keeps_what_was_given() {
        let auto = (AutoOr::Auto, AutoOr::Auto);
        let both = |precision| vec![(precision, MemoryFormat::Contiguous), (precision, MemoryFormat::ChannelsLast)];
        let cpu = |bf16| candidates(auto.0, auto.1, DeviceChoice::Cpu, bf16);
        assert_eq!(cpu(false), both(Precision::Float32), "emulated bfloat16 is never the faster");
        assert_eq!(cpu(true), [both(Precision::Float32), both(Precision::Bfloat16)].concat());
        let cuda = candidates(AutoOr::Auto, AutoOr::Given(MemoryFormat::ChannelsLast), DeviceChoice::Cuda(0), false);
        assert_eq!(
            cuda,
            [(Precision::Tfloat32, MemoryFormat::ChannelsLast), (Precision::Bfloat16, MemoryFormat::ChannelsLast)]
        );
        let given = candidates(AutoOr::Given(Precision::Bfloat16), AutoOr::Auto, DeviceChoice::Cpu, false);
        assert_eq!(given, both(Precision::Bfloat16), "a given precision stays, whatever the flags");
    }

    #[test]
    fn the_flags_line_decides_not_a_model_name() {
        assert!(has_bfloat16_flag("model name\t: Xeon\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n"));
        assert!(has_bfloat16_flag("flags\t: fpu amx_bf16 amx_tile\n"));
        assert!(!has_bfloat16_flag("model name\t: avx512_bf16 lookalike\nflags\t: fpu avx512f avx512bw\n"));
    }
}
