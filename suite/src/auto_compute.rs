//! `precision: auto` and `memory_format: auto`, resolved on the device before the trials:
//! the candidates the device can compute are each timed in real training steps of the cell's
//! network (one worker, the cell's batch per worker, data and threads, a fresh process each,
//! as profiles are), and the fastest trains. Measured, not assumed: bfloat16 that a CPU
//! computes natively (AVX-512 BF16) ran ResNet-18 1.85× faster than float32 on one AMD EPYC
//! and slower on an Intel Xeon of the same flags (PyTorch 2.13 both, the same script), and
//! channels-last helps oneDNN's convolutions by a different amount per network.
//!
//! Candidates: on a CPU float32, and bfloat16 where the CPU has native bfloat16 instructions
//! (`avx512_bf16` or `amx_bf16`; elsewhere it is emulated and never faster). On CUDA, by the
//! board's compute capability (read from NVML): from 8.0 (Ampere) tf32 and bfloat16; on 7.x
//! (Volta, Turing: float16 tensor cores, no TF32, bfloat16 emulated) fp32 and fp16 with its
//! loss scale; below 7.0 fp32 alone; where NVML cannot say, tf32, bf16 and fp16 all timed.
//! float16 is never a CPU candidate: libtorch's CPU float16 convolution backward runs a
//! generic kernel ([`warn_emulated_precisions`]). Formats: contiguous and
//! channels-last.

use std::collections::BTreeMap;
use std::path::Path;

use stratlab_results::{AutoChoiceRow, PartStore, UtcTime};
use stratlab_strategies::{DeviceChoice, LibtorchBuild, Numerics};
use stratlab_strategy_spec::{AutoOr, MemoryFormat, Precision};
use stratlab_telemetry::{cuda_compute_capability, ComputeCapability, CudaEnv};

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
        let (mut precision, format) = chosen[&group_of(trial)];
        // fp16 (chosen on a Volta or Turing board) is one PipeDream cannot train: its cells
        // fall back to fp32 rather than becoming infeasible.
        if trial.precision == AutoOr::Auto && precision.check_strategy(trial.strategy.kind()).is_err() {
            say(&format!(
                "{}: auto trains it in fp32, not the group's {precision}, which it cannot train",
                trial.label()
            ));
            precision = Precision::Float32;
        }
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
        "{} · {} · b{} · {} thread(s) · {} · precision {} · memory format {} · {} · momentum {} · libtorch {libtorch} · binary {}",
        trial.network,
        trial.dataset,
        trial.train.batch_size,
        trial.train.threads,
        device_of(trial),
        trial.precision,
        trial.memory_format,
        trial.train.optimizer,
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
    let (precisions, formats) = candidates(trial.precision, trial.memory_format, NativeTypes::of(trial, say));
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

/// What a trial's device computes natively, as far as `auto`'s candidates depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NativeTypes {
    /// A CPU, with or without bfloat16 instructions.
    Cpu { bfloat16: bool },
    /// A CUDA board of this compute capability.
    Cuda(ComputeCapability),
    /// A CUDA board whose compute capability NVML could not tell.
    CudaUnknown,
}

impl NativeTypes {
    /// What `trial`'s device computes: the CPU's flags, or the CUDA board's capability
    /// (the board the workers number as the trial's ordinal).
    fn of(trial: &TrialSpec, say: &mut dyn FnMut(&str)) -> NativeTypes {
        match device_of(trial) {
            DeviceChoice::Cuda(ordinal) => match cuda_compute_capability(ordinal, &CudaEnv::for_workers()) {
                Ok(capability) => NativeTypes::Cuda(capability),
                Err(error) => {
                    say(&format!(
                        "warning: auto: the compute capability of cuda:{ordinal} is unknown ({error}); timing tf32, \
                         bf16 and fp16"
                    ));
                    NativeTypes::CudaUnknown
                }
            },
            _ => NativeTypes::Cpu { bfloat16: cpu_computes_bfloat16() },
        }
    }
}

/// What `auto` chooses among on a device computing `native`, per axis: each axis the suite
/// gave stays as given.
fn candidates(
    precision: AutoOr<Precision>,
    memory_format: AutoOr<MemoryFormat>,
    native: NativeTypes,
) -> (Vec<Precision>, Vec<MemoryFormat>) {
    use Precision::{Bfloat16, Float16, Float32, Tfloat32};
    let precisions = match (precision, native) {
        (AutoOr::Given(precision), _) => vec![precision],
        (AutoOr::Auto, NativeTypes::Cpu { bfloat16: true }) => vec![Float32, Bfloat16],
        (AutoOr::Auto, NativeTypes::Cpu { bfloat16: false }) => vec![Float32],
        (AutoOr::Auto, NativeTypes::Cuda(capability)) if capability.has_bfloat16() => vec![Tfloat32, Bfloat16],
        (AutoOr::Auto, NativeTypes::Cuda(capability)) if capability.has_float16() => vec![Float32, Float16],
        (AutoOr::Auto, NativeTypes::Cuda(_)) => vec![Float32],
        (AutoOr::Auto, NativeTypes::CudaUnknown) => vec![Tfloat32, Bfloat16, Float16],
    };
    let formats = match memory_format {
        AutoOr::Given(format) => vec![format],
        AutoOr::Auto => vec![MemoryFormat::Contiguous, MemoryFormat::ChannelsLast],
    };
    (precisions, formats)
}

/// Whether this machine's CPU has bfloat16 instructions (AVX-512 BF16 or AMX), read from
/// the kernel's flags.
pub(crate) fn cpu_computes_bfloat16() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| has_flag(&info, &["avx512_bf16", "amx_bf16"]))
}

/// Whether the kernel's `flags` lines name any of `flags`.
fn has_flag(cpuinfo: &str, flags: &[&str]) -> bool {
    cpuinfo
        .lines()
        .filter(|line| line.starts_with("flags"))
        .any(|line| line.split_whitespace().any(|flag| flags.contains(&flag)))
}

/// Warns where a suite trains in a precision this CPU only emulates, before any of it is
/// profiled or trained: fp16, whose convolution backward runs a generic kernel in libtorch
/// 2.13 even on a Xeon with AVX-512 FP16 (87× float32's time for a 32-to-64-channel 3×3
/// layer at batch 32, one thread); and bf16 on a CPU without bfloat16 instructions
/// (`bfloat16_native`: AVX-512 BF16 or AMX), where its kernels convert every element (a
/// ResNet-18 profile took 272 s against float32's 20 s on an AVX2-only EPYC). Such cells
/// measure the emulation, not mixed precision, and take many times as long.
pub(crate) fn warn_emulated_precisions(trials: &[TrialSpec], bfloat16_native: bool, say: &mut dyn FnMut(&str)) {
    let on_cpu = |trial: &&TrialSpec| device_of(trial) == DeviceChoice::Cpu;
    let count =
        |precision: Precision| trials.iter().filter(on_cpu).filter(|trial| trial.train.precision == precision).count();
    let float16 = count(Precision::Float16);
    if float16 > 0 {
        say(&format!(
            "warning: {float16} trial(s) train fp16 on the CPU, where libtorch's float16 convolution backward runs a \
             generic kernel (tens of times float32's time, even with AVX-512 FP16); fp16 is for GPUs, bf16 is the \
             CPU's mixed precision"
        ));
    }
    let bfloat16 = count(Precision::Bfloat16);
    if bfloat16 > 0 && !bfloat16_native {
        say(&format!(
            "warning: {bfloat16} trial(s) train bf16 on a CPU without bfloat16 instructions (no avx512_bf16 or \
             amx_bf16 in /proc/cpuinfo), where bf16 kernels are emulated: expect their profiles and steps to take \
             several times float32's (a ResNet-18 profile 272 s against 20 s on such a CPU); `precision: [auto]` \
             keeps fp32 here"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_chooses_among_what_the_device_computes_and_keeps_what_was_given() {
        use Precision::{Bfloat16, Float16, Float32, Tfloat32};
        let formats = vec![MemoryFormat::Contiguous, MemoryFormat::ChannelsLast];
        let cpu = |bfloat16| candidates(AutoOr::Auto, AutoOr::Auto, NativeTypes::Cpu { bfloat16 });
        assert_eq!(cpu(false), (vec![Float32], formats.clone()), "emulated bfloat16 is never the faster");
        assert_eq!(cpu(true), (vec![Float32, Bfloat16], formats.clone()));
        let cuda = |native| candidates(AutoOr::Auto, AutoOr::Given(MemoryFormat::ChannelsLast), native).0;
        let board = |major, minor| NativeTypes::Cuda(ComputeCapability { major, minor });
        assert_eq!(cuda(board(9, 0)), [Tfloat32, Bfloat16], "Hopper");
        assert_eq!(cuda(board(8, 0)), [Tfloat32, Bfloat16], "Ampere");
        assert_eq!(cuda(board(7, 0)), [Float32, Float16], "Volta: no TF32, bfloat16 emulated");
        assert_eq!(cuda(board(6, 1)), [Float32], "Pascal: no tensor cores");
        assert_eq!(cuda(NativeTypes::CudaUnknown), [Tfloat32, Bfloat16, Float16]);
        let given = candidates(AutoOr::Given(Bfloat16), AutoOr::Auto, NativeTypes::Cpu { bfloat16: false });
        assert_eq!(given, (vec![Bfloat16], formats), "a given precision stays, whatever the flags");
    }

    #[test]
    fn a_strategy_that_cannot_train_the_groups_choice_falls_back_to_fp32() {
        // The group's choice is fp16, as on a Volta board, kept in a store so nothing is
        // timed: single trains it, PipeDream (whose stages cannot agree on a skipped
        // update) falls back to fp32 instead of becoming infeasible.
        let suite = crate::suite_file::SuiteFile::parse(
            "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\ndevice: cpu\nprecision: [auto]
strategies: [single, {name: pipedream, workers: [2]}]\nbudget: {steps: 1}\nthreads: 2\n",
        )
        .unwrap();
        let mut trials = crate::plan::plan(&suite, Path::new("t.yaml")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut choices = ChoiceStore::open(Some(dir.path()), false).unwrap();
        let fp16 = (Precision::Float16, MemoryFormat::Contiguous);
        let single = trials.iter().find(|trial| trial.strategy.name() == "single").unwrap();
        choices.keep(&choice_key(single), &[(fp16, 0.1)], fp16).unwrap();
        let mut said = Vec::new();
        resolve_auto(&mut trials, suite.numerics, &mut choices, &mut |line| said.push(line.to_owned())).unwrap();
        let resolved: Vec<(String, Precision)> =
            trials.iter().map(|trial| (trial.strategy.name().to_owned(), trial.train.precision)).collect();
        assert_eq!(resolved, [("single".to_owned(), Precision::Float16), ("pipedream".to_owned(), Precision::Float32)]);
        assert!(said.iter().any(|line| line.contains("pipedream") && line.contains("fp32, not the group's fp16")));
        assert!(trials.iter().all(|trial| trial.infeasibility().is_none()));
    }

    #[test]
    fn precisions_the_cpu_emulates_are_warned_about_and_nothing_else_is() {
        let warnings = |precision: &str, bfloat16_native: bool| {
            let text = format!(
                "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\ndevice: cpu\nbudget: {{steps: 1}}
strategies: [single, {{name: data-parallel, workers: [2]}}]\nprecision: [{precision}]\n"
            );
            let trials =
                crate::plan::plan(&crate::suite_file::SuiteFile::parse(&text).unwrap(), Path::new("t")).unwrap();
            let mut said = Vec::new();
            warn_emulated_precisions(&trials, bfloat16_native, &mut |line| said.push(line.to_owned()));
            said
        };
        let fp16 = warnings("fp16", true);
        assert!(fp16.len() == 1 && fp16[0].contains("2 trial(s) train fp16 on the CPU"), "{fp16:?}");
        let emulated = warnings("fp32, bf16", false);
        assert!(emulated.len() == 1 && emulated[0].contains("2 trial(s) train bf16 on a CPU without"), "{emulated:?}");
        assert!(warnings("fp32, bf16", true).is_empty(), "bf16 with AVX-512 BF16 or AMX is the CPU's own");
        assert!(warnings("fp32", false).is_empty());
    }

    #[test]
    fn the_flags_line_decides_not_a_model_name() {
        let bfloat16 = |cpuinfo| has_flag(cpuinfo, &["avx512_bf16", "amx_bf16"]);
        assert!(bfloat16("model name\t: Xeon\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n"));
        assert!(bfloat16("flags\t: fpu amx_bf16 amx_tile\n"));
        assert!(!bfloat16("model name\t: avx512_bf16 lookalike\nflags\t: fpu avx512f avx512bw\n"));
    }
}
