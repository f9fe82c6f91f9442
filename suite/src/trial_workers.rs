//! A trial's worker processes, started and watched: each gets the trial on its standard
//! input and reports events on its standard output; the watcher ends them all at the
//! trial's timeout or when they outgrow its memory limit, and says how each ended. A trial
//! across nodes is one Slurm job step instead (`slurm_step`), watched the same way.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use stratlab_link_emulation::{EmulatedLink, WorkerEnd as LinkEnd};
use stratlab_results::{Fingerprint, Outcome, Sample};
use stratlab_strategies::{DeviceChoice, TrainReport};
use stratlab_telemetry::CudaEnv;

use crate::memory_guard::{MemoryLimit, ResidentGuard};
use crate::progress::MatrixProgress;
use crate::protocol::{failure_outcome, WorkerEvent};
use crate::slurm_step::{Allocation, LabelledLines, StepGuard};
use crate::trial::TrialSpec;

/// A worker's last word: its report, or why it has none.
pub(crate) enum WorkerEnd {
    Report(Box<TrainReport>),
    /// The outcome, the reason in one line, and the whole error where it said more.
    Failed(Outcome, String, Option<String>),
    /// Slurm ended this rank with its job step after another rank failed
    /// (`--kill-on-bad-exit`): a consequence, which a trial's reason passes over for the
    /// cause; how, in one line.
    EndedWithStep(String),
}

/// What the ranks of a job step told of themselves beside their last words: each rank's
/// node and the telemetry it sampled there (empty for a trial on this machine, which the
/// runner samples).
#[derive(Default)]
pub(crate) struct RankFacts {
    /// Each rank's node, by rank, where it reported one.
    pub(crate) nodes: Vec<Option<Fingerprint>>,
    /// Every rank's samples, each with its node's host name.
    pub(crate) samples: Vec<(Option<String>, Sample)>,
    /// The slowest speed reference the ranks timed on their nodes, where they timed one.
    pub(crate) speed_reference_s: Option<f64>,
}

/// How long a cancelled step's srun is given to see its tasks ended before it is killed.
const STEP_CANCEL_WAIT: Duration = Duration::from_secs(10);

/// An event and the rank that reported it.
type RankEvent = (usize, WorkerEvent);

/// How a trial's ranks were started.
enum Processes {
    /// One child process per rank on this machine, each in a group of its own.
    Local(Vec<Child>),
    /// One `srun` for all ranks: a Slurm job step of this name in `allocation`, the runner's
    /// signals held off while it runs.
    Step { srun: Child, name: String, allocation: Allocation, guard: StepGuard },
}

/// The running worker processes of one trial, rank by rank.
pub(crate) struct TrialWorkers {
    processes: Processes,
    ranks: usize,
    events: mpsc::Receiver<RankEvent>,
    /// Each rank's standard error (a job step's srun: one, all ranks' labelled together
    /// with srun's own lines).
    stderr_tails: Vec<JoinHandle<String>>,
    memory_limit: MemoryLimit,
}

impl TrialWorkers {
    /// Starts every worker of `trial` (of run `run_id`) and hands each the trial: inside a
    /// Slurm allocation as a job step on its nodes (the runner's host may be a login node
    /// that computes nothing), else on this machine, on `emulated`'s ends where the trial
    /// runs over an emulated link (which joins ranks on this machine only).
    pub(crate) fn start(
        trial: &TrialSpec,
        run_id: &str,
        emulated: Option<&EmulatedLink>,
    ) -> anyhow::Result<TrialWorkers> {
        let cuda = matches!(trial.train.device, DeviceChoice::Cuda(_));
        let memory_limit = MemoryLimit::for_trial(trial.memory_limit_bytes, cuda);
        let (sender, events) = mpsc::channel::<RankEvent>();
        let mut worker_trial = trial.for_worker()?;
        match trial.job_step_allocation() {
            Some(allocation) => {
                worker_trial.job_step_telemetry_ms = Some(trial.telemetry_interval_ms);
                let request = serde_json::to_string(&worker_trial)?;
                return Self::start_step(trial, run_id, allocation, &request, (sender, events), memory_limit);
            }
            None if trial.nodes > 1 => anyhow::bail!("a trial across nodes outside a Slurm allocation"),
            None => {}
        }
        let request = serde_json::to_string(&worker_trial)?;
        let (master, port) = crate::link_axis::rendezvous(emulated)?;
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
            stderr_tails.push(read_all(child.stderr.take().context("worker stderr")?));
            children.push(child);
        }
        Ok(TrialWorkers {
            processes: Processes::Local(children),
            ranks: trial.workers,
            events,
            stderr_tails,
            memory_limit,
        })
    }

    /// Starts the trial's ranks as one job step (`slurm_step::srun`) named after the run
    /// and trial, the trial on the step's standard input, its labelled output taken apart
    /// into each rank's events.
    fn start_step(
        trial: &TrialSpec,
        run_id: &str,
        allocation: Allocation,
        request: &str,
        (sender, events): (mpsc::Sender<RankEvent>, mpsc::Receiver<RankEvent>),
        memory_limit: MemoryLimit,
    ) -> anyhow::Result<TrialWorkers> {
        let exe = std::env::current_exe().context("locating the stratlab executable")?;
        let name = crate::slurm_step::step_name(run_id, &trial.trial_id);
        let mut command = crate::slurm_step::srun(&name, trial.nodes, trial.workers, &exe, &["worker"]);
        command
            .env("CUDA_DEVICE_ORDER", CudaEnv::PCI_BUS_ID)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // The ranks hold themselves to the memory limit on their nodes (`job_step_worker`);
        // srun itself is only kept from outliving the runner.
        crate::child_process::own_group_dying_with_parent(&mut command, None);
        let guard = StepGuard::hold();
        let mut srun = command.spawn().context("starting srun (is Slurm's client installed on this host?)")?;
        let mut stdin = srun.stdin.take().context("srun stdin")?;
        writeln!(stdin, "{request}").context("sending the trial to its job step")?;
        drop(stdin);
        let stdout = srun.stdout.take().context("srun stdout")?;
        std::thread::spawn(move || {
            let send = |rank: usize, line: &str| {
                // Lines that are not events (a library printing to stdout) are ignored.
                if let Some(event) = WorkerEvent::from_line(line) {
                    let _ = sender.send((rank, event));
                }
            };
            let mut lines = LabelledLines::default();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some((Some(rank), whole)) = lines.push(&line) {
                    send(rank, &whole);
                }
            }
            // A rank's last piece with no line after it.
            lines.rest().for_each(|(rank, line)| send(rank, &line));
        });
        let stderr_tails = vec![read_all(srun.stderr.take().context("srun stderr")?)];
        Ok(TrialWorkers {
            processes: Processes::Step { srun, name, allocation, guard },
            ranks: trial.workers,
            events,
            stderr_tails,
            memory_limit,
        })
    }

    /// The local workers' process ids, by rank; srun's alone for a job step (its ranks run
    /// on other nodes).
    pub(crate) fn pids(&self) -> Vec<u32> {
        match &self.processes {
            Processes::Local(children) => children.iter().map(Child::id).collect(),
            Processes::Step { srun, .. } => vec![srun.id()],
        }
    }

    /// Follows the workers' events until every worker has closed its output, killing them
    /// all at `deadline` or when they outgrow the trial's resident-memory limit; rank 0's
    /// events move `progress`. Returns each worker's end (its last word, or what its exit
    /// status, the kill and its standard error tell) and what job-step ranks told of
    /// their nodes.
    pub(crate) fn watch(
        mut self,
        trial: &TrialSpec,
        deadline: Instant,
        progress: &MatrixProgress,
    ) -> anyhow::Result<(Vec<WorkerEnd>, RankFacts)> {
        let mut last_words: Vec<Option<WorkerEnd>> = (0..self.ranks).map(|_| None).collect();
        let mut facts = RankFacts { nodes: vec![None; self.ranks], ..RankFacts::default() };
        let mut timed_out = false;
        let mut interrupted = false;
        let mut guard = match (&self.processes, self.memory_limit) {
            (Processes::Local(_), MemoryLimit::Resident(bytes)) => Some(ResidentGuard::new(bytes, &self.pids())),
            _ => None,
        };
        let mut over_memory: Option<String> = None;
        loop {
            match self.events.recv_timeout(Duration::from_millis(100)) {
                Ok((rank, _)) if rank >= self.ranks => {}
                Ok((rank, event)) => {
                    if rank == 0 {
                        progress.worker_event(&event);
                    }
                    match event {
                        WorkerEvent::Finished(report) => last_words[rank] = Some(WorkerEnd::Report(report)),
                        WorkerEvent::Failed { outcome, reason, detail } => {
                            last_words[rank] = Some(WorkerEnd::Failed(outcome, reason, detail))
                        }
                        WorkerEvent::Node(node) => facts.nodes[rank] = Some(*node),
                        WorkerEvent::SpeedReference { seconds } => {
                            facts.speed_reference_s = Some(facts.speed_reference_s.map_or(seconds, |s| s.max(seconds)))
                        }
                        WorkerEvent::Telemetry { samples } => {
                            let host = facts.nodes[rank].as_ref().and_then(|node| node.host_name.clone());
                            facts.samples.extend(samples.into_iter().map(|sample| (host.clone(), sample)));
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
            if let Processes::Step { guard, .. } = &self.processes {
                if let Some(signal) = guard.interrupted().filter(|_| !interrupted) {
                    interrupted = true;
                    eprintln!("signal {signal}: cancelling the trial's job step before the runner ends");
                    self.kill_all();
                }
            }
            if over_memory.is_none() {
                over_memory = guard.as_mut().and_then(ResidentGuard::check);
                if over_memory.is_some() {
                    self.kill_all();
                }
            }
        }
        let silent = match &mut self.processes {
            Processes::Local(children) => {
                let statuses: Vec<ExitStatus> = children.iter_mut().map(Child::wait).collect::<Result<_, _>>()?;
                let stderr: Vec<String> =
                    self.stderr_tails.drain(..).map(|tail| tail.join().unwrap_or_default()).collect();
                statuses.into_iter().zip(stderr).map(|(status, stderr)| classify_silent_exit(status, &stderr)).collect()
            }
            Processes::Step { srun, .. } => {
                let status = srun.wait()?;
                let stderr =
                    self.stderr_tails.drain(..).map(|tail| tail.join().unwrap_or_default()).collect::<String>();
                silent_step_ends(&stderr, status, self.ranks)
            }
        };
        let ends = last_words
            .into_iter()
            .zip(silent)
            .map(|(word, silent)| match word {
                Some(end) => end,
                None if over_memory.is_some() => {
                    WorkerEnd::Failed(Outcome::Oom, over_memory.clone().unwrap_or_default(), None)
                }
                None if timed_out => {
                    let reason = format!("killed after the {} s timeout", trial.timeout_s);
                    WorkerEnd::Failed(Outcome::Timeout, reason, None)
                }
                None => silent,
            })
            .collect();
        Ok((ends, facts))
    }

    /// Ends every rank now: each local worker's group, or the job step by name; srun ends
    /// once Slurm has ended the step's tasks, which is waited for (a few seconds at most,
    /// then srun is killed), so the step is gone when this returns.
    fn kill_all(&mut self) {
        match &mut self.processes {
            Processes::Local(children) => children.iter().for_each(kill_group),
            Processes::Step { srun, name, allocation, .. } => {
                if let Err(error) = crate::slurm_step::cancel_steps(allocation, name) {
                    eprintln!("warning: could not cancel job step {name}: {error}");
                }
                let cancelled = Instant::now();
                while srun.try_wait().ok().flatten().is_none() && cancelled.elapsed() < STEP_CANCEL_WAIT {
                    std::thread::sleep(Duration::from_millis(50));
                }
                kill_group(srun);
            }
        }
    }
}

/// Reads all of a child's stream on a thread of its own, so that a full pipe never blocks it.
fn read_all(mut stream: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    })
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

/// The ranks of a job step that ended without their final event: what srun said of each
/// task (`srun: error: node2: task 1: Killed`) and the rank's labelled standard error tell
/// what; a rank srun names nothing of ended with the step (`--kill-on-bad-exit`).
fn silent_step_ends(stderr: &str, srun: ExitStatus, ranks: usize) -> Vec<WorkerEnd> {
    let mut rank_stderr = vec![String::new(); ranks];
    let mut ended: Vec<Option<(String, String)>> = vec![None; ranks];
    // What srun said of the step itself (it could not be created, a node failed).
    let mut srun_errors = Vec::new();
    let mut lines = LabelledLines::default();
    for line in stderr.lines() {
        match lines.push(line) {
            Some((Some(rank), text)) if rank < ranks => {
                rank_stderr[rank].push_str(&text);
                rank_stderr[rank].push('\n');
            }
            Some((None, text)) => {
                let ends = crate::slurm_step::task_ends(&text);
                if ends.is_empty() && text.starts_with("srun: error: ") {
                    srun_errors.push(text.trim_start_matches("srun: error: ").to_owned());
                }
                for (rank, host, how) in ends.into_iter().filter(|end| end.0 < ranks) {
                    ended[rank] = Some((host, how));
                }
            }
            _ => {}
        }
    }
    let srun_how = match (srun.signal(), srun.code()) {
        (Some(signal), _) => format!("srun killed by signal {signal} ({})", signal_name(signal)),
        (None, Some(code)) => format!("srun exited with code {code}"),
        (None, None) => "srun ended".to_owned(),
    };
    rank_stderr
        .iter()
        .zip(ended)
        .enumerate()
        .map(|(rank, (stderr, ended))| {
            let tail = crate::child_process::stderr_tail(stderr);
            let with_tail = |how: String| if tail.is_empty() { how } else { format!("{how}: {tail}") };
            // Slurm ends every rank of a step once one fails (`--kill-on-bad-exit`): those
            // ranks are the failure's consequence, not its cause.
            let cancelled = stderr.contains("CANCELLED AT");
            let how = match (ended, cancelled) {
                (Some((host, how)), false) => format!("rank {rank} on {host}: {how}"),
                (Some((host, how)), true) => {
                    return WorkerEnd::EndedWithStep(with_tail(format!(
                        "cancelled with its job step on {host} ({how})"
                    )))
                }
                (None, _) if !srun_errors.is_empty() && stderr.is_empty() => {
                    format!("the job step did not run ({srun_how}): {}", srun_errors.join(" | "))
                }
                (None, _) => {
                    return WorkerEnd::EndedWithStep(with_tail(format!("cancelled with its job step ({srun_how})")))
                }
            };
            WorkerEnd::Failed(failure_outcome(stderr), with_tail(how), None)
        })
        .collect()
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
