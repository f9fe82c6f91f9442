//! `stratlab run` inside a Slurm allocation of the testbed's two nodes: cells across nodes
//! run as job steps to `ok` beside one-node cells, train to the same weights, and name both
//! hosts; a rank killed on its node fails that trial alone; a killed runner's step is
//! cancelled by `--resume`, which loses nothing and leaves nothing on either node, and a
//! runner sent SIGTERM cancels its step before it ends; a shaped link between the nodes is
//! probed and predicted over.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use stratlab_results::{RunStore, StepRow, TelemetryRow, TrialNodeRow, TrialRow};

use crate::slurm_testbed::{testbed, Testbed};

const SUITE: &str = "name: two-nodes
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies:
  - single
  - name: data-parallel
    workers: [2]
  - name: gpipe
    workers: [2]
    micro_batches: [4]
nodes: [1, 2]
exclude:
  - {strategy: gpipe, nodes: 1}
batch_size: 32
budget: {steps: 12}
device: cpu
# One thread per rank on one node and on two: the same arithmetic, so the same weights.
threads: 1
warmup_steps: 2
timeout_s: 120
eval: {samples: 256, batch_size: 256}
";

fn stratlab() -> &'static str {
    env!("CARGO_BIN_EXE_stratlab")
}

fn write_suite(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("suite.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn text(output: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// `stratlab run suite --store store extra…` inside a fresh allocation of both nodes (with
/// `environment`'s `NAME=value`s set), which must succeed; the run it stored.
fn run_in_allocation(suite: &Path, store: &Path, environment: &[&str], extra: &[&str]) -> RunStore {
    let mut arguments = vec!["exec", "env"];
    arguments.extend(environment);
    arguments.extend(["timeout", "300", "salloc", "--nodes=2", "--exclusive", stratlab(), "run"]);
    arguments.extend([suite.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    arguments.extend(extra);
    let output = testbed(&arguments);
    assert!(output.status.success(), "{}", text(&output));
    RunStore::open(&crate::run_folders(store)[0]).unwrap()
}

fn rank0_losses(steps: &[StepRow], trial_id: &str) -> Vec<Option<f64>> {
    steps.iter().filter(|row| row.trial_id == trial_id && row.worker == 0).map(|row| row.record.loss).collect()
}

#[test]
fn a_two_node_suite_runs_as_job_steps_to_ok_names_both_hosts_and_trains_as_one_node_does() {
    let _testbed = Testbed::up();
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), SUITE);
    let store = dir.path().join("runs");
    let run = run_in_allocation(&suite, &store, &[], &["--no-predict"]);
    let trials: Vec<TrialRow> = run.load_rows().unwrap();
    let ids: Vec<&str> = trials.iter().map(|trial| trial.trial_id.as_str()).collect();
    assert_eq!(trials.len(), 4, "{ids:?}");
    for trial in &trials {
        assert_eq!(trial.outcome.name(), "ok", "{}: {:?}", trial.trial_id, trial.reason);
        // Timed by the step's ranks on their nodes.
        assert!(trial.speed_reference_s.is_some_and(|seconds| seconds > 0.0), "{}", trial.trial_id);
    }
    let across: Vec<&TrialRow> = trials.iter().filter(|trial| trial.nodes() == 2).collect();
    assert_eq!(across.len(), 2, "data-parallel and gpipe across the nodes: {ids:?}");

    // Each rank of a cell across nodes names its node; the runner's host names none.
    let nodes: Vec<TrialNodeRow> = run.load_rows().unwrap();
    for trial in &across {
        let hosts: Vec<(u32, Option<&str>)> = nodes
            .iter()
            .filter(|row| row.trial_id == trial.trial_id)
            .map(|row| (row.rank, row.host_name.as_deref()))
            .collect();
        assert_eq!(hosts, [(0, Some("node1")), (1, Some("node2"))], "{}", trial.trial_id);
    }
    let telemetry: Vec<TelemetryRow> = run.load_rows().unwrap();
    for host in ["node1", "node2"] {
        assert!(
            telemetry.iter().any(|row| row.trial_id == across[0].trial_id && row.host_name.as_deref() == Some(host)),
            "telemetry sampled on {host}"
        );
    }

    // Data-parallel on two nodes trains what it trains on one, step for step.
    let steps: Vec<StepRow> = run.load_rows().unwrap();
    let one_node = trials.iter().find(|t| t.trial_id.contains("data-parallel__w2__b32")).expect("one-node cell");
    let two_nodes = trials.iter().find(|t| t.trial_id.contains("data-parallel__w2__n2__b32")).expect("two-node cell");
    let (one, two) = (rank0_losses(&steps, &one_node.trial_id), rank0_losses(&steps, &two_nodes.trial_id));
    assert_eq!(one.len(), 12);
    assert_eq!(one, two, "the same losses, bit for bit");

    // The report shows the cells across nodes beside the one-node ones.
    let report = std::fs::read_to_string(run.run_dir().join("report/index.html")).expect("the run's report");
    assert!(report.contains("on 2 nodes"), "the report names the cells across nodes");
}

#[test]
fn a_rank_killed_on_its_node_fails_its_trial_with_the_reason_and_not_the_next_and_a_hung_step_times_out() {
    let _testbed = Testbed::up();
    let dir = tempfile::tempdir().unwrap();
    let suite = SUITE
        .replace("nodes: [1, 2]", "nodes: [2]")
        .replace("  - single\n", "  - name: 1f1b\n    workers: [2]\n    micro_batches: [4]\n")
        .replace("timeout_s: 120", "timeout_s: 10");
    let suite = write_suite(dir.path(), &suite);
    let store = dir.path().join("runs");
    // Rank 1, on node2, SIGKILLs itself after its second step; 1f1b's rank 1 hangs there.
    let fault = ["STRATLAB_TEST_FAULT=data-parallel=sigkill@1,1f1b=hang@1"];
    let run = run_in_allocation(&suite, &store, &fault, &["--no-predict", "--no-report"]);
    let trials: Vec<TrialRow> = run.load_rows().unwrap();
    let outcome = |pattern: &str| {
        let trial = trials.iter().find(|trial| trial.trial_id.contains(pattern)).expect(pattern);
        (trial.outcome.name().to_owned(), trial.reason.clone().unwrap_or_default(), trial.wall_time_s)
    };
    let (dp, reason, wall) = outcome("data-parallel");
    assert_eq!(dp, "crashed", "{reason}");
    assert!(reason.contains("rank 1 on node2") && reason.contains("Killed"), "{reason}");
    assert!(wall < 10.0, "its peer did not wait for the 10 s timeout: {wall} s");
    let (gpipe, reason, _) = outcome("gpipe");
    assert_eq!(gpipe, "ok", "{reason}");
    // The hung step is cancelled by name at the timeout, and gone when the run ends.
    let (hung, reason, _) = outcome("1f1b");
    assert_eq!(hung, "timeout", "{reason}");
    assert!(reason.contains("10 s timeout"), "{reason}");
    assert!(!steps_running().contains("stratlab."), "{}", steps_running());
}

/// The job steps of the testbed now, by name.
fn steps_running() -> String {
    String::from_utf8_lossy(&testbed(&["exec", "squeue", "--steps", "--noheader", "--format=%i %j"]).stdout)
        .into_owned()
}

/// stratlab processes still alive in the nodes' namespaces.
fn workers_on_nodes() -> Vec<String> {
    ["stlslurm-node1", "stlslurm-node2"]
        .iter()
        .flat_map(|namespace| {
            let pids = Command::new("ip").args(["netns", "pids", namespace]).output().unwrap();
            String::from_utf8_lossy(&pids.stdout)
                .split_whitespace()
                .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok())
                .filter(|command| command.contains("stratlab") && command.contains("worker"))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_killed_runner_s_step_is_cancelled_by_resume_and_a_signalled_runner_cancels_its_own() {
    let _testbed = Testbed::up();
    let dir = tempfile::tempdir().unwrap();
    // A first trial that finishes, then a long one across the nodes to kill the runner in.
    let suite = SUITE
        .replace("nodes: [1, 2]", "nodes: [2]")
        .replace("  - name: gpipe\n    workers: [2]\n    micro_batches: [4]\n", "")
        .replace("budget: {steps: 12}", "budget: {steps: 120}")
        .replace("exclude:\n  - {strategy: gpipe, nodes: 1}\n", "");
    let suite = write_suite(dir.path(), &suite);
    let store = dir.path().join("runs");
    // An allocation that outlives its runner, as an sbatch script's or an interactive one does.
    let granted = testbed(&["exec", "salloc", "--nodes=2", "--exclusive", "--no-shell"]);
    let job = text(&granted)
        .split_whitespace()
        .skip_while(|word| *word != "allocation")
        .nth(1)
        .expect("salloc names the allocation")
        .to_owned();
    let in_allocation = |arguments: &[&str]| {
        let mut command = Command::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tools/slurm-testbed.sh"));
        command.args(["exec", "env", &format!("SLURM_JOB_ID={job}"), "SLURM_JOB_NUM_NODES=2", stratlab()]);
        command.args(arguments);
        command
    };
    // A runner in the allocation, once its step across the nodes runs (every trial in an
    // allocation is a step; the runner is the child itself: `tools/slurm-testbed.sh exec`
    // and `env` exec it).
    let runner_in_its_step = |store: &Path| {
        let runner = in_allocation(&["run", suite.to_str().unwrap(), "--store", store.to_str().unwrap()])
            .args(["--no-predict", "--no-report"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !steps_running().contains("data-parallel__w2__n2") {
            assert!(started.elapsed() < Duration::from_secs(120), "no job step across the nodes started");
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(2));
        runner
    };
    let mut runner = runner_in_its_step(&store);
    // SIGKILL: the runner dies at once, srun with it, and the step's ranks live on.
    runner.kill().unwrap();
    runner.wait().unwrap();
    let run_dir = crate::run_folders(&store)[0].clone();
    let finished = RunStore::open(&run_dir).unwrap().finished_trial_ids().unwrap();
    assert_eq!(finished.len(), 1, "the single cell finished before the kill: {finished:?}");

    let resumed = in_allocation(&["run", suite.to_str().unwrap(), "--resume", run_dir.to_str().unwrap()])
        .args(["--no-predict", "--no-report"])
        .output()
        .unwrap();
    let said = text(&resumed);
    assert!(resumed.status.success(), "{said}");
    assert!(said.contains("cancelled the job steps an earlier, killed runner left"), "{said}");
    let trials: Vec<TrialRow> = RunStore::open(&run_dir).unwrap().load_rows().unwrap();
    assert_eq!(trials.len(), 2);
    assert!(trials.iter().all(|trial| trial.outcome.name() == "ok"), "{trials:?}");
    assert!(!steps_running().contains("stratlab."), "{}", steps_running());
    let started = Instant::now();
    while !workers_on_nodes().is_empty() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(workers_on_nodes(), Vec::<String>::new(), "no worker outlives its step");

    // SIGTERM (Ctrl-C is SIGINT, a batch job's end SIGTERM): the runner cancels its step
    // first, then ends by the signal.
    let mut runner = runner_in_its_step(&dir.path().join("signalled"));
    // SAFETY: sends a signal to the runner, a child of this test.
    assert_eq!(unsafe { libc::kill(runner.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = runner.wait().unwrap();
    let left = steps_running();
    let _ = testbed(&["exec", "scancel", &job]);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGTERM), "{status:?}");
    assert!(!left.contains("stratlab."), "the step outlived its runner: {left}");
}

#[test]
fn a_shaped_link_between_the_nodes_is_probed_and_the_cells_across_them_are_predicted_over_it() {
    let _testbed = Testbed::up();
    let shaped = testbed(&["shape", "1gbit"]);
    assert!(shaped.status.success(), "{}", text(&shaped));
    let dir = tempfile::tempdir().unwrap();
    let suite = SUITE
        .replace("nodes: [1, 2]", "nodes: [2]")
        .replace("  - name: gpipe\n    workers: [2]\n    micro_batches: [4]\n", "")
        .replace("exclude:\n  - {strategy: gpipe, nodes: 1}\n", "");
    let suite = write_suite(dir.path(), &suite);
    let store = dir.path().join("runs");
    let run = run_in_allocation(&suite, &store, &[], &[]);
    let trials: Vec<TrialRow> = run.load_rows().unwrap();
    assert!(trials.iter().all(|trial| trial.outcome.name() == "ok"), "{trials:?}");
    let across = trials.iter().find(|trial| trial.nodes() == 2).expect("the cell across nodes");
    let predictions: Vec<stratlab_results::PredictionRow> = run.load_rows().unwrap();
    let predicted = predictions.iter().find(|row| row.trial_id == across.trial_id).expect("its prediction");
    let bandwidth = predicted.link_bandwidth_bytes_per_s.expect("predicted over a link");
    // tbf at 1 Gbit/s is 125 MB/s; the probe's 16 MiB message reads it within a few percent.
    assert!((bandwidth / 125e6 - 1.0).abs() < 0.25, "{bandwidth} B/s over the shaped link");
    assert!(predicted.link_source.as_deref().is_some_and(|source| source.contains("between nodes")), "{predicted:?}");
    assert!(predicted.step_s.is_some(), "{predicted:?}");
    let report = std::fs::read_to_string(run.run_dir().join("report/tables/node_links.md")).expect("the links table");
    assert!(report.contains("node1 → node2"), "{report}");
}
