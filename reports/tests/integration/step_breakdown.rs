//! The step-time breakdown part of a run's report, on a hand-made run with known sums: a
//! `single` trial (no breakdown), a data-parallel trial on synthetic data whose two ranks
//! split their steps in known proportions, and a crashed parameter-server trial whose rank 0
//! counted no step. Per-step numbers and shares are exact because the sums are binary fractions.

use crate::store_fixtures;

use std::path::Path;

use polars::prelude::{CsvReadOptions, SerReader};
use stratlab_reports::aggregate::StepTimes;
use stratlab_reports::tables::step_breakdown_table;
use stratlab_reports::{aggregate_run, step_breakdown, summary_tables, write_run_report, FigureTarget, Format};
use stratlab_results::{RankBreakdownRow, RunStore, TrialRow, TrialTables};

/// A trial of resnet18 on synthetic CIFAR-10 with 32 samples per worker.
fn trial(store: &RunStore, index: i64, strategy: &str, workers: i64, outcome: &str) -> TrialRow {
    let trial_id = format!("resnet18__cifar10-synthetic__{strategy}__w{workers}__b32__r0");
    TrialRow {
        strategy: strategy.parse().unwrap(),
        parameters: (&crate::common::strategy_of(strategy, None)).into(),
        workers,
        global_batch: 32 * workers,
        outcome: outcome.parse().unwrap(),
        reason: (outcome != "ok").then(|| "rank 1 lost its peer".into()),
        reason_detail: None,
        ..store_fixtures::trial(store.run_id(), &trial_id, index)
    }
}

/// Sums over `steps` counted steps: wall = compute + exposed + idle, comm = exposed + overlapped.
fn breakdown(
    trial: &TrialRow,
    rank: u32,
    steps: u64,
    [compute_s, exposed_s, overlapped_s, idle_s]: [f64; 4],
) -> RankBreakdownRow {
    let communication_s = exposed_s + overlapped_s;
    RankBreakdownRow {
        run_id: trial.run_id.clone(),
        trial_id: trial.trial_id.clone(),
        rank,
        steps,
        wall_s: compute_s + exposed_s + idle_s,
        compute_s,
        communication_s,
        exposed_communication_s: exposed_s,
        overlapped_communication_s: overlapped_s,
        idle_s,
        overlap_share: (communication_s > 0.0).then(|| overlapped_s / communication_s),
    }
}

/// The run described at the top of the file.
fn hand_made_run(root: &Path) -> RunStore {
    let store = store_fixtures::new_store(root);
    let single = trial(&store, 0, "single", 1, "ok");
    store.write_trial(TrialTables::new(&single)).expect("write single");
    let data_parallel = trial(&store, 1, "data-parallel", 2, "ok");
    // Rank 1 first: the aggregate orders ranks itself.
    let ranks = [
        breakdown(&data_parallel, 1, 4, [1.0, 1.0, 0.0, 0.5]),
        breakdown(&data_parallel, 0, 4, [1.5, 0.25, 0.75, 0.25]),
    ];
    store.write_trial(TrialTables { rank_breakdown: &ranks, ..TrialTables::new(&data_parallel) }).expect("write dp");
    let crashed = trial(&store, 2, "parameter-server", 2, "crashed");
    let ranks = [breakdown(&crashed, 0, 0, [0.0; 4]), breakdown(&crashed, 1, 2, [0.5, 0.5, 0.0, 0.0])];
    store.write_trial(TrialTables { rank_breakdown: &ranks, ..TrialTables::new(&crashed) }).expect("write ps");
    store
}

#[test]
fn per_step_times_and_shares_divide_the_stored_sums_by_the_counted_steps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aggregates = aggregate_run(&hand_made_run(dir.path())).expect("aggregate");
    let ranks = &aggregates.step_breakdown;
    let identity: Vec<(String, &str, u32, u32, u32, u64)> = ranks
        .iter()
        .map(|r| {
            let key = &r.trial.key;
            (key.dataset_label(), key.strategy.name(), key.workers, key.batch_size, r.rank, r.steps)
        })
        .collect();
    let identity: Vec<(&str, &str, u32, u32, u32, u64)> = identity
        .iter()
        .map(|(dataset, strategy, w, b, rank, steps)| (dataset.as_str(), *strategy, *w, *b, *rank, *steps))
        .collect();
    assert_eq!(
        identity,
        [
            ("cifar10:synthetic", "data-parallel", 2, 32, 0, 4),
            ("cifar10:synthetic", "data-parallel", 2, 32, 1, 4),
            ("cifar10:synthetic", "parameter-server", 2, 32, 0, 0),
            ("cifar10:synthetic", "parameter-server", 2, 32, 1, 2),
        ]
    );
    assert!(ranks.iter().all(|r| r.trial.key.network == "resnet18"));
    assert_eq!(
        ranks[0].per_step,
        Some(StepTimes {
            wall_s: 0.5,
            compute_s: 0.375,
            exposed_communication_s: 0.0625,
            overlapped_communication_s: 0.1875,
            communication_s: 0.25,
            idle_s: 0.0625,
            overlap_share: Some(0.75),
            exposed_communication_share: Some(0.125),
            communication_share: Some(0.5),
        })
    );
    assert_eq!(
        ranks[1].per_step,
        Some(StepTimes {
            wall_s: 0.625,
            compute_s: 0.25,
            exposed_communication_s: 0.25,
            overlapped_communication_s: 0.0,
            communication_s: 0.25,
            idle_s: 0.125,
            overlap_share: Some(0.0),
            exposed_communication_share: Some(0.4),
            communication_share: Some(0.4),
        })
    );
    // The crashed trial keeps its failure; its rank without a counted step has no mean step.
    let crashed = ranks[2].trial.failure.as_ref().expect("crashed");
    assert_eq!((crashed.outcome, ranks[2].per_step), (stratlab_results::Outcome::Crashed, None));
    let rank_1 = ranks[3].per_step.expect("two counted steps");
    assert_eq!((rank_1.wall_s, rank_1.exposed_communication_share, rank_1.overlap_share), (0.5, Some(0.5), Some(0.0)));
}

#[test]
fn the_step_breakdown_table_holds_milliseconds_and_percentages() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aggregates = aggregate_run(&hand_made_run(dir.path())).expect("aggregate");
    let tables = summary_tables(&aggregates).expect("tables");
    assert_eq!(tables.len(), 7);
    assert_eq!(tables[6].name, "step_breakdown");

    let table = step_breakdown_table(&aggregates).expect("table");
    let (header, rows, numeric) = table.cells();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}: {header:?}"));
    let numbers = [
        "step (ms/step)",
        "compute (ms/step)",
        "exposed comm (ms/step)",
        "overlapped comm (ms/step)",
        "comm (ms/step)",
        "idle (ms/step)",
        "exposed comm (% of step)",
        "comm (% of step)",
        "overlapped (% of comm)",
    ];
    let row_of = |i: usize| numbers.iter().map(|name| rows[i][column(name)].as_str()).collect::<Vec<_>>();
    assert_eq!(row_of(0), ["500", "375", "62.5", "188", "250", "62.5", "12.5", "50.0", "75.0"]);
    assert_eq!(row_of(1), ["625", "250", "250", "0", "250", "125", "40.0", "40.0", "0"]);
    assert_eq!(row_of(2), ["CRASHED"; 9], "a crashed rank without counted steps shows its outcome");
    assert_eq!(rows[2][column("reason")], "rank 1 lost its peer");
    assert_eq!((rows[0][column("dataset")].as_str(), rows[0][column("rank")].as_str()), ("cifar10:synthetic", "0"));
    assert!(numbers.iter().all(|name| numeric[column(name)]));

    // The CSV keeps full precision: 0.1875 s is 187.5 ms, not the 188 on display.
    let path = table.write_csv(&dir.path().join("tables")).expect("CSV");
    let frame = CsvReadOptions::default()
        .with_has_header(true)
        .try_into_reader_with_file_path(Some(path))
        .expect("reader")
        .finish()
        .expect("CSV parses");
    let overlapped = frame.column("overlapped comm (ms/step)").expect("column").f64().expect("float");
    assert_eq!((overlapped.get(0), overlapped.get(2)), (Some(187.5), None));
    let markdown = table.to_markdown();
    assert_eq!(markdown.lines().count(), 2 + 4, "{markdown}");
}

#[test]
fn the_figure_draws_a_bar_per_rank_with_the_shares_beside_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bars = aggregate_run(&hand_made_run(dir.path())).expect("aggregate").step_breakdown_bars();
    assert_eq!(bars.len(), 4);
    let target = FigureTarget::new(dir.path(), "step_breakdown").with_formats(&[Format::Svg]);
    let written = step_breakdown(&bars, &target).expect("figure");
    assert_eq!(written, [dir.path().join("step_breakdown.svg")]);
    let svg = std::fs::read_to_string(&written[0]).expect("SVG");
    for text in [
        "resnet18 / cifar10:synthetic",
        "data-parallel W=2 · rank 0",
        "parameter-server W=2 · rank 0 (CRASHED)",
        "no step after warm-up",
        "exposed 12.5 % · overlap 75.0 %",
        "exposed 40.0 % · overlap 0 %",
        "ms per step",
        "communication overlapped with compute",
        "exposed communication",
    ] {
        assert!(svg.contains(text), "the figure lacks {text:?}");
    }
}

#[test]
fn the_run_report_gets_a_step_breakdown_section_with_figure_and_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = hand_made_run(dir.path());
    let out = dir.path().join("report");
    let report = write_run_report(store.run_dir(), &out, Format::Svg, None).expect("report");
    assert!(report.figures.contains(&out.join("figures/step_breakdown.svg")), "{:?}", report.figures);
    assert!(report.tables.contains(&out.join("tables/step_breakdown.csv")));
    assert!(report.tables.contains(&out.join("tables/step_breakdown.md")));
    let html = std::fs::read_to_string(&report.index_html).expect("page");
    assert!(html.contains("id=\"step-breakdown\"") && html.contains("Step-time breakdown"));
    let markdown = std::fs::read_to_string(out.join("tables/step_breakdown.md")).expect("Markdown");
    assert!(markdown.starts_with("# Step-time breakdown per rank") && markdown.contains(" 12.5 |"), "{markdown}");
}

#[test]
fn a_run_without_breakdown_rows_reports_without_the_section() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store_fixtures::new_store(dir.path());
    for (index, (strategy, workers)) in [("single", 1), ("data-parallel", 2)].into_iter().enumerate() {
        let row = trial(&store, index as i64, strategy, workers, "ok");
        store.write_trial(TrialTables::new(&row)).expect("write");
    }
    // A run folder from before the table existed has no `rank_breakdown/` folder at all.
    std::fs::remove_dir_all(store.run_dir().join("rank_breakdown")).expect("remove the table");
    let aggregates = aggregate_run(&store).expect("no breakdown is no error");
    assert!(aggregates.step_breakdown.is_empty() && aggregates.step_breakdown_bars().is_empty());
    let tables = summary_tables(&aggregates).expect("tables");
    assert_eq!(tables.len(), 6);
    assert!(tables.iter().all(|t| t.name != "step_breakdown"));
    assert_eq!(step_breakdown_table(&aggregates).expect("an empty table").frame.height(), 0);

    let out = dir.path().join("report");
    let report = write_run_report(store.run_dir(), &out, Format::Svg, None).expect("report");
    assert!(!out.join("figures/step_breakdown.svg").exists() && !out.join("tables/step_breakdown.csv").exists());
    assert!(report.tables.iter().all(|t| !t.ends_with("step_breakdown.csv")));
    let html = std::fs::read_to_string(&report.index_html).expect("page");
    assert!(!html.contains("step-breakdown"));
}
