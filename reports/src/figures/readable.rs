//! Every figure kind with panels stays readable whatever it is given: many panels, long
//! strategy labels, long data set names. Each is drawn crowded and its panels checked as
//! drawn: the plot area keeps at least half of its panel's height (and a minimum height),
//! and no two ticks of an axis read alike.

use stratlab_results::Outcome;
use stratlab_strategy_spec::StrategyKind;

use crate::render::{last_rendered, PanelLayout, PLOT_PX_MIN, PLOT_SHARE_MIN};
use crate::{
    AccuracyCurve, AccuracyPoint, DeviceUsageBar, FigureTarget, Format, LossCurve, LossCurves, LossPoint, Plotted,
    PredictionError, ScalingLine, ScalingPoint, SpeedupBar, Stat, StrategySeries, ThroughputBar, TimeToAccuracy,
};

/// Every strategy kind, each with a label as long as the run's parameters and settings make
/// them, some computing in bf16 on channels-last tensors.
fn crowded_series() -> Vec<StrategySeries> {
    StrategyKind::ALL
        .iter()
        .enumerate()
        .map(|(i, &kind)| {
            let series = StrategySeries {
                label: format!("{kind} (m8, bal [2,3,2,3], ckpt except_last) · 8 threads over 100 Mbit/s · 1 ms"),
                ..StrategySeries::of(kind)
            };
            match i % 3 {
                0 => series.computing("bf16 · channels_last · adam"),
                _ => series,
            }
        })
        .collect()
}

const NETWORKS: [&str; 4] = ["resnet152", "mobilenet_v2", "vgg16_bn", "small-cnn"];
const DATASETS: [&str; 3] = ["cifar10:synthetic", "imagenet:synthetic", "fashion-mnist"];

fn value(i: usize) -> Plotted {
    match i % 7 {
        3 => Plotted::Failed(Outcome::Oom),
        5 => Plotted::Missing("no baseline".into()),
        _ => Plotted::Measured(Stat {
            median: 1.0 + i as f64 * 0.37,
            min: 0.9 + i as f64 * 0.37,
            max: 1.2 + i as f64 * 0.4,
            n: 3,
        }),
    }
}

fn target(stem: &str) -> (tempfile::TempDir, FigureTarget) {
    let dir = tempfile::tempdir().unwrap();
    let target = FigureTarget::new(dir.path(), stem).with_formats(&[Format::Svg]);
    (dir, target)
}

/// The checks, on the panels of the figure just drawn.
fn assert_readable(figure: &str, panels: &[PanelLayout]) {
    assert!(!panels.is_empty(), "{figure}: no panel logged");
    for (i, panel) in panels.iter().enumerate() {
        let share = f64::from(panel.plot_px) / f64::from(panel.panel_px);
        assert!(
            share >= PLOT_SHARE_MIN && panel.plot_px >= PLOT_PX_MIN,
            "{figure} panel {i}: plot area {} of {} px ({:.0} %)",
            panel.plot_px,
            panel.panel_px,
            100.0 * share
        );
        for (axis, ticks) in [("y", &panel.y_ticks), ("x", &panel.x_ticks)] {
            for pair in ticks.windows(2) {
                assert_ne!(pair[0].1, pair[1].1, "{figure} panel {i}: {axis} ticks {pair:?} read alike");
            }
        }
        for (j, a) in panel.notes.iter().enumerate() {
            for b in &panel.notes[j + 1..] {
                let apart = a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0 || a.1 + a.3 <= b.1 || b.1 + b.3 <= a.1;
                assert!(apart, "{figure} panel {i}: notes {a:?} and {b:?} cover each other");
            }
        }
    }
}

#[test]
fn speedup_bars_with_a_panel_per_strategy_and_long_labels_keep_their_plots() {
    let mut bars = Vec::new();
    for (s, series) in crowded_series().into_iter().enumerate() {
        for (d, dataset) in DATASETS.iter().enumerate() {
            for (n, network) in NETWORKS.iter().enumerate() {
                let speedup = value(s + d + n);
                bars.push(SpeedupBar {
                    series: series.clone(),
                    network: (*network).into(),
                    dataset: (*dataset).into(),
                    workers: 2,
                    speedup,
                });
            }
        }
    }
    let (_dir, target) = target("speedup");
    crate::speedup_bars(&bars, &target).unwrap();
    assert_readable("speedup_bars", &last_rendered());
}

#[test]
fn strategy_bar_figures_with_many_cases_keep_their_plots() {
    let mut throughput = Vec::new();
    let mut usage = Vec::new();
    for (s, series) in crowded_series().into_iter().enumerate() {
        for (c, (network, dataset)) in NETWORKS.iter().flat_map(|n| DATASETS.iter().map(move |d| (n, d))).enumerate() {
            let (network, dataset) = ((*network).to_owned(), (*dataset).to_owned());
            throughput.push(ThroughputBar {
                series: series.clone(),
                network: network.clone(),
                dataset: dataset.clone(),
                workers: 4,
                samples_per_s: value(s * 3 + c).scaled(300.0),
                epoch_time_s: value(s + c).scaled(20.0),
            });
            usage.push(DeviceUsageBar {
                series: series.clone(),
                network,
                dataset,
                workers: 4,
                utilisation_mean_pct: value(s + c).scaled(10.0),
                utilisation_max_pct: value(s + c + 1).scaled(12.0),
                memory_mean_bytes: value(s + 2 * c).scaled(1e9),
                memory_max_bytes: value(s + 2 * c + 1).scaled(1e9),
            });
        }
    }
    let (_dir, target) = target("throughput");
    crate::throughput(&throughput, &target).unwrap();
    assert_readable("throughput", &last_rendered());
    crate::device_usage(&usage, &target).unwrap();
    assert_readable("device_usage", &last_rendered());
}

#[test]
fn scaling_and_prediction_errors_with_many_panels_keep_their_plots() {
    let mut points = Vec::new();
    let mut errors = Vec::new();
    for (n, network) in NETWORKS.iter().enumerate() {
        for dataset in DATASETS {
            for (s, series) in crowded_series().into_iter().enumerate() {
                for workers in [2u32, 4, 8] {
                    points.push(ScalingPoint {
                        line: ScalingLine::Strategy(series.clone()),
                        network: (*network).into(),
                        dataset: dataset.into(),
                        workers,
                        speedup: value(n + s + workers as usize),
                    });
                }
                errors.push(PredictionError {
                    series: series.strategy(),
                    network: (*network).into(),
                    predictor: "stratlab model".into(),
                    abs_error_percent: 3.0 + (n * s) as f64,
                });
            }
        }
    }
    let (_dir, target) = target("scaling");
    crate::speedup_scaling(&points, &target).unwrap();
    assert_readable("speedup_scaling", &last_rendered());
    crate::prediction_errors(&errors, &target).unwrap();
    assert_readable("prediction_errors", &last_rendered());
}

#[test]
fn curves_over_a_small_share_of_an_epoch_label_their_ticks_apart() {
    let series = crowded_series();
    let curves: Vec<LossCurve> = series
        .iter()
        .map(|series| LossCurve {
            series: series.clone(),
            workers: 2,
            // A ResNet-18 on CIFAR-10 timing a sixtieth of an epoch.
            points: (0..10)
                .map(|step| LossPoint { epoch: f64::from(step) * 0.0018, loss: 2.6 - 0.03 * f64::from(step) })
                .collect(),
            failure: None,
        })
        .collect();
    let figure = LossCurves { network: "resnet18".into(), dataset: "cifar10:synthetic".into(), curves };
    let (_dir, target) = target("loss");
    crate::loss_curves(&figure, &target).unwrap();
    assert_readable("loss_curves", &last_rendered());
    // Every run reaching the target within a second of the others, each with a long label.
    let curves: Vec<AccuracyCurve> = series
        .iter()
        .enumerate()
        .map(|(i, series)| AccuracyCurve {
            series: series.clone(),
            workers: 2,
            points: vec![AccuracyPoint { wall_s: 25.5 + 0.05 * i as f64, test_accuracy: 0.95 }],
            failure: None,
        })
        .collect();
    let figure = TimeToAccuracy { network: "small-cnn".into(), dataset: "mnist".into(), target_accuracy: 0.93, curves };
    crate::time_to_accuracy(&figure, &target).unwrap();
    let panels = last_rendered();
    assert_readable("time_to_accuracy", &panels);
    assert!(!panels[0].notes.is_empty(), "the first time to target is written beside its point");
}

#[test]
fn a_strategy_computing_two_ways_is_one_panel_of_speedup_bars() {
    let plain = StrategySeries::of(StrategyKind::DataParallel);
    let bars: Vec<SpeedupBar> = [plain.clone(), plain.computing("fp32 · channels_last")]
        .into_iter()
        .enumerate()
        .map(|(i, series)| SpeedupBar {
            series,
            network: "small-cnn".into(),
            dataset: "mnist".into(),
            workers: 2,
            speedup: Plotted::single(1.0 + 0.1 * i as f64),
        })
        .collect();
    let (_dir, target) = target("speedup");
    crate::speedup_bars(&bars, &target).unwrap();
    let panels = last_rendered();
    assert_eq!(panels.len(), 1, "one panel for data-parallel, its channels-last bars a mark within it");
    assert_eq!(panels[0].x_ticks.len(), 1, "one data set");
}

#[test]
fn the_asynchrony_figure_with_many_modes_and_stragglers_keeps_its_plots() {
    use crate::{AsynchronyFigure, ModeCurve, StragglerRow, UpdatePoint};
    let modes: Vec<String> = ["sync", "async", "bounded k=2", "bounded k=8", "sync, 1 backup"]
        .iter()
        .map(|mode| format!("parameter-server (dedicated server, {mode}) · bf16 · channels_last · adam"))
        .collect();
    let rows = ["no straggler", "straggler rank 1 ×2", "straggler rank 1 ×1.5 ±0.2", "straggler ranks [1, 2] ×4"]
        .iter()
        .map(|caption| StragglerRow {
            caption: (*caption).into(),
            curves: (0..modes.len() * 3)
                .map(|i| ModeCurve {
                    mode: i % modes.len(),
                    // Every repeat reaching the target within a few updates of the others.
                    points: (0..12)
                        .map(|e| UpdatePoint {
                            wall_s: 2.0 * f64::from(e) + 0.01 * i as f64,
                            updates: 25.0 * f64::from(e) + i as f64,
                            test_accuracy: (0.3 + 0.06 * f64::from(e)).min(0.97),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    let figure = AsynchronyFigure {
        network: "small-cnn".into(),
        dataset: "fashion-mnist".into(),
        target_accuracy: 0.9,
        modes,
        rows,
    };
    let (_dir, target) = target("asynchrony");
    crate::asynchrony(&figure, &target).unwrap();
    let panels = last_rendered();
    assert_eq!(panels.len(), 8, "two panels per straggler setting");
    assert_readable("asynchrony", &panels);
}
