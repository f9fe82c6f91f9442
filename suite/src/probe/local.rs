//! Local mode: this binary started `--workers` times as the ranks of a loopback group.

use std::ffi::OsString;

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::ValueEnum;
use stratlab_comm::Launch;

use stratlab_link_emulation::EmulatedLink;

use crate::cli::{AllReduceLoad, ProbeArgs};
use crate::link_axis::TrialLink;

/// Starts `workers` ranks of this binary on 127.0.0.1, or on `--link`'s emulated link each
/// in a network namespace of its own, each with its share of the cores, and waits for all
/// of them; the emulated link is removed after.
pub(super) fn run_local(args: &ProbeArgs, workers: usize) -> anyhow::Result<ExitCode> {
    let cores = crate::fingerprint::cores_here();
    let threads = args.threads.unwrap_or((cores / workers).max(1));
    let emulated = match args.link.as_ref().and_then(TrialLink::emulated) {
        Some(link) => {
            stratlab_link_emulation::sweep_leftovers().context("removing what killed runs left of their links")?;
            Some(EmulatedLink::create("probe", workers, link).context("emulating the --link")?)
        }
        None => None,
    };
    let (addr, port) = crate::link_axis::rendezvous(emulated.as_ref())?;
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    let over = args.link.map(|link| format!(" over {link}")).unwrap_or_default();
    eprintln!("probe: starting {workers} ranks on {addr}:{port}{over}, {threads} libtorch thread(s) each");
    let mut ranks = LocalRanks { children: Vec::with_capacity(workers) };
    for rank in 0..workers {
        let mut command = Command::new(&exe);
        command.args(rank_args(args, threads)).envs(Launch::local_env(rank, workers, addr, port));
        if let Some(emulated) = &emulated {
            emulated.ends()[rank].start_inside(&mut command).context("starting a rank on the emulated link")?;
        }
        // A group of its own, so stopping a rank stops whatever it started; and it dies
        // with this launcher instead of waiting out its peers' timeout.
        crate::child_process::own_group_dying_with_parent(&mut command, None);
        let child = command.spawn().with_context(|| format!("starting rank {rank} of {workers}"))?;
        ranks.children.push(Some(child));
    }
    ranks.wait_all(Duration::from_secs(args.time_limit_s))?;
    if let Some(emulated) = &emulated {
        eprintln!("probe: the delay line used {:.2} CPU s", emulated.delay_line_cpu_s());
    }
    Ok(ExitCode::SUCCESS)
}

/// The command line of a local rank: the same probe, with the launch variables in its
/// environment instead of `--workers`.
pub(super) fn rank_args(args: &ProbeArgs, threads: usize) -> Vec<OsString> {
    let sizes: Vec<String> = args.sizes.iter().map(u64::to_string).collect();
    let mut command: Vec<OsString> = [
        "probe".to_owned(),
        "--repeats".to_owned(),
        args.repeats.to_string(),
        "--warmup".to_owned(),
        args.warmup.to_string(),
        "--sizes".to_owned(),
        sizes.join(","),
        "--timeout".to_owned(),
        args.timeout_s.to_string(),
        "--threads".to_owned(),
        threads.to_string(),
        "--all-reduce".to_owned(),
        all_reduce_argument(&args.all_reduce),
        "--store".to_owned(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    command.push(args.store.clone().into_os_string());
    if args.gather_scatter {
        command.push("--gather-scatter".into());
    }
    // The rank only labels its rows with it.
    if let Some(link) = args.link.as_ref().and_then(TrialLink::probe_argument) {
        command.push(format!("--link={link}").into());
    }
    command
}

/// `loads` as `--all-reduce` takes them.
fn all_reduce_argument(loads: &[AllReduceLoad]) -> String {
    let names: Vec<String> =
        loads.iter().filter_map(|load| load.to_possible_value()).map(|value| value.get_name().to_owned()).collect();
    names.join(",")
}

/// The local ranks; any still running when this is dropped (an error, a panic) are killed.
pub(super) struct LocalRanks {
    /// `None` once the rank has exited and been reaped.
    children: Vec<Option<Child>>,
}

impl LocalRanks {
    /// Waits until every rank has exited successfully. The first rank to fail, or the time
    /// limit, stops all the others and is the error.
    fn wait_all(&mut self, time_limit: Duration) -> anyhow::Result<()> {
        let workers = self.children.len();
        let deadline = Instant::now() + time_limit;
        loop {
            let mut failed = None;
            for (rank, slot) in self.children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                if let Some(status) = child.try_wait().with_context(|| format!("waiting for rank {rank}"))? {
                    *slot = None;
                    if !status.success() {
                        failed = Some((rank, status));
                        break;
                    }
                }
            }
            if let Some((rank, status)) = failed {
                self.kill_all();
                bail!(
                    "rank {rank} of {workers} failed ({}; its error is above); stopped the other ranks",
                    describe_status(status)
                );
            }
            if self.children.iter().all(Option::is_none) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let running: Vec<String> = self
                    .children
                    .iter()
                    .enumerate()
                    .filter(|(_, slot)| slot.is_some())
                    .map(|(rank, _)| rank.to_string())
                    .collect();
                self.kill_all();
                bail!(
                    "the probe did not finish within --time-limit {} s (ranks {} still running); stopped them \
                     (fewer --sizes or --repeats, or a longer --time-limit)",
                    time_limit.as_secs(),
                    running.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill_all(&mut self) {
        for mut child in self.children.iter_mut().filter_map(Option::take) {
            // SAFETY: killpg has no memory-safety preconditions; the group id is the child's
            // pid (it called setpgid(0, 0)).
            unsafe {
                libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}

impl Drop for LocalRanks {
    fn drop(&mut self) {
        self.kill_all();
    }
}

pub(super) fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}
