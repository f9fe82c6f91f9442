//! Multi-worker trials through the runner: a rank that dies takes its trial down as
//! `crashed` without leaving its peer hanging, and a data-parallel trial's trace shows every
//! rank with all-reduces overlapping the backward pass.

use std::path::Path;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use stratlab_results::{EventRow, RankBreakdownRow, RunStore, TrialRow};

fn run_suite(dir: &Path, suite: &str, fault: Option<&str>) -> RunStore {
    let path = dir.join("suite.yaml");
    std::fs::write(&path, suite).unwrap();
    let results = dir.join("results");
    let mut command = Command::cargo_bin("stratlab").unwrap();
    command.args(["run", path.to_str().unwrap(), "--store", results.to_str().unwrap(), "--no-report", "--no-predict"]);
    if let Some(fault) = fault {
        command.env("STRATLAB_TEST_FAULT", fault);
    }
    let output = command.timeout(Duration::from_secs(300)).output().unwrap();
    assert!(output.status.success(), "runner failed: {}", String::from_utf8_lossy(&output.stderr));
    RunStore::open(&crate::run_folders(&results)[0]).unwrap()
}

const SUITE: &str = "name: multi
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies:
  - name: data-parallel
    workers: [2]
    fusion_threshold_mib: 1
batch_size: 32
budget: {steps: 12}
device: cpu
warmup_steps: 2
timeout_s: 90
eval: {samples: 256, batch_size: 256}
";

#[test]
fn a_rank_killed_mid_training_crashes_the_trial_and_its_peer_exits_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // Rank 1 SIGKILLs itself after 2 steps; rank 0 is then inside or before an all-reduce.
    let store = run_suite(dir.path(), SUITE, Some("data-parallel=sigkill@1"));
    let elapsed = started.elapsed();
    let rows: Vec<TrialRow> = store.load_rows().unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.outcome.name(), "crashed");
    let reason = row.reason.clone().unwrap_or_default();
    assert!(reason.starts_with("rank 1:") && reason.contains("SIGKILL"), "{reason}");
    // The surviving rank ended on its own, by an error, long before the trial's 90 s
    // timeout would have killed it (which would have recorded `timeout`).
    assert!(row.wall_time_s < 60.0, "trial took {} s", row.wall_time_s);
    assert!(elapsed < Duration::from_secs(120), "run took {elapsed:?}");
}

#[test]
fn a_data_parallel_trace_has_every_rank_and_all_reduces_overlapping_backward() {
    let dir = tempfile::tempdir().unwrap();
    let store = run_suite(dir.path(), SUITE, None);
    let rows: Vec<TrialRow> = store.load_rows().unwrap();
    assert_eq!(rows[0].outcome.name(), "ok", "{:?}", rows[0].reason);
    let trace_path = store.trace_path(&rows[0].trial_id);
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace_path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let complete: Vec<&serde_json::Value> = events.iter().filter(|event| event["ph"] == "X").collect();
    for event in &complete {
        for field in ["name", "cat", "ts", "dur", "pid", "tid", "args"] {
            assert!(event.get(field).is_some(), "event without {field}: {event}");
        }
        assert!(event["dur"].as_f64().unwrap() >= 0.0);
    }
    let ranks: std::collections::BTreeSet<u64> = complete.iter().map(|event| event["pid"].as_u64().unwrap()).collect();
    assert_eq!(ranks.into_iter().collect::<Vec<_>>(), vec![0, 1], "every rank present");
    for kind in ["forward", "backward", "all_reduce", "optimizer", "data_wait"] {
        assert!(complete.iter().any(|event| event["cat"] == kind), "no {kind} event");
    }

    // From the events table: on each rank, some all-reduce runs while a later (earlier-stage)
    // backward computes: communication overlapped with compute.
    let table: Vec<EventRow> = store.load_rows().unwrap();
    for rank in [0, 1] {
        let of_rank: Vec<&EventRow> = table.iter().filter(|event| event.rank == rank).collect();
        let overlapping =
            of_rank.iter().filter(|event| event.kind.name() == "all_reduce" && event.step >= 2).any(|reduce| {
                of_rank.iter().any(|backward| {
                    backward.kind.name() == "backward"
                        && backward.step == reduce.step
                        && backward.start_s < reduce.end_s
                        && reduce.start_s < backward.end_s
                })
            });
        assert!(overlapping, "rank {rank}: no all-reduce overlaps a backward stage");
        assert!(of_rank.iter().filter(|e| e.kind.name() == "all_reduce").all(|e| e.bytes.unwrap_or(0) > 0));
    }
    let breakdown: Vec<RankBreakdownRow> = store.load_rows().unwrap();
    assert_eq!(breakdown.len(), 2);
    for rank in &breakdown {
        assert_eq!(rank.steps, 10, "12 steps minus 2 warm-up");
        assert!(rank.overlapped_communication_s > 0.0, "{rank:?}");
        let parts = rank.compute_s + rank.exposed_communication_s + rank.idle_s;
        assert!((parts - rank.wall_s).abs() < 1e-6 * rank.wall_s.max(1.0), "{rank:?}");
    }
}
