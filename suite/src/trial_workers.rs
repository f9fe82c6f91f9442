//! A trial's worker processes, started and watched: each gets the trial on its standard
//! input and reports events on its standard output; the watcher ends them all at the
//! trial's timeout or when they outgrow its memory limit, and says how each ended.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use stratlab_link_emulation::{EmulatedLink, WorkerEnd as LinkEnd};
use stratlab_results::Outcome;
use stratlab_strategies::{DeviceChoice, TrainReport};
use stratlab_telemetry::CudaEnv;

use crate::memory_guard::{MemoryLimit, ResidentGuard};
use crate::progress::MatrixProgress;
use crate::protocol::{failure_outcome, WorkerEvent};
use crate::trial::TrialSpec;

/// A worker's last word: its report, or why it has none.
pub(crate) enum WorkerEnd {
    Report(Box<TrainReport>),
    /// The outcome, the reason in one line, and the whole error where it said more.
    Failed(Outcome, String, Option<String>),
}

/// The running worker processes of one trial, rank by rank.
pub(crate) struct TrialWorkers {
    children: Vec<Child>,
    events: mpsc::Receiver<(usize, WorkerEvent)>,
    stderr_tails: Vec<JoinHandle<String>>,
    memory_limit: MemoryLimit,
}

impl TrialWorkers {
    /// Starts every worker of `trial`, on `emulated`'s ends where the trial runs over an
    /// emulated link, and hands each the trial.
    pub(crate) fn start(trial: &TrialSpec, emulated: Option<&EmulatedLink>) -> anyhow::Result<TrialWorkers> {
        let cuda = matches!(trial.train.device, DeviceChoice::Cuda(_));
        let memory_limit = MemoryLimit::for_trial(trial.memory_limit_bytes, cuda);
        let (master, port) = crate::link_axis::rendezvous(emulated)?;
        let (sender, events) = mpsc::channel::<(usize, WorkerEvent)>();
        let request = serde_json::to_string(&trial.for_worker()?)?;
        let mut children = Vec::new();
        let mut stderr_tails = Vec::new();
        for rank in 0..trial.workers {
            let end = emulated.map(|emulated| &emulated.ends()[rank]);
            let mut child = spawn_worker(trial, rank, (master, port), end, memory_limit)?;
            let mut stdin = child.stdin.take().context("worker stdin")?;
            writeln!(stdin, "{request}").context("sending the trial to its worker")?;
            drop(stdin);
            let stdout = child.stdout.take().context("worker stdout")?;
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    // Lines that are not events (a library printing to stdout) are ignored.
                    if let Some(event) = WorkerEvent::from_line(&line) {
                        if sender.send((rank, event)).is_err() {
                            break;
                        }
                    }
                }
            });
            let mut stderr = child.stderr.take().context("worker stderr")?;
            stderr_tails.push(std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                text
            }));
            children.push(child);
        }
        Ok(TrialWorkers { children, events, stderr_tails, memory_limit })
    }

    /// The workers' process ids, by rank.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Follows the workers' events until every worker has closed its output, killing them
    /// all at `deadline` or when they outgrow the trial's resident-memory limit; rank 0's
    /// events move `progress`. Returns each worker's end: its last word, or what its exit
    /// status, the kill and its standard error tell.
    pub(crate) fn watch(
        mut self,
        trial: &TrialSpec,
        deadline: Instant,
        progress: &MatrixProgress,
    ) -> anyhow::Result<Vec<WorkerEnd>> {
        let mut last_words: Vec<Option<WorkerEnd>> = (0..trial.workers).map(|_| None).collect();
        let mut timed_out = false;
        let mut guard = match self.memory_limit {
            MemoryLimit::Resident(bytes) => Some(ResidentGuard::new(bytes, &self.pids())),
            _ => None,
        };
        let mut over_memory: Option<String> = None;
        loop {
            match self.events.recv_timeout(Duration::from_millis(100)) {
                Ok((rank, event)) => {
                    if rank == 0 {
                        progress.worker_event(&event);
                    }
                    match event {
                        WorkerEvent::Finished(report) => last_words[rank] = Some(WorkerEnd::Report(report)),
                        WorkerEvent::Failed { outcome, reason, detail } => {
                            last_words[rank] = Some(WorkerEnd::Failed(outcome, reason, detail))
                        }
                        _ => {}
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if !timed_out && over_memory.is_none() && Instant::now() >= deadline {
                timed_out = true;
                self.kill_all();
            }
            if over_memory.is_none() {
                over_memory = guard.as_mut().and_then(ResidentGuard::check);
                if over_memory.is_some() {
                    self.kill_all();
                }
            }
        }
        let statuses: Vec<ExitStatus> = self.children.iter_mut().map(|child| child.wait()).collect::<Result<_, _>>()?;
        let stderr: Vec<String> = self.stderr_tails.into_iter().map(|tail| tail.join().unwrap_or_default()).collect();
        Ok(last_words
            .into_iter()
            .zip(statuses.iter().zip(&stderr))
            .map(|(word, (status, stderr))| match word {
                Some(end) => end,
                None if over_memory.is_some() => {
                    WorkerEnd::Failed(Outcome::Oom, over_memory.clone().unwrap_or_default(), None)
                }
                None if timed_out => {
                    let reason = format!("killed after the {} s timeout", trial.timeout_s);
                    WorkerEnd::Failed(Outcome::Timeout, reason, None)
                }
                None => classify_silent_exit(*status, stderr),
            })
            .collect())
    }

    fn kill_all(&self) {
        for child in &self.children {
            kill_group(child);
        }
    }
}

/// Starts worker `rank` of `trial` in a process group of its own (so a timeout kills all
/// it started), dying with the runner (so a killed runner leaves no orphans that keep
/// training), under the address-space guard of the trial's memory limit when it has one
/// (see [`MemoryLimit`]),
/// and on an emulated link inside its end's network namespace, talking through its end.
fn spawn_worker(
    trial: &TrialSpec,
    rank: usize,
    (master, port): (IpAddr, u16),
    end: Option<&LinkEnd>,
    memory_limit: MemoryLimit,
) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    let address_space_limit = memory_limit.address_space_guard();
    let mut command = Command::new(exe);
    if let Some(end) = end {
        end.start_inside(&mut command).context("starting a worker on the emulated link")?;
    }
    command
        .arg("worker")
        .envs(stratlab_comm::Launch::local_env(rank, trial.workers, master, port))
        // CUDA numbers devices fastest-first unless told otherwise; NVML numbers them by PCI
        // bus. Bus order in both is what lets telemetry sample the boards a worker uses.
        .env("CUDA_DEVICE_ORDER", CudaEnv::PCI_BUS_ID)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::child_process::own_group_dying_with_parent(&mut command, address_space_limit);
    command.spawn().context("starting a worker process")
}

fn kill_group(child: &Child) {
    // SAFETY: killpg has no memory-safety preconditions; the group id is the child's pid.
    unsafe {
        libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
    }
}

/// A worker that ended without its final event: a signal or an exit code tells what.
fn classify_silent_exit(status: ExitStatus, stderr: &str) -> WorkerEnd {
    let tail = crate::child_process::stderr_tail(stderr);
    let outcome = failure_outcome(stderr);
    let how = match (status.signal(), status.code()) {
        (Some(signal), _) => format!("killed by signal {signal} ({})", signal_name(signal)),
        (None, Some(code)) => format!("exited with code {code} without a result"),
        (None, None) => "ended without a result".to_string(),
    };
    WorkerEnd::Failed(outcome, if tail.is_empty() { how } else { format!("{how}: {tail}") }, None)
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}
