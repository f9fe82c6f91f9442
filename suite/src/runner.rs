//! The matrix runner: runs every trial of a plan in worker processes of its own, watches
//! them (events, timeout, exit status), samples telemetry beside them, classifies how each
//! ended, and records each finished trial atomically in the run's store.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use stratlab_datasets::Source;
use stratlab_link_emulation::{EmulatedLink, EmulationError, WorkerEnd as LinkEnd};
use stratlab_strategies::DeviceChoice;

use crate::exit::InputError;
use crate::memory_guard::{MemoryLimit, ResidentGuard};
use crate::plan::plan;
use crate::profiles::ReusePolicy;
use crate::progress::MatrixProgress;
use crate::protocol::{failure_outcome, WorkerEvent};
use crate::speed_reference::reference_seconds;
use crate::suite_file::SuiteFile;
use crate::training::open_data;
use crate::trial::TrialSpec;
use crate::trial_rows::{record, Identity, RecordedTrial, WorkerEnd};
use stratlab_results::{Fingerprint, Outcome, RunStore, UtcTime};
use stratlab_telemetry::{choose_sampler, CudaEnv, TelemetryRecorder, TelemetrySummary};

/// What `stratlab run` was asked to do.
pub struct RunOptions {
    /// The suite file.
    pub suite_path: PathBuf,
    /// Where run folders are created.
    pub store_dir: PathBuf,
    /// An existing run folder to complete instead of starting a new run.
    pub resume: Option<PathBuf>,
    /// Only trials whose id contains one of these substrings.
    pub only: Vec<String>,
    /// Resume even when this machine's fingerprint differs from the run's (recorded).
    pub allow_mixed: bool,
    /// Which stored profiles the run's predictions reuse.
    pub profiles: ReusePolicy,
}

/// What a run did, for the closing summary.
pub struct RunSummary {
    /// The run folder.
    pub run_dir: PathBuf,
    /// Trials in the (filtered) plan.
    pub planned: usize,
    /// Trials already finished by an earlier attempt of a resumed run.
    pub already_done: usize,
    /// Outcomes of the trials run now.
    pub outcomes: BTreeMap<String, usize>,
}

/// Runs (or resumes) a suite and returns where its tables are.
///
/// Everything that can reject the input — the suite, `--only`, the devices, the data, a
/// resumed run's suite and fingerprint — is checked before a run folder is created or
/// touched, so a run that cannot start leaves nothing behind.
pub fn run_suite(options: &RunOptions) -> anyhow::Result<RunSummary> {
    let (suite, _text) = SuiteFile::load(&options.suite_path)?;
    let mut trials = plan(&suite, &options.suite_path)?;
    if !options.only.is_empty() {
        trials.retain(|trial| options.only.iter().any(|pattern| trial.trial_id.contains(pattern.as_str())));
        if trials.is_empty() {
            return Err(InputError(format!(
                "--only {} matches none of the {} trials of {} (`stratlab plan` lists their ids)",
                options.only.join(","),
                plan(&suite, &options.suite_path)?.len(),
                options.suite_path.display()
            ))
            .into());
        }
    }
    resolve_devices(&mut trials)?;
    prepare_real_data(&trials)?;
    if trials.iter().any(|trial| trial.link.emulated().is_some()) {
        sweep_emulated_links();
    }
    let fingerprint = crate::fingerprint::collect(Some(&options.suite_path));
    let store = match &options.resume {
        Some(run_dir) => {
            let store = RunStore::open(run_dir)?;
            check_same_suite(&store, &options.suite_path)?;
            check_same_environment(&store, &fingerprint, options.allow_mixed)?;
            store
        }
        None => RunStore::create(&options.store_dir, &suite.name, &options.suite_path, &fingerprint)?,
    };

    crate::ex_ante::predict_run(&trials, &store, options.profiles, &mut |line| eprintln!("{line}"));
    crate::ex_ante::cut_on_run_profiles(&mut trials, &store, &mut |line| eprintln!("{line}"));
    let finished = store.finished_trial_ids()?;
    let already_done = trials.iter().filter(|trial| finished.contains(&trial.trial_id)).count();
    let progress = MatrixProgress::new(trials.len(), already_done);
    let mut outcomes = BTreeMap::new();
    for trial in trials.iter().filter(|trial| !finished.contains(&trial.trial_id)) {
        progress.start_trial(&trial.label());
        let recorded = run_trial(trial, store.run_id(), &fingerprint, &progress)?;
        store.write_trial(recorded.tables())?;
        *outcomes.entry(recorded.trial.outcome.clone()).or_insert(0) += 1;
        progress.finish_trial(&recorded.trial.outcome, recorded.trial.reason.as_deref());
    }
    progress.finish();
    Ok(RunSummary { run_dir: store.run_dir().to_path_buf(), planned: trials.len(), already_done, outcomes })
}

/// Removes the namespaces and interfaces of emulated links a killed runner left behind
/// (their owner's pid is gone), saying what it removed; where links cannot be emulated
/// there is nothing to sweep, and the trials say why they are infeasible.
fn sweep_emulated_links() {
    if stratlab_link_emulation::check_feasible().is_err() {
        return;
    }
    match stratlab_link_emulation::sweep_leftovers() {
        Ok(removed) if !removed.is_empty() => {
            eprintln!("removed what an earlier, killed run left of its emulated links: {}", removed.join(", "))
        }
        Ok(_) => {}
        Err(error) => eprintln!("warning: could not remove an earlier run's emulated links: {error}"),
    }
}

/// A resumed run must continue the same matrix, or its tables would mix two suites.
fn check_same_suite(store: &RunStore, suite_path: &Path) -> anyhow::Result<()> {
    let stored = store.run_dir().join("suite.yaml");
    let stored_text = std::fs::read(&stored).with_context(|| format!("reading {}", stored.display()))?;
    let given_text = std::fs::read(suite_path).with_context(|| format!("reading {}", suite_path.display()))?;
    if stored_text != given_text {
        return Err(InputError(format!(
            "{} differs from the suite this run started with ({}); resume with the same suite file",
            suite_path.display(),
            stored.display()
        ))
        .into());
    }
    Ok(())
}

/// A resumed run must be measured in the same environment, or its trials would not be
/// comparable; `--allow-mixed` overrides that and the run records it.
fn check_same_environment(store: &RunStore, now: &Fingerprint, allow_mixed: bool) -> anyhow::Result<()> {
    let recorded = store.fingerprint()?;
    let differences = recorded.differences(now);
    if differences.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = differences.iter().map(|(field, then, now)| format!("{field}: {then} → {now}")).collect();
    if !allow_mixed {
        return Err(InputError(format!(
            "{} was measured in another environment ({}); its trials would not be comparable. \
             Rerun from scratch, or pass --allow-mixed to add trials anyway (the run records it)",
            store.run_dir().display(),
            listed.join("; ")
        ))
        .into());
    }
    eprintln!("warning: resuming a run measured elsewhere (--allow-mixed): {}", listed.join("; "));
    store.record_mixed_resume(now, &listed)?;
    Ok(())
}

/// Replaces `device: auto` with the device each trial will really use, so the worker, the
/// telemetry and the trial's row all name the same one; a CUDA device that is not there
/// is an input error before anything runs.
fn resolve_devices(trials: &mut [TrialSpec]) -> anyhow::Result<()> {
    for trial in trials {
        let device = trial.train.device.resolve().map_err(|error| InputError(error.0))?;
        trial.train.device = match device {
            tch::Device::Cuda(index) => DeviceChoice::Cuda(index),
            _ => DeviceChoice::Cpu,
        };
    }
    Ok(())
}

/// Fetches and checks every real data set the plan uses before any trial starts, so a
/// missing data set fails the run at once with the reader's message, and no trial's
/// timing includes a download.
fn prepare_real_data(trials: &[TrialSpec]) -> anyhow::Result<()> {
    let mut seen = Vec::new();
    for trial in trials {
        if trial.dataset.source == Source::Real && !seen.contains(&trial.dataset) {
            open_data(&trial.dataset, trial.train.seed, true)?;
            seen.push(trial.dataset.clone());
        }
    }
    Ok(())
}

/// Runs one trial and builds its rows; only I/O failures of the runner itself are errors.
fn run_trial(
    trial: &TrialSpec,
    run_id: &str,
    fingerprint: &Fingerprint,
    progress: &MatrixProgress,
) -> anyhow::Result<RecordedTrial> {
    let infeasibility = trial.infeasibility();
    // Timed before the trial's clock starts, on the machine as its workers will find it.
    let speed_reference_s = infeasibility.is_none().then(reference_seconds);
    let started_at = UtcTime::now();
    let started = Instant::now();
    let not_started = |outcome: Outcome, reason: String| {
        let ends = vec![WorkerEnd::Failed(outcome, reason)];
        let summary = TelemetrySummary::from_samples(&[]);
        let identity = Identity::of(trial, fingerprint, &summary, &[]);
        record(trial, run_id, &identity, &ends, Vec::new(), &summary, started_at, started)
    };
    if let Some(reason) = infeasibility {
        return Ok(not_started(Outcome::Infeasible, reason));
    }
    // The emulated link lives as long as this function: dropped however the trial ends,
    // which removes its namespaces, interfaces and qdiscs.
    let emulated = match trial.link.emulated() {
        None => None,
        Some(link) => match EmulatedLink::create(run_id, trial.workers, link) {
            Ok(emulated) => Some(emulated),
            Err(error @ EmulationError::Infeasible(_)) => {
                return Ok(not_started(Outcome::Infeasible, format!("the {} link: {error}", trial.link)))
            }
            Err(error) => return Ok(not_started(Outcome::Crashed, format!("the {} link: {error}", trial.link))),
        },
    };

    let mut children = Vec::new();
    let (events, receiver) = mpsc::channel::<(usize, WorkerEvent)>();
    let mut stderr_tails = Vec::new();
    let cuda = matches!(trial.train.device, DeviceChoice::Cuda(_));
    let memory_limit = MemoryLimit::for_trial(trial.memory_limit_bytes, cuda);
    let (master, port) = crate::link_axis::rendezvous(emulated.as_ref())?;
    for rank in 0..trial.workers {
        let end = emulated.as_ref().map(|emulated| &emulated.ends()[rank]);
        let mut child = spawn_worker(trial, rank, (master, port), end, memory_limit)?;
        let mut stdin = child.stdin.take().context("worker stdin")?;
        writeln!(stdin, "{}", serde_json::to_string(trial)?).context("sending the trial to its worker")?;
        drop(stdin);
        let stdout = child.stdout.take().context("worker stdout")?;
        let sender = events.clone();
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
    drop(events);

    // `auto` was resolved before the run started, so these are the devices the workers use:
    // one worker on the chosen device; rank i of a group on cuda:LOCAL_RANK = cuda:i.
    let cuda_ordinals: Vec<usize> = match trial.train.device {
        DeviceChoice::Cuda(index) if trial.workers == 1 => vec![index],
        DeviceChoice::Cuda(_) => (0..trial.workers).collect(),
        _ => Vec::new(),
    };
    // Every worker is sampled: one worker's process tree, or for a group the runner's own
    // tree, which holds all its workers (and the runner's few threads beside them).
    let sampled_root = if trial.workers == 1 { children[0].id() } else { std::process::id() };
    let sampler = choose_sampler(sampled_root, &cuda_ordinals, &CudaEnv::for_workers());
    let board_names: Vec<String> = sampler.boards().iter().map(|board| board.name.clone()).collect();
    let recorder = TelemetryRecorder::start(sampler, Duration::from_millis(trial.telemetry_interval_ms));
    let deadline = started + Duration::from_secs_f64(trial.timeout_s);
    let mut last_words: Vec<Option<WorkerEnd>> = (0..trial.workers).map(|_| None).collect();
    let mut timed_out = false;
    let mut guard = match memory_limit {
        MemoryLimit::Resident(bytes) => {
            Some(ResidentGuard::new(bytes, &children.iter().map(Child::id).collect::<Vec<_>>()))
        }
        _ => None,
    };
    let mut over_memory: Option<String> = None;
    loop {
        match receiver.recv_timeout(Duration::from_millis(100)) {
            Ok((rank, event)) => {
                if rank == 0 {
                    progress.worker_event(&event);
                }
                match event {
                    WorkerEvent::Finished(report) => last_words[rank] = Some(WorkerEnd::Report(report)),
                    WorkerEvent::Failed { outcome, reason } => {
                        last_words[rank] = Some(WorkerEnd::Failed(outcome, reason))
                    }
                    _ => {}
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if !timed_out && over_memory.is_none() && Instant::now() >= deadline {
            timed_out = true;
            for child in &children {
                kill_group(child);
            }
        }
        if over_memory.is_none() {
            over_memory = guard.as_mut().and_then(ResidentGuard::check);
            if over_memory.is_some() {
                for child in &children {
                    kill_group(child);
                }
            }
        }
    }
    let statuses: Vec<ExitStatus> = children.iter_mut().map(|child| child.wait()).collect::<Result<_, _>>()?;
    let samples = recorder.stop();
    let stderr: Vec<String> = stderr_tails.into_iter().map(|tail| tail.join().unwrap_or_default()).collect();

    let ends: Vec<WorkerEnd> = last_words
        .into_iter()
        .zip(statuses.iter().zip(&stderr))
        .map(|(word, (status, stderr))| match word {
            Some(end) => end,
            None if over_memory.is_some() => WorkerEnd::Failed(Outcome::Oom, over_memory.clone().unwrap_or_default()),
            None if timed_out => {
                WorkerEnd::Failed(Outcome::Timeout, format!("killed after the {} s timeout", trial.timeout_s))
            }
            None => classify_silent_exit(*status, stderr),
        })
        .collect();
    let summary = TelemetrySummary::from_samples(&samples);
    let identity = Identity::of(trial, fingerprint, &summary, &board_names);
    let mut recorded = record(trial, run_id, &identity, &ends, samples, &summary, started_at, started);
    recorded.trial.link_emulation_cpu_s =
        emulated.as_ref().map(EmulatedLink::delay_line_cpu_s).filter(|&seconds| seconds > 0.0);
    recorded.trial.speed_reference_s = speed_reference_s;
    Ok(recorded)
}

/// Starts worker `rank` of `trial` in a process group of its own (so a timeout kills all
/// it started), dying with the runner (so a killed runner leaves no orphans that keep
/// training), under the trial's address-space limit when it has one (see [`MemoryLimit`]),
/// and on an emulated link inside its end's network namespace, talking through its end.
fn spawn_worker(
    trial: &TrialSpec,
    rank: usize,
    (master, port): (IpAddr, u16),
    end: Option<&LinkEnd>,
    memory_limit: MemoryLimit,
) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    let address_space_limit = match memory_limit {
        MemoryLimit::AddressSpace(bytes) => Some(bytes),
        _ => None,
    };
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
    WorkerEnd::Failed(outcome, if tail.is_empty() { how } else { format!("{how}: {tail}") })
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
