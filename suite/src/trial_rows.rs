//! From what a trial's workers reported to the rows the results store records: the trial
//! row (outcome, headline metrics, identity, settings), its epochs and its steps. Kept apart
//! from the runner, which only starts, watches and classifies workers.

use std::time::Instant;

use stratlab_datasets::Source;
use stratlab_strategies::{stats, DeviceChoice, StepRecord, TrainOutcome, TrainReport};

use crate::telemetry::{Sample, TelemetrySummary};
use crate::trial::TrialSpec;
use stratlab_results::{EpochRow, Fingerprint, Outcome, StepRow, TelemetryRow, TrialRow, UtcTime};

/// Everything recorded about one trial.
pub(crate) struct RecordedTrial {
    pub(crate) trial: TrialRow,
    pub(crate) epochs: Vec<EpochRow>,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) telemetry: Vec<TelemetryRow>,
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

/// Builds the trial's rows from its workers' ends; the first failing worker decides the outcome.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    trial: &TrialSpec,
    run_id: &str,
    identity: &Identity,
    ends: &[WorkerEnd],
    telemetry: &[TelemetryRow],
    summary: &TelemetrySummary,
    started_at: UtcTime,
    started: Instant,
) -> RecordedTrial {
    let failure = ends.iter().find_map(|end| match end {
        WorkerEnd::Failed(outcome, reason) => Some((*outcome, Some(reason.clone()))),
        WorkerEnd::Report(report) if report.outcome == TrainOutcome::Diverged => {
            Some((Outcome::Diverged, report.reason.clone()))
        }
        WorkerEnd::Report(_) => None,
    });
    let (outcome, reason) = failure.unwrap_or((Outcome::Ok, None));
    let reports: Vec<(usize, &TrainReport)> = ends
        .iter()
        .enumerate()
        .filter_map(|(rank, end)| match end {
            WorkerEnd::Report(report) => Some((rank, report)),
            WorkerEnd::Failed(..) => None,
        })
        .collect();
    let lead = reports.first().map(|(_, report)| *report);
    let step_times = lead.map(|report| report.timed_step_times()).unwrap_or_default();
    let timed_median = |of: fn(&StepRecord) -> f64| {
        lead.and_then(|report| {
            stats::median(&report.steps.iter().filter(|step| !step.warmup).map(of).collect::<Vec<_>>())
        })
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
        strategy: trial.strategy.name().to_string(),
        workers: trial.workers as i64,
        batch_size: trial.train.batch_size as i64,
        global_batch: trial.global_batch() as i64,
        micro_batches: trial.micro_batches.map(|m| m as i64),
        balance: trial.balance.as_ref().map(ToString::to_string),
        checkpoint: trial.checkpoint.map(|checkpoint| checkpoint.to_string()),
        fusion_threshold_bytes: trial.fusion_threshold_bytes.map(|b| b as i64),
        epochs_budget: budget.epochs.map(|e| e as i64),
        steps_budget: budget.steps.map(|s| s as i64),
        seconds_budget: budget.seconds,
        repeat: trial.repeat as i64,
        seed: trial.train.seed as i64,
        device: lead.map(|report| report.device.clone()).unwrap_or_else(|| trial.train.device.to_string()),
        device_name: identity.device_name.clone(),
        device_ids: identity.device_ids.clone(),
        host_name: identity.host_name.clone(),
        threads: trial.train.threads as i64,
        cudnn_benchmark: numerics.map(|n| n.cudnn_benchmark),
        matmul_precision: numerics.map(|n| n.matmul_precision.to_string()),
        cudnn_tf32: numerics.map(|n| n.cudnn_tf32),
        metrics_every_steps: trial.train.metrics_every_steps as i64,
        target_accuracy: trial.train.target_accuracy,
        outcome: outcome.name().to_string(),
        reason,
        epochs_completed: lead.map_or(0, |report| report.epochs.len() as i64),
        steps_completed: lead.map_or(0, |report| report.steps.len() as i64),
        warmup_steps: trial.train.warmup_steps as i64,
        seconds_per_epoch_mean: lead.and_then(|report| report.seconds_per_epoch_mean()),
        seconds_per_epoch_estimate: lead.and_then(|report| report.seconds_per_epoch_estimate()),
        step_time_median_s: stats::median(&step_times),
        step_time_p10_s: stats::quantile(&step_times, 0.1),
        step_time_p90_s: stats::quantile(&step_times, 0.9),
        data_wait_median_s: timed_median(|step| step.data_wait_s),
        h2d_median_s: timed_median(|step| step.h2d_s),
        // Throughput of the whole trial: every worker's samples over the lead's time.
        step_samples_per_s: lead
            .and_then(|report| report.step_samples_per_s())
            .map(|per_worker| per_worker * reports.len() as f64),
        wall_samples_per_s: lead
            .and_then(|report| report.wall_samples_per_s())
            .map(|per_worker| per_worker * reports.len() as f64),
        val_samples_per_s: lead.and_then(|report| report.val_samples_per_s()),
        time_to_accuracy_s: lead.and_then(|report| report.time_to_accuracy_s),
        final_accuracy: lead.and_then(|report| report.final_accuracy()),
        final_loss: lead.and_then(|report| report.final_loss()),
        eval_time_s: lead.map(|report| report.evaluations.iter().map(|eval| eval.time_s).sum()),
        utilization_mean_pct: summary.utilization_mean_pct,
        utilization_max_pct: summary.utilization_max_pct,
        memory_mean_bytes: summary.memory_mean_bytes,
        memory_max_bytes: summary.memory_max_bytes,
        process_memory_mean_bytes: summary.process_memory_mean_bytes,
        process_memory_max_bytes: summary.process_memory_max_bytes,
        energy_j: summary.energy_j,
        energy_source: summary.energy_source.map(|source| source.as_str().to_owned()),
        wall_time_s: started.elapsed().as_secs_f64(),
        started_at: started_at.rfc3339(),
        finished_at: UtcTime::now().rfc3339(),
    };
    let mut epochs = Vec::new();
    let mut steps = Vec::new();
    for (rank, report) in &reports {
        epochs.extend(report.epochs.iter().map(|epoch| EpochRow {
            run_id: run_id.to_string(),
            trial_id: trial.trial_id.clone(),
            worker: *rank as i64,
            epoch: epoch.epoch as i64,
            train_loss: Some(epoch.train_loss),
            train_accuracy: Some(epoch.train_accuracy),
            test_loss: Some(epoch.test_loss),
            test_accuracy: Some(epoch.test_accuracy),
            epoch_time_s: epoch.epoch_time_s,
            eval_time_s: epoch.eval_time_s,
            wall_samples_per_s: Some(epoch.wall_samples_per_s),
            val_samples_per_s: Some(epoch.val_samples_per_s),
            elapsed_s: epoch.elapsed_s,
        }));
        steps.extend(report.steps.iter().map(|step| StepRow {
            run_id: run_id.to_string(),
            trial_id: trial.trial_id.clone(),
            worker: *rank as i64,
            epoch: step.epoch as i64,
            step: step.step as i64,
            loss: Some(step.loss),
            step_time_s: step.step_time_s,
            data_wait_s: step.data_wait_s,
            h2d_s: step.h2d_s,
            samples: step.samples as i64,
            lr: step.lr,
            warmup: step.warmup,
        }));
    }
    RecordedTrial { trial: row, epochs, steps, telemetry: telemetry.to_vec() }
}

/// Tags a recorder's sample with its run and trial.
pub fn telemetry_row(run_id: &str, trial_id: &str, sample: &Sample) -> TelemetryRow {
    TelemetryRow {
        run_id: run_id.to_owned(),
        trial_id: trial_id.to_owned(),
        t_s: sample.t_s,
        device: sample.device.clone(),
        device_id: sample.device_id.clone(),
        utilization_pct: sample.utilization_pct,
        memory_used_bytes: sample.memory_used_bytes,
        process_memory_bytes: sample.process_memory_bytes,
        power_w: sample.power_w,
        energy_counter_mj: sample.energy_counter_mj,
        sm_clock_mhz: sample.sm_clock_mhz,
    }
}
