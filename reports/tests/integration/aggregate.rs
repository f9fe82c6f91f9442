//! Aggregation and tables checked on a hand-made run with known numbers: single at 100
//! samples/s (repeats 95, 100, 110), data-parallel at 180 (W = 2) and 300 (W = 4, one crashed
//! repeat), GPipe out of memory, a diverged trial, and a cell without a `single` baseline.

use std::path::Path;

use polars::prelude::{CsvReadOptions, SerReader};
use stratlab_reports::aggregate::{
    bubble_share, CellKey, Speedup, StepsPerEpoch, ThroughputCell, MAX_LOSS_POINTS, NO_BASELINE,
};
use stratlab_reports::tables::{loss_table, speedup_table};
use stratlab_reports::{
    aggregate_run, matrix_for_terminal, summary_tables, PipelineTimeline, Plotted, RunAggregates, Stat, TimelineEvent,
};
use stratlab_results::{
    DataSource, DeviceLoad, EpochRecord, EpochRow, EventKind, Fingerprint, Outcome, RunStore, StepRecord, StepRow,
    TrainingSummary, TrialDevice, TrialRow, TrialTables, UtcTime,
};
use stratlab_units::Link;

use crate::common::{series, strategy_of};

const GIB: u64 = 1 << 30;

fn fingerprint() -> Fingerprint {
    serde_json::from_str(include_str!("../../../results/tests/data/fingerprint.json")).expect("sample fingerprint")
}

pub(crate) fn new_store(root: &Path) -> RunStore {
    let suite = root.join("suite.yaml");
    std::fs::write(&suite, "name: aggregate-test\n").expect("write suite");
    RunStore::create(&root.join("runs"), "aggregate-test", &suite, &fingerprint()).expect("create run")
}

/// A trial of small-cnn on MNIST; `wall` is its throughput, `None` for a failed trial.
pub(crate) fn trial(
    index: i64,
    strategy: &str,
    workers: i64,
    batch: i64,
    repeat: i64,
    outcome: &str,
    wall: Option<f64>,
) -> TrialRow {
    let ok = outcome == "ok";
    let outcome: Outcome = outcome.parse().expect("an outcome name");
    TrialRow {
        run_id: "run".into(),
        trial_id: format!("small-cnn__mnist__{strategy}__w{workers}__b{batch}__r{repeat}"),
        index,
        network: "small-cnn".into(),
        dataset: "mnist".into(),
        data_source: DataSource::Real,
        strategy: strategy.parse().unwrap(),
        parameters: (&strategy_of(strategy, (strategy == "gpipe").then_some(4))).into(),
        workers,
        batch_size: batch,
        global_batch: batch * workers,
        epochs_budget: Some(2),
        steps_budget: None,
        seconds_budget: None,
        min_timed_steps_budget: None,
        repeat,
        seed: repeat,
        device: TrialDevice::Cpu,
        device_name: None,
        device_ids: None,
        host_name: None,
        threads: 1,
        swept_threads: None,
        stored_precision: None,
        stored_memory_format: None,
        precision_auto: None,
        memory_format_auto: None,
        stored_optimizer: None,
        link: None,
        nodes: None,
        straggler: Default::default(),
        link_emulation_cpu_s: None,
        speed_reference_s: None,
        memory_limit_bytes: None,
        device_memory_limit_bytes: None,
        cudnn_benchmark: None,
        matmul_precision: None,
        cudnn_tf32: None,
        metrics_every_steps: 1,
        target_accuracy: 0.8,
        outcome,
        reason: (!ok).then(|| format!("{outcome} in repeat {repeat}")),
        reason_detail: None,
        epochs_completed: 2,
        steps_completed: 8,
        warmup_steps: 1,
        training: TrainingSummary {
            seconds_per_epoch_mean: wall.map(|w| 60_000.0 / w),
            seconds_per_epoch_estimate: Some(600.0),
            step_time_median_s: None,
            step_time_p10_s: None,
            step_time_p90_s: None,
            data_wait_median_s: None,
            h2d_median_s: None,
            step_samples_per_s: wall.map(|w| w * 1.25),
            wall_samples_per_s: wall,
            val_samples_per_s: None,
            time_to_accuracy_s: ok.then_some(19.5),
            final_accuracy: ok.then_some(0.9),
            final_loss: None,
            eval_time_s: None,
            peak_memory_bytes: None,
            skipped_updates: None,
        },
        load: DeviceLoad {
            utilization_mean_pct: ok.then_some(40.0 + 10.0 * repeat as f64),
            utilization_max_pct: ok.then_some(100.0),
            memory_mean_bytes: None,
            memory_max_bytes: ok.then_some((repeat as u64 + 1) * GIB),
            process_memory_mean_bytes: None,
            process_memory_max_bytes: None,
            energy_j: None,
            energy_source: None,
        },
        wall_time_s: 100.0,
        started_at: UtcTime::parse_rfc3339("2026-11-23T10:01:15Z").unwrap(),
        finished_at: UtcTime::parse_rfc3339("2026-11-23T10:02:55Z").unwrap(),
    }
}

/// Three evaluations per worker: 50 %, 85 %, 90 % test accuracy at 10, 20, 30 s.
pub(crate) fn epochs(trial: &TrialRow) -> Vec<EpochRow> {
    (0..trial.workers)
        .flat_map(|worker| {
            (0..3).map(move |epoch| (worker, epoch)).map(|(worker, epoch)| EpochRow {
                run_id: "run".into(),
                trial_id: trial.trial_id.clone(),
                worker,
                record: EpochRecord {
                    epoch: epoch as usize,
                    train_loss: Some(1.0),
                    train_accuracy: Some(0.5),
                    test_loss: Some(1.0),
                    test_accuracy: Some([0.5, 0.85, 0.9][epoch as usize]),
                    epoch_time_s: 9.0,
                    eval_time_s: 1.0,
                    wall_samples_per_s: None,
                    val_samples_per_s: None,
                    elapsed_s: 10.0 * (epoch + 1) as f64,
                    steps: None,
                },
            })
        })
        .collect()
}

/// `n` steps of worker 0, `per_epoch` to an epoch, 0.5 s of wall time each; the loss goes
/// 2.0, 1.9, … and is NaN from step `nan_from` on.
fn steps(trial: &TrialRow, n: i64, per_epoch: i64, nan_from: Option<i64>) -> Vec<StepRow> {
    (0..n)
        .map(|step| StepRow {
            run_id: "run".into(),
            trial_id: trial.trial_id.clone(),
            worker: 0,
            record: StepRecord {
                epoch: (step / per_epoch) as usize,
                step: step as usize,
                loss: Some(if nan_from.is_some_and(|s| step >= s) { f64::NAN } else { 2.0 - 0.1 * step as f64 }),
                step_time_s: 0.375,
                data_wait_s: 0.125,
                h2d_s: 0.0,
                samples: trial.batch_size as usize,
                lr: 0.01,
                warmup: step == 0,
                comm_bytes: None,
                comm_s: None,
                peak_memory_bytes: None,
                loss_scale: None,
                skipped_update: None,
            },
        })
        .collect()
}

/// The run described at the top of the file.
pub(crate) fn hand_made_run(root: &Path) -> RunStore {
    let store = new_store(root);
    let mut index = 0;
    let mut next = || {
        index += 1;
        index - 1
    };
    let write = |row: TrialRow, steps: Vec<StepRow>| {
        let epochs = if row.outcome.is_ok() { epochs(&row) } else { Vec::new() };
        store
            .write_trial(TrialTables { epochs: &epochs, steps: &steps, ..TrialTables::new(&row) })
            .expect("write trial");
    };
    for (repeat, wall) in [95.0, 100.0, 110.0].into_iter().enumerate() {
        let row = trial(next(), "single", 1, 32, repeat as i64, "ok", Some(wall));
        let steps = steps(&row, 8, 4, None);
        write(row, steps);
    }
    for (repeat, wall) in [170.0, 180.0, 200.0].into_iter().enumerate() {
        write(trial(next(), "data-parallel", 2, 32, repeat as i64, "ok", Some(wall)), Vec::new());
    }
    for (repeat, wall) in [290.0, 300.0, 310.0].into_iter().enumerate() {
        write(trial(next(), "data-parallel", 4, 32, repeat as i64, "ok", Some(wall)), Vec::new());
    }
    write(trial(next(), "data-parallel", 4, 32, 3, "crashed", None), Vec::new());
    write(trial(next(), "gpipe", 2, 32, 0, "oom", None), Vec::new());
    write(trial(next(), "gpipe", 2, 32, 1, "oom", None), Vec::new());
    write(trial(next(), "data-parallel", 2, 64, 0, "ok", Some(350.0)), Vec::new());
    // Diverged inside its first epoch: 1200 steps of 0.5 s, an estimate of 600 s per epoch.
    let diverged = trial(next(), "data-parallel", 8, 32, 0, "diverged", None);
    let diverged_steps = steps(&diverged, 1200, 10_000, Some(1000));
    write(diverged, diverged_steps);
    store
}

fn cell<'a>(aggregates: &'a RunAggregates, strategy: &str, workers: u32, batch_size: u32) -> &'a ThroughputCell {
    let key = CellKey {
        network: "small-cnn".into(),
        dataset: "mnist".into(),
        data_source: DataSource::Real,
        strategy: strategy_of(strategy, (strategy == "gpipe").then_some(4)),
        workers,
        batch_size,
        swept_threads: None,
        link: None,
        nodes: 1,
        straggler: None,
        precision: Default::default(),
        memory_format: Default::default(),
        optimizer: Default::default(),
    };
    aggregates.throughput.iter().find(|c| c.key == key).unwrap_or_else(|| panic!("no cell {key:?}"))
}

/// A link's label holds ` · ` (`1 Gbit/s · 1 ms`), as the label of swept threads does: a
/// cell over such a link still finds its single baseline, at its own threads.
#[test]
fn a_cell_over_a_link_with_latency_keeps_its_speedup_over_single() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let link = "1 Gbit/s · 1 ms";
    for (index, (strategy, workers, wall, link)) in
        [("single", 1, 100.0, None), ("data-parallel", 2, 150.0, Some(link))].into_iter().enumerate()
    {
        let mut row = trial(index as i64, strategy, workers, 128, 0, "ok", Some(wall));
        row.swept_threads = Some(2);
        row.link = link.map(|name| Link::from_name(name).unwrap());
        store.write_trial(TrialTables { epochs: &epochs(&row), ..TrialTables::new(&row) }).expect("write trial");
    }
    let aggregates = aggregate_run(&store).expect("aggregate");
    let over_link = aggregates.throughput.iter().find(|c| c.key.workers == 2).expect("the data-parallel cell");
    assert_eq!(aggregates.labels.strategy(&over_link.key), format!("data-parallel · 2 threads over {link}"));
    let stored = over_link.key.link.map(|link| link.name());
    assert_eq!((over_link.key.swept_threads, stored.as_deref()), (Some(2), Some(link)));
    let (speedup, efficiency) = speedup_of(over_link);
    assert_stat(&speedup, 1.5, 1.5, 1.5, 1);
    assert_stat(&efficiency, 0.75, 0.75, 0.75, 1);
}

fn assert_stat(stat: &Stat, median: f64, min: f64, max: f64, n: usize) {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(stat.median, median) && close(stat.min, min) && close(stat.max, max), "{stat:?}");
    assert_eq!(stat.n, n, "{stat:?}");
}

fn speedup_of(cell: &ThroughputCell) -> (Stat, Stat) {
    match &cell.speedup {
        Speedup::Measured { speedup, efficiency, .. } => (*speedup, *efficiency),
        other => panic!("{:?}: expected a measured speedup, got {other:?}", cell.key),
    }
}

#[test]
fn throughput_speedup_and_efficiency_over_repeats() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aggregates = aggregate_run(&hand_made_run(dir.path())).expect("aggregate");
    assert_eq!(aggregates.throughput.len(), 6);

    let single = cell(&aggregates, "single", 1, 32);
    assert_stat(single.wall_samples_per_s.stat().expect("measured"), 100.0, 95.0, 110.0, 3);
    assert_stat(single.step_samples_per_s.stat().expect("measured"), 125.0, 118.75, 137.5, 3);
    assert_stat(single.seconds_per_epoch.stat().expect("measured"), 600.0, 60_000.0 / 110.0, 60_000.0 / 95.0, 3);
    assert!(!single.epoch_time_estimated);
    let (speedup, efficiency) = speedup_of(single);
    assert_stat(&speedup, 1.0, 95.0 / 110.0, 110.0 / 95.0, 3);
    assert_stat(&efficiency, 1.0, 95.0 / 110.0, 110.0 / 95.0, 3);

    let w2 = cell(&aggregates, "data-parallel", 2, 32);
    assert_stat(w2.wall_samples_per_s.stat().expect("measured"), 180.0, 170.0, 200.0, 3);
    let (speedup, efficiency) = speedup_of(w2);
    assert_stat(&speedup, 1.8, 170.0 / 110.0, 200.0 / 95.0, 3);
    assert_stat(&efficiency, 0.9, 170.0 / 220.0, 200.0 / 190.0, 3);

    let w4 = cell(&aggregates, "data-parallel", 4, 32);
    assert_stat(w4.wall_samples_per_s.stat().expect("measured"), 300.0, 290.0, 310.0, 3);
    assert_eq!((w4.repeats.trials, w4.repeats.failed, w4.repeats.ok()), (4, 1, 3));
    let first = w4.repeats.first_failure.as_ref().expect("a failed repeat");
    assert_eq!((first.outcome, first.reason.as_deref()), (Outcome::Crashed, Some("crashed in repeat 3")));
    let (speedup, efficiency) = speedup_of(w4);
    assert_stat(&speedup, 3.0, 290.0 / 110.0, 310.0 / 95.0, 3);
    assert_stat(&efficiency, 0.75, 290.0 / 440.0, 310.0 / 380.0, 3);

    let gpipe = cell(&aggregates, "gpipe", 2, 32);
    assert_eq!(gpipe.wall_samples_per_s, Plotted::Failed(Outcome::Oom));
    assert_eq!(gpipe.seconds_per_epoch, Plotted::Failed(Outcome::Oom));
    assert_eq!(gpipe.speedup, Speedup::Failed(Plotted::Failed(Outcome::Oom)));
    assert_eq!((gpipe.repeats.trials, gpipe.repeats.failed), (2, 2));

    let diverged = cell(&aggregates, "data-parallel", 8, 32);
    assert_eq!(diverged.speedup, Speedup::Failed(Plotted::Failed(Outcome::Diverged)));

    let no_baseline = cell(&aggregates, "data-parallel", 2, 64);
    assert_stat(no_baseline.wall_samples_per_s.stat().expect("measured"), 350.0, 350.0, 350.0, 1);
    assert!(no_baseline.speedup.missing_baseline().expect("no baseline").contains("batch 64"));

    // Figures: W > 1 only, one set per W; the missing baseline drawn as such.
    let sets = aggregates.speedup_bars_by_workers();
    assert_eq!(sets.iter().map(|s| s[0].workers).collect::<Vec<_>>(), [2, 4, 8]);
    assert_eq!(sets[0].len(), 3);
    let bar = sets[0].iter().find(|b| b.series == series("data-parallel") && b.speedup.stat().is_none()).expect("bar");
    assert_eq!(bar.speedup, Plotted::Missing(NO_BASELINE.into()));
    assert_eq!(aggregates.scaling_points().len(), 6);
    assert_eq!(aggregates.throughput_bars().len(), 6);

    // Device usage: medians over the ok repeats, failures carried.
    let usage = aggregates.device_usage_bars();
    let single_usage = usage.iter().find(|b| b.series == series("single")).expect("single");
    assert_stat(single_usage.utilisation_mean_pct.stat().expect("measured"), 50.0, 40.0, 60.0, 3);
    assert_stat(
        single_usage.memory_max_bytes.stat().expect("measured"),
        2.0 * GIB as f64,
        GIB as f64,
        3.0 * GIB as f64,
        3,
    );
    assert!(single_usage.memory_mean_bytes.stat().is_none(), "not recorded stays absent");
    let gpipe_usage = usage.iter().find(|b| b.series == series("gpipe")).expect("gpipe");
    assert_eq!(gpipe_usage.utilisation_max_pct, Plotted::Failed(Outcome::Oom));
}

#[test]
fn time_to_accuracy_and_loss_curves_per_trial() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aggregates = aggregate_run(&hand_made_run(dir.path())).expect("aggregate");
    assert_eq!(aggregates.accuracy.len(), 14);
    let first = &aggregates.accuracy[0];
    assert_eq!((first.target_accuracy, first.time_to_accuracy_s, first.final_accuracy), (0.8, Some(19.5), Some(0.9)));

    let figures = aggregates.time_to_accuracy();
    assert_eq!(figures.len(), 1);
    let figure = &figures[0];
    assert_eq!((figure.network.as_str(), figure.dataset.as_str(), figure.target_accuracy), ("small-cnn", "mnist", 0.8));
    assert_eq!(figure.curves.len(), 14);
    // Both ranks of a W = 2 trial evaluate: the curve is the lead's, three points.
    let w2 = figure.curves.iter().find(|c| c.series == series("data-parallel") && c.workers == 2).expect("W=2 curve");
    assert_eq!(w2.points.len(), 3);
    assert_eq!(w2.first_reaching(0.8).expect("reached").wall_s, 20.0);
    let oom = figure.curves.iter().find(|c| c.series == series("gpipe")).expect("gpipe curve");
    assert_eq!((oom.points.len(), oom.failure), (0, Some(Outcome::Oom)));

    let single = &aggregates.loss[0];
    assert_eq!(single.steps_per_epoch, Some(StepsPerEpoch::Counted(4)));
    assert_eq!(single.points.len(), 8);
    assert_eq!((single.points[6].epoch, single.points[6].loss), (1.5, 2.0 - 0.1 * 6.0));
    assert_eq!((single.first_loss, single.min_loss), (Some(2.0), Some(2.0 - 0.1 * 7.0)));

    let diverged = aggregates.loss.iter().find(|l| l.trial.key.workers == 8).expect("diverged trial");
    // 600 s per epoch ÷ 0.5 s per step.
    assert_eq!(diverged.steps_per_epoch, Some(StepsPerEpoch::FromEstimate(1200)));
    assert_eq!((diverged.steps, diverged.diverged_at_step), (1200, Some(1000)));
    assert!(diverged.points.len() <= MAX_LOSS_POINTS + 2);
    let nan = diverged.points.iter().find(|p| p.loss.is_nan()).expect("the divergence is kept");
    assert!((nan.epoch - 1000.0 / 1200.0).abs() < 1e-12);
    assert!(diverged.last_loss.expect("last").is_nan());

    let curves = aggregates.loss_curves();
    assert_eq!(curves.len(), 1);
    let failed = curves[0].curves.iter().find(|c| c.workers == 8).expect("curve");
    assert_eq!(failed.failure, Some(Outcome::Diverged));

    // Skipped fp16 updates have a column only where some trial scaled its loss.
    const SKIPPED: &str = "skipped updates (fp16)";
    let columns = |aggregates: &RunAggregates| -> Vec<String> {
        let table = loss_table(aggregates).expect("loss table");
        table.frame.get_column_names().iter().map(|name| name.to_string()).collect()
    };
    assert!(!columns(&aggregates).contains(&SKIPPED.to_owned()), "no trial scaled its loss");
    let mut scaled = aggregates;
    scaled.loss[0].skipped_updates = Some(3);
    assert!(columns(&scaled).contains(&SKIPPED.to_owned()));
    let table = loss_table(&scaled).expect("loss table");
    assert_eq!(table.frame.column(SKIPPED).unwrap().i64().unwrap().get(0), Some(3));
}

#[test]
fn gpipe_bubble_of_two_stages_and_four_micro_batches() {
    // Unit blocks: stage 0 runs forwards 0–4, stage 1 forwards 1–5, then backwards in
    // reverse, stage 1 at 5–9 and stage 0 at 6–10. Each stage is busy 8 of 10 s.
    let mut events = Vec::new();
    for mb in 0..4u32 {
        for stage in 0..2u32 {
            let forward = f64::from(mb + stage);
            let backward = 5.0 + f64::from(3 - mb) + f64::from(1 - stage);
            let event = |kind, start_s: f64| TimelineEvent {
                worker: stage,
                kind,
                micro_batch: Some(mb),
                pipeline_stage: None,
                start_s,
                end_s: start_s + 1.0,
            };
            events.push(event(EventKind::Forward, forward));
            events.push(event(EventKind::Backward, backward));
        }
    }
    let timeline = PipelineTimeline {
        title: "GPipe, 2 workers, 4 micro-batches".into(),
        workers: 2,
        worker_labels: Vec::new(),
        events,
    };
    let share = bubble_share(&timeline);
    assert!((share.measured - 0.2).abs() < 1e-12, "{share:?}");
    assert!((share.theoretical.expect("a pipeline") - 0.2).abs() < 1e-12);
    let table = stratlab_reports::tables::bubble_table(&[timeline]).expect("table");
    assert_eq!(table.cells().1, vec![vec!["GPipe, 2 workers, 4 micro-batches", "2", "4", "20.0", "20.0"]]);
}

#[test]
fn speedup_table_as_csv_markdown_and_cells() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aggregates = aggregate_run(&hand_made_run(dir.path())).expect("aggregate");
    let table = speedup_table(&aggregates).expect("table");
    let path = table.write_csv(&dir.path().join("tables")).expect("CSV");
    assert_eq!(path.file_name().and_then(|n| n.to_str()), Some("speedup.csv"));

    let frame = CsvReadOptions::default()
        .with_has_header(true)
        .try_into_reader_with_file_path(Some(path))
        .expect("reader")
        .finish()
        .expect("CSV parses");
    assert_eq!(frame.height(), 6);
    let strategy = frame.column("strategy").expect("strategy").str().expect("text");
    let workers = frame.column("W").expect("W").i64().expect("int");
    let speedup = frame.column("speedup (×, median)").expect("speedup").f64().expect("float");
    let row = (0..frame.height())
        .find(|&i| strategy.get(i) == Some("data-parallel") && workers.get(i) == Some(4))
        .expect("W=4 row");
    assert_eq!(speedup.get(row), Some(3.0));
    let gpipe = (0..frame.height()).find(|&i| strategy.get(i) == Some("gpipe")).expect("gpipe row");
    assert_eq!(speedup.get(gpipe), None);
    assert_eq!(frame.column("outcome").expect("outcome").str().expect("text").get(gpipe), Some("oom"));

    let (header, rows, numeric) = table.cells();
    let column = |name: &str| header.iter().position(|h| h == name).expect(name);
    assert!(numeric[column("speedup (×, median)")] && !numeric[column("strategy")]);
    assert_eq!(rows[gpipe][column("speedup (×, median)")], "OOM");
    assert_eq!(rows[gpipe][column("outcome")], "OOM");
    assert_eq!(rows[row][column("efficiency (median)")], "0.750");
    assert_eq!(rows[row][column("repeats failed")], "1");

    let markdown = table.to_markdown();
    let lines: Vec<&str> = markdown.lines().collect();
    assert_eq!(lines.len(), 2 + 6, "{markdown}");
    assert!(lines[0].starts_with("| network ") && lines[0].contains("| speedup (×, median) |"), "{markdown}");
    assert!(lines[1].starts_with("|-") && lines[1].ends_with("-|"), "{markdown}");
    let w2 = lines.iter().find(|l| l.contains("data-parallel") && l.contains(" 2 ") && l.contains("32")).expect("W=2");
    assert!(w2.contains(" 1.80 |") && w2.contains(" 0.900 |"), "{w2}");
    assert!(markdown.contains("| — ") && markdown.contains("no single W=1 trial with batch 64"), "{markdown}");
}

#[test]
fn a_run_without_finished_trials_aggregates_to_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let aggregates = aggregate_run(&store).expect("an empty run is no error");
    assert!(aggregates.is_empty() && aggregates.accuracy.is_empty() && aggregates.loss.is_empty());
    assert!(aggregates.speedup_bars().is_empty() && aggregates.time_to_accuracy().is_empty());
    assert!(matrix_for_terminal(&aggregates).contains("no finished trials"));
    for table in summary_tables(&aggregates).expect("tables") {
        assert_eq!(table.frame.height(), 0, "{}", table.name);
        table.write_csv(dir.path()).expect("an empty table still writes its header");
    }
}

#[test]
fn a_run_of_only_single_trials_draws_single_at_speedup_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let row = trial(0, "single", 1, 32, 0, "ok", Some(100.0));
    store.write_trial(TrialTables::new(&row)).expect("write");
    let bars = aggregate_run(&store).expect("aggregate").speedup_bars();
    assert_eq!(bars.len(), 1);
    assert_eq!((bars[0].workers, bars[0].speedup.clone()), (1, Plotted::Measured(Stat::single(1.0))));
}
