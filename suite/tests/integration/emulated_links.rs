//! Emulated links seen from outside: nothing of a link is left after its trial is killed or
//! after the runner itself is, and where links cannot be emulated the trials say so. (That
//! a probe over one measures what it was given is timed, so it is in `tests/timing/`.)
//!
//! Needs root (CAP_NET_ADMIN), `ip` and `tc`, which CI and `just setup` have. Where links
//! cannot be emulated the tests fail saying why, unless STRATLAB_SKIP_NETNS is set: a skip
//! is asked for, never assumed (`stratlab_link_emulation::testing`).

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use stratlab_link_emulation::made_by;
use stratlab_link_emulation::testing::feasible_or_skip;
use stratlab_results::{RunStore, TrialRow};

/// `stratlab args…` started as a user would (no launcher's variables), output piped.
fn start(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .args(args)
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stratlab")
}

fn stratlab(args: &[&str]) -> Output {
    start(args).wait_with_output().expect("run stratlab")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// A suite of one data-parallel cell over `link` (YAML) that trains `budget` (YAML).
fn suite_over(dir: &Path, link: &str, budget: &str, timeout_s: u32) -> String {
    let suite = dir.join("suite.yaml");
    std::fs::write(
        &suite,
        format!(
            "name: link-check\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\n\
             strategies: [{{name: data-parallel, workers: [2]}}]\nbatch_size: 16\nthreads: 2\n\
             budget: {budget}\nwarmup_steps: 1\ntimeout_s: {timeout_s}\nlink: [{link}]\n\
             eval: {{samples: 256, batch_size: 256}}\n"
        ),
    )
    .unwrap();
    suite.to_str().unwrap().to_owned()
}

#[test]
fn a_trial_killed_by_its_timeout_leaves_nothing_of_its_link() {
    if !feasible_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The delay line's TUN devices, tbf, and a budget the timeout cuts short. At 100 Mbit/s
    // the run's probe of the link before the trial takes seconds (at 10 Mbit/s, 40).
    let suite = suite_over(dir.path(), "{bandwidth: 100 Mbit/s, latency: 2 ms}", "{seconds: 120}", 6);
    let store = dir.path().join("runs");
    let child = start(&["run", &suite, "--store", store.to_str().unwrap()]);
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run = crate::run_folders(&store).into_iter().next().expect("the run");
    let trials: Vec<TrialRow> = RunStore::open(&run).unwrap().load_rows().unwrap();
    assert_eq!(trials.len(), 1);
    assert_eq!(trials[0].outcome.name(), "timeout", "{:?}", trials[0].reason);
    assert_eq!(trials[0].link.map(|link| link.name()).as_deref(), Some("100 Mbit/s · 2 ms"));
    // The delay line's threads ran on this machine's cores; the row says for how long.
    assert!(trials[0].link_emulation_cpu_s.is_some_and(|seconds| seconds > 0.0), "{:?}", trials[0]);
    assert!(trials[0].trial_id.ends_with("__link-100Mbit-2ms__r0"), "{}", trials[0].trial_id);
    assert!(made_by(pid).is_empty(), "the trial's link is gone");
}

#[test]
fn what_a_killed_runner_left_is_swept_at_the_next_start() {
    if !feasible_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A fast link: the run probes it before its trial makes it, and only the trial's counts.
    let suite = suite_over(dir.path(), "{bandwidth: 1 Gbit/s}", "{seconds: 120}", 300);
    let store = dir.path().join("runs");
    let mut runner = start(&["run", &suite, "--store", store.to_str().unwrap()]);
    let pid = runner.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    while made_by(pid).len() < 2 {
        assert!(Instant::now() < deadline, "the runner never made its link");
        assert!(runner.try_wait().unwrap().is_none(), "the runner ended before it was killed");
        std::thread::sleep(Duration::from_millis(50));
    }
    runner.kill().unwrap();
    runner.wait().unwrap();
    let left = made_by(pid);
    assert_eq!(left.len(), 2, "a killed runner cannot clean up: {left:?}");

    let quick = suite_over(dir.path(), "{bandwidth: 1 Gbit/s}", "{steps: 3}", 120);
    let next = stratlab(&["run", &quick, "--store", store.to_str().unwrap(), "--no-predict"]);
    assert!(next.status.success(), "{}", text(&next));
    assert!(text(&next).contains("removed what an earlier, killed run left of its emulated links"), "{}", text(&next));
    assert!(left.iter().all(|name| text(&next).contains(name.as_str())), "{}", text(&next));
    assert!(made_by(pid).is_empty(), "swept");
}

/// Without `ip` and `tc` (here: a PATH without them) a shaped trial is recorded infeasible
/// with the reason, never run on loopback instead, and the rest of the suite runs.
#[test]
fn where_links_cannot_be_emulated_shaped_trials_are_infeasible_and_the_rest_runs() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "name: no-tools\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\n\
         strategies: [single, {name: data-parallel, workers: [2]}]\nbatch_size: 16\nthreads: 2\n\
         budget: {steps: 3}\nwarmup_steps: 1\nlink: [loopback, {bandwidth: 1 Gbit/s}]\n\
         eval: {samples: 256, batch_size: 256}\n",
    )
    .unwrap();
    let store = dir.path().join("runs");
    let out = Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .args(["run", suite.to_str().unwrap(), "--no-predict", "--store"])
        .arg(&store)
        .env("PATH", dir.path().join("no-tools-here"))
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .unwrap();
    let run = crate::run_folders(&store).into_iter().next().unwrap_or_else(|| panic!("no run: {}", text(&out)));
    let mut trials: Vec<TrialRow> = RunStore::open(&run).unwrap().load_rows().unwrap();
    trials.sort_by_key(|trial| trial.index);
    let outcomes: Vec<(&str, &str)> = trials.iter().map(|t| (t.trial_id.as_str(), t.outcome.name())).collect();
    assert_eq!(
        outcomes,
        [
            ("small-cnn__mnist-synthetic__single__w1__b16__r0", "ok"),
            ("small-cnn__mnist-synthetic__data-parallel__w2__b16__r0", "ok"),
            ("small-cnn__mnist-synthetic__data-parallel__w2__b16__link-1Gbit__r0", "infeasible"),
        ],
        "{}",
        text(&out)
    );
    let reason = trials[2].reason.as_deref().unwrap_or_default();
    assert!(reason.contains("1 Gbit/s link") && reason.contains("`ip` (iproute2) is not installed"), "{reason}");
}

/// More than two workers: a bridge in a hub namespace (veth), or the delay line routing
/// each packet to the TUN of its destination (latency). Three ranks probe every pair.
#[test]
fn three_ranks_talk_over_a_bridge_and_over_the_delay_line() {
    if !feasible_or_skip() {
        return;
    }
    for (link, label) in [("bandwidth=1Gbit/s", "1 Gbit/s"), ("bandwidth=1Gbit/s,latency=500us", "1 Gbit/s · 500 us")]
    {
        let store = tempfile::tempdir().unwrap();
        let store_path = store.path().to_str().unwrap();
        let child = start(&[
            "probe",
            "--workers",
            "3",
            "--link",
            link,
            "--sizes",
            "4,64K",
            "--repeats",
            "3",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--store",
            store_path,
        ]);
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{link}: {}", text(&out));
        let run = crate::run_folders(store.path()).into_iter().next().expect("the probe run");
        let rows: Vec<stratlab_results::ProbeRow> = RunStore::open(&run).unwrap().load_rows().unwrap();
        let pairs = rows.iter().filter(|row| row.kind.name() == "p2p").count();
        assert_eq!(pairs, 3 * 2, "{link}: every pair of 3 ranks at 2 sizes");
        assert!(
            rows.iter().all(|row| row.world_size == 3 && row.link.map(|link| link.name()).as_deref() == Some(label)),
            "{rows:#?}"
        );
        assert!(made_by(pid).is_empty(), "{link}: the link is gone");
    }
}
