//! The parameter-server modes section of a run's report, on a hand-made run with known
//! numbers: a synchronous dedicated-server trial (two workers, rounds of both gradients)
//! and an asynchronous one whose server recorded six gradients and evaluated its weights
//! every two updates. Staleness, updates and gradients to target, and the time per update
//! are exact.

use crate::store_fixtures;

use polars::prelude::{CsvReadOptions, DataFrame, SerReader};
use stratlab_reports::{write_run_report, Format};
use stratlab_results::{
    EvalRecord, EvaluationRow, GradientRecord, GradientUpdateRow, RunStore, TrainingSummary, TrialRow, TrialTables,
};
use stratlab_strategy_spec::{ParameterColumns, ServerMode, ServerPlacement, Strategy, StrategyKind};

fn server_trial(store: &RunStore, index: i64, mode: Option<ServerMode>, step_s: f64, tta_s: f64) -> TrialRow {
    let strategy = Strategy::ParameterServer {
        server: Some(ServerPlacement::Dedicated),
        mode,
        staleness: None,
        backup_workers: None,
        lr_per_update: None,
    };
    let trial_id = format!("small-cnn__mnist__parameter-server__w3__b32{}__r0", strategy.id_parameters());
    let fixture = store_fixtures::trial(store.run_id(), &trial_id, index);
    TrialRow {
        network: "small-cnn".into(),
        dataset: "mnist".into(),
        strategy: StrategyKind::ParameterServer,
        parameters: ParameterColumns::from(&strategy),
        workers: 3,
        batch_size: 32,
        global_batch: 64,
        steps_completed: 6,
        target_accuracy: 0.9,
        training: TrainingSummary {
            step_time_median_s: Some(step_s),
            time_to_accuracy_s: Some(tta_s),
            ..fixture.training.clone()
        },
        ..fixture
    }
}

fn evaluation(trial: &TrialRow, worker: i64, by_server: bool, after_step: usize, accuracy: f64) -> EvaluationRow {
    EvaluationRow {
        run_id: trial.run_id.clone(),
        trial_id: trial.trial_id.clone(),
        worker,
        by_server,
        record: EvalRecord {
            after_step,
            loss: 1.0 - accuracy,
            accuracy,
            samples: 100,
            time_s: 0.1,
            elapsed_s: after_step as f64 * 0.5,
        },
    }
}

fn read_csv(path: &std::path::Path) -> DataFrame {
    CsvReadOptions::default().try_into_reader_with_file_path(Some(path.into())).unwrap().finish().unwrap()
}

#[test]
fn the_section_sets_each_mode_s_staleness_and_updates_to_target_beside_sync() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_fixtures::new_store(dir.path());
    // Sync: rank 0 evaluates after its steps 3 and 6 (a round each), reaching 90 % at 6.
    let sync = server_trial(&store, 0, None, 0.2, 3.0);
    let evaluations = [evaluation(&sync, 0, false, 3, 0.7), evaluation(&sync, 0, false, 6, 0.92)];
    store.write_trial(TrialTables { evaluations: &evaluations, ..TrialTables::new(&sync) }).unwrap();
    // Async: six gradients, arriving at versions 0..5, pulled as the staleness says.
    let asynchronous = server_trial(&store, 1, Some(ServerMode::Async), 0.1, 2.0);
    let pulled = [(0, 0), (1, 0), (0, 1), (1, 2), (0, 3), (1, 3)];
    let gradients: Vec<GradientUpdateRow> = pulled
        .iter()
        .enumerate()
        .map(|(arrived, &(worker, pulled))| {
            let record = GradientRecord {
                worker,
                pulled_version: pulled,
                arrived_version: arrived as u64,
                applied: true,
                time_s: arrived as f64 * 0.1,
            };
            GradientUpdateRow::new(store.run_id(), &asynchronous.trial_id, record)
        })
        .collect();
    // The server evaluates every two updates and reaches 90 % at the fourth; its workers
    // evaluated too, which the section leaves to the server.
    let evaluations = [
        evaluation(&asynchronous, 2, true, 2, 0.6),
        evaluation(&asynchronous, 2, true, 4, 0.91),
        evaluation(&asynchronous, 2, true, 6, 0.95),
        evaluation(&asynchronous, 0, false, 3, 0.99),
    ];
    store
        .write_trial(TrialTables {
            evaluations: &evaluations,
            gradient_updates: &gradients,
            ..TrialTables::new(&asynchronous)
        })
        .unwrap();

    // The accuracy curves take every evaluation of the table, the server's where it made
    // them: the epochs table, which this run has none of, holds only end-of-epoch ones.
    let aggregates = stratlab_reports::aggregate_run(&store).unwrap();
    let curve = |trial: &TrialRow| -> Vec<(f64, f64)> {
        let accuracy = aggregates.accuracy.iter().find(|a| a.trial.trial_id == trial.trial_id).unwrap();
        accuracy.points.iter().map(|p| (p.wall_s, p.test_accuracy)).collect()
    };
    assert_eq!(curve(&sync), [(1.5, 0.7), (3.0, 0.92)]);
    assert_eq!(curve(&asynchronous), [(1.0, 0.6), (2.0, 0.91), (3.0, 0.95)]);
    let out = dir.path().join("report");
    let report = write_run_report(store.run_dir(), &out, Format::Svg, None).unwrap();
    let table = read_csv(&out.join("tables/asynchrony.csv"));
    let column = |name: &str| -> Vec<Option<f64>> {
        table.column(name).unwrap().cast(&polars::prelude::DataType::Float64).unwrap().f64().unwrap().to_vec()
    };
    assert_eq!(column("time per update (ms, median)"), [Some(200.0), Some(100.0)]);
    assert_eq!(column("updates to target (median)"), [Some(6.0), Some(4.0)]);
    // A round applies both workers' gradients; an asynchronous update one.
    assert_eq!(column("gradients to target (median)"), [Some(12.0), Some(4.0)]);
    assert_eq!(column("updates × time per update (s, median)"), [Some(6.0 * 0.2), Some(4.0 * 0.1)]);
    // Staleness arrived − pulled: 0, 1, 1, 1, 1, 2.
    assert_eq!(column("staleness (mean)"), [Some(0.0), Some(1.0)]);
    assert_eq!(column("staleness (max)"), [Some(0.0), Some(2.0)]);
    assert_eq!(column("gradients per worker (median)"), [Some(6.0), Some(3.0)]);
    assert_eq!(column("time to target (s, median)"), [Some(3.0), Some(2.0)]);
    let figure = out.join("figures/asynchrony_small-cnn_mnist-synthetic.svg");
    assert!(report.figures.contains(&figure), "{:?}", report.figures);
    let page = std::fs::read_to_string(&report.index_html).unwrap();
    assert!(page.contains("Parameter-server modes"), "the page has the section");
}

#[test]
fn a_run_without_a_per_worker_server_has_no_section() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_fixtures::new_store(dir.path());
    let sync = server_trial(&store, 0, None, 0.2, 3.0);
    store.write_trial(TrialTables::new(&sync)).unwrap();
    let out = dir.path().join("report");
    write_run_report(store.run_dir(), &out, Format::Svg, None).unwrap();
    assert!(!out.join("tables/asynchrony.csv").exists());
}
