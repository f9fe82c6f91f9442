//! Pipeline trials: what each stage held and what it measured, from the run's
//! `pipeline_stages` table (see `stratlab_results::pipeline_stage_rows`), one timed step
//! of a trial's events as the timeline the figure draws (thesis figs. 2.5, 6.1, 7.2), and
//! the step the model predicted for its cell before training (fig. 7.1), measured as the
//! events are.

use std::collections::{BTreeMap, HashMap};

use stratlab_results::{
    pipeline_stage_rows, CellKey, EventKind, EventRow, Lane, PipelineStageInfo, PipelineStageRow, PredictedPassRow,
};
use stratlab_strategy_spec::StrategyKind;

use super::trial::{TrialInfo, TrialRecord};
use crate::{PipelineTimeline, TimelineEvent};

/// One pipeline trial: its identity and the stored row of each of its ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineTrial {
    /// The trial (identity with `<set>:synthetic` data sets, repeat, failure).
    pub trial: TrialInfo,
    /// Warm-up steps of the trial (its first steps, left out of every measurement).
    pub warmup_steps: u64,
    /// One row per rank, in rank order.
    pub ranks: Vec<PipelineStageRow>,
    /// The model's predicted step of the trial's cell, made before any trial trained
    /// (`predicted_passes`); empty where the run predicted none (runs before the table,
    /// cells the model could not predict).
    pub predicted: Vec<PredictedPassRow>,
}

/// One stage of a pipeline trial, its replicas (`hybrid`) taken together.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineStage {
    /// What the stage held, as its first replica reported it (layers, parameters, balance
    /// and schedule are the same on every replica).
    pub info: PipelineStageInfo,
    /// Ranks running this stage: the pipeline's data-parallel replicas.
    pub replicas: u32,
    /// Mean compute seconds per timed step over the replicas that timed a step; `None`
    /// when none did.
    pub compute_s: Option<f64>,
    /// Mean measured bubble (0–1) over the replicas that timed a step; `None` when none did.
    pub bubble_measured: Option<f64>,
    /// The bubble (0–1) of the model's predicted step, by the same rule as the measured
    /// one; `None` without a prediction.
    pub bubble_predicted: Option<f64>,
    /// The schedule's (p − 1) ÷ (m + p − 1), 0–1.
    pub bubble_theoretical: f64,
    /// The trial's measured imbalance (max ÷ mean stage compute − 1); `None` when no rank
    /// of the trial timed a step.
    pub measured_imbalance: Option<f64>,
    /// The largest peak activation memory over the replicas, bytes; `None` if unmeasured.
    pub peak_activation_bytes: Option<u64>,
    /// The fewest timed steps over the replicas.
    pub timed_steps: u32,
}

impl PipelineTrial {
    /// The schedule (pipeline strategy) the stages reported: the trial's own.
    pub fn schedule(&self) -> StrategyKind {
        self.trial.key.kind()
    }

    /// Stages per pipeline (p).
    pub fn stage_count(&self) -> u32 {
        self.ranks.first().map_or(0, |row| row.info.stages)
    }

    /// Pipeline stages each rank holds (v; 1 unless interleaved).
    pub fn virtual_stages(&self) -> u32 {
        self.ranks.first().and_then(|row| row.info.virtual_stages).unwrap_or(1)
    }

    /// Micro-batches per step (m).
    pub fn micro_batches(&self) -> u32 {
        self.ranks.first().map_or(0, |row| row.info.micro_batches)
    }

    /// Data-parallel replicas of the pipeline (1 outside `hybrid`).
    pub fn replicas(&self) -> u32 {
        self.ranks.iter().map(|row| row.info.replica + 1).max().unwrap_or(0)
    }

    /// The trial's measured bubble: the mean over its ranks that timed a step; `None` when
    /// none did.
    pub fn bubble_measured(&self) -> Option<f64> {
        mean(self.timed().map(|row| row.bubble_measured))
    }

    /// One entry per stage, in stage order.
    pub fn stages(&self) -> Vec<PipelineStage> {
        let mut by_stage: BTreeMap<u32, Vec<&PipelineStageRow>> = BTreeMap::new();
        for row in &self.ranks {
            by_stage.entry(row.info.stage).or_default().push(row);
        }
        let imbalance = self.timed().next().map(|row| row.measured_imbalance);
        // A replicated stage's workers averaged, as the measured bubble is.
        let mut predicted: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for row in self.predicted_rows() {
            predicted.entry(row.info.stage).or_default().push(row.bubble_measured);
        }
        by_stage
            .into_values()
            .map(|replicas| {
                let timed = || replicas.iter().filter(|row| row.timed_steps > 0);
                PipelineStage {
                    info: replicas[0].info.clone(),
                    replicas: replicas.len() as u32,
                    compute_s: mean(timed().map(|row| row.compute_s)),
                    bubble_measured: mean(timed().map(|row| row.bubble_measured)),
                    bubble_predicted: predicted
                        .get(&replicas[0].info.stage)
                        .and_then(|bubbles| mean(bubbles.iter().copied())),
                    bubble_theoretical: replicas[0].bubble_theoretical,
                    measured_imbalance: imbalance,
                    peak_activation_bytes: replicas.iter().filter_map(|row| row.info.peak_activation_bytes).max(),
                    timed_steps: replicas.iter().map(|row| row.timed_steps).min().unwrap_or(0),
                }
            })
            .collect()
    }

    /// One step of the trial's `events` as a timeline, ranks as rows: the first step after
    /// warm-up in which a stage computed, or, when every step was warm-up, the last one
    /// (the title says so), from the step's first pass: what began before it (PipeDream's
    /// sends of the step before, completed in this one) is drawn from there. `None`
    /// without a forward, backward or recompute event of the trial's ranks.
    pub fn timeline(&self, events: &[EventRow], strategy: &str) -> Option<PipelineTimeline> {
        let ranks: HashMap<u32, &PipelineStageRow> = self.ranks.iter().map(|row| (row.info.rank, row)).collect();
        let is_compute = |event: &EventRow| event.kind.is_pass();
        let ours = || events.iter().filter(|event| ranks.contains_key(&event.rank));
        let computed = || ours().filter(|event| is_compute(event)).map(|event| event.step);
        let step = computed().filter(|step| *step >= self.warmup_steps).min().or_else(|| computed().max())?;
        let workers = self.ranks.iter().map(|row| row.info.rank + 1).max().unwrap_or(0);
        let per_worker = self.virtual_stages();
        let first_pass_s = ours()
            .filter(|event| event.step == step && is_compute(event))
            .map(|event| event.start_s)
            .fold(f64::INFINITY, f64::min);
        let timeline_events = ours()
            .filter(|event| event.step == step && event.end_s > first_pass_s)
            .filter(|event| drawn(event.kind))
            .filter_map(|event| {
                timeline_event(
                    event.rank,
                    event.kind,
                    event.micro_batch,
                    event.pipeline_stage,
                    per_worker,
                    (event.start_s.max(first_pass_s), event.end_s),
                )
            })
            .collect();
        let worker_labels = (0..workers)
            .map(|rank| ranks.get(&rank).map_or_else(|| format!("rank {rank}"), |row| self.row_label(row)))
            .collect();
        let mut title = self.title(strategy);
        title.push_str(&format!(" · step {step}"));
        if step < self.warmup_steps {
            title.push_str(" (warm-up)");
        }
        Some(PipelineTimeline { title, workers, worker_labels, events: timeline_events })
    }

    /// The model's predicted step of the trial's cell as a timeline on the same terms as
    /// [`PipelineTrial::timeline`]: one pipeline (hybrid's replicas are predicted alike), a
    /// row per rank from its first pass at 0 s. `None` without a prediction.
    pub fn predicted_timeline(&self, strategy: &str) -> Option<PipelineTimeline> {
        let first_replica = self.first_replica();
        let workers = first_replica.len() as u32;
        let per_worker = self.virtual_stages();
        let events: Vec<TimelineEvent> = self
            .predicted
            .iter()
            .filter(|pass| pass.rank < workers)
            .filter_map(|pass| {
                let interval = (pass.start_s, pass.end_s);
                timeline_event(pass.rank, pass.kind, pass.micro_batch, pass.pipeline_stage, per_worker, interval)
            })
            .collect();
        if events.is_empty() {
            return None;
        }
        let worker_labels = first_replica.iter().map(|row| self.row_label(row)).collect();
        let title = format!("{} · predicted before training", self.title(strategy));
        Some(PipelineTimeline { title, workers, worker_labels, events })
    }

    /// The first replica's rows (every rank outside `hybrid`), in stage order: the ranks
    /// of the one pipeline the model predicts.
    fn first_replica(&self) -> Vec<&PipelineStageRow> {
        let mut rows: Vec<&PipelineStageRow> = self.ranks.iter().filter(|row| row.info.replica == 0).collect();
        rows.sort_by_key(|row| row.info.stage);
        rows
    }

    /// The predicted step measured as a trial's events are (`pipeline_stage_rows`): one row
    /// per rank of the first replica, its `bubble_measured` the predicted bubble. Empty
    /// without a prediction.
    fn predicted_rows(&self) -> Vec<PipelineStageRow> {
        if self.predicted.is_empty() {
            return Vec::new();
        }
        let infos: Vec<PipelineStageInfo> = self.first_replica().iter().map(|row| row.info.clone()).collect();
        let events: Vec<EventRow> = self
            .predicted
            .iter()
            .filter_map(|pass| {
                // The model's rank r is the stage r of the pipeline; its row names the world rank.
                let info = infos.get(pass.rank as usize)?;
                Some(EventRow {
                    run_id: pass.run_id.clone(),
                    trial_id: pass.trial_id.clone(),
                    rank: info.rank,
                    step: 0,
                    micro_batch: pass.micro_batch,
                    pipeline_stage: pass.pipeline_stage,
                    kind: pass.kind,
                    name: String::new(),
                    start_s: pass.start_s,
                    end_s: pass.end_s,
                    bytes: None,
                    lane: Lane::Compute,
                })
            })
            .collect();
        pipeline_stage_rows(&self.predicted[0].run_id, &self.trial.trial_id, &infos, &events, 0)
    }

    /// The predicted bubble: the mean over the predicted ranks; `None` without a prediction.
    pub fn bubble_predicted(&self) -> Option<f64> {
        mean(self.predicted_rows().iter().map(|row| row.bubble_measured))
    }

    /// A rank's row name: its replica and stage (hybrid), its stage and which of the
    /// stage's workers it is (replicated stages), the stages a worker holds (interleaved),
    /// or its stage.
    fn row_label(&self, row: &PipelineStageRow) -> String {
        let per_worker = self.virtual_stages();
        match row.info.stage_replica {
            _ if self.replicas() > 1 => format!("replica {} · stage {}", row.info.replica, row.info.stage),
            Some(worker) => format!("stage {} · worker {worker}", row.info.stage),
            _ if per_worker > 1 => {
                let (rank, ranks) = (row.info.stage as usize, row.info.stages as usize);
                let held: Vec<String> = match self.trial.key.strategy.schedule() {
                    Some(schedule) => schedule.stages_of_rank(rank, ranks).iter().map(ToString::to_string).collect(),
                    None => {
                        (0..per_worker).map(|chunk| (chunk * row.info.stages + row.info.stage).to_string()).collect()
                    }
                };
                format!("worker {} · stages {}", row.info.stage, held.join(", "))
            }
            _ => format!("stage {}", row.info.stage),
        }
    }

    /// What a timeline of the trial is titled: cell, pipeline shape and micro-batches.
    fn title(&self, strategy: &str) -> String {
        let key = &self.trial.key;
        let per_worker = self.virtual_stages();
        let mut title = format!(
            "{} / {} · {strategy} W={}, {} stages",
            key.network,
            key.dataset_label(),
            key.workers,
            self.stage_count() * per_worker
        );
        if per_worker > 1 {
            title.push_str(&format!(" ({per_worker} per worker)"));
        }
        if self.replicas() > 1 {
            title.push_str(&format!(" × {} replicas", self.replicas()));
        }
        title.push_str(&format!(", m = {}", self.micro_batches()));
        title
    }

    /// The rows of ranks that timed at least one step.
    fn timed(&self) -> impl Iterator<Item = &PipelineStageRow> {
        self.ranks.iter().filter(|row| row.timed_steps > 0)
    }
}

/// Whether the timeline draws an event of `kind`: not evaluation, barriers or recorded idle
/// time, which are no part of a training step's timeline (a gap shows idle time).
fn drawn(kind: EventKind) -> bool {
    !matches!(kind, EventKind::Barrier | EventKind::Idle | EventKind::Eval)
}

/// A drawn block of `worker` from `start_s` to `end_s`, its pass named by its stage where
/// a worker holds several; `None` where the times are not a finite interval.
fn timeline_event(
    worker: u32,
    kind: EventKind,
    micro_batch: Option<u32>,
    pipeline_stage: Option<u32>,
    per_worker: u32,
    (start_s, end_s): (f64, f64),
) -> Option<TimelineEvent> {
    let finite = start_s.is_finite() && end_s.is_finite() && start_s <= end_s;
    finite.then_some(TimelineEvent {
        worker,
        kind,
        micro_batch,
        pipeline_stage: pipeline_stage.filter(|_| per_worker > 1),
        start_s,
        end_s,
    })
}

/// The mean of `values`; `None` for none.
fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0u32), |(sum, count), value| (sum + value, count + 1));
    (count > 0).then(|| sum / f64::from(count))
}

/// One entry per trial in `records` that has `pipeline_stages` rows, in matrix order, its
/// ranks in order. Rows of trials the trials table does not list are left out.
/// Each trial's cell's predicted step comes from `predicted`, by cell.
pub(crate) fn pipeline_trials(
    records: &[TrialRecord],
    rows: Vec<PipelineStageRow>,
    predicted: &BTreeMap<CellKey, Vec<PredictedPassRow>>,
) -> Vec<PipelineTrial> {
    let mut by_trial: HashMap<String, Vec<PipelineStageRow>> = HashMap::new();
    for row in rows {
        by_trial.entry(row.trial_id.clone()).or_default().push(row);
    }
    let mut trials = Vec::new();
    for record in records {
        let Some(mut ranks) = by_trial.remove(record.info.trial_id.as_str()) else { continue };
        ranks.sort_by_key(|row| row.info.rank);
        trials.push(PipelineTrial {
            trial: record.info.clone(),
            warmup_steps: record.warmup_steps,
            ranks,
            predicted: predicted.get(&record.info.key).cloned().unwrap_or_default(),
        });
    }
    trials
}
