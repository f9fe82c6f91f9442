//! Hand-made inputs for every figure kind, shaped like the published findings (data parallelism
//! scales, model parallelism does not, pipelines recover with micro-batches), with failed
//! trials and single runs mixed in. Shared by the tests and the `sample_figures` example.

#![allow(dead_code)]

use stratlab_reports::*;
pub use stratlab_results::{EventKind, Outcome};

/// The series of a strategy by name, computing by default.
pub fn series(name: &str) -> StrategySeries {
    StrategySeries::of(name.parse().expect("a strategy name"))
}

/// Median 'v' with a ±`spread` range over three repeats.
pub fn three(v: f64, spread: f64) -> Plotted {
    Plotted::Measured(Stat::from_samples(&[v - spread, v, v + spread * 0.6]).expect("finite samples"))
}

pub fn oom() -> Plotted {
    Plotted::Failed(Outcome::Oom)
}

/// Thesis fig. 3.1 at W = 4: three data sets, four networks, four strategies.
pub fn speedup_bars_input() -> Vec<SpeedupBar> {
    let networks = ["resnet18", "resnet50", "vgg16", "mobilenet_v2"];
    let datasets = ["mnist", "cifar10", "imagenet"];
    let mut bars = Vec::new();
    for strategy in ["data-parallel", "model-parallel", "gpipe", "1f1b"] {
        for (di, dataset) in datasets.iter().enumerate() {
            for (ni, network) in networks.iter().enumerate() {
                let base = match strategy {
                    "data-parallel" => [3.5, 3.7, 2.6, 3.3][ni] - 0.3 * (2 - di) as f64,
                    "model-parallel" => 0.85 + 0.03 * ni as f64,
                    "gpipe" => 1.9 + 0.3 * di as f64 + 0.1 * ni as f64,
                    _ => 2.2 + 0.3 * di as f64 + 0.1 * ni as f64,
                };
                let speedup = match (strategy, *network, *dataset) {
                    ("data-parallel", "vgg16", "imagenet") => oom(),
                    ("gpipe", "mobilenet_v2", "mnist") => Plotted::Failed(Outcome::Crashed),
                    ("1f1b", _, "imagenet") => Plotted::single(base),
                    _ => three(base, 0.08 + 0.02 * ni as f64),
                };
                bars.push(SpeedupBar {
                    series: series(strategy),
                    network: network.to_string(),
                    dataset: dataset.to_string(),
                    workers: 4,
                    speedup,
                });
            }
        }
    }
    bars
}

/// Thesis fig. 3.2: ImageNet, two networks, W = 2…16.
pub fn scaling_input() -> Vec<ScalingPoint> {
    let mut points = Vec::new();
    for network in ["resnet50", "vgg16"] {
        for workers in [2u32, 4, 8, 16] {
            let w = f64::from(workers);
            for strategy in ["data-parallel", "model-parallel", "gpipe"] {
                let speedup = match (strategy, network) {
                    ("data-parallel", "resnet50") => three(w * 0.92, 0.1 * w.sqrt()),
                    ("data-parallel", _) => three(w * 0.62, 0.1 * w.sqrt()),
                    ("model-parallel", _) if workers == 16 => oom(),
                    ("model-parallel", _) => three(0.9, 0.04),
                    _ if workers == 16 && network == "vgg16" => Plotted::Failed(Outcome::Timeout),
                    _ => Plotted::single(w * 0.55),
                };
                points.push(ScalingPoint {
                    line: ScalingLine::Strategy(series(strategy)),
                    network: network.into(),
                    dataset: "imagenet".into(),
                    workers,
                    speedup,
                });
            }
        }
    }
    points
}

/// Strategy rows for the per-strategy bar figures: (strategy, W, speed factor over single).
const STRATEGIES: [(&str, u32, f64); 4] =
    [("single", 1, 1.0), ("data-parallel", 4, 3.4), ("model-parallel", 4, 0.9), ("gpipe", 4, 2.3)];

/// Figs. 7 and 10 of the single-GPU vs data/model/GPipe study on CIFAR-10, with one OOM.
pub fn throughput_input() -> Vec<ThroughputBar> {
    let mut bars = Vec::new();
    for (network, single_rate) in [("resnet18", 2400.0), ("vgg16", 1500.0), ("mobilenet_v2", 2100.0)] {
        for (strategy, workers, factor) in STRATEGIES {
            let failed = strategy == "gpipe" && network == "vgg16";
            let rate = single_rate * factor;
            bars.push(ThroughputBar {
                series: series(strategy),
                network: network.into(),
                dataset: "cifar10".into(),
                workers,
                samples_per_s: if failed { oom() } else { three(rate, rate * 0.04) },
                epoch_time_s: if failed { oom() } else { three(50_000.0 / rate, 50_000.0 / rate * 0.05) },
            });
        }
    }
    bars
}

/// Figs. 8, 9, 17 and 18 of the single-GPU vs data/model/GPipe study on CIFAR-10: every value
/// a single run.
pub fn device_usage_input() -> Vec<DeviceUsageBar> {
    let gib = 1024.0 * 1024.0 * 1024.0;
    let mut bars = Vec::new();
    for (network, mem_gib) in [("resnet18", 3.1), ("vgg16", 5.2), ("mobilenet_v2", 4.4)] {
        for (strategy, workers, _) in STRATEGIES {
            let failed = strategy == "gpipe" && network == "vgg16";
            let (util, mem) = match strategy {
                "single" => (93.0, mem_gib),
                "data-parallel" => (81.0, mem_gib * 1.08),
                "model-parallel" => (27.0, mem_gib / 3.2),
                _ => (58.0, mem_gib / 2.5),
            };
            let value = |v: f64| if failed { oom() } else { Plotted::single(v) };
            bars.push(DeviceUsageBar {
                series: series(strategy),
                network: network.into(),
                dataset: "cifar10".into(),
                workers,
                utilisation_mean_pct: value(util),
                utilisation_max_pct: value((util * 1.12).min(100.0)),
                memory_mean_bytes: value(mem * 0.85 * gib),
                memory_max_bytes: value(mem * gib),
            });
        }
    }
    bars
}

fn accuracy_curve(
    strategy: &str,
    workers: u32,
    epoch_s: f64,
    epochs: usize,
    failure: Option<Outcome>,
) -> AccuracyCurve {
    let points = (1..=epochs)
        .map(|e| AccuracyPoint { wall_s: e as f64 * epoch_s, test_accuracy: 0.94 - 0.6 * (-(e as f64) / 4.0).exp() })
        .collect();
    AccuracyCurve { series: series(strategy), workers, points, failure }
}

/// Fig. 13 of the single-GPU vs data/model/GPipe study: ResNet-18 on CIFAR-10, target 90 %,
/// one crash and one never starting.
pub fn time_to_accuracy_input() -> TimeToAccuracy {
    TimeToAccuracy {
        network: "resnet18".into(),
        dataset: "cifar10".into(),
        target_accuracy: 0.9,
        curves: vec![
            accuracy_curve("single", 1, 21.0, 15, None),
            accuracy_curve("data-parallel", 4, 6.2, 15, None),
            // Stops at 9 epochs, 87.7 %: never reaches the target.
            accuracy_curve("model-parallel", 4, 23.0, 9, None),
            accuracy_curve("gpipe", 4, 9.1, 6, Some(Outcome::Crashed)),
            AccuracyCurve { series: series("1f1b"), workers: 4, points: vec![], failure: Some(Outcome::Oom) },
        ],
    }
}

fn loss_curve(strategy: &str, workers: u32, epochs: usize, rate: f64, diverge_at: Option<usize>) -> LossCurve {
    let points = (0..=epochs * 4)
        .map(|step| {
            let epoch = step as f64 / 4.0;
            let loss = if diverge_at.is_some_and(|d| step >= d) { f64::NAN } else { 0.2 + 2.1 * (-epoch * rate).exp() };
            LossPoint { epoch, loss }
        })
        .collect();
    LossCurve { series: series(strategy), workers, points, failure: None }
}

/// Fig. 14 of the single-GPU vs data/model/GPipe study: loss per epoch, one diverged run and
/// one OOM.
pub fn loss_curves_input() -> LossCurves {
    LossCurves {
        network: "resnet18".into(),
        dataset: "cifar10".into(),
        curves: vec![
            loss_curve("single", 1, 10, 0.45, None),
            loss_curve("data-parallel", 4, 10, 0.42, None),
            loss_curve("gpipe", 4, 10, 0.40, Some(17)),
            LossCurve { series: series("1f1b"), workers: 4, points: vec![], failure: Some(Outcome::Oom) },
        ],
    }
}

/// GPipe on 2 workers with 4 micro-batches: forwards of 10 ms, backwards of 20 ms, all
/// forwards then all backwards, then the optimizer step (thesis fig. 2.5).
pub fn gpipe_timeline() -> PipelineTimeline {
    let f = 0.010;
    let b = 0.020;
    let mut events = Vec::new();
    for m in 0..4u32 {
        let mf = f64::from(m);
        events.push(TimelineEvent {
            worker: 0,
            kind: EventKind::Forward,
            micro_batch: Some(m),
            pipeline_stage: None,
            start_s: mf * f,
            end_s: (mf + 1.0) * f,
        });
        events.push(TimelineEvent {
            worker: 1,
            kind: EventKind::Forward,
            micro_batch: Some(m),
            pipeline_stage: None,
            start_s: (mf + 1.0) * f,
            end_s: (mf + 2.0) * f,
        });
        // Backwards run in reverse micro-batch order, last stage first.
        let order = f64::from(3 - m);
        events.push(TimelineEvent {
            worker: 1,
            kind: EventKind::Backward,
            micro_batch: Some(m),
            pipeline_stage: None,
            start_s: 5.0 * f + order * b,
            end_s: 5.0 * f + (order + 1.0) * b,
        });
        events.push(TimelineEvent {
            worker: 0,
            kind: EventKind::Backward,
            micro_batch: Some(m),
            pipeline_stage: None,
            start_s: 5.0 * f + (order + 1.0) * b,
            end_s: 5.0 * f + (order + 2.0) * b,
        });
    }
    for worker in 0..2 {
        events.push(TimelineEvent {
            worker,
            kind: EventKind::Optimizer,
            micro_batch: None,
            pipeline_stage: None,
            start_s: 0.150,
            end_s: 0.155,
        });
    }
    PipelineTimeline {
        title: "GPipe, 2 workers, 4 micro-batches".into(),
        workers: 2,
        worker_labels: Vec::new(),
        events,
    }
}

/// Holistic Trace Analysis' temporal breakdown: data-parallel ranks hiding most of their
/// all-reduce behind backward, parameter-server ranks exposing theirs, one crashed rank
/// that counted no step.
pub fn step_breakdown_input() -> Vec<StepBreakdownBar> {
    let bar = |strategy: &str, workers: u32, rank: u32, per_step: Option<[f64; 4]>| StepBreakdownBar {
        network: "resnet50".into(),
        dataset: "imagenet".into(),
        series: series(strategy),
        workers,
        batch_size: 64,
        repeat: 0,
        rank,
        failure: (per_step.is_none()).then_some(Outcome::Crashed),
        per_step: per_step.map(|[compute_s, exposed_communication_s, overlapped_communication_s, idle_s]| {
            StepSegments { compute_s, exposed_communication_s, overlapped_communication_s, idle_s }
        }),
    };
    let mut bars: Vec<StepBreakdownBar> = (0..4)
        .map(|rank| bar("data-parallel", 4, rank, Some([0.180 + 0.004 * f64::from(rank), 0.012, 0.045, 0.006])))
        .collect();
    bars.push(bar("parameter-server", 2, 0, Some([0.150, 0.060, 0.0, 0.030])));
    bars.push(bar("parameter-server", 2, 1, None));
    bars
}

/// GPipe paper's curve on ResNet-50 / ImageNet at p = 4: gpipe and 1f1b over m = 1…16, the
/// measured bubble a little above (p − 1)/(m + p − 1), one 1f1b point out of memory.
pub fn pipeline_bubble_input() -> PipelineBubble {
    let mut points = Vec::new();
    for schedule in ["gpipe", "1f1b"] {
        for m in [1u32, 2, 4, 8, 16] {
            let theory = 3.0 / (f64::from(m) + 3.0);
            let bubble = match (schedule, m) {
                ("1f1b", 16) => oom(),
                ("gpipe", _) => three(theory + 0.04, 0.01),
                _ => Plotted::single(theory + 0.02),
            };
            points.push(BubblePoint {
                schedule: schedule.parse().unwrap(),
                virtual_stages: 1,
                micro_batches: m,
                bubble,
            });
        }
    }
    PipelineBubble { network: "resnet50".into(), dataset: "imagenet".into(), stages: 4, points }
}

/// One 1F1B step of 2 stages and 2 micro-batches with activation checkpointing: stage 0
/// recomputes each forward just before its backward; all-reduce-free, sends on the comm lane.
pub fn recompute_timeline() -> PipelineTimeline {
    let event = |worker, kind, micro_batch, start_s, end_s| TimelineEvent {
        worker,
        kind,
        micro_batch: Some(micro_batch),
        pipeline_stage: None,
        start_s,
        end_s,
    };
    PipelineTimeline {
        title: "1F1B with checkpointing, 2 stages, 2 micro-batches".into(),
        workers: 2,
        worker_labels: vec!["stage 0".into(), "stage 1".into()],
        events: vec![
            event(0, EventKind::Forward, 0, 0.00, 0.01),
            event(0, EventKind::Send, 0, 0.01, 0.012),
            event(0, EventKind::Forward, 1, 0.01, 0.02),
            event(1, EventKind::Forward, 0, 0.012, 0.022),
            event(1, EventKind::Backward, 0, 0.022, 0.042),
            event(1, EventKind::Forward, 1, 0.042, 0.052),
            event(0, EventKind::Recompute, 0, 0.042, 0.052),
            event(0, EventKind::Backward, 0, 0.052, 0.072),
            event(1, EventKind::Backward, 1, 0.052, 0.072),
            event(0, EventKind::Recompute, 1, 0.072, 0.082),
            event(0, EventKind::Backward, 1, 0.082, 0.102),
        ],
    }
}

/// Strategy `name` with `micro_batches` (a hybrid gets pp 2).
pub fn strategy_of(name: &str, micro_batches: Option<i64>) -> stratlab_strategy_spec::Strategy {
    use stratlab_strategy_spec::{Parameters, Strategy, StrategyKind};
    let kind: StrategyKind = name.parse().unwrap();
    let parameters = Parameters {
        micro_batches: micro_batches.map(|m| m as usize),
        pipeline_stages: (kind == StrategyKind::Hybrid).then_some(2),
        ..Parameters::default()
    };
    Strategy::new(kind, parameters).unwrap()
}
