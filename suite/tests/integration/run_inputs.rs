//! Bad input to `stratlab run` and `stratlab train`: exit code 2 (1 for a failure that is not
//! the input's fault), a message naming what is wrong, and no run folder left behind.
//! Also: resuming in another environment, and the fault variable in a release build.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use stratlab_results::{Fingerprint, RunStore, TrialRow};

const TINY: &str = "\
name: tiny
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
batch_size: 16
budget: {steps: 3}
device: cpu
threads: 1
eval: {samples: 64, batch_size: 64}
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The run folder of a store holding one run (beside the profiles it took).
fn only_run(store: &Path) -> PathBuf {
    crate::run_folders(store).into_iter().next().expect("a run folder")
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|entries| entries.count()).unwrap_or(0)
}

/// Runs `stratlab run <suite> --store <dir>/results <extra…>` with an empty data cache.
fn run(dir: &Path, suite: &Path, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("stratlab")
        .unwrap()
        .args(["run", suite.to_str().unwrap(), "--store", dir.join("results").to_str().unwrap(), "--no-predict"])
        .args(extra)
        .env("STRATLAB_DATA_DIR", dir.join("data"))
        .env_remove("STRATLAB_TEST_FAULT")
        .output()
        .unwrap()
}

fn assert_input_error(output: &std::process::Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "expected `{needle}` in: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn only_matching_nothing_exits_2_and_creates_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "tiny.yaml", TINY);
    let output = run(dir.path(), &suite, &["--only", "resnet999"]);
    assert_input_error(&output, &["--only resnet999", "matches none", "stratlab plan"]);
    assert_eq!(entries(&dir.path().join("results")), 0);
}

#[test]
fn a_missing_real_data_set_exits_2_before_any_run_folder_exists() {
    let dir = tempfile::tempdir().unwrap();
    // Real CIFAR-10 cannot be fetched here and the data cache is empty.
    let suite = write(dir.path(), "cifar.yaml", &TINY.replace("mnist:synthetic", "cifar10"));
    let output = run(dir.path(), &suite, &[]);
    assert_input_error(&output, &["cifar10"]);
    assert_eq!(entries(&dir.path().join("results")), 0);
}

#[test]
fn a_cuda_device_that_is_not_there_exits_2_before_any_run_folder_exists() {
    // The first index this machine lacks (cuda:0 without a GPU), so the test runs everywhere.
    let missing = format!("cuda:{}", tch::Cuda::device_count());
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "gpu.yaml", &TINY.replace("device: cpu", &format!("device: {missing}")));
    let output = run(dir.path(), &suite, &[]);
    assert_input_error(&output, &[missing.as_str(), "valid choices: cpu, auto"]);
    assert_eq!(entries(&dir.path().join("results")), 0);
}

#[test]
fn resuming_a_folder_that_is_not_a_run_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "tiny.yaml", TINY);
    let not_a_run = dir.path().join("holiday-photos");
    std::fs::create_dir(&not_a_run).unwrap();
    let output = run(dir.path(), &suite, &["--resume", not_a_run.to_str().unwrap()]);
    assert_input_error(&output, &["holiday-photos"]);
    assert_eq!(entries(&not_a_run), 0, "nothing may be written into it");
}

#[test]
fn reporting_a_folder_that_is_not_a_run_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_run = dir.path().join("holiday-photos");
    std::fs::create_dir(&not_a_run).unwrap();
    let output =
        Command::cargo_bin("stratlab").unwrap().args(["report", not_a_run.to_str().unwrap()]).output().unwrap();
    assert_input_error(&output, &["holiday-photos"]);
    assert_eq!(entries(&not_a_run), 0, "no report folder may be created in it");
}

#[test]
fn resuming_in_another_environment_is_refused_unless_allow_mixed_which_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let two_trials = format!("{TINY}repeats: 2\n");
    let suite = write(dir.path(), "tiny.yaml", &two_trials);
    let first = run(dir.path(), &suite, &["--only", "r0"]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let run_dir = only_run(&dir.path().join("results"));

    // Pretend the run was started on another host with another driver.
    let fingerprint_path = run_dir.join("fingerprint.json");
    let mut recorded: Fingerprint = serde_json::from_slice(&std::fs::read(&fingerprint_path).unwrap()).unwrap();
    recorded.host_name = Some("gpu-node-17".into());
    recorded.nvidia_driver_version = Some("550.54.15".into());
    std::fs::write(&fingerprint_path, serde_json::to_vec_pretty(&recorded).unwrap()).unwrap();

    let refused = run(dir.path(), &suite, &["--resume", run_dir.to_str().unwrap()]);
    assert_input_error(&refused, &["host_name: gpu-node-17", "nvidia_driver_version: 550.54.15", "--allow-mixed"]);
    let store = RunStore::open(&run_dir).unwrap();
    assert_eq!(store.finished_trial_ids().unwrap().len(), 1, "a refused resume adds nothing");
    assert!(store.mixed_resumes().unwrap().is_empty());

    let mixed = run(dir.path(), &suite, &["--resume", run_dir.to_str().unwrap(), "--allow-mixed"]);
    assert!(mixed.status.success(), "{}", String::from_utf8_lossy(&mixed.stderr));
    assert_eq!(store.finished_trial_ids().unwrap().len(), 2);
    let resumes = store.mixed_resumes().unwrap();
    assert_eq!(resumes.len(), 1);
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&resumes[0]).unwrap()).unwrap();
    assert_eq!(record["allow_mixed"], true);
    assert!(record["differences"].to_string().contains("gpu-node-17"), "{record}");
    assert_eq!(record["fingerprint"]["host_name"], serde_json::json!(stratlab::fingerprint::collect(None).host_name));
}

#[test]
fn device_auto_is_resolved_and_every_row_names_its_host_device_and_numerics() {
    let dir = tempfile::tempdir().unwrap();
    let text = TINY.replace("device: cpu", "device: auto").replace("steps: 3", "steps: 8");
    let suite = write(dir.path(), "auto.yaml", &format!("{text}warmup_steps: 2\n"));
    let output = run(dir.path(), &suite, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run_dir = only_run(&dir.path().join("results"));
    let rows: Vec<stratlab_results::TrialRow> = RunStore::open(&run_dir).unwrap().load_rows().unwrap();
    let row = &rows[0];
    let here = stratlab::fingerprint::collect(None);
    let expected_device = if tch::Cuda::is_available() { "cuda:0" } else { "cpu" };
    assert_eq!(row.device.to_string(), expected_device, "auto must be recorded as the device used");
    assert_eq!(row.host_name, here.host_name);
    if expected_device == "cpu" {
        assert_eq!(row.device_name, here.cpu_model);
        assert_eq!(row.device_ids, None);
    }
    assert_eq!(row.cudnn_benchmark, Some(true));
    assert_eq!(row.matmul_precision.map(|p| p.name()), Some("highest"));
    // The suite's default precision is fp32: float32 on every device, cuDNN's TF32 off.
    assert_eq!(row.cudnn_tf32, Some(false));
    assert_eq!(
        (row.stored_precision.map(|p| p.name()), row.stored_memory_format.map(|f| f.name())),
        (Some("fp32"), Some("contiguous"))
    );
    assert_eq!((row.precision_auto, row.memory_format_auto), (Some(false), Some(false)));
    assert_eq!(row.metrics_every_steps, 5);
    assert!(row.training.step_samples_per_s.unwrap() >= row.training.wall_samples_per_s.unwrap());
    // `--no-predict` (which `run` here passes): nothing profiled, nothing predicted.
    let predictions: Vec<stratlab_results::PredictionRow> = RunStore::open(&run_dir).unwrap().load_rows().unwrap();
    assert!(predictions.is_empty(), "{predictions:?}");
    assert!(!dir.path().join("results/profiles").exists(), "no profile is taken");
    assert!(!String::from_utf8_lossy(&output.stderr).contains("predicted every cell"));
}

#[test]
fn a_memory_limit_fails_the_same_allocation_every_run_with_one_readable_line() {
    // The small CNN at 512 samples asks for its first convolution's output, 42 MiB, over a
    // 24 MiB limit on tensor storage: the counting allocator refuses it at the same byte
    // count in both repeats, where an address-space limit failed wherever reserved address
    // space happened to run out.
    let dir = tempfile::tempdir().unwrap();
    let suite = write(
        dir.path(),
        "limit.yaml",
        "name: memory-limit
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single]
batch_size: 512
budget: {steps: 2}
repeats: 2
device: cpu
threads: 1
memory_limit_mib: 24
eval: {samples: 64, batch_size: 64}
",
    );
    let output = run(dir.path(), &suite, &["--no-report"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let rows: Vec<stratlab_results::TrialRow> =
        RunStore::open(&only_run(&dir.path().join("results"))).unwrap().load_rows().unwrap();
    assert_eq!(rows.len(), 2);
    let reasons: Vec<&str> = rows.iter().map(|row| row.reason.as_deref().unwrap_or_default()).collect();
    for (row, reason) in rows.iter().zip(&reasons) {
        assert_eq!(row.outcome.name(), "oom", "{reason}");
        assert_eq!((row.memory_limit_bytes, row.device_memory_limit_bytes), (Some(24 << 20), None));
        assert!(!reason.contains('\n') && !reason.contains("\\n") && !reason.contains("frame #"), "{reason}");
        assert!(reason.contains("stratlab memory limit: 44302336 bytes (42 MiB) asked for"), "{reason}");
        assert!(reason.contains("over the worker's limit of 25165824 bytes (24 MiB, memory_limit_mib)"), "{reason}");
        // libtorch's whole text, backtrace and all, in a column of its own.
        let detail = row.reason_detail.as_deref().unwrap_or_default();
        let said = reason.trim_start_matches("panic: ");
        assert!(detail.contains(said) && detail.contains("Exception raised from allocate"), "{detail}");
    }
    // The same allocation fails in both; what is in use beside it differs by the batches
    // the loader's thread has prefetched by then.
    let asked = |reason: &str| reason.split(" asked for").next().unwrap_or_default().to_owned();
    assert_eq!(asked(reasons[0]), asked(reasons[1]), "the same allocation fails in every run");
}

#[test]
fn train_reports_out_of_memory_as_an_error_not_a_panic() {
    // ResNet-18 on 256 Highres images (3×512×512): the first convolution's output alone is
    // 4 GiB, which with the 0.8 GB batch does not fit in 6 GiB of address space, while
    // libtorch itself does. It fails at that allocation, before any compute: 2 s, where 512
    // ImageNet images ran a slow single-thread forward for 12 s before running out.
    let limit: u64 = 6 << 30;
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("stratlab"));
    command.args([
        "train",
        "--network",
        "resnet18",
        "--dataset",
        "highres:synthetic",
        "--batch-size",
        "256",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--threads",
        "1",
    ]);
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let rlimit = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_AS, &rlimit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("out of memory"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_release_binary_ignores_the_fault_variable() {
    // `just test` builds the release binary without the test-only feature first and names it
    // here; this test binary's own `stratlab` is built with fault injection.
    let binary = std::env::var_os("STRATLAB_RELEASE_BINARY")
        .expect("STRATLAB_RELEASE_BINARY must name a stratlab built without `fault-injection` (`just test` sets it)");
    let env = std::process::Command::new(&binary).arg("env").output().unwrap();
    let fingerprint: Fingerprint = serde_json::from_slice(&env.stdout).unwrap();
    assert!(!fingerprint.fault_injection_enabled, "{binary:?} was built with fault injection");

    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "tiny.yaml", TINY);
    let results = dir.path().join("results");
    let output = std::process::Command::new(&binary)
        .args(["run", suite.to_str().unwrap(), "--store", results.to_str().unwrap(), "--no-predict"])
        .env("STRATLAB_TEST_FAULT", "r0=panic")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run_dir = only_run(&results);
    let store = RunStore::open(&run_dir).unwrap();
    let rows: Vec<stratlab_results::TrialRow> = store.load_rows().unwrap();
    assert_eq!(rows[0].outcome.name(), "ok", "the fault must not fire: {:?}", rows[0].reason);
    assert_eq!(store.fingerprint().unwrap().active_fault, None);
}

#[test]
fn a_fault_injection_build_records_the_active_fault_in_the_fingerprint() {
    let output =
        Command::cargo_bin("stratlab").unwrap().arg("env").env("STRATLAB_TEST_FAULT", "r3=hang").output().unwrap();
    let fingerprint: Fingerprint = serde_json::from_slice(&output.stdout).unwrap();
    assert!(fingerprint.fault_injection_enabled);
    assert_eq!(fingerprint.active_fault.as_deref(), Some("r3=hang"));
}

#[test]
fn a_cell_across_nodes_outside_an_allocation_or_beyond_it_is_infeasible_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(
        dir.path(),
        "nodes.yaml",
        "name: nodes\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\n\
         strategies: [{name: data-parallel, workers: [2]}]\nnodes: [2]\nbudget: {steps: 2}\ndevice: cpu\n",
    );
    let reason_with = |environment: &[(&str, &str)]| {
        let store = tempfile::tempdir().unwrap();
        let mut command = Command::cargo_bin("stratlab").unwrap();
        command.args(["run", suite.to_str().unwrap(), "--store", store.path().to_str().unwrap()]);
        command.args(["--no-predict", "--no-report"]).env_remove("SLURM_JOB_ID").env_remove("SLURM_JOB_NUM_NODES");
        let output = command.envs(environment.iter().copied()).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let rows: Vec<TrialRow> = RunStore::open(&only_run(store.path())).unwrap().load_rows().unwrap();
        assert_eq!((rows.len(), rows[0].outcome.name(), rows[0].nodes()), (1, "infeasible", 2));
        rows[0].reason.clone().unwrap_or_default()
    };
    let outside = reason_with(&[]);
    assert!(outside.contains("outside an allocation") && outside.contains("salloc -N 2"), "{outside}");
    let beyond = reason_with(&[("SLURM_JOB_ID", "41"), ("SLURM_JOB_NUM_NODES", "1")]);
    assert_eq!(beyond, "needs 2 nodes; Slurm job 41 has 1 (SLURM_JOB_NUM_NODES)");
}
