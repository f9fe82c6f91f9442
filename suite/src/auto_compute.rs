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
use std::path::Path;

use stratlab_results::{AutoChoiceRow, PartStore, UtcTime};
use stratlab_strategies::{DeviceChoice, LibtorchBuild, Numerics};
use stratlab_strategy_spec::{AutoOr, MemoryFormat, Precision};

use crate::profile_worker::time_steps_apart;
use crate::profiles::binary_digest;
use crate::trial::TrialSpec;

/// Where choices are kept and whether stored ones may be reused.
pub struct ChoiceStore {
    /// `None`: measured afresh and kept nowhere.
    store: Option<PartStore<AutoChoiceRow>>,
    stored: Vec<AutoChoiceRow>,
}

impl ChoiceStore {
    /// The choices of the store at `store_dir`; with `fresh`, none are reused (new ones
    /// are still stored), as `--fresh-profiles` retakes profiles.
    pub fn open(store_dir: Option<&Path>, fresh: bool) -> anyhow::Result<ChoiceStore> {
        let store = store_dir.map(PartStore::new);
        let stored = match (&store, fresh) {
            (Some(store), false) => store.load()?,
            _ => Vec::new(),
        };
        Ok(ChoiceStore { store, stored })
    }

    /// The stored choice under `key`, the latest.
    fn reused(&self, key: &str) -> Option<(Precision, MemoryFormat)> {
        let row = self.stored.iter().rev().find(|row| row.choice_key == key && row.chosen)?;
        Some((row.precision.parse().ok()?, row.memory_format.parse().ok()?))
    }

    fn keep(
        &mut self,
        key: &str,
        timed: &[((Precision, MemoryFormat), f64)],
        chosen: (Precision, MemoryFormat),
    ) -> anyhow::Result<()> {
        let taken_at = UtcTime::now().rfc3339();
        let rows: Vec<AutoChoiceRow> = timed
            .iter()
            .map(|&((precision, format), step_s)| AutoChoiceRow {
                choice_key: key.to_owned(),
                precision: precision.to_string(),
                memory_format: format.to_string(),
                step_s,
                chosen: (precision, format) == chosen,
                taken_at: taken_at.clone(),
            })
            .collect();
        if let Some(store) = &self.store {
            store.append(&rows)?;
        }
        self.stored.extend(rows);
        Ok(())
    }
}

/// Resolves every trial's `auto`, measuring each group of trials that share a resolution
/// once, or reusing the store's choice for it; `say` hears each choice and how it was made.
pub(crate) fn resolve_auto(
    trials: &mut [TrialSpec],
    suite_numerics: Numerics,
    choices: &mut ChoiceStore,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    // One choice per group, so that every strategy of a network, data set and batch trains
    // in the same precision and format as the single cell its speedup divides by; timed on
    // the group's trial with the most threads per worker (single's, where it has one).
    let mut timed_on: BTreeMap<String, TrialSpec> = BTreeMap::new();
    for trial in trials.iter().filter(|trial| trial.awaits_resolution()) {
        let representative = timed_on.entry(group_of(trial)).or_insert_with(|| trial.clone());
        if trial.train.threads > representative.train.threads {
            *representative = trial.clone();
        }
    }
    let mut chosen: BTreeMap<String, (Precision, MemoryFormat)> = BTreeMap::new();
    for (group, trial) in &timed_on {
        let key = choice_key(trial);
        let choice = match choices.reused(&key) {
            Some(choice) => {
                say(&format!("{}: {} {} (chosen before, reused)", what(trial), choice.0, choice.1));
                choice
            }
            None => measure_choice(trial, suite_numerics, &key, choices, say)?,
        };
        chosen.insert(group.clone(), choice);
    }
    for trial in trials.iter_mut().filter(|trial| trial.awaits_resolution()) {
        let (precision, format) = chosen[&group_of(trial)];
        trial.resolve_compute(precision, format, suite_numerics);
    }
    Ok(())
}

/// Which trials share one choice: the same network, data set, batch per worker and
/// device, and the same request.
fn group_of(trial: &TrialSpec) -> String {
    format!(
        "{} · {} · b{} · {} · {} · {}",
        trial.network,
        trial.dataset,
        trial.train.batch_size,
        device_of(trial),
        trial.precision,
        trial.memory_format
    )
}

/// The device a trial trains on, `auto` resolved.
fn device_of(trial: &TrialSpec) -> DeviceChoice {
    match trial.train.device.resolve() {
        Ok(tch::Device::Cuda(index)) => DeviceChoice::Cuda(index),
        _ => DeviceChoice::Cpu,
    }
}

/// Everything a choice depends on: its group's network, data, batch per worker and device,
/// the threads it was timed at, what the suite asked, the optimizer, libtorch and this
/// binary.
fn choice_key(trial: &TrialSpec) -> String {
    let libtorch = LibtorchBuild::read().torch_version.unwrap_or_else(|| "unknown".into());
    format!(
        "{} · {} · b{} · {} thread(s) · {} · precision {} · memory format {} · momentum {} · libtorch {libtorch} · binary {}",
        trial.network,
        trial.dataset,
        trial.train.batch_size,
        trial.train.threads,
        device_of(trial),
        trial.precision,
        trial.memory_format,
        trial.train.momentum,
        binary_digest().unwrap_or("unknown"),
    )
}

fn what(trial: &TrialSpec) -> String {
    format!(
        "auto for {} on {} at batch {} and {} thread(s)",
        trial.network, trial.dataset, trial.train.batch_size, trial.train.threads
    )
}

/// The fastest of `trial`'s candidates, timed, and kept in `choices`.
fn measure_choice(
    trial: &TrialSpec,
    suite_numerics: Numerics,
    key: &str,
    choices: &mut ChoiceStore,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<(Precision, MemoryFormat)> {
    let (precisions, formats) =
        candidates(trial.precision, trial.memory_format, device_of(trial), cpu_computes_bfloat16());
    if let ([precision], [format]) = (precisions.as_slice(), formats.as_slice()) {
        return Ok((*precision, *format));
    }
    let mut timed: Vec<((Precision, MemoryFormat), f64)> = Vec::new();
    let time = |precision, format| -> anyhow::Result<((Precision, MemoryFormat), f64)> {
        let mut candidate = trial.clone();
        candidate.resolve_compute(precision, format, suite_numerics);
        Ok(((precision, format), time_steps_apart(&candidate)?))
    };
    let fastest = |timed: &[((Precision, MemoryFormat), f64)]| {
        timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|&(choice, _)| choice).expect("a candidate was timed")
    };
    // The first candidate timed after a run's start has read its step far slower than the
    // same candidate timed later, enough to choose the slower precision: one untimed
    // process first.
    time(precisions[0], formats[0])?;
    // One axis at a time: the precisions in the first format, then the other formats in the
    // fastest precision. The axes' gains multiply about independently (ResNet-18 on an AMD
    // EPYC: channels-last ×1.09 in float32, ×1.16 in bfloat16; bfloat16 ×1.85 and ×1.96),
    // and on a network whose step takes seconds every candidate left out is seconds saved.
    for &precision in &precisions {
        timed.push(time(precision, formats[0])?);
    }
    let precision = fastest(&timed).0;
    for &format in &formats[1..] {
        timed.push(time(precision, format)?);
    }
    let fastest = fastest(&timed);
    choices.keep(key, &timed, fastest)?;
    let steps: Vec<String> = timed
        .iter()
        .map(|((precision, format), step_s)| format!("{precision} {format} {:.1} ms", step_s * 1e3))
        .collect();
    say(&format!("{}: {} {} (a training step: {})", what(trial), fastest.0, fastest.1, steps.join(", ")));
    Ok(fastest)
}

/// What `auto` chooses among on `device`, per axis: each axis the suite gave stays as given.
fn candidates(
    precision: AutoOr<Precision>,
    memory_format: AutoOr<MemoryFormat>,
    device: DeviceChoice,
    cpu_bfloat16: bool,
) -> (Vec<Precision>, Vec<MemoryFormat>) {
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
    (precisions, formats)
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
        let formats = vec![MemoryFormat::Contiguous, MemoryFormat::ChannelsLast];
        let cpu = |bf16| candidates(AutoOr::Auto, AutoOr::Auto, DeviceChoice::Cpu, bf16);
        assert_eq!(cpu(false), (vec![Precision::Float32], formats.clone()), "emulated bfloat16 is never the faster");
        assert_eq!(cpu(true), (vec![Precision::Float32, Precision::Bfloat16], formats.clone()));
        let cuda = candidates(AutoOr::Auto, AutoOr::Given(MemoryFormat::ChannelsLast), DeviceChoice::Cuda(0), false);
        assert_eq!(cuda, (vec![Precision::Tfloat32, Precision::Bfloat16], vec![MemoryFormat::ChannelsLast]));
        let given = candidates(AutoOr::Given(Precision::Bfloat16), AutoOr::Auto, DeviceChoice::Cpu, false);
        assert_eq!(given, (vec![Precision::Bfloat16], formats), "a given precision stays, whatever the flags");
    }

    #[test]
    fn the_flags_line_decides_not_a_model_name() {
        assert!(has_bfloat16_flag("model name\t: Xeon\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n"));
        assert!(has_bfloat16_flag("flags\t: fpu amx_bf16 amx_tile\n"));
        assert!(!has_bfloat16_flag("model name\t: avx512_bf16 lookalike\nflags\t: fpu avx512f avx512bw\n"));
    }
}
