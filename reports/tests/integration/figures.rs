//! Every figure kind, rendered from hand-made inputs with failed trials and single runs,
//! checked from the outside: the SVG's elements and labels, the PNG's size and content.

use std::path::{Path, PathBuf};

use crate::common::*;
use stratlab_reports::*;

/// The SVG and PNG written for `stem`, after checking both exist.
fn outputs(written: &[PathBuf], dir: &Path, stem: &str) -> (String, image::RgbImage) {
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    assert_eq!(written, [svg_path.clone(), png_path.clone()], "files written, SVG first");
    let svg = std::fs::read_to_string(&svg_path).expect("SVG is UTF-8 text");
    let png = image::open(&png_path).expect("PNG decodes").to_rgb8();
    (svg, png)
}

fn count(svg: &str, element: &str) -> usize {
    svg.matches(&format!("<{element}")).count()
}

/// The text of every `<text>` element, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

fn assert_labels(svg: &str, labels: &[&str]) {
    let all = texts(svg);
    for label in labels {
        assert!(all.iter().any(|t| t.contains(label)), "no text contains {label:?}; texts: {all:?}");
    }
}

/// 1200×800 and more than a blank canvas: many distinct colours, mostly white background.
fn assert_png_is_a_figure(png: &image::RgbImage) {
    assert_eq!(png.dimensions(), (1200, 800));
    let first = *png.get_pixel(0, 0);
    assert_eq!(first, image::Rgb([255, 255, 255]), "white background");
    let mut colours: Vec<[u8; 3]> = png.pixels().map(|p| p.0).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() > 20, "only {} colours: not a figure", colours.len());
    let white = png.pixels().filter(|p| p.0 == [255, 255, 255]).count() as f64 / f64::from(1200 * 800);
    assert!((0.3..0.98).contains(&white), "white share {white}");
}

/// Every text in the SVG is at least 14 px to the em.
fn assert_fonts_readable(svg: &str) {
    for size in svg.split("font-size=\"").skip(1).map(|s| s.split('"').next().unwrap().parse::<f64>().unwrap()) {
        assert!(size >= 13.99, "font-size {size} below 14 px");
    }
}

#[test]
fn speedup_bars_draw_a_panel_per_strategy_with_failures_and_single_runs_marked() {
    let dir = tempfile::tempdir().unwrap();
    let bars = speedup_bars_input();
    let written = speedup_bars(&bars, &FigureTarget::new(dir.path(), "speedup")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "speedup");
    assert!(svg.starts_with("<svg"));
    // 46 measured bars, fill and outline each, plus 2 failure stubs (fill, outline) and the
    // legend's swatches.
    assert!(count(&svg, "rect") >= 46 * 2 + 2 * 2, "{} rects", count(&svg, "rect"));
    assert_labels(
        &svg,
        &["data-parallel", "model-parallel", "gpipe", "1f1b", "resnet50", "imagenet", "OOM", "crashed"],
    );
    assert_labels(&svg, &["ideal 4×", "speedup over single (×)", "n=1"]);
    assert_eq!(texts(&svg).iter().filter(|t| *t == "n=1").count(), 4, "the four 1f1b ImageNet bars are single runs");
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn speedup_bars_say_once_when_every_value_is_a_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let bars: Vec<SpeedupBar> = speedup_bars_input()
        .into_iter()
        .map(|b| SpeedupBar { speedup: b.speedup.stat().map_or(b.speedup.clone(), |s| Plotted::single(s.median)), ..b })
        .collect();
    let written = speedup_bars(&bars, &FigureTarget::new(dir.path(), "single_runs")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "single_runs");
    assert_labels(&svg, &["every bar is a single run (n = 1)"]);
    assert!(!texts(&svg).iter().any(|t| t == "n=1"), "no per-bar marks when the subtitle says it");
    assert_png_is_a_figure(&png);
}

#[test]
fn speedup_bars_refuse_mixed_worker_counts() {
    let mut bars = speedup_bars_input();
    bars[3].workers = 8;
    let err = speedup_bars(&bars, &FigureTarget::new(std::env::temp_dir(), "never")).unwrap_err();
    assert!(matches!(&err, ReportError::InvalidInput { field, .. } if field == "bars[3].workers"), "{err}");
}

#[test]
fn speedup_scaling_draws_a_line_per_strategy_and_the_ideal() {
    let dir = tempfile::tempdir().unwrap();
    let written = speedup_scaling(&scaling_input(), &FigureTarget::new(dir.path(), "scaling")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "scaling");
    // 3 strategies × 2 panels of lines, the ideal dashes, whiskers, legend lines.
    assert!(count(&svg, "polyline") >= 6, "{} polylines", count(&svg, "polyline"));
    // 21 measured points (resnet50: 4 + 3 + 4, vgg16: 4 + 3 + 3), each a white backing disc
    // and a coloured dot, plus 4 dots in the legend; the 3 failures are crosses, not dots.
    assert_eq!(count(&svg, "circle"), 21 * 2 + 4);
    assert_labels(
        &svg,
        &["resnet50", "vgg16", "data-parallel", "gpipe", "ideal (speedup = W)", "OOM", "timeout", "16"],
    );
    assert_labels(&svg, &["workers W", "single run (n=1)"]);
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn throughput_shows_samples_per_second_and_epoch_time_with_the_oom() {
    let dir = tempfile::tempdir().unwrap();
    let written = throughput(&throughput_input(), &FigureTarget::new(dir.path(), "throughput")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "throughput");
    // 2 panels × 11 measured bars (fill + outline) and 2 stubs.
    assert!(count(&svg, "rect") >= 2 * 11 * 2 + 2 * 2, "{} rects", count(&svg, "rect"));
    assert_labels(
        &svg,
        &["throughput (samples/s)", "time per epoch (s)", "single", "gpipe (W=4)", "vgg16", "OOM", "cifar10"],
    );
    assert_eq!(texts(&svg).iter().filter(|t| *t == "OOM").count(), 2, "the failure shows in both panels");
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn device_usage_shows_four_panels_in_percent_and_gib() {
    let dir = tempfile::tempdir().unwrap();
    let written = device_usage(&device_usage_input(), &FigureTarget::new(dir.path(), "usage")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "usage");
    assert!(count(&svg, "rect") >= 4 * 11 * 2 + 4 * 2, "{} rects", count(&svg, "rect"));
    assert_labels(&svg, &["Mean device utilisation", "Max device memory", "utilisation (%)", "memory (GiB)", "OOM"]);
    assert_labels(&svg, &["every bar is a single run (n = 1)", "model-parallel (W=4)"]);
    assert_eq!(texts(&svg).iter().filter(|t| *t == "OOM").count(), 4);
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn time_to_accuracy_marks_the_target_and_each_runs_time_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = time_to_accuracy_input();
    assert_eq!(input.curves[1].first_reaching(0.9).map(|p| p.wall_s), Some(11.0 * 6.2));
    let written = time_to_accuracy(&input, &FigureTarget::new(dir.path(), "tta")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "tta");
    assert!(count(&svg, "polyline") >= 4, "{} polylines", count(&svg, "polyline"));
    assert_labels(
        &svg,
        &["target 90.0 %", "data-parallel (W=4): 68.2 s to target", "model-parallel (W=4): target not reached"],
    );
    assert_labels(
        &svg,
        &["gpipe (W=4): crashed at 54.6 s", "1f1b (W=4): OOM before first evaluation", "test accuracy (%)"],
    );
    assert_labels(&svg, &["wall-clock time (s)"]);
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn time_to_accuracy_refuses_percentages_given_as_accuracy() {
    let mut input = time_to_accuracy_input();
    input.target_accuracy = 90.0;
    let err = time_to_accuracy(&input, &FigureTarget::new(std::env::temp_dir(), "never")).unwrap_err();
    assert!(matches!(&err, ReportError::InvalidInput { field, .. } if field == "target_accuracy"), "{err}");
}

#[test]
fn loss_curves_stop_at_divergence_and_list_the_oom() {
    let dir = tempfile::tempdir().unwrap();
    let written = loss_curves(&loss_curves_input(), &FigureTarget::new(dir.path(), "loss")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "loss");
    assert!(count(&svg, "polyline") >= 3, "{} polylines", count(&svg, "polyline"));
    assert_labels(
        &svg,
        &["gpipe (W=4) (diverged)", "1f1b (W=4) (OOM)", "diverged", "epoch", "training loss (cross-entropy)"],
    );
    assert!(!svg.contains("NaN"), "non-finite losses are cut, not drawn");
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn gpipe_timeline_shows_every_pass_and_the_bubble() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = gpipe_timeline();
    // Each worker computes 4 × 10 ms + 4 × 20 ms + 5 ms of the 155 ms span.
    for worker in 0..2 {
        assert!((timeline.idle_share(worker) - 30.0 / 155.0).abs() < 1e-9, "worker {worker}");
    }
    let written = pipeline_timeline(&timeline, &FigureTarget::new(dir.path(), "gpipe")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "gpipe");
    // 18 events, fill and outline each.
    assert!(count(&svg, "rect") >= 18 * 2, "{} rects", count(&svg, "rect"));
    let all = texts(&svg);
    for pass in ["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"] {
        assert_eq!(all.iter().filter(|t| *t == pass).count(), 2, "{pass} on both workers");
    }
    assert_labels(&svg, &["worker 0", "worker 1", "idle 19 %", "time (ms)", "micro-batch 3", "backward (B)", "idle"]);
    // Backward blocks are hatched: many short diagonal lines.
    assert!(count(&svg, "polyline") + count(&svg, "line") > 100);
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn predicted_and_measured_timelines_share_one_time_scale_one_panel_each() {
    let dir = tempfile::tempdir().unwrap();
    let mut measured = gpipe_timeline();
    measured.title = "measured · bubble 19 %".into();
    // The prediction: the same passes, half as long and from 0 s (the measured step's
    // clock starts elsewhere).
    let mut predicted = gpipe_timeline();
    predicted.title = "predicted before training · bubble 12 %".into();
    for event in &mut predicted.events {
        event.start_s /= 2.0;
        event.end_s /= 2.0;
    }
    for event in &mut measured.events {
        event.start_s += 3.0;
        event.end_s += 3.0;
    }
    let target = FigureTarget::new(dir.path(), "beside");
    let written = pipeline_timelines("gpipe W=2, m = 4 · step 1", &[&predicted, &measured], &target).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "beside");
    let all = texts(&svg);
    for pass in ["F0", "B3"] {
        assert_eq!(all.iter().filter(|t| *t == pass).count(), 4, "{pass} on both workers of both panels");
    }
    assert_labels(
        &svg,
        &["gpipe W=2, m = 4 · step 1", "predicted before training · bubble 12 %", "measured · bubble 19 %"],
    );
    // Both panels in ms from their own first event: the measured one's 3 s offset is gone,
    // and the predicted one ends at half the measured span.
    assert_eq!(all.iter().filter(|t| *t == "time (ms)").count(), 2);
    assert!(!all.iter().any(|t| t == "time (s)"));
    assert_eq!(all.iter().filter(|t| *t == "idle 19 %").count(), 2 * 2, "idle shares do not change with the scale");
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);

    let mut broken = measured.clone();
    broken.events[2].worker = 7;
    let err = pipeline_timelines("t", &[&predicted, &broken], &target).unwrap_err();
    assert!(matches!(&err, ReportError::InvalidInput { field, .. } if field == "panels[1].events[2].worker"), "{err}");
    assert!(matches!(pipeline_timelines("t", &[], &target), Err(ReportError::Empty { .. })));
}

#[test]
fn recomputed_passes_are_labelled_and_cross_hatched_on_named_rows() {
    let dir = tempfile::tempdir().unwrap();
    let written = pipeline_timeline(&recompute_timeline(), &FigureTarget::new(dir.path(), "recompute")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "recompute");
    let all = texts(&svg);
    for pass in ["R0", "R1", "F0", "B1"] {
        assert!(all.iter().any(|t| t == pass), "no {pass}: {all:?}");
    }
    assert_labels(&svg, &["stage 0", "stage 1", "recompute (R)", "pale cross-hatched: recompute", "send/receive"]);
    assert!(!all.iter().any(|t| t.starts_with("worker")), "rows carry their given names");
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);

    // Without recompute the legend and subtitle do not mention it.
    let svg = std::fs::read_to_string(
        &pipeline_timeline(&gpipe_timeline(), &FigureTarget::new(dir.path(), "plain").with_formats(&[Format::Svg]))
            .unwrap()[0],
    )
    .unwrap();
    assert!(!svg.contains("recompute"));
}

#[test]
fn pipeline_bubble_draws_the_theoretical_curve_and_a_marker_per_schedule_and_m() {
    let dir = tempfile::tempdir().unwrap();
    let written = pipeline_bubble(&pipeline_bubble_input(), &FigureTarget::new(dir.path(), "bubble")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "bubble");
    assert_labels(
        &svg,
        &[
            "resnet50 / imagenet, p = 4",
            "theoretical (p − 1)/(m + p − 1), p = 4",
            "gpipe",
            "1f1b",
            "OOM",
            "micro-batches per step m",
            "bubble (% of the step)",
            "16",
        ],
    );
    // 9 measured points: a white backing and a dot each.
    assert!(count(&svg, "circle") >= 18, "{} circles", count(&svg, "circle"));
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);

    let mut input = pipeline_bubble_input();
    input.points[3].micro_batches = 0;
    let err = pipeline_bubble(&input, &FigureTarget::new(dir.path(), "never")).unwrap_err();
    assert!(err.to_string().contains("points[3].micro_batches"), "{err}");
    input.points.clear();
    assert!(matches!(
        pipeline_bubble(&input, &FigureTarget::new(dir.path(), "never")),
        Err(ReportError::Empty { figure: "pipeline_bubble" })
    ));
}

/// Interleaved trials (v = 2) join the figure with their own arithmetic line, and two v at
/// the same m are two schedules, each with its marker.
#[test]
fn pipeline_bubble_draws_interleaved_points_with_their_own_line_per_v() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = pipeline_bubble_input();
    let plain = pipeline_bubble(&input, &FigureTarget::new(dir.path(), "plain")).unwrap();
    let (plain_svg, _) = outputs(&plain, dir.path(), "plain");
    for v in [2u32, 4] {
        for m in [4u32, 8] {
            let theory = 3.0 / (f64::from(v * m) + 3.0);
            input.points.push(BubblePoint {
                schedule: "interleaved-1f1b".parse().unwrap(),
                virtual_stages: v,
                micro_batches: m,
                bubble: Plotted::single(theory + 0.03),
            });
        }
    }
    let written = pipeline_bubble(&input, &FigureTarget::new(dir.path(), "interleaved")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "interleaved");
    assert_labels(
        &svg,
        &[
            "theoretical (p − 1)/(m + p − 1), p = 4",
            "(p − 1)/(v·m + p − 1), v = 2",
            "(p − 1)/(v·m + p − 1), v = 4",
            "interleaved-1f1b v = 2",
            "interleaved-1f1b v = 4",
        ],
    );
    assert!(!plain_svg.contains("v·m"), "no interleaved line without interleaved trials");
    // Four more measured points, a white backing and a dot each.
    assert!(count(&svg, "circle") >= count(&plain_svg, "circle") + 8, "{} circles", count(&svg, "circle"));
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn step_breakdown_stacks_compute_exposed_communication_and_idle_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let written = step_breakdown(&step_breakdown_input(), &FigureTarget::new(dir.path(), "breakdown")).unwrap();
    let (svg, png) = outputs(&written, dir.path(), "breakdown");
    assert_labels(
        &svg,
        &[
            "resnet50 / imagenet",
            "data-parallel W=4 · rank 3",
            "parameter-server W=2 · rank 1 (CRASHED)",
            "no step after warm-up",
            // Rank 0: 12 of 198 ms exposed; 45 of 57 ms of communication hidden.
            "exposed 6.06 % · overlap 78.9 %",
            "exposed 25.0 % · overlap 0 %",
            "ms per step",
            "communication overlapped with compute",
            "idle",
        ],
    );
    // The hidden communication is hatched: many short diagonal lines.
    assert!(count(&svg, "polyline") + count(&svg, "line") > 40);
    assert_fonts_readable(&svg);
    assert_png_is_a_figure(&png);
}

#[test]
fn step_breakdown_refuses_negative_times_with_their_field() {
    let mut bars = step_breakdown_input();
    bars[1].per_step.as_mut().unwrap().idle_s = -0.001;
    let err = step_breakdown(&bars, &FigureTarget::new(std::env::temp_dir(), "never")).unwrap_err();
    assert!(err.to_string().contains("bars[1].per_step.idle_s"), "{err}");
    assert!(matches!(
        step_breakdown(&[], &FigureTarget::new(std::env::temp_dir(), "never")),
        Err(ReportError::Empty { .. })
    ));
}

#[test]
fn timeline_refuses_events_that_end_before_they_start() {
    let mut timeline = gpipe_timeline();
    timeline.events[5].end_s = timeline.events[5].start_s - 1.0;
    let err = pipeline_timeline(&timeline, &FigureTarget::new(std::env::temp_dir(), "never")).unwrap_err();
    assert!(matches!(&err, ReportError::InvalidInput { field, .. } if field == "events[5].end_s"), "{err}");
}

#[test]
fn figures_without_data_are_an_error_not_an_empty_file() {
    let target = FigureTarget::new(std::env::temp_dir(), "never");
    assert!(matches!(speedup_bars(&[], &target), Err(ReportError::Empty { figure: "speedup_bars" })));
    assert!(matches!(throughput(&[], &target), Err(ReportError::Empty { figure: "throughput" })));
}

#[test]
fn non_finite_measurements_are_rejected_with_their_field() {
    let mut bars = throughput_input();
    bars[2].samples_per_s = Plotted::Measured(Stat { median: f64::NAN, min: 1.0, max: 2.0, n: 3 });
    let err = throughput(&bars, &FigureTarget::new(std::env::temp_dir(), "never")).unwrap_err();
    assert!(err.to_string().contains("bars[2].samples_per_s"), "{err}");
}

#[test]
fn a_target_with_one_format_writes_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = FigureTarget::new(dir.path(), "only_svg").with_formats(&[Format::Svg]);
    let written = pipeline_timeline(&gpipe_timeline(), &target).unwrap();
    assert_eq!(written, [dir.path().join("only_svg.svg")]);
    assert!(!dir.path().join("only_svg.png").exists());
}
