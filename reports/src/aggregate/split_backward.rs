//! What splitting the backward costs (zero-bubble's `I` and `W`): per pipeline stage of
//! every zero-bubble trial, the median `I` and `W` per micro-batch over the timed steps,
//! beside the median whole backward `B` of the same layers in a trial of the same run that
//! did not split it (same network, data set, batch and micro-batches; its cut holding
//! exactly those layers as one stage), and the model's ex-ante `I`, `W` and `B` of them.
//! `I + W − B` is the penalty; the model took its `I` and `W` from the profile's halves.

use std::collections::BTreeMap;

use stratlab_results::{EventKind, EventRow, PredictedPassRow};
use stratlab_strategy_spec::Schedule;

use super::pipeline::PipelineTrial;
use super::trial::TrialInfo;
use crate::Stat;

/// One stage of a zero-bubble trial, its split against the whole backward.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitBackwardStage {
    /// The zero-bubble trial.
    pub trial: TrialInfo,
    /// The pipeline stage.
    pub stage: u32,
    /// Its layers, as the stage reported them.
    pub layers: String,
    /// Median seconds of its `I` per micro-batch (`None` on the first stage, whose `I` is
    /// nothing: its `W` is its whole backward).
    pub input_s: Option<f64>,
    /// Median seconds of its `W`.
    pub weight_s: Option<f64>,
    /// Median seconds of the same layers' whole backward in the twin trial.
    pub whole_s: Option<f64>,
    /// The trial B was measured in, where one was found.
    pub twin: Option<TrialInfo>,
    /// The model's `I`, `W` (from the profile's halves) and the twin cell's `B`, before training.
    pub predicted: [Option<f64>; 3],
}

impl SplitBackwardStage {
    /// `I + W − B`, seconds per micro-batch.
    pub fn penalty_s(&self) -> Option<f64> {
        Some(self.input_s.unwrap_or(0.0) + self.weight_s? - self.whole_s?)
    }
}

/// Every zero-bubble trial's stages of `pipelines`, whose events `events_of` gives by trial id.
pub fn split_backward_stages(
    pipelines: &[PipelineTrial],
    events_of: &BTreeMap<String, Vec<EventRow>>,
) -> Vec<SplitBackwardStage> {
    let mut rows = Vec::new();
    for trial in pipelines.iter().filter(|trial| splits(trial)) {
        let Some(events) = events_of.get(&trial.trial.trial_id) else { continue };
        let layers = stage_layers(trial);
        let measured = |kind| median_by_stage(events.iter().filter(|e| e.step >= trial.warmup_steps), kind);
        let (inputs, weights) = (measured(EventKind::BackwardInput), measured(EventKind::BackwardWeight));
        let predicted = |passes: &[PredictedPassRow], kind| {
            median_by_stage(passes.iter().map(|p| (p.pipeline_stage, p.kind, p.end_s - p.start_s)), kind)
        };
        for (&stage, names) in &layers {
            let twin = pipelines.iter().filter(|other| is_twin(trial, other)).find_map(|other| {
                let (twin_stage, _) = stage_layers(other).into_iter().find(|(_, other_names)| other_names == names)?;
                let events = events_of.get(&other.trial.trial_id)?;
                let timed = events.iter().filter(|e| e.step >= other.warmup_steps);
                let whole = median_by_stage(timed, EventKind::Backward).get(&twin_stage).copied()?;
                let whole_predicted = predicted(&other.predicted, EventKind::Backward).get(&twin_stage).copied();
                Some((other.trial.clone(), whole, whole_predicted))
            });
            rows.push(SplitBackwardStage {
                trial: trial.trial.clone(),
                stage,
                layers: names.clone(),
                input_s: inputs.get(&stage).copied().filter(|_| stage > 0),
                weight_s: weights.get(&stage).copied(),
                whole_s: twin.as_ref().map(|(_, whole, _)| *whole),
                predicted: [
                    predicted(&trial.predicted, EventKind::BackwardInput).get(&stage).copied().filter(|_| stage > 0),
                    predicted(&trial.predicted, EventKind::BackwardWeight).get(&stage).copied(),
                    twin.as_ref().and_then(|(_, _, whole)| *whole),
                ],
                twin: twin.map(|(other, _, _)| other),
            });
        }
    }
    rows
}

/// Whether the trial's schedule splits its backwards.
fn splits(trial: &PipelineTrial) -> bool {
    trial.trial.key.strategy.schedule().is_some_and(Schedule::splits_backward)
}

/// Whether `other` ran the same work whole: same network, data and micro-batch size, not split.
fn is_twin(trial: &PipelineTrial, other: &PipelineTrial) -> bool {
    let (a, b) = (&trial.trial.key, &other.trial.key);
    !splits(other)
        && (&a.network, &a.dataset, a.batch_size, a.precision, a.memory_format, a.swept_threads)
            == (&b.network, &b.dataset, b.batch_size, b.precision, b.memory_format, b.swept_threads)
        && trial.micro_batches() == other.micro_batches()
}

/// Each pipeline stage's layers: a rank holding several reports theirs joined by ` | `,
/// first stage first, in the order its schedule places them.
fn stage_layers(trial: &PipelineTrial) -> BTreeMap<u32, String> {
    let schedule = trial.trial.key.strategy.schedule();
    let mut layers = BTreeMap::new();
    for row in trial.ranks.iter().filter(|row| row.info.replica == 0 && row.info.stage_replica.unwrap_or(0) == 0) {
        let held: Vec<u32> = match (schedule, row.info.virtual_stages) {
            (Some(schedule), Some(_)) => schedule
                .stages_of_rank(row.info.stage as usize, row.info.stages as usize)
                .into_iter()
                .map(|stage| stage as u32)
                .collect(),
            _ => vec![row.info.stage],
        };
        for (stage, names) in held.into_iter().zip(row.info.layers.split(" | ")) {
            layers.insert(stage, names.to_owned());
        }
    }
    layers
}

/// The median duration of `kind` passes per pipeline stage, over passes that took time.
fn median_by_stage<I, P>(passes: I, kind: EventKind) -> BTreeMap<u32, f64>
where
    I: IntoIterator<Item = P>,
    P: Pass,
{
    let mut by_stage: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (stage, pass_kind, seconds) in passes.into_iter().map(Pass::parts) {
        if let Some(stage) = stage.filter(|_| pass_kind == kind && seconds > 0.0) {
            by_stage.entry(stage).or_default().push(seconds);
        }
    }
    by_stage.into_iter().filter_map(|(stage, seconds)| Some((stage, Stat::from_samples(&seconds)?.median))).collect()
}

/// A timed pass, measured or predicted: its stage, kind and seconds.
trait Pass {
    fn parts(self) -> (Option<u32>, EventKind, f64);
}

impl Pass for &EventRow {
    fn parts(self) -> (Option<u32>, EventKind, f64) {
        (self.pipeline_stage, self.kind, self.end_s - self.start_s)
    }
}

impl Pass for (Option<u32>, EventKind, f64) {
    fn parts(self) -> (Option<u32>, EventKind, f64) {
        self
    }
}
