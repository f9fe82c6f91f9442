//! `batch_size: max` end to end: the runner searches for the largest batch that trains under
//! the memory limit, the cell trains at it, and the report draws the frontier. The counting
//! allocator makes the limit exact, so the same search twice tries the same batches with
//! the same outcomes.

use std::path::Path;

use assert_cmd::Command;
use stratlab_results::{BatchProbeRow, RunStore, TrialRow};

/// The small CNN on MNIST-shaped data: a 40 MiB limit on its tensor storage fits a few
/// dozen samples (its 4.8 MB of weights, their gradients and momentum, ~0.3 MB of
/// activations per sample).
const SUITE: &str = "\
name: frontier
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
batch_size: max
memory_limit_mib: 40
budget: {steps: 2}
warmup_steps: 1
device: cpu
threads: 1
eval: {samples: 32, batch_size: 32}
";

fn run(dir: &Path, store: &Path, extra: &[&str]) -> (Vec<BatchProbeRow>, Vec<TrialRow>) {
    let suite = dir.join("frontier.yaml");
    std::fs::write(&suite, SUITE).unwrap();
    let before = crate::run_folders(store);
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .args(["run", suite.to_str().unwrap(), "--store", store.to_str().unwrap(), "--no-predict"])
        .args(extra)
        .env_remove("STRATLAB_TEST_FAULT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("largest batch of small-cnn · mnist:synthetic · single×1 · bmax: "), "{stderr}");
    let run = crate::run_folders(store).into_iter().find(|run| !before.contains(run)).expect("a new run");
    let store = RunStore::open(&run).unwrap();
    (store.load_rows().unwrap(), store.load_rows().unwrap())
}

#[test]
fn the_largest_batch_under_a_limit_is_found_the_same_twice_trained_and_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("results");
    let (first, _) = run(dir.path(), &store, &["--no-report"]);
    let (second, trials) = run(dir.path(), &store, &[]);

    let outcomes = |probes: &[BatchProbeRow]| -> Vec<(i64, bool)> {
        probes.iter().map(|probe| (probe.batch_size, probe.fits)).collect()
    };
    assert_eq!(outcomes(&first), outcomes(&second), "the same search twice: the same batches, the same outcomes");
    let largest = first.iter().filter(|probe| probe.fits).map(|probe| probe.batch_size).max().expect("one fitted");
    // The search starts where the model predicted, and closes to a sixteenth of its answer.
    assert_eq!(Some(first[0].batch_size), first[0].predicted_batch_size, "{first:?}");
    let smallest_failing = first.iter().filter(|probe| !probe.fits).map(|probe| probe.batch_size).min().unwrap();
    assert!(smallest_failing > largest && smallest_failing - largest <= (largest / 16).max(1), "{first:?}");
    for probe in &first {
        assert_eq!(probe.memory_limit_bytes, Some(40 << 20));
        if probe.fits {
            assert!(probe.peak_memory_bytes.unwrap() <= 40 << 20, "{probe:?}");
        } else {
            // Over the limit at the allocation that would pass it, said in one line.
            assert_eq!(probe.outcome.name(), "oom", "{probe:?}");
            let reason = probe.reason.as_deref().unwrap();
            assert!(reason.contains("over the worker's limit of 41943040 bytes"), "{probe:?}");
            // And where: the pass the allocation was for.
            assert!(
                reason.contains(" asked for in the forward") || reason.contains(" asked for in the backward"),
                "{reason}"
            );
        }
    }
    // The cell then trains at that batch, under the same limit.
    assert_eq!(trials.len(), 1);
    assert_eq!((trials[0].batch_size, trials[0].outcome.name()), (largest, "ok"));
    assert!(trials[0].trial_id.contains("__bmax"), "{}", trials[0].trial_id);

    let report = crate::run_folders(&store).pop().unwrap().join("report");
    let table = std::fs::read_to_string(report.join("tables").join("memory_frontier.csv")).unwrap();
    assert!(table.lines().nth(1).is_some_and(|row| row.contains(&format!(",{largest},"))), "{table}");
    assert!(report.join("figures").join("memory_frontier.svg").is_file());
}
