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
