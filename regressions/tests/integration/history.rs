//! `history` on a hand-made series of runs with one known step.

use crate::common::{fingerprint_at, run, Made};
use polars::prelude::{ParquetReader, SerReader};
use stratlab_regressions::{write_history, HeadlineMetric, History, Thresholds};

/// Twelve hourly runs; at run 7 libtorch is upgraded and data parallel slows from 0.10 s
/// to 0.15 s per step (throughput −33 %); the single-device cell stays put.
fn twelve_runs() -> History {
    let runs = (0..12)
        .map(|i| {
            let mut fingerprint = fingerprint_at(60 * i);
            if i >= 7 {
                fingerprint.libtorch_version = Some("2.14.0".into());
            }
            // Run-to-run noise of ±3 % on the level, as on a quiet machine.
            let drift = 1.0 + 0.03 * (((i * 5) % 7) as f64 / 3.0 - 1.0);
            let data_parallel = if i < 7 { 0.10 } else { 0.15 } * drift;
            run(
                &format!("20261123T{:02}0000Z-matrix", 10 + i),
                fingerprint,
                &[Made::new("single", 1, Some(0.05 * drift)), Made::new("data-parallel", 2, Some(data_parallel))],
            )
        })
        .rev() // order of discovery must not matter
        .collect();
    History::new("matrix", runs, &Thresholds::default())
}

#[test]
fn one_known_step_is_found_at_its_run_and_attributed_to_the_upgrade() {
    let history = twelve_runs();
    assert_eq!(history.runs.len(), 12);
    assert_eq!(history.rows.len(), 24);
    assert_eq!(history.runs[0].run_id, "20261123T100000Z-matrix", "oldest first");
    let throughput: Vec<_> = history.steps.iter().filter(|s| s.metric == HeadlineMetric::Throughput).collect();
    assert_eq!(throughput.len(), 1, "{:#?}", history.steps);
    let step = throughput[0];
    assert!(step.cell.contains("data-parallel ×2"), "{step:?}");
    assert_eq!((step.from_run.as_str(), step.to_run.as_str()), ("20261123T160000Z-matrix", "20261123T170000Z-matrix"));
    assert_eq!(step.to_run_index, 7);
    assert!(step.worse);
    assert!((step.after / step.before - 0.10 / 0.15).abs() < 0.03, "{step:?}");
    let suspects: Vec<(&str, &str, &str)> =
        step.environment_changes.iter().map(|c| (c.field.as_str(), c.baseline.as_str(), c.new.as_str())).collect();
    assert_eq!(suspects, [("libtorch_version", "2.13.0", "2.14.0")]);
    // The same change seen as step time, and nothing else anywhere.
    let others: Vec<_> = history.steps.iter().filter(|s| s.metric != HeadlineMetric::Throughput).collect();
    assert_eq!(others.len(), 1, "{others:#?}");
    assert_eq!((others[0].metric, others[0].to_run_index), (HeadlineMetric::StepTime, 7));
    let environments: std::collections::BTreeSet<&str> = history.runs.iter().map(|r| r.environment.as_str()).collect();
    assert_eq!(environments.len(), 2, "two environments, keyed by fingerprint");
    assert_eq!(history.environment_changes().iter().map(|(i, _)| *i).collect::<Vec<_>>(), [7]);
}

#[test]
fn the_history_table_is_written_as_parquet_with_markdown_and_json() {
    let history = twelve_runs();
    let dir = tempfile::tempdir().unwrap();
    let files = write_history(&history, dir.path()).unwrap();
    assert_eq!(files.len(), 3);
    let frame = ParquetReader::new(std::fs::File::open(&files[0]).unwrap()).finish().unwrap();
    assert_eq!(frame.height(), 24);
    for column in ["environment", "libtorch_version", "cell", "throughput", "step_time_median_s"] {
        assert!(frame.column(column).is_ok(), "{column} missing");
    }
    let markdown = std::fs::read_to_string(&files[1]).unwrap();
    assert!(markdown.contains("libtorch_version 2.13.0 → 2.14.0"), "{markdown}");
}

/// The history table's schema is derived from its row, and is the one the previous release
/// wrote by hand (`results/tests/data/previous_release_schemas.txt`, whose other tables the
/// results crate checks).
#[test]
fn the_history_table_keeps_the_schema_the_previous_release_wrote() {
    use stratlab_results::Table;
    let text = include_str!("../../../results/tests/data/previous_release_schemas.txt");
    let expected: Vec<&str> = text
        .split("[HistoryRow]")
        .nth(1)
        .expect("a [HistoryRow] section")
        .lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.is_empty())
        .collect();
    let derived: Vec<String> =
        stratlab_regressions::HistoryRow::schema().iter().map(|(name, dtype)| format!("{name}: {dtype:?}")).collect();
    assert_eq!(derived, expected);
}
