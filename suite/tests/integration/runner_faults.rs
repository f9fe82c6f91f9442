//! Fault isolation: each injected fault is recorded with the right outcome while the other
//! trials of the matrix still finish; a runner killed mid-run resumes without losing or
//! repeating a finished trial.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use stratlab_results::{RunStore, TrialRow};

fn write_suite(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("suite.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn only_run_dir(results: &Path) -> PathBuf {
    let runs = crate::run_folders(results);
    assert_eq!(runs.len(), 1, "one run folder expected: {runs:?}");
    runs.into_iter().next().unwrap()
}

#[test]
fn every_injected_fault_is_recorded_with_its_outcome_and_the_matrix_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        "name: faults
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
batch_size: 32
budget: {steps: 24}
repeats: 7
device: cpu
threads: 1
warmup_steps: 2
timeout_s: 6
memory_limit_mib: 6144
eval: {samples: 256, batch_size: 256}
include:
  - {network: small-cnn, dataset: imagenet:synthetic, strategy: single}
",
    );
    let results = dir.path().join("results");
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .args(["run", suite.to_str().unwrap(), "--store", results.to_str().unwrap(), "--no-predict"])
        .env("STRATLAB_TEST_FAULT", "r1=panic,r2=abort,r3=sigkill,r4=hang,r5=nan,r6=alloc")
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(output.status.success(), "runner failed: {}", String::from_utf8_lossy(&output.stderr));

    let store = RunStore::open(&only_run_dir(&results)).unwrap();
    let rows: Vec<TrialRow> = store.load_rows().unwrap();
    let by_repeat: BTreeMap<String, &TrialRow> =
        rows.iter().filter(|row| row.dataset == "mnist").map(|row| (format!("r{}", row.repeat), row)).collect();
    let outcome = |repeat: &str| by_repeat[repeat].outcome.name();
    let reason = |repeat: &str| by_repeat[repeat].reason.clone().unwrap_or_default();
    // 7 repeats of the mnist cell and of the included imagenet cell.
    assert_eq!(rows.len(), 14);
    assert_eq!(outcome("r0"), "ok");
    assert_eq!(by_repeat["r0"].steps_completed, 24);
    assert!(by_repeat["r0"].training.final_accuracy.is_some());
    // 24 steps are a fraction of an epoch: no measured epoch time, an extrapolated one.
    assert_eq!(by_repeat["r0"].training.seconds_per_epoch_mean, None);
    assert!(by_repeat["r0"].training.seconds_per_epoch_estimate.unwrap() > 0.0);
    assert_eq!(outcome("r1"), "crashed");
    assert!(reason("r1").contains("injected test fault: panic"), "{}", reason("r1"));
    assert_eq!(outcome("r2"), "crashed");
    assert!(reason("r2").contains("SIGABRT"), "{}", reason("r2"));
    assert_eq!(outcome("r3"), "crashed");
    assert!(reason("r3").contains("SIGKILL"), "{}", reason("r3"));
    assert_eq!(outcome("r4"), "timeout");
    assert_eq!(outcome("r5"), "diverged");
    assert!(reason("r5").contains("loss became NaN"), "{}", reason("r5"));
    assert_eq!(outcome("r6"), "oom");
    for infeasible in rows.iter().filter(|row| row.dataset == "imagenet") {
        assert_eq!(infeasible.outcome.name(), "infeasible");
        assert!(infeasible.reason.as_deref().unwrap().contains("small-cnn"));
    }
    // Telemetry was sampled beside the healthy trial.
    assert!(by_repeat["r0"].load.memory_max_bytes.unwrap_or(0) > 0);

    // The run ends with its report: the matrix on stdout, and every failure listed with its
    // outcome and reason in the HTML page (the page escapes text, so compare escaped reasons).
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = only_run_dir(&results).join("report");
    assert!(stdout.contains(&format!("report: {}", report.join("index.html").display())), "{stdout}");
    assert!(stdout.contains("small-cnn"), "the results matrix names the network: {stdout}");
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    for row in rows.iter().filter(|row| !row.outcome.is_ok()) {
        assert!(html.contains(&row.trial_id), "{} missing from the report", row.trial_id);
    }
    for outcome in ["crashed", "timeout", "diverged", "oom", "infeasible"] {
        assert!(html.contains(outcome), "outcome {outcome} missing from the report");
    }
    assert!(html.contains("SIGABRT"));
    let figures: Vec<_> = std::fs::read_dir(report.join("figures")).unwrap().collect();
    assert!(figures.len() >= 5, "figures: {figures:?}");
}

#[test]
fn a_runner_killed_mid_run_resumes_with_every_trial_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        "name: resume
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
batch_size: 32
budget: {steps: 40}
repeats: 4
device: cpu
threads: 1
eval: {samples: 256, batch_size: 256}
",
    );
    let results = dir.path().join("results");
    let exe = assert_cmd::cargo::cargo_bin("stratlab");
    let mut runner = std::process::Command::new(&exe)
        .args(["run", suite.to_str().unwrap(), "--store", results.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until at least one trial is recorded, then kill the runner without warning.
    let started = Instant::now();
    let finished_parts = |results: &Path| -> usize {
        crate::run_folders(results)
            .first()
            .and_then(|run| std::fs::read_dir(run.join("trials")).ok())
            .map(|parts| {
                parts.filter(|p| p.as_ref().unwrap().path().extension().is_some_and(|e| e == "parquet")).count()
            })
            .unwrap_or(0)
    };
    while finished_parts(&results) == 0 {
        assert!(started.elapsed() < Duration::from_secs(120), "no trial finished in time");
        std::thread::sleep(Duration::from_millis(50));
    }
    runner.kill().unwrap();
    runner.wait().unwrap();
    let before = finished_parts(&results);
    assert!(before < 4, "the runner was meant to be killed mid-run, but {before} trials had finished");

    let run_dir = only_run_dir(&results);
    // An interrupted run reports what it holds.
    let out = dir.path().join("interrupted-report");
    let report = Command::cargo_bin("stratlab")
        .unwrap()
        .args(["report", run_dir.to_str().unwrap(), "--out", out.to_str().unwrap(), "--format", "png"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(report.status.success(), "report failed: {}", String::from_utf8_lossy(&report.stderr));
    assert!(out.join("index.html").is_file());
    assert!(out.join("tables/results_matrix.csv").is_file());
    assert!(std::fs::read_dir(out.join("figures")).unwrap().all(|f| f.unwrap().path().extension().unwrap() == "png"));
    let run_dir = only_run_dir(&results);
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .args(["run", suite.to_str().unwrap(), "--resume", run_dir.to_str().unwrap()])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(output.status.success(), "resume failed: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("{before} already finished")), "{stdout}");

    let store = RunStore::open(&run_dir).unwrap();
    let rows: Vec<TrialRow> = store.load_rows().unwrap();
    let mut ids: Vec<&str> = rows.iter().map(|row| row.trial_id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(rows.len(), 4);
    assert_eq!(ids.len(), 4, "every trial exactly once");
    assert!(rows.iter().all(|row| row.outcome.is_ok()));
    // The steps table agrees: 40 steps for each of the 4 trials, no duplicates.
    assert_eq!(store.load("steps").unwrap().height(), 4 * 40);
}

#[test]
fn resuming_with_a_changed_suite_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name: r\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nstrategies: [single]\nbudget: {steps: 3}\ndevice: cpu\nbatch_size: 16\neval: {samples: 64}\n";
    let suite = write_suite(dir.path(), text);
    let results = dir.path().join("results");
    Command::cargo_bin("stratlab")
        .unwrap()
        .args(["run", suite.to_str().unwrap(), "--store", results.to_str().unwrap(), "--no-predict"])
        .assert()
        .success();
    std::fs::write(&suite, text.replace("steps: 3", "steps: 4")).unwrap();
    let run_dir = only_run_dir(&results);
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .args(["run", suite.to_str().unwrap(), "--resume", run_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("differs from the suite this run started with"));
    // Nothing was added to the run.
    assert_eq!(RunStore::open(&run_dir).unwrap().finished_trial_ids().unwrap().len(), 1);
}
