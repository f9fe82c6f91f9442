//! One trial, start to end: its emulated link made and removed, its worker processes started
//! and watched (events, timeout, exit status) with telemetry sampled beside them, and its
//! rows built from how it ended. The runner runs every trial of a plan through it, and the
//! largest-batch search each of its probes.

use std::time::{Duration, Instant};

use stratlab_link_emulation::{EmulatedLink, EmulationError};
use stratlab_results::{Fingerprint, Outcome, UtcTime};
use stratlab_strategies::DeviceChoice;
use stratlab_telemetry::{choose_sampler, CudaEnv, TelemetryRecorder};

use crate::progress::MatrixProgress;
use crate::speed_reference::reference_seconds;
use crate::trial::TrialSpec;
use crate::trial_rows::{record, RecordedTrial, TrialFacts};
use crate::trial_workers::TrialWorkers;

/// Runs one trial and builds its rows; only I/O failures of the runner itself are errors.
pub(crate) fn run_trial(
    trial: &TrialSpec,
    run_id: &str,
    fingerprint: &Fingerprint,
    progress: &MatrixProgress,
) -> anyhow::Result<RecordedTrial> {
    let infeasibility = trial.infeasibility();
    // Timed before the trial's clock starts, on the machine as its workers will find it; a
    // job step's ranks time it on their nodes instead (the runner's host may be a login node).
    let runs_as_step = trial.job_step_allocation().is_some();
    let speed_reference_s = (infeasibility.is_none() && !runs_as_step).then(reference_seconds);
    let started_at = UtcTime::now();
    let started = Instant::now();
    let not_started = |outcome: Outcome, reason: String| {
        record(trial, run_id, fingerprint, TrialFacts::not_started(outcome, reason, started_at, started))
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
    let workers = TrialWorkers::start(trial, run_id, emulated.as_ref())?;

    // A job step's ranks sample themselves on their nodes; the runner samples its own
    // workers. `auto` was resolved before the run started, so these are the devices the
    // workers use: one worker on the chosen device; rank i of a group on cuda:LOCAL_RANK.
    let runner_telemetry = (!runs_as_step).then(|| {
        let cuda_ordinals: Vec<usize> = match trial.train.device {
            DeviceChoice::Cuda(index) if trial.workers == 1 => vec![index],
            DeviceChoice::Cuda(_) => (0..trial.workers).collect(),
            _ => Vec::new(),
        };
        // Every worker is sampled: one worker's process tree, or for a group the runner's
        // own tree, which holds all its workers (and the runner's few threads beside them).
        let sampled_root = if trial.workers == 1 { workers.pids()[0] } else { std::process::id() };
        let sampler = choose_sampler(sampled_root, &cuda_ordinals, &CudaEnv::for_workers());
        let board_names: Vec<String> = sampler.boards().iter().map(|board| board.name.clone()).collect();
        (board_names, TelemetryRecorder::start(sampler, Duration::from_millis(trial.telemetry_interval_ms)))
    });
    let (ends, ranks) = workers.watch(trial, started + Duration::from_secs_f64(trial.timeout_s), progress)?;
    let (board_names, samples) = match runner_telemetry {
        Some((board_names, recorder)) => {
            (board_names, recorder.stop().into_iter().map(|sample| (None, sample)).collect())
        }
        None => (Vec::new(), ranks.samples),
    };
    let facts = TrialFacts {
        ends,
        samples,
        nodes: ranks.nodes,
        board_names,
        started_at,
        started,
        speed_reference_s: speed_reference_s.or(ranks.speed_reference_s),
        link_emulation_cpu_s: emulated.as_ref().map(EmulatedLink::delay_line_cpu_s).filter(|&seconds| seconds > 0.0),
    };
    Ok(record(trial, run_id, fingerprint, facts))
}
