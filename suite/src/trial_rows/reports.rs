//! What the workers' reports say together: how the trial ended, its pace (the slowest
//! rank's), and every rank's events on one time axis.

use stratlab_results::{EpochRow, EvaluationRow, EventRow, Lane, Outcome, StepRow};
use stratlab_strategies::{StepRecord, TrainOutcome, TrainReport};

use crate::trial::TrialSpec;
use crate::trial_workers::WorkerEnd;

/// Every rank's epochs, steps and evaluations as rows of `trial`.
pub(super) fn per_rank_rows(run_id: &str, trial: &TrialSpec, reports: &[(usize, &TrainReport)]) -> PerRankRows {
    let PerRankRows { mut epochs, mut steps, mut evaluations } = PerRankRows::default();
    for (rank, report) in reports {
        let ids = || (run_id.to_string(), trial.trial_id.clone(), *rank as i64);
        // A rank that trained no step evaluated as the server (the weights it serves).
        let by_server = report.steps.is_empty();
        evaluations.extend(report.evaluations.iter().map(|evaluation| {
            let (run_id, trial_id, worker) = ids();
            EvaluationRow { run_id, trial_id, worker, by_server, record: evaluation.clone() }
        }));
        epochs.extend(report.epochs.iter().map(|epoch| {
            let (run_id, trial_id, worker) = ids();
            EpochRow { run_id, trial_id, worker, record: epoch.clone() }
        }));
        steps.extend(report.steps.iter().map(|step| {
            let (run_id, trial_id, worker) = ids();
            // A one-worker trial communicates nothing: its traffic is unknown, not zero.
            let distributed = trial.workers > 1;
            let record = StepRecord {
                comm_bytes: step.comm_bytes.filter(|_| distributed),
                comm_s: step.comm_s.filter(|_| distributed),
                ..step.clone()
            };
            StepRow { run_id, trial_id, worker, record }
        }));
    }
    PerRankRows { epochs, steps, evaluations }
}

/// What every rank of a trial recorded, as rows.
#[derive(Default)]
pub(super) struct PerRankRows {
    pub(super) epochs: Vec<EpochRow>,
    pub(super) steps: Vec<StepRow>,
    pub(super) evaluations: Vec<EvaluationRow>,
}

/// A failing rank: its rank, outcome, reason and detail, and whether it only followed
/// another rank's failure.
type RankFailure = (usize, Outcome, Option<String>, Option<String>, bool);

/// How a trial ended, from its workers' ends: the first failing worker decides, except that
/// a rank that only lost its peer yields to the peer's own failure, which caused it.
pub(super) fn outcome_of(ends: &[WorkerEnd]) -> (Outcome, Option<String>, Option<String>) {
    let failures: Vec<RankFailure> = ends
        .iter()
        .enumerate()
        .filter_map(|(rank, end)| match end {
            WorkerEnd::Failed(outcome, reason, detail) => {
                Some((rank, *outcome, Some(reason.clone()), detail.clone(), is_peer_loss(reason)))
            }
            WorkerEnd::EndedWithStep(reason) => Some((rank, Outcome::Crashed, Some(reason.clone()), None, true)),
            WorkerEnd::Report(report) if report.outcome == TrainOutcome::Diverged => {
                Some((rank, Outcome::Diverged, report.reason.clone(), None, false))
            }
            WorkerEnd::Report(_) => None,
        })
        .collect();
    // A rank that lost its peer fails with a communication error, and Slurm ends a job
    // step's other ranks once one fails; the rank's own failure (a crash, a kill) is the
    // cause, so it names the outcome when there is one.
    let cause = failures.iter().find(|failure| !failure.4).or_else(|| failures.first());
    match cause {
        None => (Outcome::Ok, None, None),
        Some((rank, outcome, reason, detail, _)) if ends.len() > 1 => {
            (*outcome, reason.as_ref().map(|reason| format!("rank {rank}: {reason}")), detail.clone())
        }
        Some((_, outcome, reason, detail, _)) => (*outcome, reason.clone(), detail.clone()),
    }
}

/// Whether a failure reason is a rank losing its peer (see `TrainError::Comm`).
fn is_peer_loss(reason: &str) -> bool {
    reason.starts_with("communication:")
}

/// Rank 0's report with each step's times replaced by the slowest training rank's: a
/// synchronous step is over only when every rank is done, so the trial's pace is the
/// slowest rank's. `None` for one-rank trials (the report is used as it is).
pub(super) fn slowest_rank_pace(training: &[&TrainReport]) -> Option<TrainReport> {
    let (first, others) = training.split_first()?;
    if others.is_empty() {
        return None;
    }
    let mut paced = (*first).clone();
    for (index, step) in paced.steps.iter_mut().enumerate() {
        for other in others {
            if let Some(theirs) = other.steps.get(index) {
                step.step_time_s = step.step_time_s.max(theirs.step_time_s);
                step.data_wait_s = step.data_wait_s.max(theirs.data_wait_s);
                step.h2d_s = step.h2d_s.max(theirs.h2d_s);
            }
        }
    }
    Some(paced)
}

/// Every rank's events, on one time axis starting at the earliest event of the trial
/// (the ranks of one machine share CLOCK_MONOTONIC).
pub(super) fn event_rows(run_id: &str, trial_id: &str, reports: &[(usize, &TrainReport)]) -> Vec<EventRow> {
    let origin = reports.iter().flat_map(|(_, report)| report.events.iter().map(|event| event.start_ns)).min();
    let Some(origin) = origin else {
        return Vec::new();
    };
    let seconds = |ns: i64| (ns - origin) as f64 * 1e-9;
    reports
        .iter()
        .flat_map(|(rank, report)| {
            report.events.iter().map(move |event| EventRow {
                run_id: run_id.to_string(),
                trial_id: trial_id.to_string(),
                rank: *rank as u32,
                step: event.step,
                micro_batch: event.micro_batch,
                pipeline_stage: event.pipeline_stage,
                kind: event.kind,
                name: event.name.clone(),
                start_s: seconds(event.start_ns),
                end_s: seconds(event.end_ns),
                bytes: event.bytes,
                lane: if event.kind.is_communication() { Lane::Comm } else { Lane::Compute },
            })
        })
        .collect()
}
