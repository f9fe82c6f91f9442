//! Slurm across the two nodes of the one-machine testbed (`tools/slurm-testbed.sh`: munge,
//! slurmctld and a slurmd per network namespace): `stratlab probe` as a job step, whose
//! ranks form their group from Slurm's variables and whose pairs name both hosts; and
//! `stratlab run` inside an allocation, whose cells across nodes run as job steps (see
//! `slurm_runs.rs`). The tests take the testbed one at a time.
//!
//! Needs root (namespaces, a bridge, daemons) and Debian's Slurm, which `just test`
//! installs (`tools/setup-debian.sh slurmctld slurmd slurm-client munge`). The testbed is
//! brought down however the test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stratlab_results::{ProbeKind, ProbeRow, RunStore};

fn testbed_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/slurm-testbed.sh")
}

pub(crate) fn testbed(arguments: &[&str]) -> Output {
    Command::new(testbed_script()).args(arguments).output().expect("run tools/slurm-testbed.sh")
}

/// One testbed on the machine: the tests that need it take it in turn.
static TESTBED: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The testbed, up; down on drop, whatever happened.
pub(crate) struct Testbed {
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Testbed {
    pub(crate) fn up() -> Testbed {
        let turn = TESTBED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let output = testbed(&["up"]);
        let testbed = Testbed { _turn: turn };
        assert!(
            output.status.success(),
            "tools/slurm-testbed.sh up failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        testbed
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let output = testbed(&["down"]);
        if !output.status.success() {
            eprintln!("tools/slurm-testbed.sh down: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
}

#[test]
fn a_probe_step_across_the_testbed_s_two_nodes_names_both_hosts() {
    let _testbed = Testbed::up();
    let store = tempfile::tempdir().expect("temp dir");
    let output = testbed(&[
        "exec",
        "timeout",
        "180",
        "srun",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        env!("CARGO_BIN_EXE_stratlab"),
        "probe",
        "--sizes",
        "4,1048576",
        "--repeats",
        "5",
        "--warmup",
        "2",
        "--all-reduce",
        "idle",
        "--threads",
        "1",
        "--store",
        store.path().to_str().expect("a UTF-8 temp path"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the step failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("over 2 ranks on 2 hosts"), "{stdout}");
    let runs: Vec<PathBuf> =
        std::fs::read_dir(store.path()).expect("store").map(|entry| entry.unwrap().path()).collect();
    assert_eq!(runs.len(), 1, "one probe run, stored by rank 0: {runs:?}");
    let rows: Vec<ProbeRow> = RunStore::open(&runs[0]).expect("the probe run opens").load_rows().expect("probe rows");
    let pairs: Vec<&ProbeRow> = rows.iter().filter(|row| row.kind == ProbeKind::P2p).collect();
    assert_eq!(pairs.len(), 2, "one pair at two sizes: {rows:#?}");
    for row in pairs {
        assert_eq!((row.src, row.dst, row.world_size, row.hosts), (Some(0), Some(1), 2, Some(2)), "{row:?}");
        assert_eq!((row.src_host.as_deref(), row.dst_host.as_deref()), (Some("node1"), Some("node2")), "{row:?}");
        assert!(row.algorithm_gbps > 0.0, "{row:?}");
    }
    assert!(rows.iter().any(|row| row.kind == ProbeKind::AllReduce && row.hosts == Some(2)), "{rows:#?}");

    // Its pairs cross nodes: it is refused as this machine's link, with the way out.
    let refused = Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .args(["recommend", "--network", "small-cnn", "--dataset", "mnist:synthetic", "--workers", "2", "--probe"])
        .arg(&runs[0])
        .args(["--store", store.path().join("profiles").to_str().unwrap()])
        .output()
        .expect("run stratlab recommend");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the probe spans 2 hosts") && stderr.contains("--cluster"), "{stderr}");

    // `predict` reads it as the network between nodes: a cell across two is predicted over it.
    let suite = store.path().join("across.yaml");
    std::fs::write(
        &suite,
        "name: across\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\n\
         strategies: [{name: data-parallel, workers: [2]}]\nnodes: [2]\nbatch_size: 32\nbudget: {steps: 4}\n\
         device: cpu\nthreads: 1\n",
    )
    .unwrap();
    let predicted = Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .arg("predict")
        .arg(&suite)
        .arg("--probe")
        .arg(&runs[0])
        .args(["--store", store.path().join("profiles").to_str().unwrap()])
        .output()
        .expect("run stratlab predict");
    let stdout = String::from_utf8_lossy(&predicted.stdout);
    assert!(predicted.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&predicted.stderr));
    let row = stdout.lines().find(|line| line.contains("2 nodes")).expect("the cell across nodes");
    assert!(row.contains(" ms") && !row.contains("needs a link"), "{row}");
}
