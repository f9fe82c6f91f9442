//! From what a trial's workers reported to the rows the results store records: the trial
//! row (outcome, headline metrics, identity, settings), its epochs and its steps. Kept apart
//! from the runner, which only starts, watches and classifies workers.

use std::time::Instant;

use stratlab_datasets::Source;
use stratlab_strategies::{DeviceChoice, StepRecord, TrainOutcome, TrainReport};
use stratlab_strategy_spec::StrategyColumns;

use crate::trial::TrialSpec;
use stratlab_results::{
    pipeline_stage_rows, rank_breakdown, EpochRow, EventRow, Fingerprint, Lane, Outcome, PipelineStageInfo,
    PipelineStageRow, RankBreakdownRow, StepRow, TelemetryRow, TrainingSummary, TrialRow, TrialTables, UtcTime,
};
use stratlab_telemetry::{Sample, TelemetrySummary};

/// Everything recorded about one trial.
pub(crate) struct RecordedTrial {
    pub(crate) trial: TrialRow,
    pub(crate) epochs: Vec<EpochRow>,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) telemetry: Vec<TelemetryRow>,
    pub(crate) events: Vec<EventRow>,
    pub(crate) rank_breakdown: Vec<RankBreakdownRow>,
    pub(crate) pipeline_stages: Vec<PipelineStageRow>,
}

impl RecordedTrial {
    /// The tables to write, borrowing from this record.
    pub(crate) fn tables(&self) -> TrialTables<'_> {
        TrialTables {
            trial: &self.trial,
            epochs: &self.epochs,
            steps: &self.steps,
            telemetry: &self.telemetry,
            events: &self.events,
            rank_breakdown: &self.rank_breakdown,
            pipeline_stages: &self.pipeline_stages,
        }
    }
}

/// A worker's last word: its report, or why it has none.
pub(crate) enum WorkerEnd {
    Report(TrainReport),
    Failed(Outcome, String),
}

/// Where a trial ran: every row carries it, so trials of a mixed run stay tellable apart.
pub(crate) struct Identity {
    host_name: Option<String>,
    device_name: Option<String>,
    device_ids: Option<String>,
}

impl Identity {
    /// `board_names` are the GPU boards telemetry sampled (empty without NVML).
    pub(crate) fn of(
        trial: &TrialSpec,
        fingerprint: &Fingerprint,
        summary: &TelemetrySummary,
        board_names: &[String],
    ) -> Identity {
        let device_name = match trial.train.device {
            DeviceChoice::Cuda(index) => {
                let mut names = board_names.to_vec();
                names.dedup();
                match names.is_empty() {
                    false => Some(names.join(", ")),
                    // No NVML: say which ordinal, not a guess at the board.
                    true => Some(format!("CUDA device {index} (board unknown without NVML)")),
                }
            }
            _ => fingerprint.cpu_model.clone(),
        };
        Identity {
            host_name: fingerprint.host_name.clone(),
            device_name,
            device_ids: (!summary.device_ids.is_empty()).then(|| summary.device_ids.join(",")),
        }
    }
}

/// Builds the trial's rows from its workers' ends.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    trial: &TrialSpec,
    run_id: &str,
    identity: &Identity,
    ends: &[WorkerEnd],
    samples: Vec<Sample>,
    summary: &TelemetrySummary,
    started_at: UtcTime,
    started: Instant,
) -> RecordedTrial {
    let (outcome, reason) = outcome_of(ends);
    let reports: Vec<(usize, &TrainReport)> = ends
        .iter()
        .enumerate()
        .filter_map(|(rank, end)| match end {
            WorkerEnd::Report(report) => Some((rank, report)),
            WorkerEnd::Failed(..) => None,
        })
        .collect();
    // Ranks that trained on data (a dedicated parameter server reports no steps).
    let training: Vec<&TrainReport> =
        reports.iter().map(|(_, report)| *report).filter(|report| !report.steps.is_empty()).collect();
    let paced = slowest_rank_pace(&training);
    let lead = paced.as_ref().or(reports.first().map(|(_, report)| *report));
    let shards = match trial.strategy.kind().is_pipeline() {
        true => (trial.global_batch() / trial.train.batch_size.max(1)) as f64,
        false => training.len().max(1) as f64,
    };
    let numerics = lead.map(|report| report.numerics);
    let budget = trial.train.budget;
    let row = TrialRow {
        run_id: run_id.to_string(),
        trial_id: trial.trial_id.clone(),
        index: trial.index as i64,
        network: trial.network.clone(),
        dataset: trial.dataset.name.to_string(),
        data_source: match trial.dataset.source {
            Source::Real => "real",
            Source::Synthetic => "synthetic",
        }
        .to_string(),
        strategy: StrategyColumns::from(&trial.strategy),
        workers: trial.workers as i64,
        batch_size: trial.train.batch_size as i64,
        global_batch: trial.global_batch() as i64,
        epochs_budget: budget.epochs.map(|e| e as i64),
        steps_budget: budget.steps.map(|s| s as i64),
        seconds_budget: budget.seconds,
        min_timed_steps_budget: budget.min_timed_steps.map(|timed| timed as i64),
        repeat: trial.repeat as i64,
        seed: trial.train.seed as i64,
        device: lead.map(|report| report.device.clone()).unwrap_or_else(|| trial.train.device.to_string()),
        device_name: identity.device_name.clone(),
        device_ids: identity.device_ids.clone(),
        host_name: identity.host_name.clone(),
        threads: trial.train.threads as i64,
        swept_threads: trial.swept_threads.map(|threads| threads as i64),
        link: trial.link.emulated().map(|_| trial.link.label()),
        link_emulation_cpu_s: None,
        speed_reference_s: None,
        cudnn_benchmark: numerics.map(|n| n.cudnn_benchmark),
        matmul_precision: numerics.map(|n| n.matmul_precision.to_string()),
        cudnn_tf32: numerics.map(|n| n.cudnn_tf32),
        metrics_every_steps: trial.train.metrics_every_steps as i64,
        target_accuracy: trial.train.target_accuracy,
        outcome: outcome.name().to_string(),
        reason,
        warmup_steps: trial.train.warmup_steps as i64,
        // Throughput of the whole trial: every batch shard's samples over the slowest rank's
        // time per step (the lead report carries those times).
        training: TrainingSummary {
            // Memory is per worker: the worker that held the most.
            peak_memory_bytes: reports.iter().filter_map(|(_, report)| report.peak_memory_bytes()).max(),
            ..lead.map(|report| report.summary(shards)).unwrap_or_default()
        },
        load: summary.load.clone(),
        wall_time_s: started.elapsed().as_secs_f64(),
        started_at: started_at.rfc3339(),
        finished_at: UtcTime::now().rfc3339(),
    };
    let mut epochs = Vec::new();
    let mut steps = Vec::new();
    for (rank, report) in &reports {
        let ids = || (run_id.to_string(), trial.trial_id.clone(), *rank as i64);
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
    let events = event_rows(run_id, &trial.trial_id, &reports);
    let rank_breakdown = rank_breakdown(run_id, &trial.trial_id, &events, trial.train.warmup_steps as u64);
    let stage_infos: Vec<PipelineStageInfo> = reports
        .iter()
        .filter_map(|(rank, report)| report.pipeline.as_ref().map(|stage| stage.info(*rank, trial.strategy.name())))
        .collect();
    let pipeline_stages =
        pipeline_stage_rows(run_id, &trial.trial_id, &stage_infos, &events, trial.train.warmup_steps as u64);
    let telemetry = samples
        .into_iter()
        .map(|sample| TelemetryRow { run_id: run_id.to_owned(), trial_id: trial.trial_id.clone(), sample })
        .collect();
    RecordedTrial { trial: row, epochs, steps, telemetry, events, rank_breakdown, pipeline_stages }
}

/// How a trial ended, from its workers' ends: the first failing worker decides, except that
/// a rank that only lost its peer yields to the peer's own failure, which caused it.
fn outcome_of(ends: &[WorkerEnd]) -> (Outcome, Option<String>) {
    let failures: Vec<(usize, Outcome, Option<String>)> = ends
        .iter()
        .enumerate()
        .filter_map(|(rank, end)| match end {
            WorkerEnd::Failed(outcome, reason) => Some((rank, *outcome, Some(reason.clone()))),
            WorkerEnd::Report(report) if report.outcome == TrainOutcome::Diverged => {
                Some((rank, Outcome::Diverged, report.reason.clone()))
            }
            WorkerEnd::Report(_) => None,
        })
        .collect();
    // A rank that lost its peer fails with a communication error; the peer's own failure
    // (a crash, a kill) is the cause, so it names the outcome when there is one.
    let cause = failures
        .iter()
        .find(|(_, _, reason)| !reason.as_deref().is_some_and(is_peer_loss))
        .or_else(|| failures.first());
    match cause {
        None => (Outcome::Ok, None),
        Some((rank, outcome, reason)) if ends.len() > 1 => {
            (*outcome, reason.as_ref().map(|reason| format!("rank {rank}: {reason}")))
        }
        Some((_, outcome, reason)) => (*outcome, reason.clone()),
    }
}

/// Whether a failure reason is a rank losing its peer (see `TrainError::Comm`).
fn is_peer_loss(reason: &str) -> bool {
    reason.starts_with("communication:")
}

/// Rank 0's report with each step's times replaced by the slowest training rank's: a
/// synchronous step is over only when every rank is done, so the trial's pace is the
/// slowest rank's. `None` for one-rank trials (the report is used as it is).
fn slowest_rank_pace(training: &[&TrainReport]) -> Option<TrainReport> {
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
fn event_rows(run_id: &str, trial_id: &str, reports: &[(usize, &TrainReport)]) -> Vec<EventRow> {
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
                kind: event.kind.name().to_string(),
                name: event.name.clone(),
                start_s: seconds(event.start_ns),
                end_s: seconds(event.end_ns),
                bytes: event.bytes,
                lane: if event.kind.is_communication() { Lane::Comm } else { Lane::Compute }.name().to_string(),
            })
        })
        .collect()
}
