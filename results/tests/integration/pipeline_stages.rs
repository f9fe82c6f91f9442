//! The `pipeline_stages` table seen from outside: stage rows measured from hand-made pipeline
//! timelines whose bubbles and imbalances are known exactly, and their way through the store.

use std::fs;

use crate::common::{assert_schema_matches_serde, new_store, trial};
use polars::prelude::DataType;
use stratlab_results::{
    pipeline_stage_rows, theoretical_bubble, EventKind, EventRow, ExportFormat, PipelineStageInfo, PipelineStageRow,
    RunStore, Table, TrialTables,
};

/// An event of `rank` in `step` for micro-batch `micro_batch` when given.
fn event(rank: u32, step: u64, kind: EventKind, micro_batch: Option<u32>, start_s: f64, end_s: f64) -> EventRow {
    let stage = Some(rank);
    EventRow {
        micro_batch,
        pipeline_stage: stage,
        name: format!("stage {rank}"),
        ..crate::common::event(rank, step, kind, start_s, end_s)
    }
}

/// Stage `stage` of replica `replica` of a `schedule` pipeline of `stages` stages.
fn info(schedule: &str, replica: u32, stage: u32, stages: u32, micro_batches: u32) -> PipelineStageInfo {
    PipelineStageInfo {
        rank: replica * stages + stage,
        replica,
        stage,
        stage_replica: None,
        stages,
        virtual_stages: None,
        schedule: schedule.parse().unwrap(),
        micro_batches,
        balance: "[2,3]".into(),
        layers: if stage == 0 { "conv1+layer1".into() } else { "layer2+layer3+fc".into() },
        first_layer: 2 * stage,
        layer_count: 2 + stage,
        parameters: 1_000 * u64::from(stage + 1),
        predicted_cost: f64::from(stage + 2),
        cost_unit: "layers".into(),
        predicted_imbalance: 0.2,
        peak_activation_bytes: (stage == 0).then_some(3 << 20),
    }
}

/// One GPipe step of 2 stages and 2 micro-batches from `t0`: forwards of 1 s, backwards of
/// 2 s, all forwards then all backwards in reverse (thesis fig. 2.5).
///
/// ```text
/// stage 0  F0 F1 .  .  .  B1 B1 B0 B0      busy 6 of the step's span [0, 9]
/// stage 1  .  F0 F1 B1 B1 B0 B0 .  .       busy 6 of [0, 9]
/// ```
/// Each stage idles 3 of 9 s: (p − 1) ÷ (m + p − 1) = 1/3. Sends, receives and the
/// optimizer step after the span are no compute and change nothing.
fn gpipe_step(step: u64, t0: f64) -> Vec<EventRow> {
    let at = |rank, kind, mb, start: f64, end: f64| event(rank, step, kind, Some(mb), t0 + start, t0 + end);
    let mut events = vec![
        at(0, EventKind::Forward, 0, 0.0, 1.0),
        at(0, EventKind::Forward, 1, 1.0, 2.0),
        at(0, EventKind::Send, 0, 1.0, 1.25),
        at(1, EventKind::Recv, 0, 1.0, 1.25),
        at(1, EventKind::Forward, 0, 1.0, 2.0),
        at(1, EventKind::Forward, 1, 2.0, 3.0),
        at(1, EventKind::Backward, 1, 3.0, 5.0),
        at(1, EventKind::Backward, 0, 5.0, 7.0),
        at(0, EventKind::Backward, 1, 5.0, 7.0),
        at(0, EventKind::Backward, 0, 7.0, 9.0),
    ];
    for rank in 0..2 {
        events.push(event(rank, step, EventKind::Optimizer, None, t0 + 9.0, t0 + 9.5));
    }
    events
}

fn infos_2x2(schedule: &str) -> Vec<PipelineStageInfo> {
    // Stage 1 first: the rows come out in rank order whatever the order given.
    vec![info(schedule, 0, 1, 2, 2), info(schedule, 0, 0, 2, 2)]
}

#[test]
fn the_schema_lists_every_serde_field_of_a_row() {
    let rows = pipeline_stage_rows("r", "t", &infos_2x2("gpipe"), &gpipe_step(0, 0.0), 0);
    assert_schema_matches_serde(&rows[0]);
    assert_eq!(PipelineStageRow::NAME, "pipeline_stages");
}

#[test]
fn a_two_stage_gpipe_step_idles_one_third_like_the_schedule_says() {
    let rows = pipeline_stage_rows("r", "t", &infos_2x2("gpipe"), &gpipe_step(0, 0.0), 0);
    assert_eq!(rows.iter().map(|r| r.info.rank).collect::<Vec<_>>(), [0, 1]);
    for row in &rows {
        assert_eq!((row.run_id.as_str(), row.trial_id.as_str()), ("r", "t"));
        assert_eq!(row.timed_steps, 1, "stage {}", row.info.stage);
        assert_eq!(row.compute_s, 6.0, "stage {}: 2 forwards of 1 s, 2 backwards of 2 s", row.info.stage);
        assert!((row.bubble_measured - 1.0 / 3.0).abs() < 1e-12, "stage {}: {}", row.info.stage, row.bubble_measured);
        assert!((row.bubble_theoretical - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(row.measured_imbalance, 0.0, "both stages compute 6 s per step");
    }
    assert_eq!(rows[0].info, info("gpipe", 0, 0, 2, 2), "the stage's info is kept as given");
    assert_eq!(theoretical_bubble(2, 2, 1), rows[1].bubble_theoretical);
}

#[test]
fn warm_up_steps_are_skipped() {
    // Step 0 (warm-up): stage 0 forwards for 4 s, stage 1 for 1 s after it: span [0, 5].
    let mut events =
        vec![event(0, 0, EventKind::Forward, Some(0), 0.0, 4.0), event(1, 0, EventKind::Forward, Some(0), 4.0, 5.0)];
    events.extend(gpipe_step(1, 10.0));
    let infos = infos_2x2("1f1b");

    let timed = pipeline_stage_rows("r", "t", &infos, &events, 1);
    assert_eq!(timed, pipeline_stage_rows("r", "t", &infos, &gpipe_step(1, 10.0), 0));
    assert_eq!((timed[0].timed_steps, timed[0].compute_s), (1, 6.0));

    // Counted too, step 0 adds 4 s busy (stage 0) and 1 s (stage 1) of a 5 s span.
    let all = pipeline_stage_rows("r", "t", &infos, &events, 0);
    assert_eq!((all[0].timed_steps, all[0].compute_s, all[1].compute_s), (2, 5.0, 3.5));
    assert!((all[0].bubble_measured - (1.0 - 10.0 / 14.0)).abs() < 1e-12);
    assert!((all[1].bubble_measured - (1.0 - 7.0 / 14.0)).abs() < 1e-12);
    // Stage means 5 and 3.5: max ÷ mean − 1 = 5 ÷ 4.25 − 1.
    assert!((all[0].measured_imbalance - (5.0 / 4.25 - 1.0)).abs() < 1e-12);
    assert_eq!(all[0].measured_imbalance, all[1].measured_imbalance, "one value per trial");

    // Skipping every step leaves each rank unmeasured: zeros and no timed step.
    for row in pipeline_stage_rows("r", "t", &infos, &events, 5) {
        assert_eq!((row.timed_steps, row.compute_s, row.bubble_measured, row.measured_imbalance), (0, 0.0, 0.0, 0.0));
        assert!((row.bubble_theoretical - 1.0 / 3.0).abs() < 1e-12);
    }
}

#[test]
fn hybrid_replicas_are_averaged_per_stage_before_the_imbalance() {
    // 2 stages × 2 replicas, rank = replica × 2 + stage. Compute per step: stage 0 takes 2 s
    // on replica 0 and 4 s on replica 1 (a forward, a recompute, a backward), stage 1 takes
    // 1 s on both. Stage means 3 and 1: imbalance 3 ÷ 2 − 1 = 0.5 (per rank it would be
    // 4 ÷ 2 − 1 = 1).
    let infos: Vec<PipelineStageInfo> = [(1, 1), (0, 0), (0, 1), (1, 0)]
        .into_iter()
        .map(|(replica, stage)| info("hybrid", replica, stage, 2, 1))
        .collect();
    let events = vec![
        event(0, 3, EventKind::Forward, Some(0), 0.0, 1.0),
        event(0, 3, EventKind::Backward, Some(0), 2.0, 3.0),
        event(1, 3, EventKind::Forward, Some(0), 1.0, 1.5),
        event(1, 3, EventKind::Backward, Some(0), 1.5, 2.0),
        event(0, 3, EventKind::AllReduce, None, 3.0, 4.0),
        event(2, 3, EventKind::Forward, Some(0), 0.0, 1.0),
        event(2, 3, EventKind::Recompute, Some(0), 2.0, 2.5),
        event(2, 3, EventKind::Backward, Some(0), 2.5, 5.0),
        event(3, 3, EventKind::Forward, Some(0), 1.0, 1.5),
        event(3, 3, EventKind::Backward, Some(0), 1.5, 2.0),
        // A rank the trial has no stage for is no part of it.
        event(9, 3, EventKind::Forward, Some(0), 0.0, 100.0),
    ];
    let rows = pipeline_stage_rows("r", "t", &infos, &events, 0);
    let compute: Vec<(u32, u32, u32, f64)> =
        rows.iter().map(|r| (r.info.rank, r.info.replica, r.info.stage, r.compute_s)).collect();
    assert_eq!(compute, [(0, 0, 0, 2.0), (1, 0, 1, 1.0), (2, 1, 0, 4.0), (3, 1, 1, 1.0)]);
    for row in &rows {
        assert!((row.measured_imbalance - 0.5).abs() < 1e-12, "rank {}: {}", row.info.rank, row.measured_imbalance);
        assert_eq!(row.bubble_theoretical, 0.5, "p = 2, m = 1");
    }
    // Each replica's span is its own: replica 0 runs [0, 3], replica 1 [0, 5].
    let bubbles: Vec<f64> = rows.iter().map(|r| r.bubble_measured).collect();
    assert_eq!(bubbles, [1.0 - 2.0 / 3.0, 1.0 - 1.0 / 3.0, 1.0 - 4.0 / 5.0, 1.0 - 1.0 / 5.0]);
}

#[test]
fn stage_rows_round_trip_through_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    let events: Vec<EventRow> = gpipe_step(0, 0.0)
        .into_iter()
        .map(|e| EventRow { run_id: run.clone(), trial_id: "t0000".into(), ..e })
        .collect();
    let stages = pipeline_stage_rows(&run, "t0000", &infos_2x2("gpipe"), &events, 0);
    let row = trial(&run, "t0000", 0);
    store.write_trial(TrialTables { events: &events, pipeline_stages: &stages, ..TrialTables::new(&row) }).unwrap();
    let other = trial(&run, "t0001", 1);
    store.write_trial(TrialTables::new(&other)).unwrap();

    let reopened = RunStore::open(store.run_dir()).expect("open");
    assert_eq!(reopened.load_rows::<PipelineStageRow>().unwrap(), stages);
    let frame = reopened.load(PipelineStageRow::NAME).unwrap();
    assert_eq!(frame.schema().as_ref(), &PipelineStageRow::schema());
    assert_eq!(frame.column("stage").unwrap().dtype(), &DataType::UInt32);
    assert_eq!(frame.column("peak_activation_bytes").unwrap().null_count(), 1);
    // One trial's part alone, without loading the others'.
    assert_eq!(reopened.load_trial_rows::<EventRow>("t0000").unwrap(), events);
    assert_eq!(reopened.load_trial_rows::<PipelineStageRow>("t0000").unwrap(), stages);
    assert!(reopened.load_trial_rows::<PipelineStageRow>("t0001").unwrap().is_empty());
    assert!(reopened.load_trial_rows::<EventRow>("never-ran").unwrap().is_empty());
    assert!(reopened.load_trial_rows::<EventRow>("../escape").is_err());

    let exported = reopened.export(ExportFormat::Csv, &dir.path().join("csv")).unwrap();
    assert!(exported.contains(&dir.path().join("csv").join("pipeline_stages.csv")), "{exported:?}");
}

#[test]
fn a_run_stored_before_the_table_existed_loads_without_stage_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    store.write_trial(TrialTables::new(&trial(&run, "t0000", 0))).unwrap();
    // An older build wrote no `pipeline_stages/` folder at all.
    fs::remove_dir_all(store.run_dir().join(PipelineStageRow::NAME)).unwrap();

    let frame = store.load(PipelineStageRow::NAME).expect("a missing folder is an empty table");
    assert_eq!((frame.height(), frame.schema().as_ref()), (0, &PipelineStageRow::schema()));
    assert!(store.load_trial_rows::<PipelineStageRow>("t0000").unwrap().is_empty());
    let reopened = RunStore::open(store.run_dir()).expect("an older run opens");
    assert!(reopened.load_rows::<PipelineStageRow>().unwrap().is_empty());
    assert_eq!(reopened.load_rows::<stratlab_results::TrialRow>().unwrap().len(), 1);
}
