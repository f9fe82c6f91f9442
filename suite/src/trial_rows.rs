//! From what a trial's workers reported to the rows the results store records: the trial
//! row (outcome, headline metrics, identity, settings), its epochs and its steps. Kept apart
//! from the runner, which only starts, watches and classifies workers.

use std::time::Instant;

use stratlab_results::{
    pipeline_stage_rows, rank_breakdown, EpochRow, EvaluationRow, EventRow, Fingerprint, GradientUpdateRow, Outcome,
    PipelineStageInfo, PipelineStageRow, RankBreakdownRow, StepRow, TelemetryRow, TrainingSummary, TrialNodeRow,
    TrialRow, TrialTables, UtcTime,
};
use stratlab_strategies::TrainReport;
use stratlab_strategy_spec::{AutoOr, ParameterColumns, StragglerColumns, StrategyKind};
use stratlab_telemetry::{Sample, TelemetrySummary};

use crate::trial::TrialSpec;
use crate::trial_workers::WorkerEnd;

mod identity;
mod per_worker;
mod reports;

use identity::Identity;
use per_worker::per_worker_pace;
use reports::{event_rows, outcome_of, per_rank_rows, slowest_rank_pace, PerRankRows};

/// Everything recorded about one trial.
pub(crate) struct RecordedTrial {
    pub(crate) trial: TrialRow,
    pub(crate) epochs: Vec<EpochRow>,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) telemetry: Vec<TelemetryRow>,
    pub(crate) events: Vec<EventRow>,
    pub(crate) rank_breakdown: Vec<RankBreakdownRow>,
    pub(crate) pipeline_stages: Vec<PipelineStageRow>,
    pub(crate) evaluations: Vec<EvaluationRow>,
    pub(crate) gradient_updates: Vec<GradientUpdateRow>,
    pub(crate) nodes: Vec<TrialNodeRow>,
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
            evaluations: &self.evaluations,
            gradient_updates: &self.gradient_updates,
            nodes: &self.nodes,
        }
    }
}

/// What the runner knows of a trial when it is over.
pub(crate) struct TrialFacts {
    /// Every worker's last word, by rank.
    pub(crate) ends: Vec<WorkerEnd>,
    /// Telemetry sampled beside the workers, each sample with the node a job step's rank
    /// sampled it on (none where the runner sampled).
    pub(crate) samples: Vec<(Option<String>, Sample)>,
    /// Each rank's node, where a job step's rank reported it.
    pub(crate) nodes: Vec<Option<Fingerprint>>,
    /// The GPU boards telemetry sampled (empty without NVML).
    pub(crate) board_names: Vec<String>,
    /// When the trial started, by the calendar and by the monotonic clock.
    pub(crate) started_at: UtcTime,
    pub(crate) started: Instant,
    /// The speed reference timed just before the trial (none for one that did not start).
    pub(crate) speed_reference_s: Option<f64>,
    /// CPU seconds the emulated link's delay line took, where it took any.
    pub(crate) link_emulation_cpu_s: Option<f64>,
}

impl TrialFacts {
    /// A trial that never started its workers, and why.
    pub(crate) fn not_started(outcome: Outcome, reason: String, started_at: UtcTime, started: Instant) -> TrialFacts {
        TrialFacts {
            ends: vec![WorkerEnd::Failed(outcome, reason, None)],
            samples: Vec::new(),
            nodes: Vec::new(),
            board_names: Vec::new(),
            started_at,
            started,
            speed_reference_s: None,
            link_emulation_cpu_s: None,
        }
    }
}

/// Builds the trial's rows from what the runner knows of it.
pub(crate) fn record(trial: &TrialSpec, run_id: &str, fingerprint: &Fingerprint, facts: TrialFacts) -> RecordedTrial {
    let TrialFacts { ends, samples, nodes, board_names, started_at, started, speed_reference_s, link_emulation_cpu_s } =
        facts;
    let summary = TelemetrySummary::from_samples(&samples.iter().map(|(_, sample)| sample.clone()).collect::<Vec<_>>());
    let identity = Identity::of(trial, fingerprint, &summary, &board_names);
    let (outcome, reason, reason_detail) = outcome_of(&ends);
    let reports: Vec<(usize, &TrainReport)> = ends
        .iter()
        .enumerate()
        .filter_map(|(rank, end)| match end {
            WorkerEnd::Report(report) => Some((rank, report.as_ref())),
            WorkerEnd::Failed(..) | WorkerEnd::EndedWithStep(_) => None,
        })
        .collect();
    // Ranks that trained on data (a dedicated parameter server reports no steps).
    let training: Vec<&TrainReport> =
        reports.iter().map(|(_, report)| *report).filter(|report| !report.steps.is_empty()).collect();
    // The server's report: the one that recorded what it was pushed.
    let server = reports.iter().map(|(_, report)| *report).find(|report| !report.gradients.is_empty());
    let per_worker = match trial.strategy.kind() {
        StrategyKind::ParameterServer => per_worker_pace(trial.strategy.server_settings(), &training, server),
        _ => None,
    };
    let (paced, shards) = match per_worker {
        Some((lead, shards)) => (Some(lead), shards),
        None => (
            slowest_rank_pace(&training),
            match trial.strategy.kind().is_pipeline() {
                true => (trial.global_batch() / trial.train.batch_size.max(1)) as f64,
                false => training.len().max(1) as f64,
            },
        ),
    };
    let lead = paced.as_ref().or(reports.first().map(|(_, report)| *report));
    let numerics = lead.map(|report| report.numerics);
    let budget = trial.train.budget;
    let row = TrialRow {
        run_id: run_id.to_string(),
        trial_id: trial.trial_id.clone(),
        index: trial.index as i64,
        network: trial.network.clone(),
        dataset: trial.dataset.name.to_string(),
        data_source: trial.dataset.source,
        strategy: trial.strategy.kind(),
        workers: trial.workers as i64,
        batch_size: trial.train.batch_size as i64,
        global_batch: trial.global_batch() as i64,
        parameters: ParameterColumns::from(&trial.strategy),
        epochs_budget: budget.epochs.map(|e| e as i64),
        steps_budget: budget.steps.map(|s| s as i64),
        seconds_budget: budget.seconds,
        min_timed_steps_budget: budget.min_timed_steps.map(|timed| timed as i64),
        repeat: trial.repeat as i64,
        seed: trial.train.seed as i64,
        device: lead.map_or_else(|| trial.train.device.planned(), |report| report.device),
        device_name: identity.device_name.clone(),
        device_ids: identity.device_ids.clone(),
        host_name: identity.host_name.clone(),
        threads: trial.train.threads as i64,
        swept_threads: trial.swept_threads.map(|threads| threads as i64),
        link: trial.link.emulated().copied(),
        nodes: (trial.nodes > 1).then_some(trial.nodes as i64),
        straggler: StragglerColumns::from(trial.train.straggler.as_ref()),
        stored_precision: Some(trial.train.precision),
        stored_memory_format: Some(trial.train.memory_format),
        precision_auto: Some(trial.precision == AutoOr::Auto),
        memory_format_auto: Some(trial.memory_format == AutoOr::Auto),
        stored_optimizer: Some(trial.train.optimizer),
        link_emulation_cpu_s,
        speed_reference_s,
        memory_limit_bytes: trial.memory_limit_bytes,
        device_memory_limit_bytes: trial.train.device_memory_limit_bytes,
        cudnn_benchmark: numerics.map(|n| n.cudnn_benchmark),
        matmul_precision: numerics.map(|n| n.matmul_precision),
        cudnn_tf32: numerics.map(|n| n.cudnn_tf32),
        metrics_every_steps: trial.train.metrics_every_steps as i64,
        target_accuracy: trial.train.target_accuracy,
        outcome,
        reason,
        reason_detail,
        epochs_completed: lead.map_or(0, |report| report.epochs.len() as i64),
        steps_completed: lead.map_or(0, |report| report.steps.len() as i64),
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
        started_at,
        finished_at: UtcTime::now(),
    };
    let PerRankRows { epochs, steps, evaluations } = per_rank_rows(run_id, trial, &reports);
    let events = event_rows(run_id, &trial.trial_id, &reports);
    let rank_breakdown = rank_breakdown(run_id, &trial.trial_id, &events, trial.train.warmup_steps as u64);
    let stage_infos: Vec<PipelineStageInfo> =
        reports.iter().filter_map(|(_, report)| report.pipeline.clone()).collect();
    let pipeline_stages =
        pipeline_stage_rows(run_id, &trial.trial_id, &stage_infos, &events, trial.train.warmup_steps as u64);
    let telemetry = samples
        .into_iter()
        .map(|(host_name, sample)| TelemetryRow {
            run_id: run_id.to_owned(),
            trial_id: trial.trial_id.clone(),
            host_name,
            sample,
        })
        .collect();
    let nodes = nodes
        .iter()
        .enumerate()
        .filter_map(|(rank, node)| Some(TrialNodeRow::new(run_id, &trial.trial_id, rank as u32, node.as_ref()?)))
        .collect();
    let gradient_updates = server
        .map(|server| {
            let record = |record: &stratlab_results::GradientRecord| {
                GradientUpdateRow::new(run_id, &trial.trial_id, record.clone())
            };
            server.gradients.iter().map(record).collect()
        })
        .unwrap_or_default();
    RecordedTrial {
        trial: row,
        epochs,
        steps,
        telemetry,
        events,
        rank_breakdown,
        pipeline_stages,
        evaluations,
        gradient_updates,
        nodes,
    }
}
