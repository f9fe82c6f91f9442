//! The Pipelines part of a run's report, on a hand-made run whose stage rows come from
//! hand-made events through `stratlab_results::pipeline_stage_rows`: GPipe and 1F1B at two
//! micro-batch counts each and a hybrid run of 2 replicas × 2 stages with recompute, next
//! to a `single` trial; and a run without pipelines, whose report has no such part.
//!
//! Every step is the textbook fill and drain of 2 stages (forwards of 0.25 s, backwards of
//! 0.5 s), so each stage's measured bubble is exactly (p − 1)/(m + p − 1) = 1/(m + 1).

use crate::store_fixtures;

use std::path::Path;

use stratlab_reports::aggregate::{split_backward_stages, PipelineTrial};
use stratlab_reports::tables::{pipeline_stages_table, split_backward_table};
use stratlab_reports::{aggregate_run, summary_tables, write_run_report, Format};
use stratlab_results::DataSource;
use stratlab_results::{
    pipeline_stage_rows, EventKind, EventRow, PipelineStageInfo, PredictedPassRow, RunStore, TrialRow, TrialTables,
};

const FORWARD_S: f64 = 0.25;
const BACKWARD_S: f64 = 0.5;
/// Steps 0 (warm-up), 1 and 2, each 10 s after the last.
const STEPS: u64 = 3;

/// A trial of resnet18 on CIFAR-10 (real data) with one warm-up step.
fn trial(store: &RunStore, index: i64, strategy: &str, workers: i64, micro_batches: Option<i64>) -> TrialRow {
    let m = micro_batches.map_or(String::new(), |m| format!("__m{m}"));
    TrialRow {
        strategy: strategy.parse().unwrap(),
        parameters: (&crate::common::strategy_of(strategy, micro_batches)).into(),
        workers,
        global_batch: 32 * workers,
        data_source: DataSource::Real,
        warmup_steps: 1,
        ..store_fixtures::trial(store.run_id(), &format!("resnet18__cifar10__{strategy}__w{workers}{m}__r0"), index)
    }
}

fn info(schedule: &str, replica: u32, stage: u32, micro_batches: u32) -> PipelineStageInfo {
    PipelineStageInfo {
        rank: replica * 2 + stage,
        replica,
        stage,
        stage_replica: None,
        stages: 2,
        virtual_stages: None,
        schedule: schedule.parse().unwrap(),
        micro_batches,
        balance: "uniform".into(),
        layers: if stage == 0 { "conv1+layer1+layer2".into() } else { "layer3+layer4+fc".into() },
        first_layer: 3 * stage,
        layer_count: 3,
        parameters: 5_000_000 + 1_000 * u64::from(stage),
        predicted_cost: 3.0,
        cost_unit: "layers".into(),
        predicted_imbalance: 0.2,
        peak_activation_bytes: Some(3 << 20),
    }
}

/// One fill-and-drain step of 2 stages on ranks `first_rank` and `first_rank + 1`, from `t0`.
/// With `recompute`, stage 0 re-runs each forward in the first half of its backward.
fn step_events(trial: &TrialRow, first_rank: u32, step: u64, m: u32, t0: f64, recompute: bool) -> Vec<EventRow> {
    let event = |stage: u32, kind: EventKind, micro_batch: Option<u32>, start_s: f64, end_s: f64| EventRow {
        run_id: trial.run_id.clone(),
        trial_id: trial.trial_id.clone(),
        micro_batch,
        pipeline_stage: Some(stage),
        name: format!("stage {stage}"),
        ..store_fixtures::event(first_rank + stage, step, kind, t0 + start_s, t0 + end_s)
    };
    let mut events = Vec::new();
    let drain = f64::from(m + 1) * FORWARD_S;
    for mb in 0..m {
        let i = f64::from(mb);
        events.push(event(0, EventKind::Forward, Some(mb), i * FORWARD_S, (i + 1.0) * FORWARD_S));
        events.push(event(0, EventKind::Send, Some(mb), (i + 1.0) * FORWARD_S, (i + 1.0) * FORWARD_S + 0.01));
        events.push(event(1, EventKind::Forward, Some(mb), (i + 1.0) * FORWARD_S, (i + 2.0) * FORWARD_S));
        // Backwards in reverse micro-batch order, stage 1 first.
        let order = f64::from(m - 1 - mb);
        let last = drain + order * BACKWARD_S;
        events.push(event(1, EventKind::Backward, Some(mb), last, last + BACKWARD_S));
        let first = last + BACKWARD_S;
        if recompute {
            let half = first + BACKWARD_S / 2.0;
            events.push(event(0, EventKind::Recompute, Some(mb), first, half));
            events.push(event(0, EventKind::Backward, Some(mb), half, first + BACKWARD_S));
        } else {
            events.push(event(0, EventKind::Backward, Some(mb), first, first + BACKWARD_S));
        }
    }
    let end = drain + f64::from(m + 1) * BACKWARD_S;
    for stage in 0..2 {
        events.push(event(stage, EventKind::Optimizer, None, end, end + 0.05));
    }
    events
}

/// Writes a pipeline trial: `replicas` copies of the 2-stage pipeline, every step.
fn write_pipeline(store: &RunStore, row: &TrialRow, schedule: &str, m: u32, replicas: u32) {
    let mut events = Vec::new();
    for step in 0..STEPS {
        for replica in 0..replicas {
            events.extend(step_events(row, replica * 2, step, m, 10.0 * step as f64, replica == 1));
        }
    }
    let infos: Vec<PipelineStageInfo> =
        (0..replicas).flat_map(|replica| (0..2).map(move |stage| info(schedule, replica, stage, m))).collect();
    let stages = pipeline_stage_rows(&row.run_id, &row.trial_id, &infos, &events, 1);
    store
        .write_trial(TrialTables { events: &events, pipeline_stages: &stages, ..TrialTables::new(row) })
        .expect("write pipeline trial");
}

/// The pipeline run described at the top of the file, and its trials in matrix order.
fn pipeline_run(root: &Path) -> (RunStore, Vec<TrialRow>) {
    let store = store_fixtures::new_store(root);
    let single = trial(&store, 0, "single", 1, None);
    store.write_trial(TrialTables::new(&single)).expect("write single");
    let mut trials = vec![single];
    for (index, (schedule, m)) in [("gpipe", 2), ("gpipe", 4), ("1f1b", 2), ("1f1b", 4)].into_iter().enumerate() {
        let row = trial(&store, index as i64 + 1, schedule, 2, Some(i64::from(m)));
        write_pipeline(&store, &row, schedule, m, 1);
        trials.push(row);
    }
    let hybrid = trial(&store, 5, "hybrid", 4, Some(2));
    write_pipeline(&store, &hybrid, "hybrid", 2, 2);
    trials.push(hybrid);
    (store, trials)
}

#[test]
fn the_pipeline_table_has_a_row_per_trial_and_stage_with_exact_bubbles() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = pipeline_run(dir.path());
    let aggregates = aggregate_run(&store).expect("aggregate");
    assert_eq!(aggregates.pipelines.len(), 5, "the single trial has no stages");
    let tables = summary_tables(&aggregates).expect("tables");
    assert_eq!(tables.last().map(|t| t.name.as_str()), Some("pipeline_stages"));

    let table = pipeline_stages_table(&aggregates).expect("table");
    let (header, rows, numeric) = table.cells();
    assert_eq!(rows.len(), 5 * 2, "two stages per trial; the hybrid's replicas share a row");
    let column = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}: {header:?}"));
    let shown = [
        "strategy",
        "stage",
        "replicas",
        "schedule",
        "m",
        "balance",
        "layers",
        "imbalance predicted (%)",
        "imbalance measured (%)",
        "bubble measured (%)",
        "bubble predicted (%)",
        "bubble theoretical (%)",
        "peak activations (MiB)",
        "compute (ms/step)",
        "timed steps",
    ];
    let row_of = |i: usize| shown.iter().map(|name| rows[i][column(name)].as_str()).collect::<Vec<_>>();
    // m = 2: 2 × (0.25 + 0.5) s of compute in a 2.25 s step, bubble 1/3.
    assert_eq!(
        row_of(0),
        [
            "gpipe (m2)",
            "0",
            "1",
            "gpipe",
            "2",
            "uniform",
            "conv1+layer1+layer2",
            "20.0",
            "0",
            "33.3",
            "—",
            "33.3",
            "3.00",
            "1500",
            "2"
        ]
    );
    // m = 4: bubble 1/5 = 20 %, compute 3 s per step.
    let m4 = row_of(3);
    assert_eq!((m4[0], m4[1], m4[9], m4[11], m4[13]), ("gpipe (m4)", "1", "20.0", "20.0", "3000"));
    assert_eq!((row_of(4)[0], row_of(6)[0]), ("1f1b (m2)", "1f1b (m4)"));
    // The hybrid's stages: two replicas each, one micro-batch count, so no `m` in the label.
    let hybrid = row_of(8);
    assert_eq!((hybrid[0], hybrid[2], hybrid[3], hybrid[9], hybrid[13]), ("hybrid", "2", "hybrid", "33.3", "1500"));
    assert_eq!(rows[8][column("W")], "4");
    assert!(["bubble measured (%)", "compute (ms/step)", "parameters"].iter().all(|name| numeric[column(name)]));
}

#[test]
fn a_timeline_is_the_first_step_after_warm_up_with_a_row_per_rank() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, trials) = pipeline_run(dir.path());
    let aggregates = aggregate_run(&store).expect("aggregate");
    let timeline_of = |pipeline: &PipelineTrial| {
        let events: Vec<EventRow> = store.load_trial_rows(&pipeline.trial.trial_id).expect("events");
        pipeline.timeline(&events, &aggregates.labels.strategy(&pipeline.trial.key)).expect("a timeline")
    };

    let gpipe = timeline_of(&aggregates.pipelines[0]);
    assert_eq!(gpipe.title, "resnet18 / cifar10 · gpipe (m2) W=2, 2 stages, m = 2 · step 1");
    assert_eq!((gpipe.workers, gpipe.worker_labels.clone()), (2, vec!["stage 0".to_owned(), "stage 1".to_owned()]));
    // Step 1 runs from 10 s: 4 forwards, 4 backwards, 2 sends and 2 optimizer steps.
    assert_eq!(gpipe.events.len(), 12);
    let (start_s, end_s) = gpipe.span_s().expect("events");
    assert!(start_s == 10.0 && (end_s - 12.3).abs() < 1e-9, "{start_s}..{end_s}");
    assert_eq!(gpipe.events.iter().filter(|e| matches!(e.kind, EventKind::Send | EventKind::Recv)).count(), 2);

    let hybrid = timeline_of(&aggregates.pipelines[4]);
    assert_eq!(aggregates.pipelines[4].trial.trial_id, trials[5].trial_id);
    assert!(hybrid.title.contains("2 stages × 2 replicas, m = 2 · step 1"), "{}", hybrid.title);
    assert_eq!(hybrid.workers, 4);
    assert_eq!(hybrid.worker_labels[3], "replica 1 · stage 1");
    let recomputed: Vec<(u32, Option<u32>)> =
        hybrid.events.iter().filter(|e| e.kind == EventKind::Recompute).map(|e| (e.worker, e.micro_batch)).collect();
    assert_eq!(recomputed, [(2, Some(0)), (2, Some(1))], "replica 1's stage 0 recomputes");

    // A send of the step that began before its first pass (PipeDream's, carried over) is
    // drawn from that pass; one over before it is not drawn.
    let mut carried: Vec<EventRow> = store.load_trial_rows(&aggregates.pipelines[0].trial.trial_id).expect("events");
    let send = carried.iter().find(|e| e.step == 1 && e.kind == EventKind::Send).expect("a send").clone();
    carried.push(EventRow { start_s: 8.0, end_s: 10.05, ..send.clone() });
    carried.push(EventRow { start_s: 8.0, end_s: 9.5, ..send });
    let clipped = aggregates.pipelines[0].timeline(&carried, "gpipe").expect("a timeline");
    assert_eq!(clipped.events.len(), 13);
    assert_eq!(clipped.span_s().map(|(start, _)| start), Some(10.0));

    // No compute event at all: nothing to draw.
    assert!(aggregates.pipelines[0].timeline(&[], "gpipe").is_none());
}

#[test]
fn the_bubble_figure_compares_the_schedules_across_micro_batch_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = pipeline_run(dir.path());
    let figures = aggregate_run(&store).expect("aggregate").pipeline_bubbles();
    assert_eq!(figures.len(), 1, "hybrid is no flushed schedule");
    let figure = &figures[0];
    assert_eq!((figure.network.as_str(), figure.dataset.as_str(), figure.stages), ("resnet18", "cifar10", 2));
    let points: Vec<(&str, u32, f64)> = figure
        .points
        .iter()
        .map(|p| (p.schedule.name(), p.micro_batches, p.bubble.stat().expect("measured").median))
        .collect();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert_eq!(
        points.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(),
        [("gpipe", 2), ("gpipe", 4), ("1f1b", 2), ("1f1b", 4)]
    );
    assert!(points.iter().all(|&(_, m, bubble)| close(bubble, 1.0 / f64::from(m + 1))), "{points:?}");
}

#[test]
fn the_run_report_gets_a_pipelines_section_with_its_figures_and_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, trials) = pipeline_run(dir.path());
    let out = dir.path().join("report");
    let report = write_run_report(store.run_dir(), &out, Format::Svg, None).expect("report");
    let figures = out.join("figures");
    assert!(report.figures.contains(&figures.join("pipeline_bubble_resnet18_cifar10_p2.svg")), "{:?}", report.figures);
    for trial in &trials[1..] {
        let path = figures.join(format!("pipeline_timeline_{}.svg", trial.trial_id));
        assert!(report.figures.contains(&path) && path.is_file(), "no timeline of {}", trial.trial_id);
    }
    assert!(!figures.join(format!("pipeline_timeline_{}.svg", trials[0].trial_id)).exists(), "single is no pipeline");
    assert!(report.tables.contains(&out.join("tables/pipeline_stages.csv")));
    let markdown = std::fs::read_to_string(out.join("tables/pipeline_stages.md")).expect("Markdown");
    assert!(markdown.starts_with("# Pipeline stages") && markdown.lines().count() == 2 + 2 + 10, "{markdown}");

    let html = std::fs::read_to_string(&report.index_html).expect("page");
    assert!(html.contains("id=\"pipelines\"") && html.contains(">Pipelines<"));
    assert!(!html.contains("Pipeline timelines and bubble shares appear once"), "the run holds them");
    let hybrid = std::fs::read_to_string(figures.join(format!("pipeline_timeline_{}.svg", trials[5].trial_id)))
        .expect("hybrid timeline");
    for label in ["R0", "B1", "F0", "replica 1 · stage 0", "recompute (R)"] {
        assert!(hybrid.contains(label), "the hybrid timeline lacks {label}");
    }
}

#[test]
fn a_run_without_pipeline_trials_reports_without_the_section() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store_fixtures::new_store(dir.path());
    for (index, (strategy, workers)) in [("single", 1), ("data-parallel", 2)].into_iter().enumerate() {
        store.write_trial(TrialTables::new(&trial(&store, index as i64, strategy, workers, None))).expect("write");
    }
    // A run folder from before the table existed has no `pipeline_stages/` folder at all.
    std::fs::remove_dir_all(store.run_dir().join("pipeline_stages")).expect("remove the table");
    let aggregates = aggregate_run(&store).expect("no stages is no error");
    assert!(aggregates.pipelines.is_empty() && aggregates.pipeline_bubbles().is_empty());
    assert!(summary_tables(&aggregates).expect("tables").iter().all(|t| t.name != "pipeline_stages"));

    let out = dir.path().join("report");
    let report = write_run_report(store.run_dir(), &out, Format::Svg, None).expect("report");
    assert!(report.figures.iter().all(|f| !f.to_string_lossy().contains("pipeline")), "{:?}", report.figures);
    assert!(!out.join("tables/pipeline_stages.csv").exists());
    let html = std::fs::read_to_string(&report.index_html).expect("page");
    assert!(!html.contains("id=\"pipelines\""));
    assert!(html.contains("Pipeline timelines and bubble shares appear once"), "the note stays as it was");
}

/// The model's step of a 2-stage GPipe cell at m = 2 whose second stage is twice as slow
/// (forward 0.5 s, backward 1 s, against 0.25 and 0.5 s), each rank's update after it, as a
/// run stores it before training, for the cell of `trial`.
fn predicted_gpipe(trial: &TrialRow) -> Vec<PredictedPassRow> {
    let pass = |rank: u32, kind: EventKind, micro_batch: Option<u32>, start_s: f64, end_s: f64| PredictedPassRow {
        run_id: trial.run_id.clone(),
        trial_id: trial.trial_id.clone(),
        rank,
        kind,
        pipeline_stage: micro_batch.map(|_| rank),
        micro_batch,
        start_s,
        end_s,
    };
    vec![
        pass(0, EventKind::Forward, Some(0), 0.0, 0.25),
        pass(0, EventKind::Forward, Some(1), 0.25, 0.5),
        pass(1, EventKind::Forward, Some(0), 0.25, 0.75),
        pass(1, EventKind::Forward, Some(1), 0.75, 1.25),
        pass(1, EventKind::Backward, Some(1), 1.25, 2.25),
        pass(1, EventKind::Backward, Some(0), 2.25, 3.25),
        pass(0, EventKind::Backward, Some(1), 2.25, 2.75),
        pass(0, EventKind::Backward, Some(0), 3.25, 3.75),
        pass(1, EventKind::Optimizer, None, 3.25, 3.3),
        pass(0, EventKind::Optimizer, None, 3.75, 3.8),
    ]
}

#[test]
fn a_predicted_cell_gets_its_bubble_and_its_timeline_above_the_measured_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, trials) = pipeline_run(dir.path());
    // gpipe at m = 2 and the hybrid (one pipeline predicted for both replicas).
    let mut predicted = predicted_gpipe(&trials[1]);
    predicted.extend(predicted_gpipe(&trials[5]));
    store.write_run_rows(&predicted).expect("write predicted passes");
    let aggregates = aggregate_run(&store).expect("aggregate");

    // Over the 3.75 s from the first pass to the last, stage 0 computes 1.5 s and stage 1
    // 3 s: predicted bubbles of 60 % and 20 %, the updates left out as in the measured.
    let table = pipeline_stages_table(&aggregates).expect("table");
    let (header, rows, _) = table.cells();
    let column = |name: &str| header.iter().position(|h| h == name).expect(name);
    let bubbles: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|row| {
            (
                row[column("strategy")].as_str(),
                row[column("bubble predicted (%)")].as_str(),
                row[column("bubble measured (%)")].as_str(),
            )
        })
        .collect();
    assert_eq!(&bubbles[..2], [("gpipe (m2)", "60.0", "33.3"), ("gpipe (m2)", "20.0", "33.3")]);
    assert!(bubbles[2..8].iter().all(|(_, predicted, _)| *predicted == "—"), "unpredicted cells: {bubbles:?}");
    assert_eq!(&bubbles[8..], [("hybrid", "60.0", "33.3"), ("hybrid", "20.0", "33.3")], "one pipeline, both replicas");
    assert!((aggregates.pipelines[0].bubble_predicted().expect("predicted") - 0.4).abs() < 1e-12);

    let gpipe = &aggregates.pipelines[0];
    let timeline = gpipe.predicted_timeline("gpipe (m2)").expect("a predicted timeline");
    assert_eq!(
        (timeline.workers, timeline.worker_labels.clone()),
        (2, vec!["stage 0".to_owned(), "stage 1".to_owned()])
    );
    assert_eq!(timeline.events.len(), 10);
    assert_eq!(timeline.span_s(), Some((0.0, 3.8)));
    let hybrid = aggregates.pipelines[4].predicted_timeline("hybrid").expect("the hybrid's");
    assert_eq!(hybrid.worker_labels, ["replica 0 · stage 0", "replica 0 · stage 1"]);
    assert!(aggregates.pipelines[1].predicted_timeline("gpipe (m4)").is_none(), "its cell was not predicted");

    let out = dir.path().join("report");
    let report = write_run_report(store.run_dir(), &out, Format::Svg, None).expect("report");
    let svg = |trial: &TrialRow| {
        let path = out.join("figures").join(format!("pipeline_timeline_{}.svg", trial.trial_id));
        assert!(report.figures.contains(&path));
        std::fs::read_to_string(path).expect("timeline")
    };
    let beside = svg(&trials[1]);
    for label in [
        "predicted before training · bubble 40 %",
        "measured · bubble 33 % (mean over the timed steps)",
        "resnet18 / cifar10 · gpipe (m2) W=2, 2 stages, m = 2 · step 1",
    ] {
        assert!(beside.contains(label), "the timeline lacks {label}");
    }
    let alone = svg(&trials[2]);
    assert!(!alone.contains("predicted before training"), "an unpredicted cell draws the measured step alone");
}

/// ZB-H1 on the same 2-stage cut as the run's gpipe at m = 2: stage 1's `I` and `W` take
/// 0.3 s each against gpipe's 0.5 s backward of the same layers (a 0.1 s penalty, I + W
/// = 1.2 B); stage 0's `I` is empty and its `W` is the whole backward.
#[test]
fn zero_bubble_s_halves_are_set_beside_the_same_layers_whole_backward() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = pipeline_run(dir.path());
    let row = trial(&store, 6, "zero-bubble", 2, Some(2));
    let (input_s, weight_s) = (0.3, 0.3);
    let mut events = Vec::new();
    for step in 0..STEPS {
        let t0 = 10.0 * step as f64;
        let event = |stage: u32, kind: EventKind, mb: u32, start_s: f64, seconds: f64| EventRow {
            run_id: row.run_id.clone(),
            trial_id: row.trial_id.clone(),
            micro_batch: Some(mb),
            pipeline_stage: Some(stage),
            name: format!("stage {stage}"),
            ..store_fixtures::event(stage, step, kind, t0 + start_s, t0 + start_s + seconds)
        };
        for mb in 0..2 {
            let at = 3.0 * f64::from(mb);
            events.push(event(0, EventKind::Forward, mb, at, FORWARD_S));
            events.push(event(1, EventKind::Forward, mb, at + 0.25, FORWARD_S));
            events.push(event(1, EventKind::BackwardInput, mb, at + 0.5, input_s));
            events.push(event(1, EventKind::BackwardWeight, mb, at + 0.8, weight_s));
            events.push(event(0, EventKind::BackwardInput, mb, at + 0.8, 0.0));
            events.push(event(0, EventKind::BackwardWeight, mb, at + 0.8, BACKWARD_S));
        }
    }
    let infos: Vec<PipelineStageInfo> = (0..2).map(|stage| info("zero-bubble", 0, stage, 2)).collect();
    let stages = pipeline_stage_rows(&row.run_id, &row.trial_id, &infos, &events, 1);
    store
        .write_trial(TrialTables { events: &events, pipeline_stages: &stages, ..TrialTables::new(&row) })
        .expect("write zero-bubble trial");

    let aggregates = aggregate_run(&store).expect("aggregate");
    let events_of = aggregates
        .pipelines
        .iter()
        .map(|p| (p.trial.trial_id.clone(), store.load_trial_rows::<EventRow>(&p.trial.trial_id).unwrap()))
        .collect();
    let split = split_backward_stages(&aggregates.pipelines, &events_of);
    assert_eq!(split.len(), 2, "one row per stage of the one zero-bubble trial");
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    let (first, second) = (&split[0], &split[1]);
    assert_eq!((first.stage, first.input_s), (0, None), "the first stage's I is nothing");
    assert!(close(first.weight_s, BACKWARD_S) && close(first.penalty_s(), 0.0), "{first:?}");
    assert!(close(second.input_s, input_s) && close(second.weight_s, weight_s), "{second:?}");
    assert!(close(second.whole_s, BACKWARD_S) && close(second.penalty_s(), 0.1), "{second:?}");
    let twin = second.twin.as_ref().map(|twin| twin.trial_id.as_str());
    assert_eq!(twin, Some("resnet18__cifar10__gpipe__w2__m2__r0"), "same m, same layers");
    let table = split_backward_table(&aggregates.labels, &split).expect("table");
    let (header, rows, _) = table.cells();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows[1][column("(I + W) ÷ B")], "1.20");
    assert_eq!(rows[1][column("B measured in")], "gpipe (m2)", "named as the run's labels name it");
}
