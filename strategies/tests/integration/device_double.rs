//! A CUDA trial's path on the scripted device (`stratlab_strategies::device_double`), on a
//! machine without a GPU: single-device and data-parallel training asked for `cuda:0` must
//! resolve it, set the TF32 switches their precision decides, open a CUDA autocast region in
//! their precision's type around every forward, copy every batch and synchronise before
//! every clock read, and under float16 run the loss scale.
//!
//! Each run is a child process of this binary: the scripted device is process-wide.

use std::path::Path;
use std::time::Duration;

use crate::common::*;
use stratlab_comm::{Backend, GroupOptions, Launch, ProcessGroup};
use stratlab_strategies::autocast::AutocastType;
use stratlab_strategies::device_double::{self, DeviceCall};
use stratlab_strategies::device_memory;
use stratlab_strategies::{
    data_parallel, single, DeviceChoice, MatmulPrecision, Numerics, Precision, TrainConfig, TrainContext, TrainReport,
};

const CHILD: &str = "device_double::scripted_cuda_child";

/// One worker of the run named in the environment (`single/tf32`, `data-parallel/bf16`);
/// only the parent test starts it.
#[test]
#[ignore = "entry point of the child processes the scripted-device test starts"]
fn scripted_cuda_child() {
    device_double::install();
    let role = std::env::var(ROLE).expect("started by the parent test, with the role in the environment");
    let (strategy, precision) = role.split_once('/').expect("strategy/precision");
    let precision: Precision = precision.parse().unwrap();
    let config = TrainConfig {
        device: DeviceChoice::Cuda(0),
        numerics: Numerics::default().for_precision(precision),
        ..config_in(precision, PER_RANK_BATCH)
    };
    let (train, test) = data();
    let spec = network(&train);
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    let launch = Launch::from_env().unwrap();
    let report = match strategy {
        "single" => single::train(&context, &mut weights),
        "data-parallel" => {
            let options = GroupOptions::for_launch(&launch, Backend::Gloo, Duration::from_secs(60));
            let group = ProcessGroup::init(&launch, &options).unwrap();
            data_parallel::train(&context, &group, 1 << 20, &mut weights)
        }
        other => panic!("unknown strategy {other}"),
    }
    .unwrap();
    let out = Path::new(&std::env::var(OUT).unwrap()).to_path_buf();
    let calls = serde_json::to_vec(&device_double::calls()).unwrap();
    std::fs::write(out.join(format!("rank{}.calls.json", launch.rank)), calls).unwrap();
    std::fs::write(out.join(format!("rank{}.report.json", launch.rank)), serde_json::to_vec(&report).unwrap()).unwrap();
}

#[test]
fn a_cuda_trial_on_the_scripted_device_takes_every_cuda_step() {
    let runs = [
        ("single", Precision::Float32, 1),
        ("single", Precision::Tfloat32, 1),
        ("single", Precision::Float16, 1),
        ("data-parallel", Precision::Bfloat16, 2),
    ];
    for (strategy, precision, workers) in runs {
        let role = format!("{strategy}/{precision}");
        let dir = tempfile::tempdir().unwrap();
        run_ranks(CHILD, &role, workers, dir.path());
        for rank in 0..workers {
            let read = |what: &str| std::fs::read(dir.path().join(format!("rank{rank}.{what}.json"))).unwrap();
            let calls: Vec<DeviceCall> = serde_json::from_slice(&read("calls")).unwrap();
            let report: TrainReport = serde_json::from_slice(&read("report")).unwrap();
            let steps = report.steps.len();
            assert_eq!(steps, steps_in(precision), "{role}");
            assert_eq!(calls.first(), Some(&DeviceCall::Resolved(0)), "{role}: cuda:0 resolved first");
            let count = |call: &DeviceCall| calls.iter().filter(|made| *made == call).count();
            // Every training batch is copied, and each step has its copy and its end
            // synchronised; evaluation adds its own.
            assert!(count(&DeviceCall::BatchCopy) >= steps, "{role}: {calls:?}");
            assert!(count(&DeviceCall::Synchronize) >= 2 * steps, "{role}: {calls:?}");
            // The TF32 switches the precision decides (fp32 off, tf32 on, the rest the
            // suite's), read back from libtorch's global context.
            let expected = Numerics::default().for_precision(precision);
            let switches = |numerics: Numerics| (numerics.cudnn_tf32, numerics.matmul_precision);
            assert_eq!(switches(report.numerics), switches(expected), "{role}");
            match precision {
                Precision::Float32 => assert_eq!(switches(report.numerics), (false, MatmulPrecision::Highest)),
                Precision::Tfloat32 => assert_eq!(switches(report.numerics), (true, MatmulPrecision::High)),
                _ => {}
            }
            let autocast = match precision {
                Precision::Bfloat16 => Some(AutocastType::Bfloat16),
                Precision::Float16 => Some(AutocastType::Float16),
                _ => None,
            };
            let regions: Vec<&DeviceCall> =
                calls.iter().filter(|call| matches!(call, DeviceCall::Autocast(_))).collect();
            match autocast {
                // One region per forward: every step's, and evaluation's.
                Some(dtype) => {
                    assert!(regions.len() >= steps, "{role}: {} regions", regions.len());
                    assert!(regions.iter().all(|region| **region == DeviceCall::Autocast(dtype)), "{role}");
                }
                None => assert!(regions.is_empty(), "{role}: {regions:?}"),
            }
            let scaled = report.steps.iter().all(|step| step.loss_scale.is_some());
            assert_eq!(scaled, precision == Precision::Float16, "{role}: the loss scale runs in fp16 only");
        }
    }
}

const CAP_CHILD: &str = "device_double::scripted_cuda_cap_child";

/// What a capped run on the scripted device wrote: its calls, and its report or its
/// failure with the refusal's one-line reason.
#[derive(serde::Serialize, serde::Deserialize)]
struct CappedRun {
    calls: Vec<DeviceCall>,
    report: Option<TrainReport>,
    failure: Option<String>,
    refusal: Option<String>,
}

/// Single-device training on scripted `cuda:0` under the cap in bytes named in the
/// environment; only the parent test starts it.
#[test]
#[ignore = "entry point of the child processes the scripted-device cap test starts"]
fn scripted_cuda_cap_child() {
    device_double::install();
    let cap: u64 = std::env::var(ROLE).unwrap().parse().expect("the cap in bytes");
    let config = TrainConfig {
        device: DeviceChoice::Cuda(0),
        device_memory_limit_bytes: Some(cap),
        ..config_in(Precision::Float32, PER_RANK_BATCH)
    };
    let (train, test) = data();
    let spec = network(&train);
    let context = TrainContext { network: &spec, train, test, config: &config };
    let mut weights = Weights::default();
    // Out of memory is an error of a fallible call or a panic of tch's panicking ones.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| single::train(&context, &mut weights)));
    let (report, failure) = match outcome {
        Ok(Ok(report)) => (Some(report), None),
        Ok(Err(error)) => (None, Some(error.to_string())),
        Err(panic) => (None, Some(format!("{:?}", panic.downcast_ref::<String>()))),
    };
    let refusal = device_memory::last_refusal(tch::Device::Cpu).map(|refusal| refusal.reason());
    let run = CappedRun { calls: device_double::calls(), report, failure, refusal };
    let out = Path::new(&std::env::var(OUT).unwrap()).join("capped.json");
    std::fs::write(out, serde_json::to_vec(&run).unwrap()).unwrap();
}

fn capped_run(cap: u64) -> CappedRun {
    let dir = tempfile::tempdir().unwrap();
    run_ranks(CAP_CHILD, &cap.to_string(), 1, dir.path());
    serde_json::from_slice(&std::fs::read(dir.path().join("capped.json")).unwrap()).unwrap()
}

#[test]
fn a_device_memory_cap_on_the_scripted_device_is_its_fraction_and_its_refusal_reads_as_one_line() {
    let fraction_of = |calls: &[DeviceCall]| {
        calls.iter().find_map(|call| match call {
            DeviceCall::MemoryFraction(fraction) => Some(*fraction),
            _ => None,
        })
    };
    // A cap far above the small CNN's needs: it trains, with the fraction set after the
    // device resolved and before the first batch, and the allocator's peak read every step.
    let roomy = device_double::SCRIPTED_DEVICE_BYTES / 64;
    let run = capped_run(roomy);
    let report = run.report.unwrap_or_else(|| panic!("trains under {roomy} bytes: {:?}", run.failure));
    assert_eq!(fraction_of(&run.calls), Some(1.0 / 64.0));
    let position = |wanted: &dyn Fn(&DeviceCall) -> bool| run.calls.iter().position(wanted).unwrap();
    assert!(
        position(&|call| matches!(call, DeviceCall::Resolved(0)))
            < position(&|call| matches!(call, DeviceCall::MemoryFraction(_)))
    );
    assert!(
        position(&|call| matches!(call, DeviceCall::MemoryFraction(_)))
            < position(&|call| *call == DeviceCall::BatchCopy)
    );
    let resets = run.calls.iter().filter(|call| **call == DeviceCall::ResetPeakStats).count();
    assert!(resets >= report.steps.len(), "{resets} peak resets for {} steps", report.steps.len());
    let peaks: Vec<u64> = report.steps.iter().map(|step| step.peak_memory_bytes.expect("a peak per step")).collect();
    assert!(peaks.iter().all(|&peak| peak > 0 && peak <= roomy), "{peaks:?}");

    // Just under the largest step's peak: the weights fit, a step does not, and the refusal
    // names the pass, the cap and where the cap came from, at the same bytes every run.
    let tight = peaks.iter().max().unwrap() - (64 << 10);
    let refused = || {
        let run = capped_run(tight);
        assert!(run.report.is_none(), "a step needs more than {tight} bytes");
        let failure = run.failure.unwrap();
        assert!(failure.contains("out of memory"), "{failure}");
        // JSON's float parsing may move the last bit.
        let fraction = fraction_of(&run.calls).expect("the cap's fraction is set");
        assert!((fraction * device_double::SCRIPTED_DEVICE_BYTES as f64 - tight as f64).abs() < 1.0, "{fraction}");
        run.refusal.expect("the refusal is kept")
    };
    let reason = refused();
    assert!(reason.starts_with("out of memory on cuda:0: "), "{reason}");
    assert!(reason.contains(" asked for in the "), "names the pass: {reason}");
    assert!(reason.contains(&format!("device_memory_limit_mib {} of the device's 16 GiB", tight >> 20)), "{reason}");
    assert!(!reason.contains('\n'), "{reason}");
    assert_eq!(refused(), reason, "the same refusal every run");
}
