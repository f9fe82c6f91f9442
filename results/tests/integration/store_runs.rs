//! The results store seen from outside: rows in, Parquet on disk, frames and exports out.

use std::fs;

use crate::common::{assert_schema_matches_serde, new_store, trial};
use polars::prelude::{CsvReadOptions, DataType, SerReader};
use stratlab_results::{
    from_frame, to_frame, EpochRecord, EpochRow, ExportFormat, RunStore, Sample, StepRecord, StepRow, StoreError,
    Table, TelemetryRow, TrialRow, TrialTables,
};

fn epochs(run_id: &str, trial_id: &str, n: i64) -> Vec<EpochRow> {
    (0..n)
        .map(|epoch| EpochRow {
            run_id: run_id.into(),
            trial_id: trial_id.into(),
            worker: 1,
            record: EpochRecord {
                epoch: epoch as usize,
                train_loss: Some(2.0 - epoch as f64 * 0.5),
                train_accuracy: Some(0.3 + epoch as f64 * 0.1),
                // Only the last epoch is evaluated: the column must stay Float64 with nulls.
                test_loss: (epoch == n - 1).then_some(1.07),
                test_accuracy: (epoch == n - 1).then_some(0.61),
                epoch_time_s: 12.5,
                eval_time_s: 1.25,
                wall_samples_per_s: Some(1500.0),
                val_samples_per_s: None,
                elapsed_s: 12.5 * (epoch + 1) as f64,
                steps: Some(10),
            },
        })
        .collect()
}

fn steps(run_id: &str, trial_id: &str, n: i64) -> Vec<StepRow> {
    (0..n)
        .map(|step| StepRow {
            run_id: run_id.into(),
            trial_id: trial_id.into(),
            worker: 0,
            record: StepRecord {
                epoch: (step / 10) as usize,
                step: step as usize,
                loss: if step % 2 == 0 { Some(2.5 - step as f64 * 0.01) } else { None },
                step_time_s: 0.04 + step as f64 * 1e-4,
                data_wait_s: 1e-4,
                h2d_s: 2e-5,
                samples: 32,
                lr: 0.01,
                warmup: step < 5,
                comm_bytes: (step % 3 == 0).then_some(4096),
                comm_s: (step % 3 == 0).then_some(0.002),
                peak_memory_bytes: (step % 2 == 1).then_some(7_340_032 + step as u64),
                loss_scale: None,
                skipped_update: None,
            },
        })
        .collect()
}

fn telemetry(run_id: &str, trial_id: &str, n: usize, with_power: bool) -> Vec<TelemetryRow> {
    (0..n)
        .map(|i| TelemetryRow {
            host_name: None,
            run_id: run_id.into(),
            trial_id: trial_id.into(),
            sample: Sample {
                t_s: i as f64 * 0.1,
                device: "gpu0".into(),
                utilization_pct: 90.0,
                memory_used_bytes: 3_000_000_000 + i as u64,
                power_w: with_power.then_some(250.5),
                sm_clock_mhz: with_power.then_some(1800),
                device_id: Some("00000000:3B:00.0".into()),
                process_memory_bytes: with_power.then_some(2_500_000_000),
                energy_counter_mj: with_power.then_some(1_000_000 + i as u64 * 25_000),
            },
        })
        .collect()
}

#[test]
fn schemas_list_every_serde_field() {
    assert_schema_matches_serde(&trial("r", "t", 0));
    assert_schema_matches_serde(&epochs("r", "t", 1)[0]);
    assert_schema_matches_serde(&steps("r", "t", 1)[0]);
    assert_schema_matches_serde(&telemetry("r", "t", 1, true)[0]);
}

#[test]
fn rows_round_trip_through_frames_with_exact_dtypes() {
    let rows = vec![trial("r", "a", 0), trial("r", "b", 1)];
    let frame = to_frame(&rows).expect("frame");
    assert_eq!(frame.schema().as_ref(), &TrialRow::schema());
    assert_eq!(frame.column("time_to_accuracy_s").expect("column").null_count(), 2);
    assert_eq!(from_frame::<TrialRow>(&frame).expect("rows"), rows);

    let empty = to_frame::<StepRow>(&[]).expect("empty frame");
    assert_eq!(empty.height(), 0);
    assert_eq!(empty.schema().as_ref(), &StepRow::schema());
}

#[test]
fn rows_round_trip_through_parquet_with_nulls_kept_and_dtypes_stable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    // Trial a has power readings; trial b has none, so its power column is all null.
    let a = (trial(&run, "a", 0), epochs(&run, "a", 3), steps(&run, "a", 20), telemetry(&run, "a", 5, true));
    let b = (trial(&run, "b", 1), epochs(&run, "b", 2), steps(&run, "b", 7), telemetry(&run, "b", 4, false));
    store
        .write_trial(TrialTables { epochs: &a.1, steps: &a.2, telemetry: &a.3, ..TrialTables::new(&a.0) })
        .expect("write a");
    store
        .write_trial(TrialTables { epochs: &b.1, steps: &b.2, telemetry: &b.3, ..TrialTables::new(&b.0) })
        .expect("write b");

    let reopened = RunStore::open(store.run_dir()).expect("open");
    assert_eq!(reopened.load_rows::<TrialRow>().expect("trials"), vec![a.0.clone(), b.0.clone()]);
    assert_eq!(reopened.load_rows::<EpochRow>().expect("epochs"), [a.1.clone(), b.1.clone()].concat());
    assert_eq!(reopened.load_rows::<StepRow>().expect("steps"), [a.2.clone(), b.2.clone()].concat());
    assert_eq!(reopened.load_rows::<TelemetryRow>().expect("telemetry"), [a.3.clone(), b.3.clone()].concat());

    let frame = reopened.load("telemetry").expect("load telemetry");
    assert_eq!(frame.height(), 9);
    let power = frame.column("power_w").expect("power column");
    assert_eq!(power.dtype(), &DataType::Float64);
    assert_eq!(power.null_count(), 4);
    assert_eq!(frame.column("sm_clock_mhz").expect("clock").dtype(), &DataType::UInt32);
    assert_eq!(frame.column("memory_used_bytes").expect("memory").dtype(), &DataType::UInt64);
    assert_eq!(reopened.load("steps").expect("steps").column("warmup").expect("warmup").dtype(), &DataType::Boolean);
}

#[test]
fn diverged_losses_are_stored_as_nan_and_infinity_not_as_missing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    let mut row = trial(&run, "d", 0);
    row.outcome = stratlab_results::Outcome::Diverged;
    row.training.final_loss = Some(f64::NAN);
    let mut step_rows = steps(&run, "d", 4);
    step_rows[1].record.loss = Some(f64::INFINITY);
    step_rows[2].record.loss = Some(f64::NAN);
    step_rows[3].record.loss = None; // not measured on this worker
    store.write_trial(TrialTables { steps: &step_rows, ..TrialTables::new(&row) }).expect("write");

    let frame = RunStore::open(store.run_dir()).expect("open").load("steps").expect("steps");
    let losses: Vec<Option<f64>> = frame.column("loss").expect("loss").f64().expect("f64").to_vec();
    assert_eq!(losses[0], Some(2.5));
    assert_eq!(losses[1], Some(f64::INFINITY));
    assert!(losses[2].is_some_and(f64::is_nan), "NaN must be stored as NaN: {losses:?}");
    assert_eq!(losses[3], None, "a missing loss stays null");
    let back: Vec<StepRow> = store.load_rows().expect("typed rows");
    assert!(back[2].record.loss.is_some_and(f64::is_nan) && back[3].record.loss.is_none());
    let trials: Vec<TrialRow> = store.load_rows().expect("trials");
    assert!(trials[0].training.final_loss.is_some_and(f64::is_nan));
}

#[test]
fn one_trial_row_per_trial_after_writing_n_trials() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    for i in 0..5 {
        let id = format!("t{i:04}");
        store
            .write_trial(TrialTables {
                epochs: &epochs(&run, &id, 3),
                steps: &steps(&run, &id, 10),
                ..TrialTables::new(&trial(&run, &id, i))
            })
            .expect("write");
    }
    // Rewriting a trial (a rerun) replaces it rather than adding a row.
    store
        .write_trial(TrialTables { epochs: &epochs(&run, "t0002", 1), ..TrialTables::new(&trial(&run, "t0002", 2)) })
        .expect("rewrite");

    let trials = store.load("trials").expect("trials");
    assert_eq!(trials.height(), 5);
    assert_eq!(store.load("epochs").expect("epochs").height(), 4 * 3 + 1);
    assert_eq!(store.load("steps").expect("steps").height(), 4 * 10);
    assert_eq!(store.load("telemetry").expect("telemetry").height(), 0);
    let ids: Vec<String> = store.finished_trial_ids().expect("ids").into_iter().collect();
    assert_eq!(ids, ["t0000", "t0001", "t0002", "t0003", "t0004"]);
}

#[test]
fn run_folder_has_the_documented_layout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let id = store.run_id();
    // 20261122T214501Z-default
    assert_eq!(id.len(), "20261122T214501Z-default".len(), "{id}");
    assert!(id.ends_with("Z-default"), "{id}");
    let tables = ["trials", "epochs", "steps", "telemetry", "events", "rank_breakdown", "pipeline_stages"];
    for name in ["fingerprint.json", "suite.yaml"].into_iter().chain(tables) {
        assert!(store.run_dir().join(name).exists(), "{name} missing");
    }
    assert_eq!(fs::read_to_string(store.run_dir().join("suite.yaml")).expect("suite copy"), "name: default\n");
    assert!(store.fingerprint().expect("fingerprint").suite_sha256.is_some());

    // A second run in the same second gets its own folder.
    let other = new_store(dir.path());
    assert_ne!(other.run_dir(), store.run_dir());
    assert_eq!(store.load("trials").expect("empty trials").schema().as_ref(), &TrialRow::schema());
}

#[test]
fn leftover_temp_files_and_uncommitted_trials_are_not_finished() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    store
        .write_trial(TrialTables { epochs: &epochs(&run, "done", 2), ..TrialTables::new(&trial(&run, "done", 0)) })
        .expect("write");

    // A crash mid-write: a temp trials part from a dead writer (pid 0 is never a process),
    // and a trial whose epochs part landed but whose trials part never did.
    let stale = store.run_dir().join("trials").join(".crashed.parquet.tmp-0-0");
    fs::write(&stale, b"half a parquet file").expect("write stale temp");
    fs::copy(
        store.run_dir().join("epochs").join("done.parquet"),
        store.run_dir().join("epochs").join("crashed.parquet"),
    )
    .expect("orphan part");

    let ids = store.finished_trial_ids().expect("ids");
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), ["done"]);
    assert_eq!(store.load("epochs").expect("epochs").height(), 2, "orphan parts must not be loaded");

    // Reading leaves the folder as it is; resuming sweeps what dead writers left.
    let read = RunStore::open(store.run_dir()).expect("open");
    assert_eq!(read.finished_trial_ids().expect("ids").len(), 1);
    assert!(stale.exists(), "reading a run must not change it");
    let resumed = RunStore::resume(store.run_dir()).expect("resume");
    assert!(!stale.exists(), "resume must delete temp files of dead writers");
    assert_eq!(resumed.finished_trial_ids().expect("ids").len(), 1);
}

/// A run checked into a source tree (a fixture) or someone else's folder: reading it, old
/// tables missing included, creates and deletes nothing.
#[test]
fn opening_a_run_to_read_it_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    store.write_trial(TrialTables::new(&trial(&run, "done", 0))).expect("write");
    // As a run written before the probe tables existed.
    fs::remove_dir_all(store.run_dir().join("probes")).expect("remove a table folder");
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<_> = fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name()).collect();
        names.sort();
        names
    };
    let before = listing(store.run_dir());
    let read = RunStore::open(store.run_dir()).expect("open");
    assert_eq!(read.finished_trial_ids().expect("ids").len(), 1);
    assert_eq!(read.load("probes").expect("a missing table reads as empty").height(), 0);
    assert_eq!(listing(store.run_dir()), before);
}

#[test]
fn export_writes_readable_csv_and_json_with_all_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    // Trial c ran with a straggler: its ranks are a list column, which CSV holds as text.
    let with_straggler = |trial: TrialRow| match trial.trial_id.as_str() {
        "c" => TrialRow {
            straggler: stratlab_strategy_spec::StragglerColumns::from(Some(&stratlab_strategy_spec::Straggler {
                ranks: vec![1, 3],
                slowdown: 2.0,
                jitter: 0.0,
            })),
            ..trial
        },
        _ => trial,
    };
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        store
            .write_trial(TrialTables {
                epochs: &epochs(&run, id, 2),
                steps: &steps(&run, id, 4),
                telemetry: &telemetry(&run, id, 3, i == 0),
                ..TrialTables::new(&with_straggler(trial(&run, id, i as i64)))
            })
            .expect("write");
    }
    // Tables this run has no rows for are exported too, empty, so a reader finds every file.
    let expected = [
        ("trials", 3),
        ("epochs", 6),
        ("steps", 12),
        ("telemetry", 9),
        ("events", 0),
        ("rank_breakdown", 0),
        ("pipeline_stages", 0),
        ("evaluations", 0),
        ("gradient_updates", 0),
        ("trial_nodes", 0),
        ("probes", 0),
        ("predictions", 0),
        ("predicted_passes", 0),
        ("batch_probes", 0),
    ];

    let csv_files = store.export(ExportFormat::Csv, &dir.path().join("csv")).expect("csv export");
    assert_eq!(csv_files.len(), expected.len());
    for (path, (table, rows)) in csv_files.iter().zip(expected) {
        assert!(path.ends_with(format!("{table}.csv")), "{}", path.display());
        let frame = CsvReadOptions::default()
            .try_into_reader_with_file_path(Some(path.clone()))
            .expect("csv reader")
            .finish()
            .expect("csv parses");
        assert_eq!(frame.height(), rows, "{table}.csv");
    }
    let trials_csv = fs::read_to_string(&csv_files[0]).expect("trials.csv");
    assert!(trials_csv.contains("\"[1,3]\""), "the ranks as their JSON list: {trials_csv}");

    let json_files = store.export(ExportFormat::Json, &dir.path().join("json")).expect("json export");
    for (path, (table, rows)) in json_files.iter().zip(expected) {
        let value: serde_json::Value =
            serde_json::from_slice(&fs::read(path).expect("read json")).expect("json parses");
        assert_eq!(value.as_array().map(Vec::len), Some(rows), "{table}.json");
    }
    let trials: Vec<TrialRow> = serde_json::from_slice(&fs::read(&json_files[0]).expect("read")).expect("typed");
    assert_eq!(trials[2], with_straggler(trial(&run, "c", 2)));
}

#[test]
fn parts_stored_before_a_column_was_added_read_back_with_it_null() {
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path());
    let trial_row = trial(store.run_id(), "t0", 0);
    let steps = steps(store.run_id(), "t0", 6);
    store.write_trial(TrialTables { steps: &steps, ..TrialTables::new(&trial_row) }).unwrap();
    // Rewrite the steps part as an older build wrote it: without the communication columns.
    let part = std::fs::read_dir(store.run_dir().join("steps")).unwrap().next().unwrap().unwrap().path();
    let frame = polars::prelude::ParquetReader::new(std::fs::File::open(&part).unwrap()).finish().unwrap();
    let mut old = frame.drop_many(["comm_bytes", "comm_s"]);
    polars::prelude::ParquetWriter::new(std::fs::File::create(&part).unwrap()).finish(&mut old).unwrap();
    let read: Vec<StepRow> = store.load_rows().unwrap();
    assert_eq!(read.len(), 6);
    assert!(read.iter().all(|step| step.record.comm_bytes.is_none() && step.record.comm_s.is_none()));
    assert_eq!(read[3].record.step_time_s, steps[3].record.step_time_s);
    // A part with a column of the wrong type is still a schema error, not silently patched.
    let mut wrong = frame.clone();
    {
        use polars::prelude::NamedFrom;
        wrong.replace("warmup", polars::prelude::Series::new("warmup".into(), vec![1i64; 6]).into()).unwrap();
    }
    polars::prelude::ParquetWriter::new(std::fs::File::create(&part).unwrap()).finish(&mut wrong).unwrap();
    assert!(matches!(store.load_rows::<StepRow>(), Err(stratlab_results::StoreError::SchemaMismatch { .. })));
}

#[test]
fn errors_name_the_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    assert!(matches!(store.load("losses"), Err(StoreError::UnknownTable { .. })));
    let bad = store.write_trial(TrialTables::new(&trial(&run, "../escape", 0)));
    assert!(matches!(bad, Err(StoreError::InvalidTrialId { .. })));
    let foreign =
        store.write_trial(TrialTables { epochs: &epochs(&run, "b", 1), ..TrialTables::new(&trial(&run, "a", 0)) });
    assert!(matches!(foreign, Err(StoreError::ForeignRow { table: "epochs", .. })));
    let not_a_run = RunStore::open(dir.path()).expect_err("not a run");
    assert!(not_a_run.to_string().contains("not a run folder"), "{not_a_run}");

    // A corrupt part is reported with its file name.
    fs::write(store.run_dir().join("trials").join("junk.parquet"), b"not parquet").expect("write junk");
    let message = store.load("trials").expect_err("corrupt part").to_string();
    assert!(message.contains("junk.parquet"), "{message}");
}
