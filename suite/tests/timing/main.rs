//! `compare`, `history` and `report --history` on real runs of a tiny suite: a real
//! slowdown (the same suite with 2 threads, then 1) is flagged with exit status 3, and the
//! same suite run twice unchanged is not.
//!
//! These tests measure time, so they are a test binary of their own: cargo runs test
//! binaries one after another, so no other test competes for the cores while these runs
//! are timed (in the crate's main test binary they ran beside a one-epoch MNIST training and
//! the 2-thread baseline came out as slow as the 1-thread run). The runs are made once and
//! shared: a 2-thread baseline, the 1-thread run, and a second 2-thread run.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use assert_cmd::Command;
use tempfile::TempDir;

mod emulated_link_probe;

/// One VGG-11 cell, 17 timed steps of 64 samples on the CPU (~10 s with 2 threads). Its
/// large convolutions use a second thread well: 1 thread measured +79 to +87 % step time
/// (10th percentile) against 2 here, where the small CNN's +28 to +92 % was not reliable.
fn suite(threads: usize) -> String {
    format!(
        "name: tiny-compare
networks: [vgg11]
datasets: [mnist:synthetic]
strategies: [single]
batch_size: 64
budget: {{steps: 20}}
warmup_steps: 3
eval: {{samples: 200}}
device: cpu
threads: {threads}
"
    )
}

fn stratlab(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("stratlab").unwrap().args(args).output().unwrap()
}

/// Runs the tiny suite with `threads` into `store`; returns the new run folder.
fn run(store: &Path, threads: usize) -> PathBuf {
    let suite_path = store.join(format!("tiny-{threads}.yaml"));
    std::fs::write(&suite_path, suite(threads)).unwrap();
    let before: Vec<PathBuf> = runs_in(store);
    let output = stratlab(&[
        "run",
        suite_path.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--no-report",
        "--no-predict",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut new: Vec<PathBuf> = runs_in(store).into_iter().filter(|run| !before.contains(run)).collect();
    assert_eq!(new.len(), 1, "one new run folder");
    new.remove(0)
}

fn runs_in(store: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(store)
        .map(|entries| entries.map(|e| e.unwrap().path()).filter(|p| p.join("fingerprint.json").is_file()).collect())
        .unwrap_or_default()
}

/// The shared runs: `slowdown` holds the 2-thread baseline and the 1-thread run (a history
/// of two runs); `unchanged` holds a second 2-thread run.
struct Runs {
    slowdown: TempDir,
    two_threads: PathBuf,
    one_thread: PathBuf,
    _unchanged: TempDir,
    two_threads_again: PathBuf,
}

/// Held for the whole of every test in this binary: libtest runs its tests side by side,
/// and not only the timed parts compete. In CI the emulated-link probe measured a 1 ms link
/// as 1.74 ms while the other tests' `compare`, `history` and `report` (untimed, and outside
/// an earlier, narrower lock) ran beside it.
static TIMED: Mutex<()> = Mutex::new(());

/// This test's turn alone on the machine; the guard ends it.
fn alone() -> MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Made by the first test that needs them, one after another; the caller holds [`alone`].
fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let slowdown = tempfile::tempdir().unwrap();
        let unchanged = tempfile::tempdir().unwrap();
        let two_threads = run(slowdown.path(), 2);
        let one_thread = run(slowdown.path(), 1);
        let two_threads_again = run(unchanged.path(), 2);
        Runs { slowdown, two_threads, one_thread, _unchanged: unchanged, two_threads_again }
    })
}

/// How the slowdown is judged. Not as measured at the default 30 %: on a shared CI host the
/// 1-thread run measured only +43.7 % [+24.8 %, +68.6 %] (its reference work taking 14 % less
/// time than the baseline's), and at 15 % a slower sitting's +37.4 % [+13.6 %, +53.8 %]
/// (reference −27.7 %) still missed: the host's own speed moved between the runs. Per machine
/// speed those were +68 % and +90 %; 15 % lies well below either; the unchanged pair is
/// judged as measured, against the default.
const SLOWDOWN_JUDGEMENT: [&str; 3] = ["--noise-threshold", "0.15", "--per-machine-speed"];

fn compare(baseline: &Path, new: &Path, extra: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let mut args = vec!["compare", baseline.to_str().unwrap(), new.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = stratlab(&args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.code() != Some(1) && output.status.code() != Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let run_id = baseline.file_name().unwrap();
    let json = std::fs::read(new.join("compare").join(run_id).join("comparison.json")).expect("comparison.json");
    (output.status.code(), stdout, serde_json::from_slice(&json).unwrap())
}

#[test]
fn a_real_slowdown_from_two_threads_to_one_is_flagged_and_exits_3_and_history_shows_it() {
    let _alone = alone();
    let runs = runs();
    let (two, one) = (&runs.two_threads, &runs.one_thread);
    let (code, stdout, json) = compare(two, one, &SLOWDOWN_JUDGEMENT);
    assert_eq!(code, Some(3), "{stdout}");
    let cell = &json["cells"][0];
    assert_eq!(cell["verdict"], "regressed", "{stdout}");
    assert!(cell["per_machine_step_time_ratio"]["low"].as_f64().unwrap() > 1.15, "{cell}");
    assert!(stdout.contains("threads 2 → 1") && stdout.contains("RESULT: regression"), "{stdout}");
    assert!(stdout.contains("suite_sha256"), "the suite file changed, and the fingerprint says so:\n{stdout}");
    assert!(one.join("compare").join(two.file_name().unwrap()).join("comparison.md").is_file());

    // The same two runs as a history: one step, at the second run, with the figure.
    let store = runs.slowdown.path();
    // History's series stay as measured: its steps compare point levels, not intervals.
    let output = stratlab(&["history", store.to_str().unwrap(), SLOWDOWN_JUDGEMENT[0], SLOWDOWN_JUDGEMENT[1]]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("worse") && stdout.contains("suite_sha256"), "{stdout}");
    let history = store.join("history").join("tiny-compare");
    for file in ["history.parquet", "steps.md", "history.json", "figures/history_throughput.svg"] {
        assert!(history.join(file).is_file(), "{file} missing");
    }
    let report = tempfile::tempdir().unwrap();
    let out = report.path().join("report");
    let output = stratlab(&[
        "report",
        one.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--history",
        store.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("History of suite tiny-compare (2 runs)"), "no history section");
}

#[test]
fn the_same_suite_run_twice_unchanged_is_no_regression_and_exits_0() {
    let _alone = alone();
    let runs = runs();
    let (code, stdout, json) = compare(&runs.two_threads, &runs.two_threads_again, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(json["cells"][0]["verdict"], "noise", "{stdout}");
    assert_eq!(json["leaders"][0]["ranking"], "unchanged");
    assert!(stdout.contains("RESULT: no regression"), "{stdout}");
}
