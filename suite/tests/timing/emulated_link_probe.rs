//! A probe over an emulated link measures the link it was given: bandwidth within 10 %,
//! one-way latency within 0.2 ms + 20 % (issue 24; 10 % until a fresh clone's run on a host
//! slowed by a quarter to a half measured 1.27–1.33 ms in every repeat: the delay line
//! forwards each packet through user space, and that costs more on a slower host). Timed, so here: on this project's
//! 2-core machine the same probe beside the other integration tests measured 2.7 ms for
//! the 1 ms link, the delay line's threads waiting for a core.
//!
//! Needs root (CAP_NET_ADMIN), `ip` and `tc`; fails saying so unless STRATLAB_SKIP_NETNS
//! asks to skip it.

use std::process::{Command, Stdio};

use stratlab_link_emulation::made_by;
use stratlab_link_emulation::testing::feasible_or_skip;
use stratlab_results::{ProbeRow, RunStore};

fn text(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_probe_over_an_emulated_link_measures_the_bandwidth_and_latency_it_was_given() {
    if !feasible_or_skip() {
        return;
    }
    let _alone = crate::alone();
    let store = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_stratlab"))
        .args(["probe", "--link", "bandwidth=100Mbit/s,latency=1ms", "--sizes", "4,512K,2M", "--repeats", "5"])
        .args(["--warmup", "2", "--store"])
        .arg(store.path())
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("delay line used"), "{}", text(&out));
    let run = std::fs::read_dir(store.path()).unwrap().next().expect("the probe run").unwrap().path();
    let rows: Vec<ProbeRow> = RunStore::open(&run).unwrap().load_rows().unwrap();
    assert!(
        rows.iter().all(|row| row.link.map(|link| link.name()).as_deref() == Some("100 Mbit/s · 1 ms")),
        "{rows:#?}"
    );
    // The pair's one ping-pong: its round trip crosses the link both ways.
    let p2p = |bytes: u64| {
        let times: Vec<f64> =
            rows.iter().filter(|row| row.kind.name() == "p2p" && row.bytes == bytes).map(|row| row.median_s).collect();
        assert_eq!(times.len(), 1, "the pair's ping-pong of {bytes} bytes: {rows:#?}");
        times[0]
    };
    // A 4-byte message's one-way time is the latency: within 0.2 ms + 20 % of 1 ms.
    let latency_s = p2p(4);
    // On failure, the fastest, median and slowest repeat: a few slow repeats
    // (the scheduler) and all of them slow (the link) read differently.
    let small: Vec<String> = rows
        .iter()
        .filter(|row| row.kind.name() == "p2p" && row.bytes == 4)
        .map(|row| {
            format!(
                "{:?}→{:?}: {:.3} / {:.3} / {:.3} ms",
                row.src,
                row.dst,
                row.min_s * 1e3,
                row.median_s * 1e3,
                row.max_s * 1e3
            )
        })
        .collect();
    assert!(
        (latency_s - 1e-3).abs() <= 0.2e-3 + 0.2e-3,
        "one-way latency {latency_s} s against 1 ms; min / median / max: {small:?}"
    );
    // 1.5 MiB more take 1.5 MiB ÷ bandwidth longer (126 ms; the smaller message is already
    // 8 times tbf's 64 KiB burst): within 10 % of 100 Mbit/s.
    let bandwidth = 1.5 * 1048576.0 / (p2p(2 << 20) - p2p(512 << 10));
    assert!((bandwidth / 12.5e6 - 1.0).abs() <= 0.1, "bandwidth {} Mbit/s against 100", bandwidth * 8e-6);
    assert!(made_by(pid).is_empty(), "the probe's link is gone: {:?}", made_by(pid));
}
