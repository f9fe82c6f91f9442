//! The matrix runner: checks a suite's input, resolves what waits for the machine (devices,
//! `auto`, `batch_size: max`), predicts every cell, then runs every trial of the plan
//! ([`crate::one_trial`]) and records each finished one atomically in the run's store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use stratlab_datasets::Source;
use stratlab_results::{Fingerprint, Outcome, RunStore};
use stratlab_strategies::DeviceChoice;

use crate::exit::InputError;
use crate::one_trial::run_trial;
use crate::plan::plan;
use crate::profiles::ReusePolicy;
use crate::progress::MatrixProgress;
use crate::suite_file::SuiteFile;
use crate::training::open_data;
use crate::trial::TrialSpec;

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
    /// Predict every cell before its first trial (profiles, link probes), for the report
    /// to judge.
    pub predict: bool,
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
    pub outcomes: BTreeMap<Outcome, usize>,
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
    // Choices are kept beside the runs, as profiles are: a resumed run's own store.
    let store_dir = options.resume.as_deref().and_then(Path::parent).unwrap_or(&options.store_dir);
    let mut choices = crate::auto_compute::ChoiceStore::open(Some(store_dir), options.profiles.fresh)?;
    crate::auto_compute::resolve_auto(&mut trials, suite.numerics, &mut choices, &mut |line| eprintln!("{line}"))?;
    let bfloat16_native = crate::auto_compute::cpu_computes_bfloat16();
    crate::auto_compute::warn_emulated_precisions(&trials, bfloat16_native, &mut |line| eprintln!("{line}"));
    if trials.iter().any(|trial| trial.link.emulated().is_some()) {
        sweep_emulated_links();
    }
    let fingerprint = crate::fingerprint::collect(Some(&options.suite_path));
    let store = match &options.resume {
        Some(run_dir) => {
            let store = RunStore::resume(run_dir)?;
            check_same_suite(&store, &options.suite_path)?;
            check_same_environment(&store, &fingerprint, options.allow_mixed)?;
            store
        }
        None => RunStore::create(&options.store_dir, &suite.name, &options.suite_path, &fingerprint)?,
    };

    if trials.iter().any(|trial| trial.nodes > 1) {
        cancel_leftover_steps(store.run_id());
    }
    crate::largest_batch::resolve_largest_batches(&mut trials, &store, &fingerprint, options.profiles, &mut |line| {
        eprintln!("{line}")
    })?;
    if options.predict {
        crate::ex_ante::predict_run(&trials, &store, options.profiles, &mut |line| eprintln!("{line}"));
    }
    crate::ex_ante::cut_on_run_profiles(&mut trials, &store, &mut |line| eprintln!("{line}"));
    let finished = store.finished_trial_ids()?;
    let already_done = trials.iter().filter(|trial| finished.contains(&trial.trial_id)).count();
    let progress = MatrixProgress::new(trials.len(), already_done);
    let mut outcomes = BTreeMap::new();
    for trial in trials.iter().filter(|trial| !finished.contains(&trial.trial_id)) {
        progress.start_trial(&trial.label());
        let recorded = run_trial(trial, store.run_id(), &fingerprint, &progress)?;
        store.write_trial(recorded.tables())?;
        *outcomes.entry(recorded.trial.outcome).or_insert(0) += 1;
        progress.finish_trial(recorded.trial.outcome, recorded.trial.reason.as_deref());
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

/// Cancels the job steps of this run that a killed runner left in the allocation (srun
/// dies with the runner, but its step's ranks may not), saying which; outside an
/// allocation there are none.
fn cancel_leftover_steps(run_id: &str) {
    let Some(allocation) = crate::slurm_step::Allocation::from_env() else {
        return;
    };
    match crate::slurm_step::cancel_steps(&allocation, &crate::slurm_step::run_prefix(run_id)) {
        Ok(cancelled) if !cancelled.is_empty() => {
            eprintln!("cancelled the job steps an earlier, killed runner left: {}", cancelled.join(", "))
        }
        Ok(_) => {}
        Err(error) => eprintln!("warning: could not look for job steps an earlier runner left: {error}"),
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
