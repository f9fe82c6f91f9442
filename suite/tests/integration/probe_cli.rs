//! `stratlab probe` in local mode (it starts its own ranks on 127.0.0.1), seen from outside:
//! what it stores and prints, the input it refuses, and how a failing or slow rank ends it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use stratlab_results::{ProbeRow, RunStore};

fn stratlab(args: &[&str], store: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .args(args)
        .arg("--store")
        .arg(store)
        // Local mode: no launch variables inherited from whoever runs the tests.
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .expect("run stratlab")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn local_probe_of_two_workers_stores_their_pair_and_the_all_reduce_and_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs");
    let out = stratlab(&["probe", "--workers", "2", "--sizes", "4,64K", "--repeats", "3", "--warmup", "1"], &store);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // One ping-pong per pair: its round trip crosses the link both ways.
    assert!(stdout.contains("0→1") && !stdout.contains("1→0") && stdout.contains("64 KiB"), "{stdout}");
    assert!(stdout.contains("busbw GB/s"), "{stdout}");

    let runs: Vec<_> = std::fs::read_dir(&store).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(stdout.contains(&format!("probe run: {}", runs[0].display())), "{stdout}");
    let rows: Vec<ProbeRow> = RunStore::open(&runs[0]).unwrap().load_rows().unwrap();
    let mut keys: Vec<(String, Option<u32>, Option<u32>, u64)> =
        rows.iter().map(|row| (row.kind.name().to_owned(), row.src, row.dst, row.bytes)).collect();
    keys.sort();
    let expected: Vec<(String, Option<u32>, Option<u32>, u64)> = vec![
        ("all_reduce".into(), None, None, 4),
        ("all_reduce".into(), None, None, 65536),
        ("all_reduce_loaded".into(), None, None, 4),
        ("all_reduce_loaded".into(), None, None, 65536),
        ("p2p".into(), Some(0), Some(1), 4),
        ("p2p".into(), Some(0), Some(1), 65536),
    ];
    assert_eq!(keys, expected);
    for row in &rows {
        assert_eq!((row.repeats, row.world_size), (3, 2), "{row:?}");
        assert!(row.min_s > 0.0 && row.min_s <= row.median_s && row.median_s <= row.max_s, "{row:?}");
        let expected_gbps = row.bytes as f64 / row.median_s / 1e9;
        assert!((row.algorithm_gbps - expected_gbps).abs() <= 1e-9 * expected_gbps, "{row:?}");
    }
}

#[test]
fn a_probe_told_to_time_only_the_loaded_all_reduce_stores_no_idle_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs");
    let args = ["probe", "--workers", "2", "--sizes", "4", "--repeats", "2", "--warmup", "0", "--all-reduce", "loaded"];
    let out = stratlab(&args, &store);
    assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    let runs: Vec<_> = std::fs::read_dir(&store).unwrap().map(|e| e.unwrap().path()).collect();
    let rows: Vec<ProbeRow> = RunStore::open(&runs[0]).unwrap().load_rows().unwrap();
    let mut kinds: Vec<&str> = rows.iter().map(|row| row.kind.name()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["all_reduce_loaded", "p2p"]);
}

#[test]
fn probe_of_one_worker_says_there_is_nothing_to_measure() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs");
    let out = stratlab(&["probe", "--workers", "1"], &store);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("nothing to measure"), "{}", text(&out.stderr));
    assert!(!store.exists(), "nothing is stored");
}

#[test]
fn probe_refuses_zero_workers_and_sizes_that_are_not_float32_buffers() {
    let dir = tempfile::tempdir().unwrap();
    for (args, message) in [
        (&["probe", "--workers", "0"][..], "at least 2"),
        (&["probe", "--sizes", "4,6"][..], "6 bytes is not a positive multiple of 4"),
        (&["probe", "--sizes", ""][..], "empty size"),
        (&["probe", "--repeats", "0"][..], "--repeats"),
    ] {
        let out = stratlab(args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(message), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn a_rank_that_fails_stops_the_others_and_fails_the_probe_naming_it() {
    // Rank 0 cannot create the store (a path under a file); rank 1 would wait for it until
    // its 120 s rendezvous timeout if the launcher did not stop it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let started = Instant::now();
    let out = stratlab(&["probe", "--sizes", "4", "--repeats", "1"], &file.join("runs"));
    let waited = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("rank 0 of 2 failed (exit code 1"), "{stderr}");
    assert!(stderr.contains("creating the store folder"), "rank 0's own error is shown: {stderr}");
    assert!(waited < Duration::from_secs(60), "took {waited:?}: rank 1 was not stopped");
}

#[test]
fn a_probe_past_its_time_limit_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = stratlab(&["probe", "--sizes", "64M", "--repeats", "100000", "--time-limit", "2"], dir.path());
    let waited = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not finish within --time-limit 2 s"), "{stderr}");
    assert!(waited < Duration::from_secs(30), "took {waited:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a stopped probe stores no run");
}

#[test]
fn under_a_launcher_workers_must_agree_with_world_size() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .args(["probe", "--workers", "3", "--store"])
        .arg(dir.path())
        .envs([("RANK", "0"), ("WORLD_SIZE", "2")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("disagrees with WORLD_SIZE=2"), "{}", text(&out.stderr));
}
