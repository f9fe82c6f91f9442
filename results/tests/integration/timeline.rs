//! Per-rank timelines seen from outside: events and their breakdown stored with a trial,
//! the Chrome trace written beside them, the breakdown's numbers, and probe runs.

use std::fs;

use crate::common::{assert_schema_matches_serde, event, fingerprint, new_store, trial};
use polars::prelude::DataType;
use serde_json::Value;
use stratlab_results::{
    chrome_trace, rank_breakdown, EventKind, EventRow, ProbeKind, ProbeRow, ProbeSpec, RankBreakdownRow, RunStore,
    Table, TrialTables, TABLE_NAMES,
};

/// The events of one trial of run `run_id`, with labels and micro-batches set on some.
fn trial_events(run_id: &str, trial_id: &str) -> Vec<EventRow> {
    let mut events = vec![
        event(0, 0, EventKind::Forward, 0.0, 0.25),
        event(0, 0, EventKind::AllReduce, 0.125, 0.375),
        event(1, 0, EventKind::Forward, 0.0, 0.3125),
        event(1, 0, EventKind::Send, 0.3125, 0.5),
    ];
    events[1].name = "bucket 2".into();
    events[2].micro_batch = Some(3);
    events[2].name = "stage 1".into();
    for e in &mut events {
        e.run_id = run_id.into();
        e.trial_id = trial_id.into();
    }
    events
}

/// The breakdown of a hand-made timeline; every time is a multiple of 1/4 so the expected
/// sums are exact in binary floating point.
///
/// - rank 0, step 0 (warm-up): forward [0, 1.75] — left out with `skip_steps` 1.
/// - rank 0, step 1: forward [2, 3], all-reduce [2.5, 3.5] → compute 1, communication 1, of
///   it 0.5 overlapped and 0.5 exposed, idle 0; an evaluation [3.5, 5] is no part of it.
/// - rank 1, step 1: data wait [9.5, 10], forward [10, 12] and backward [11, 13] overlapping,
///   all-reduce [12.5, 14] with a send [13, 13.5] nested in it, a gap, optimizer [15, 15.5].
///   Span 6; compute [10, 13] ∪ [15, 15.5] = 3.5; communication [12.5, 14] = 1.5, 0.5 of it
///   under the backward; idle = the wait 0.5 + the gap [14, 15] = 1.5.
/// - rank 1, step 2: forward [20, 21] alone: wall 1, compute 1.
/// - rank 2 ran only warm-up steps.
fn hand_made_timeline() -> Vec<EventRow> {
    vec![
        event(0, 0, EventKind::Forward, 0.0, 1.75),
        event(0, 1, EventKind::Forward, 2.0, 3.0),
        event(0, 1, EventKind::AllReduce, 2.5, 3.5),
        event(0, 1, EventKind::Eval, 3.5, 5.0),
        event(1, 1, EventKind::DataWait, 9.5, 10.0),
        event(1, 1, EventKind::Forward, 10.0, 12.0),
        event(1, 1, EventKind::Backward, 11.0, 13.0),
        event(1, 1, EventKind::AllReduce, 12.5, 14.0),
        event(1, 1, EventKind::Send, 13.0, 13.5),
        event(1, 1, EventKind::Optimizer, 15.0, 15.5),
        event(1, 2, EventKind::Forward, 20.0, 21.0),
        event(2, 0, EventKind::Forward, 0.0, 1.0),
    ]
}

fn breakdown(rank: u32, steps: u64, times: [f64; 6], overlap_share: Option<f64>) -> RankBreakdownRow {
    let [wall_s, compute_s, communication_s, exposed_communication_s, overlapped_communication_s, idle_s] = times;
    RankBreakdownRow {
        run_id: "r".into(),
        trial_id: "t".into(),
        rank,
        steps,
        wall_s,
        compute_s,
        communication_s,
        exposed_communication_s,
        overlapped_communication_s,
        idle_s,
        overlap_share,
    }
}

#[test]
fn schemas_of_the_new_tables_list_every_serde_field() {
    assert_schema_matches_serde(&trial_events("r", "t")[2]);
    assert_schema_matches_serde(&rank_breakdown("r", "t", &trial_events("r", "t"), 0)[0]);
    let spec = ProbeSpec {
        run_id: "r".into(),
        kind: ProbeKind::P2p,
        backend: "gloo".into(),
        world_size: 2,
        src: Some(0),
        dst: Some(1),
        bytes: 1024,
    };
    assert_schema_matches_serde(&ProbeRow::from_times(spec, &[1e-3]).unwrap());
}

#[test]
fn breakdown_of_a_hand_made_two_rank_timeline_has_exact_numbers() {
    let rows = rank_breakdown("r", "t", &hand_made_timeline(), 1);
    // [wall, compute, communication, exposed, overlapped, idle]
    assert_eq!(
        rows,
        [
            breakdown(0, 1, [1.5, 1.0, 1.0, 0.5, 0.5, 0.0], Some(0.5)),
            breakdown(1, 2, [7.0, 4.5, 1.5, 1.0, 0.5, 1.5], Some(1.0 / 3.0)),
            breakdown(2, 0, [0.0; 6], None),
        ]
    );
    for row in &rows {
        assert_eq!(row.wall_s, row.compute_s + row.exposed_communication_s + row.idle_s, "rank {}", row.rank);
    }

    // Without warm-up skipped, rank 0's step 0 (forward only, 1.75 s) counts too.
    let all_steps = rank_breakdown("r", "t", &hand_made_timeline(), 0);
    assert_eq!(all_steps[0], breakdown(0, 2, [3.25, 2.75, 1.0, 0.5, 0.5, 0.0], Some(0.5)));
    assert_eq!(all_steps[2], breakdown(2, 1, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0], None));
}

#[test]
fn a_blocking_send_on_the_training_thread_counts_as_exposed_communication() {
    let mut send = event(0, 0, EventKind::Send, 1.0, 1.5);
    send.lane = stratlab_results::Lane::Compute;
    let rows = rank_breakdown("r", "t", &[event(0, 0, EventKind::Forward, 0.0, 1.0), send], 0);
    assert_eq!(rows, [breakdown(0, 1, [1.5, 1.0, 0.5, 0.5, 0.0, 0.0], Some(0.0))]);
}

#[test]
fn events_and_breakdown_round_trip_through_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    let events = trial_events(&run, "t0000");
    let breakdown = rank_breakdown(&run, "t0000", &events, 0);
    let row = trial(&run, "t0000", 0);
    store.write_trial(TrialTables { events: &events, rank_breakdown: &breakdown, ..TrialTables::new(&row) }).unwrap();

    let reopened = RunStore::open(store.run_dir()).expect("open");
    assert_eq!(reopened.load_rows::<EventRow>().unwrap(), events);
    assert_eq!(reopened.load_rows::<RankBreakdownRow>().unwrap(), breakdown);
    let frame = reopened.load("events").unwrap();
    assert_eq!(frame.column("rank").unwrap().dtype(), &DataType::UInt32);
    assert_eq!(frame.column("micro_batch").unwrap().null_count(), 3);
    // Rank 1 sends and never computes beside it: no overlap, and the share is 0, not null.
    let shares = reopened.load("rank_breakdown").unwrap().column("overlap_share").unwrap().f64().unwrap().to_vec();
    assert_eq!(shares, [Some(0.5), Some(0.0)]);
}

#[test]
fn tables_a_trial_has_no_rows_for_read_back_empty_with_their_schema() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    store.write_trial(TrialTables::new(&trial(&run, "t0000", 0))).unwrap();
    assert!(store.run_dir().join("events").join("t0000.parquet").is_file(), "an empty part is still written");
    let events = store.load(EventRow::NAME).unwrap();
    assert_eq!((events.height(), events.schema().as_ref()), (0, &EventRow::schema()));
    let breakdown = store.load(RankBreakdownRow::NAME).unwrap();
    assert_eq!((breakdown.height(), breakdown.schema().as_ref()), (0, &RankBreakdownRow::schema()));
    assert!(store.load_rows::<EventRow>().unwrap().is_empty());
    assert!(!store.trace_path("t0000").exists(), "no events, no trace");
}

#[test]
fn a_trial_with_events_gets_a_chrome_trace_with_one_slice_per_event() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    let events = trial_events(&run, "t0000");
    store.write_trial(TrialTables { events: &events, ..TrialTables::new(&trial(&run, "t0000", 0)) }).unwrap();

    let path = store.trace_path("t0000");
    assert_eq!(path, store.run_dir().join("traces").join("t0000.json"));
    let trace: Value = serde_json::from_slice(&fs::read(&path).expect("trace written")).expect("trace parses");
    assert_eq!(trace, chrome_trace(&events));
    assert_eq!(trace["displayTimeUnit"], "ms");
    let entries = trace["traceEvents"].as_array().expect("traceEvents");
    let slices: Vec<&Value> = entries.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(slices.len(), events.len());

    // The all-reduce of bucket 2: rank 0's comm lane, from 0.125 s for 0.25 s, in µs.
    let bucket = slices[1];
    assert_eq!((bucket["pid"].as_u64(), bucket["tid"].as_u64()), (Some(0), Some(1)));
    assert_eq!((bucket["name"].as_str(), bucket["cat"].as_str()), (Some("all_reduce"), Some("all_reduce")));
    assert_eq!((bucket["ts"].as_f64(), bucket["dur"].as_f64()), (Some(125_000.0), Some(250_000.0)));
    assert_eq!(bucket["args"]["bytes"], 4 << 20);
    assert_eq!(bucket["args"]["name"], "bucket 2");
    assert_eq!(slices[2]["args"]["micro_batch"], 3);
    assert_eq!((slices[2]["pid"].as_u64(), slices[2]["tid"].as_u64()), (Some(1), Some(0)));

    let names = |kind: &str| -> Vec<(u64, Option<u64>, String)> {
        entries
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == kind)
            .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64(), e["args"]["name"].as_str().unwrap().to_owned()))
            .collect()
    };
    assert_eq!(names("process_name"), [(0, None, "rank 0".into()), (1, None, "rank 1".into())]);
    assert_eq!(
        names("thread_name"),
        [
            (0, Some(0), "compute".into()),
            (0, Some(1), "comm".into()),
            (1, Some(0), "compute".into()),
            (1, Some(1), "comm".into())
        ]
    );
}

#[test]
fn rewriting_a_trial_without_events_removes_its_old_trace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let run = store.run_id().to_owned();
    let row = trial(&run, "t0000", 0);
    let events = trial_events(&run, "t0000");
    store.write_trial(TrialTables { events: &events, ..TrialTables::new(&row) }).unwrap();
    assert!(store.trace_path("t0000").is_file());
    store.write_trial(TrialTables::new(&row)).unwrap();
    assert!(!store.trace_path("t0000").exists(), "a stale trace would describe the earlier attempt");
    assert!(store.load_rows::<EventRow>().unwrap().is_empty());
}

#[test]
fn bus_bandwidth_is_algorithm_bandwidth_times_2_w_minus_1_over_w() {
    let probe = |kind, world_size| {
        let spec = ProbeSpec {
            run_id: "r".into(),
            kind,
            backend: "nccl".into(),
            world_size,
            src: None,
            dst: None,
            bytes: 1 << 30,
        };
        // Median 0.5 s of 2^30 bytes: 2.147483648 GB/s.
        ProbeRow::from_times(spec, &[1.0, 0.5, 0.25]).unwrap()
    };
    let algorithm = 2.147483648;
    let w2 = probe(ProbeKind::AllReduce, 2);
    assert_eq!((w2.median_s, w2.min_s, w2.max_s, w2.repeats), (0.5, 0.25, 1.0, 3));
    assert_eq!(w2.algorithm_gbps, algorithm);
    assert_eq!(w2.bus_gbps, algorithm, "W = 2: 2(W−1)/W = 1");
    let w4 = probe(ProbeKind::AllReduce, 4);
    assert_eq!(w4.algorithm_gbps, algorithm);
    assert_eq!(w4.bus_gbps, algorithm * 1.5, "W = 4: 2(W−1)/W = 1.5");
    assert_eq!(w4.kind, stratlab_results::ProbeKind::AllReduce);
    let p2p = probe(ProbeKind::P2p, 4);
    assert_eq!(p2p.bus_gbps, p2p.algorithm_gbps);
}

#[test]
fn a_probe_run_opens_again_and_reads_its_probes_back_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = RunStore::create_probe(&dir.path().join("runs"), &fingerprint()).expect("create probe run");
    assert!(store.run_id().ends_with("Z-probe"), "{}", store.run_id());
    assert!(!store.run_dir().join("suite.yaml").exists());
    let row = |kind, src, dst, bytes, time_s| {
        let spec =
            ProbeSpec { run_id: store.run_id().into(), kind, backend: "gloo".into(), world_size: 2, src, dst, bytes };
        ProbeRow::from_times(spec, &[time_s]).unwrap()
    };
    let p2p = vec![
        row(ProbeKind::P2p, Some(0), Some(1), 1 << 20, 1e-3),
        row(ProbeKind::P2p, Some(1), Some(0), 1 << 20, 2e-3),
    ];
    let all_reduce = vec![row(ProbeKind::AllReduce, None, None, 1 << 26, 0.125)];
    store.write_probes(&p2p).unwrap();
    store.write_probes(&all_reduce).unwrap();
    store.write_probes(&[]).unwrap();

    let reopened = RunStore::open(store.run_dir()).expect("a probe run opens");
    assert_eq!(reopened.load_rows::<ProbeRow>().unwrap(), [p2p, all_reduce].concat());
    assert_eq!(reopened.fingerprint().unwrap(), fingerprint());
    assert!(reopened.finished_trial_ids().unwrap().is_empty());
    assert_eq!(reopened.load("trials").unwrap().height(), 0);
    let exported = reopened.export(stratlab_results::ExportFormat::Csv, &dir.path().join("csv")).unwrap();
    assert_eq!(exported.len(), TABLE_NAMES.len());
}
