//! The history figure: lines per cell against run date, environment changes and steps marked.

use stratlab_reports::{history_chart, FigureTarget, Format, HistoryChart, HistoryLine, ReportError};

fn chart() -> HistoryChart {
    let hour = 3600;
    HistoryChart {
        title: "throughput (samples/s) over time — suite nightly".into(),
        y_label: "throughput (samples/s)".into(),
        run_times_s: (0..6).map(|i| 1_795_000_000 + i * 24 * hour).collect(),
        lines: vec![
            HistoryLine {
                label: "resnet18 · cifar10 · single ×1 · b128".into(),
                points: (0..6).map(|r| (r, 500.0)).collect(),
            },
            HistoryLine {
                label: "resnet18 · cifar10 · data-parallel ×2 · b128".into(),
                points: (0..6).map(|r| (r, if r < 3 { 900.0 } else { 700.0 })).collect(),
            },
        ],
        environment_changes: vec![(3, "libtorch_version 2.13.0→2.14.0".into())],
        steps: vec![(1, 3)],
    }
}

#[test]
fn a_history_chart_names_its_cells_dates_and_the_change_that_explains_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let files =
        history_chart(&chart(), &FigureTarget::new(dir.path(), "history").with_formats(&[Format::Svg])).unwrap();
    let svg = std::fs::read_to_string(&files[0]).unwrap();
    for text in ["data-parallel ×2", "libtorch_version 2.13.0→2.14.0", "environment change", "step change", "run date"]
    {
        assert!(svg.contains(text), "{text} missing from the figure");
    }
    // Dates on the x axis: the first run is 2026-11-18 (Unix 1 795 000 000 s).
    assert!(svg.contains("11-18"), "no date tick");
}

#[test]
fn a_point_past_the_last_run_is_refused_with_its_field() {
    let mut bad = chart();
    bad.lines[0].points.push((9, 1.0));
    let dir = tempfile::tempdir().unwrap();
    match history_chart(&bad, &FigureTarget::new(dir.path(), "history")) {
        Err(ReportError::InvalidInput { field, .. }) => assert_eq!(field, "lines[0].points[6].run"),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}
