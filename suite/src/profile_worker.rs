//! Profiles are measured in a process of their own (`stratlab profile-worker`, started by
//! [`measure_apart`]), fresh for each network, data set and thread count, as every trial
//! worker is. Measured inside the runner, after other networks' profiles at other thread
//! counts, a profile depended on what came before it: the small CNN's training step on
//! CIFAR at two threads and 64 samples took 48 ms after its one-thread profile in the same
//! process and 58 ms in the trial, whose worker is fresh (13 % off at one thread, 17 % the
//! other way); profiled first, in a process of its own, 59 ms.

use std::io::{BufRead, BufReader, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Stdio;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use stratlab_networks::NetworkSpec;
use stratlab_profile::NetworkProfile;
use stratlab_strategies::contention::measure_contention;
use stratlab_strategies::profile::profile_network;
use stratlab_strategies::split_profile::time_split_backward;
use stratlab_strategies::stored_profile::ProfileNeeds;
use stratlab_strategies::training_steps::{measure_training_steps, measure_training_steps_briefly};
use stratlab_strategies::TrainContext;
use tch::Device;

use crate::contention_copies::CopyProcesses;
use crate::profile_samples::ProfileSamples;
use crate::protocol::panic_message;
use crate::training::open_data;
use crate::trial::TrialSpec;

/// What a profile worker reads on stdin: the trial whose network, data, threads, optimizer
/// and numerics are profiled, and what to measure.
#[derive(Debug, Serialize, Deserialize)]
struct ProfileRequest {
    trial: TrialSpec,
    sizes: Vec<usize>,
    contention: Option<(usize, Vec<usize>)>,
    training_steps: Vec<usize>,
    /// Whether to time every stage's backward split in two as well (zero-bubble cells).
    #[serde(default)]
    split_backward: bool,
    /// Only the training steps, briefly ([`time_steps_apart`]): no stages, no contention.
    #[serde(default)]
    brief: bool,
}

/// One line of a profile worker's stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
enum ProfileEvent {
    /// What the worker did, for the user.
    Note { message: String },
    /// The profile, last.
    Profiled { profile: NetworkProfile },
    /// Why there is none.
    Failed { reason: String },
}

/// `trial`'s network profiled as `needs` asks, in a fresh `stratlab profile-worker`; and the
/// seconds it took, start of that process included. `report` hears what the worker says.
pub(crate) fn measure_apart(
    trial: &TrialSpec,
    needs: &ProfileNeeds<'_>,
    report: &mut dyn FnMut(&str),
) -> anyhow::Result<(NetworkProfile, f64)> {
    let request = ProfileRequest {
        trial: trial.clone(),
        sizes: needs.sizes.to_vec(),
        contention: needs.contention.map(|(copies, at)| (copies, at.to_vec())),
        training_steps: needs.training_steps.to_vec(),
        split_backward: needs.split_backward,
        brief: false,
    };
    let what = format!("profiling {} on {} at {} thread(s)", trial.network, trial.dataset.name, trial.train.threads);
    answer_apart(&request, &what, report)
}

/// Seconds of one training step of `trial`'s network by one worker at its batch, threads,
/// precision and memory format (the 10th percentile of two steps after one untimed), in a
/// fresh `stratlab profile-worker`: what `auto` compares its candidates by.
pub(crate) fn time_steps_apart(trial: &TrialSpec) -> anyhow::Result<f64> {
    let request = ProfileRequest {
        trial: trial.clone(),
        sizes: Vec::new(),
        contention: None,
        training_steps: vec![trial.train.batch_size],
        split_backward: false,
        brief: true,
    };
    let what = format!("timing {} on {}{}", trial.network, trial.dataset.name, trial.compute_label());
    let (profile, _) = answer_apart(&request, &what, &mut |_| {})?;
    profile.training_step_s.first().map(|&(_, seconds)| seconds).with_context(|| format!("{what}: no step was timed"))
}

/// Sends `request` to a fresh `stratlab profile-worker` and reads its profile back, with the
/// seconds it took (the process's start included); `report` hears what the worker says.
fn answer_apart(
    request: &ProfileRequest,
    what: &str,
    report: &mut dyn FnMut(&str),
) -> anyhow::Result<(NetworkProfile, f64)> {
    let started = Instant::now();
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    // Inside a Slurm allocation the machine measured is a compute node's, as the trials'
    // are: a one-task job step (its output labelled, as a trial's step's is).
    let (mut command, in_step) = crate::slurm_step::on_a_compute_node("stratlab.profile", &exe);
    command.arg("profile-worker").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    crate::child_process::own_group_dying_with_parent(&mut command, None);
    let mut child = command.spawn().with_context(|| format!("{what}: starting a profile worker"))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    writeln!(stdin, "{}", serde_json::to_string(request)?).with_context(|| format!("{what}: sending the request"))?;
    drop(stdin);
    // Read apart, so that a worker writing much to stderr never blocks on a full pipe.
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut outcome = None;
    let mut labelled = crate::slurm_step::LabelledLines::default();
    for line in BufReader::new(child.stdout.take().expect("stdout is piped")).lines() {
        let line = line.with_context(|| format!("{what}: reading the profile worker"))?;
        let line = match in_step {
            true => match labelled.push(&line) {
                Some((Some(_), whole)) => whole,
                _ => continue,
            },
            false => line,
        };
        match serde_json::from_str::<ProfileEvent>(line.trim()) {
            Ok(ProfileEvent::Note { message }) => report(&message),
            Ok(event) => outcome = Some(event),
            // Anything else on stdout (libtorch's own printing) is not the protocol's.
            Err(_) => {}
        }
    }
    let status = child.wait().with_context(|| format!("{what}: waiting for the profile worker"))?;
    let stderr = stderr.join().unwrap_or_default();
    match outcome {
        Some(ProfileEvent::Profiled { profile }) => Ok((profile, started.elapsed().as_secs_f64())),
        Some(ProfileEvent::Failed { reason }) => anyhow::bail!("{what}: {reason}"),
        _ => {
            let tail = crate::child_process::stderr_tail(&stderr);
            anyhow::bail!("{what}: the profile worker ended ({status}) without a profile: {tail}")
        }
    }
}

/// Runs `stratlab profile-worker` on this process's stdin and stdout. Returns the exit code.
pub fn run_profile_worker() -> i32 {
    let request: ProfileRequest = match crate::child_process::read_request_or_exit_code("profile-worker", "the request")
    {
        Ok(request) => request,
        Err(code) => return code,
    };
    std::panic::set_hook(Box::new(|info| eprintln!("stratlab profile-worker: {info}")));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        measure_here(&request, &mut |message| emit(&ProfileEvent::Note { message: message.to_owned() }))
    }));
    let event = match outcome {
        Ok(Ok(profile)) => ProfileEvent::Profiled { profile },
        Ok(Err(error)) => ProfileEvent::Failed { reason: format!("{error:#}") },
        Err(panic) => ProfileEvent::Failed { reason: format!("panic: {}", panic_message(&*panic)) },
    };
    emit(&event);
    0
}

fn emit(event: &ProfileEvent) {
    let line = crate::slurm_step::unambiguous_line(serde_json::to_string(event).expect("profile events serialise"));
    let mut stdout = std::io::stdout().lock();
    // A closed pipe means the runner is gone; nothing useful is left to do with the line.
    let _ = writeln!(stdout, "{line}").and_then(|_| stdout.flush());
}

fn measure_here(request: &ProfileRequest, report: &mut dyn FnMut(&str)) -> anyhow::Result<NetworkProfile> {
    let trial = &request.trial;
    trial.apply_numerics()?;
    let spec = trial.network_spec()?;
    if request.brief {
        return steps_briefly(trial, &spec, &request.training_steps);
    }
    let needs = ProfileNeeds {
        sizes: &request.sizes,
        contention: request.contention.as_ref().map(|(copies, at)| (*copies, at.as_slice())),
        training_steps: &request.training_steps,
        split_backward: request.split_backward,
    };
    measure(trial, &spec, &needs, report)
}

/// Only the training steps at `batches`, briefly, as a profile holding nothing else.
fn steps_briefly(trial: &TrialSpec, spec: &NetworkSpec, batches: &[usize]) -> anyhow::Result<NetworkProfile> {
    tch::set_num_threads(trial.train.threads as i32);
    let data = open_data(&trial.dataset, trial.train.seed, false)?;
    let context = TrainContext { network: spec, train: data.train, test: data.test, config: &trial.train };
    let mut profile = NetworkProfile {
        stages: Vec::new(),
        optimizer_s: 0.0,
        whole_model_copy_s: 0.0,
        contention: None,
        training_step_s: Vec::new(),
        training_step_peak_bytes: Vec::new(),
    };
    for &batch in batches {
        if let Some(steps) = measure_training_steps_briefly(&context, batch)? {
            profile.training_step_s.push((batch, steps.p10_s));
        }
    }
    Ok(profile)
}

/// `trial`'s network profiled on this machine's CPU at its threads and everything
/// `needs` asks, with the contention of its copies and its training steps where asked; and
/// the seconds it took, which `report` hears. The stages are not timed at the batches of
/// the training steps (their cells are predicted from the steps) unless the trial's data
/// is not on this machine: then those cells are predicted from the stages, and `report`
/// says why.
fn measure(
    trial: &TrialSpec,
    spec: &NetworkSpec,
    needs: &ProfileNeeds<'_>,
    report: &mut dyn FnMut(&str),
) -> anyhow::Result<NetworkProfile> {
    let started = Instant::now();
    let threads = trial.train.threads;
    tch::set_num_threads(threads as i32);
    let data = match needs.training_steps.is_empty() {
        true => None,
        false => match open_data(&trial.dataset, trial.train.seed, false) {
            Ok(data) => Some(data),
            Err(error) => {
                report(&format!(
                    "no training steps of {} on {} (single cells predicted from its stages): {error}",
                    trial.network, trial.dataset.name
                ));
                None
            }
        },
    };
    let mut sizes = needs.sizes.to_vec();
    if data.is_none() {
        sizes.extend(needs.training_steps);
        sizes.sort_unstable();
        sizes.dedup();
    }
    let update = trial.train.update_rule();
    // The split the training steps opened, where they did: read once.
    let samples = match &data {
        Some(data) => ProfileSamples::of(data.train.clone()),
        None => ProfileSamples::open(trial)?,
    };
    if let Some(stand_in) = samples.stand_in() {
        report(stand_in);
    }
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let mut profile =
        profile_network(spec, Device::Cpu, &sizes, update, trial.train.compute(), &samples.first(largest)?)?;
    if needs.split_backward {
        let began = Instant::now();
        time_split_backward(&mut profile, spec, Device::Cpu, &sizes, trial.train.compute(), &samples.first(largest)?)?;
        report(&format!("split backwards timed for zero-bubble in {:.1} s", began.elapsed().as_secs_f64()));
    }
    let stages_s = started.elapsed().as_secs_f64();
    let mut contended = String::new();
    if let Some((copies, at)) = needs.contention {
        let began = Instant::now();
        let mut processes = CopyProcesses::start(trial, copies)?;
        let measured =
            measure_contention(at, copies, &profile, &mut |samples, passes| processes.together(samples, passes))?;
        drop(processes);
        contended = format!(
            "; {copies} at once at {at:?} samples: ×{:.2?} ({:.1} s)",
            ratios(&measured.ratio),
            began.elapsed().as_secs_f64()
        );
        profile.contention = Some(measured);
    }
    let mut stepped = String::new();
    if let Some(data) = data {
        let began = Instant::now();
        let context = TrainContext { network: spec, train: data.train, test: data.test, config: &trial.train };
        for steps in measure_training_steps(&context, needs.training_steps)? {
            profile.training_step_s.push((steps.batch, steps.p10_s));
            if let Some(bytes) = steps.peak_bytes {
                profile.training_step_peak_bytes.push((steps.batch, bytes));
            }
        }
        stepped =
            format!("; training steps at {:?} samples ({:.1} s)", needs.training_steps, began.elapsed().as_secs_f64());
    }
    let profile_s = started.elapsed().as_secs_f64();
    report(&format!(
        "profiled {} on {} at {threads} thread(s), batch sizes {sizes:?} ({stages_s:.1} s){contended}{stepped}: {profile_s:.1} s",
        trial.network, trial.dataset.name
    ));
    Ok(profile)
}

fn ratios(points: &[(usize, f64)]) -> Vec<f64> {
    points.iter().map(|&(_, ratio)| ratio).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::plan;
    use crate::suite_file::SuiteFile;

    /// What the worker measures for a request, and the line that carries it back, read as
    /// the runner reads it. No contention: its copies are processes of the stratlab binary,
    /// which a unit test's executable is not (`tests/integration/predict_cli.rs` profiles
    /// with them).
    #[test]
    fn a_request_is_measured_and_its_profile_crosses_the_pipe_whole() {
        let suite = SuiteFile::parse(
            "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nbatch_size: 8\nthreads: 1\n\
             strategies: [single, {name: gpipe, workers: [2], micro_batches: [2]}]\nbudget: {steps: 2}\n",
        )
        .unwrap();
        let trials = plan(&suite, Path::new("t.yaml")).unwrap();
        let request = ProfileRequest {
            trial: trials[0].clone(),
            sizes: vec![4],
            contention: None,
            training_steps: vec![8],
            split_backward: true,
            brief: false,
        };
        let mut notes = Vec::new();
        let profile = measure_here(&request, &mut |note| notes.push(note.to_owned())).unwrap();
        let sizes: Vec<usize> = profile.stages[0].forward_s.iter().map(|&(samples, _)| samples).collect();
        assert_eq!(sizes, [4], "the stages are not timed at the batch the training steps are");
        assert!(profile.contention.is_none());
        assert_eq!(profile.training_step_s.len(), 1);
        let (batch, peak) = profile.training_step_peak_bytes[0];
        assert_eq!(batch, 8);
        assert!(peak > 0.0, "the counting allocator saw the steps allocate");
        assert!(notes.iter().any(|note| note.starts_with("profiled small-cnn on mnist at 1 thread(s)")), "{notes:?}");

        let line = serde_json::to_string(&ProfileEvent::Profiled { profile: profile.clone() }).unwrap();
        match serde_json::from_str::<ProfileEvent>(&line).unwrap() {
            ProfileEvent::Profiled { profile: read } => {
                // serde_json reads floats back to within an ulp, not always bit for bit.
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
                assert_eq!(read.stages.len(), profile.stages.len());
                assert!(read.stages.iter().zip(&profile.stages).all(|(r, p)| r.name == p.name
                    && r.forward_s.iter().zip(&p.forward_s).all(|(a, b)| a.0 == b.0 && close(a.1, b.1))));
                assert!(close(read.training_step_s[0].1, profile.training_step_s[0].1));
            }
            other => panic!("{other:?}"),
        }
    }
}
