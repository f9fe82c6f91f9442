//! One table per figure kind: the numbers each plot draws, with the spread, the repeat
//! counts and the reason wherever a number is missing.

use polars::prelude::Column;

use super::summary_table::{SummaryTable, OUTCOME_COLUMN};
use crate::aggregate::{
    bubble_share, CellKey, Labels, PipelineStage, Repeats, RunAggregates, SplitBackwardStage, StepTimes, StepsPerEpoch,
    TrialInfo,
};
use crate::{PipelineTimeline, Plotted, ReportError, Stat};
use stratlab_results::{EventKind, Outcome};

const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const BYTES_PER_MIB: f64 = 1024.0 * 1024.0;

/// Columns built one by one, then checked into a frame, with each row's outcome where the
/// rows are cells or trials.
#[derive(Default)]
pub(crate) struct Columns(Vec<Column>, Vec<Outcome>);

impl Columns {
    pub(crate) fn text(mut self, name: &str, values: Vec<String>) -> Self {
        self.0.push(Column::new(name.into(), values));
        self
    }
    pub(crate) fn maybe_text(mut self, name: &str, values: Vec<Option<String>>) -> Self {
        self.0.push(Column::new(name.into(), values));
        self
    }
    pub(crate) fn int(mut self, name: &str, values: Vec<Option<i64>>) -> Self {
        self.0.push(Column::new(name.into(), values));
        self
    }
    pub(crate) fn float(mut self, name: &str, values: Vec<Option<f64>>) -> Self {
        self.0.push(Column::new(name.into(), values));
        self
    }
    /// The cell identity: network, data set, strategy (as the run's labels name it), W,
    /// batch per worker.
    pub(crate) fn keys<'a>(self, labels: &Labels, keys: impl Iterator<Item = &'a CellKey> + Clone) -> Self {
        self.text("network", keys.clone().map(|k| k.network.clone()).collect())
            .text("dataset", keys.clone().map(CellKey::dataset_label).collect())
            .text("strategy", keys.clone().map(|k| labels.strategy(k)).collect())
            .int("W", keys.clone().map(|k| Some(i64::from(k.workers))).collect())
            .int("batch/worker", keys.map(|k| Some(i64::from(k.batch_size))).collect())
    }
    /// Repeat counts, the cell's outcome (its first failure when none is `ok`) and a note.
    pub(crate) fn repeats<'a>(self, repeats: impl Iterator<Item = &'a Repeats> + Clone) -> Self {
        self.int("repeats ok", repeats.clone().map(|r| Some(r.ok() as i64)).collect())
            .int("repeats failed", repeats.clone().map(|r| Some(r.failed as i64)).collect())
            .outcomes(repeats.map(cell_outcome).collect())
    }
    /// The outcome column, and each row's outcome for display.
    pub(crate) fn outcomes(mut self, outcomes: Vec<Outcome>) -> Self {
        self = self.text(OUTCOME_COLUMN, outcomes.iter().map(|outcome| outcome.name().to_owned()).collect());
        self.1 = outcomes;
        self
    }
    pub(crate) fn finish(self, name: &str, title: &str) -> Result<SummaryTable, ReportError> {
        Ok(SummaryTable::from_columns(name, title, self.0)?.with_outcomes(self.1))
    }
}

/// The outcome that stands for a cell: `ok` when any repeat is, else the first failure.
fn cell_outcome(repeats: &Repeats) -> Outcome {
    match (&repeats.first_failure, repeats.ok()) {
        (Some(failed), 0) => failed.outcome,
        _ => Outcome::Ok,
    }
}

/// Why a failed cell or repeat failed, as recorded.
fn failure_note(repeats: &Repeats) -> Option<String> {
    let failed = repeats.first_failure.as_ref()?;
    let reason = failed.reason.as_deref().unwrap_or("no reason recorded");
    Some(match repeats.ok() {
        0 => reason.to_owned(),
        _ => format!("first failed repeat: {} ({reason})", failed.outcome.name()),
    })
}

fn stat_of(outcome: &Plotted) -> Option<Stat> {
    outcome.stat().copied()
}

fn medians(stats: &[Option<Stat>], scale: f64) -> Vec<Option<f64>> {
    stats.iter().map(|s| s.map(|s| s.median * scale)).collect()
}
fn mins(stats: &[Option<Stat>]) -> Vec<Option<f64>> {
    stats.iter().map(|s| s.map(|s| s.min)).collect()
}
fn maxs(stats: &[Option<Stat>]) -> Vec<Option<f64>> {
    stats.iter().map(|s| s.map(|s| s.max)).collect()
}

/// Speedup over `single` (W = 1) and scaling efficiency per cell: the numbers behind the
/// speedup bars and the scaling lines.
pub fn speedup_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let cells = &aggregates.throughput;
    let speedup: Vec<Option<Stat>> = cells.iter().map(|c| c.speedup.speedup().copied()).collect();
    let efficiency: Vec<Option<Stat>> = cells.iter().map(|c| c.speedup.efficiency().copied()).collect();
    let notes = cells.iter().map(|c| c.speedup.baseline_note().or_else(|| failure_note(&c.repeats)));
    Columns::default()
        .keys(&aggregates.labels, cells.iter().map(|c| &c.key))
        .float("speedup (×, median)", medians(&speedup, 1.0))
        .float("speedup (×, min)", mins(&speedup))
        .float("speedup (×, max)", maxs(&speedup))
        .float("efficiency (median)", medians(&efficiency, 1.0))
        .repeats(cells.iter().map(|c| &c.repeats))
        .maybe_text("note", notes.collect())
        .finish("speedup", "Speedup over single (W = 1) and scaling efficiency (speedup ÷ W)")
}

/// Throughput and seconds per epoch per cell: the numbers behind the throughput figure.
pub fn throughput_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let cells = &aggregates.throughput;
    let wall: Vec<Option<Stat>> = cells.iter().map(|c| stat_of(&c.wall_samples_per_s)).collect();
    let step: Vec<Option<Stat>> = cells.iter().map(|c| stat_of(&c.step_samples_per_s)).collect();
    let epoch: Vec<Option<Stat>> = cells.iter().map(|c| stat_of(&c.seconds_per_epoch)).collect();
    let source = cells
        .iter()
        .zip(&epoch)
        .map(|(c, e)| e.map(|_| if c.epoch_time_estimated { "estimated" } else { "measured" }.to_owned()));
    Columns::default()
        .keys(&aggregates.labels, cells.iter().map(|c| &c.key))
        .float("samples/s (median)", medians(&wall, 1.0))
        .float("samples/s (min)", mins(&wall))
        .float("samples/s (max)", maxs(&wall))
        .float("step samples/s (median)", medians(&step, 1.0))
        .float("s/epoch (median)", medians(&epoch, 1.0))
        .float("s/epoch (min)", mins(&epoch))
        .float("s/epoch (max)", maxs(&epoch))
        .maybe_text("s/epoch from", source.collect())
        .repeats(cells.iter().map(|c| &c.repeats))
        .finish("throughput", "Training throughput (wall samples/s, loader wait included) and seconds per epoch")
}

/// Device utilisation and memory per cell, medians over repeats.
pub fn device_usage_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let cells = &aggregates.device_usage;
    let of = |f: fn(&crate::aggregate::DeviceUsageCell) -> &Plotted| -> Vec<Option<Stat>> {
        cells.iter().map(|c| stat_of(f(c))).collect()
    };
    Columns::default()
        .keys(&aggregates.labels, cells.iter().map(|c| &c.key))
        .float("utilisation mean (%, median)", medians(&of(|c| &c.utilisation_mean_pct), 1.0))
        .float("utilisation max (%, median)", medians(&of(|c| &c.utilisation_max_pct), 1.0))
        .float("memory mean (GiB, median)", medians(&of(|c| &c.memory_mean_bytes), 1.0 / BYTES_PER_GIB))
        .float("memory max (GiB, median)", medians(&of(|c| &c.memory_max_bytes), 1.0 / BYTES_PER_GIB))
        .repeats(cells.iter().map(|c| &c.repeats))
        .finish("device_usage", "Device utilisation and memory in use (medians over repeats)")
}

/// Per-trial identity columns, the trial's outcome and its reason.
fn trial_columns<'a>(labels: &Labels, trials: impl Iterator<Item = &'a TrialInfo> + Clone) -> (Columns, Columns) {
    let head = Columns::default()
        .keys(labels, trials.clone().map(|t| &t.key))
        .int("repeat", trials.clone().map(|t| Some(t.repeat)).collect());
    let outcome = trials.clone().map(|t| t.failure.as_ref().map_or(Outcome::Ok, |f| f.outcome)).collect();
    let reason = trials.map(|t| t.failure.as_ref().and_then(|f| f.reason.clone())).collect();
    (head, Columns::default().outcomes(outcome).maybe_text("reason", reason))
}

/// Time-to-accuracy, final accuracy and evaluation count per trial.
pub fn time_to_accuracy_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let trials = &aggregates.accuracy;
    let (head, tail) = trial_columns(&aggregates.labels, trials.iter().map(|t| &t.trial));
    let mut columns = head
        .float("target accuracy (%)", trials.iter().map(|t| Some(t.target_accuracy * 100.0)).collect())
        .float("time to accuracy (s)", trials.iter().map(|t| t.time_to_accuracy_s).collect())
        .float("final accuracy (%)", trials.iter().map(|t| t.final_accuracy.map(|a| a * 100.0)).collect())
        .int("evaluations", trials.iter().map(|t| Some(t.points.len() as i64)).collect());
    columns.0.extend(tail.0);
    columns.1 = tail.1;
    columns.finish("time_to_accuracy", "Time to target test accuracy (wall seconds from the start of training)")
}

/// Loss-curve summary per trial: how many steps, where the loss started, ended and diverged.
pub fn loss_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let trials = &aggregates.loss;
    let (head, tail) = trial_columns(&aggregates.labels, trials.iter().map(|t| &t.trial));
    let source = trials.iter().map(|t| {
        t.steps_per_epoch.map(|spe| match spe {
            StepsPerEpoch::Counted(_) => "counted".to_owned(),
            StepsPerEpoch::FromEstimate(_) => "from estimate".to_owned(),
            StepsPerEpoch::AtLeast(_) => "at least".to_owned(),
        })
    });
    let mut columns = head
        .int("steps", trials.iter().map(|t| Some(t.steps as i64)).collect())
        .int("steps/epoch", trials.iter().map(|t| t.steps_per_epoch.map(|s| s.steps() as i64)).collect())
        .maybe_text("steps/epoch from", source.collect())
        .float("first loss", trials.iter().map(|t| t.first_loss).collect())
        .float("last loss", trials.iter().map(|t| t.last_loss).collect())
        .float("min loss", trials.iter().map(|t| t.min_loss).collect())
        .int("diverged at step", trials.iter().map(|t| t.diverged_at_step).collect());
    // Only runs with a scaled loss (fp16) have the column: elsewhere it would be empty.
    if trials.iter().any(|t| t.skipped_updates.is_some()) {
        columns = columns.int("skipped updates (fp16)", trials.iter().map(|t| t.skipped_updates).collect());
    }
    columns.0.extend(tail.0);
    columns.1 = tail.1;
    columns.finish("loss_curves", "Training loss per trial (cross-entropy)")
}

/// Where each rank's step time went, per trial and rank: ms per counted step (after
/// warm-up) of compute, exposed and overlapped communication and idle time, and the shares.
pub fn step_breakdown_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let ranks = &aggregates.step_breakdown;
    let (head, tail) = trial_columns(&aggregates.labels, ranks.iter().map(|r| &r.trial));
    let ms = |f: fn(&StepTimes) -> f64| -> Vec<Option<f64>> {
        ranks.iter().map(|r| r.per_step.as_ref().map(|s| f(s) * 1e3)).collect()
    };
    let pct = |f: fn(&StepTimes) -> Option<f64>| -> Vec<Option<f64>> {
        ranks.iter().map(|r| r.per_step.as_ref().and_then(f).map(|share| share * 100.0)).collect()
    };
    let mut columns = head
        .int("rank", ranks.iter().map(|r| Some(i64::from(r.rank))).collect())
        .int("steps", ranks.iter().map(|r| i64::try_from(r.steps).ok()).collect())
        .float("step (ms/step)", ms(|s| s.wall_s))
        .float("compute (ms/step)", ms(|s| s.compute_s))
        .float("exposed comm (ms/step)", ms(|s| s.exposed_communication_s))
        .float("overlapped comm (ms/step)", ms(|s| s.overlapped_communication_s))
        .float("comm (ms/step)", ms(|s| s.communication_s))
        .float("idle (ms/step)", ms(|s| s.idle_s))
        .float("exposed comm (% of step)", pct(|s| s.exposed_communication_share))
        .float("comm (% of step)", pct(|s| s.communication_share))
        .float("overlapped (% of comm)", pct(|s| s.overlap_share));
    columns.0.extend(tail.0);
    columns.1 = tail.1;
    columns.finish(
        "step_breakdown",
        "Step-time breakdown per rank: ms per step after warm-up and the share communication takes",
    )
}

/// Each pipeline trial's stages: what the partitioner gave them and what they measured
/// over the steps after warm-up (a `hybrid` stage's replicas taken together).
pub fn pipeline_stages_table(aggregates: &RunAggregates) -> Result<SummaryTable, ReportError> {
    let stages: Vec<(&TrialInfo, PipelineStage)> = aggregates
        .pipelines
        .iter()
        .flat_map(|pipeline| pipeline.stages().into_iter().map(move |stage| (&pipeline.trial, stage)))
        .collect();
    let (head, tail) = trial_columns(&aggregates.labels, stages.iter().map(|(trial, _)| *trial));
    let text = |f: fn(&PipelineStage) -> &String| -> Vec<String> { stages.iter().map(|(_, s)| f(s).clone()).collect() };
    let int = |f: fn(&PipelineStage) -> u32| -> Vec<Option<i64>> {
        stages.iter().map(|(_, s)| Some(i64::from(f(s)))).collect()
    };
    let pct = |f: fn(&PipelineStage) -> Option<f64>| -> Vec<Option<f64>> {
        stages.iter().map(|(_, s)| f(s).map(|share| share * 100.0)).collect()
    };
    let mut columns = head
        .int("stage", int(|s| s.info.stage))
        .int("replicas", int(|s| s.replicas))
        .text("schedule", stages.iter().map(|(_, s)| s.info.schedule.name().to_owned()).collect())
        .int("m", int(|s| s.info.micro_batches))
        .text("balance", text(|s| &s.info.balance))
        .text("layers", text(|s| &s.info.layers))
        .int("parameters", stages.iter().map(|(_, s)| i64::try_from(s.info.parameters).ok()).collect())
        .float("imbalance predicted (%)", pct(|s| Some(s.info.predicted_imbalance)))
        .float("imbalance measured (%)", pct(|s| s.measured_imbalance))
        .float("bubble measured (%)", pct(|s| s.bubble_measured))
        .float("bubble predicted (%)", pct(|s| s.bubble_predicted))
        .float("bubble theoretical (%)", pct(|s| Some(s.bubble_theoretical)))
        .float(
            "peak activations (MiB)",
            stages.iter().map(|(_, s)| s.peak_activation_bytes.map(|b| b as f64 / BYTES_PER_MIB)).collect(),
        )
        .float("compute (ms/step)", stages.iter().map(|(_, s)| s.compute_s.map(|c| c * 1e3)).collect())
        .int("timed steps", int(|s| s.timed_steps));
    columns.0.extend(tail.0);
    columns.1 = tail.1;
    columns.finish(
        "pipeline_stages",
        "Pipeline stages: imbalance predicted by the partitioner and measured, bubble measured, predicted by the model and (p − 1)/(v·m + p − 1)",
    )
}

/// Zero-bubble's split backward per stage against the same layers' whole backward in a
/// trial that did not split it, measured and as the model predicted before training.
pub fn split_backward_table(labels: &Labels, stages: &[SplitBackwardStage]) -> Result<SummaryTable, ReportError> {
    let (head, tail) = trial_columns(labels, stages.iter().map(|s| &s.trial));
    let ms = |f: fn(&SplitBackwardStage) -> Option<f64>| -> Vec<Option<f64>> {
        stages.iter().map(|s| f(s).map(|seconds| seconds * 1e3)).collect()
    };
    let ratio = |split: Option<f64>, whole: Option<f64>| Some(split? / whole.filter(|&w| w > 0.0)?);
    let mut columns = head
        .int("stage", stages.iter().map(|s| Some(i64::from(s.stage))).collect())
        .text("layers", stages.iter().map(|s| s.layers.clone()).collect())
        .float("I (ms)", ms(|s| s.input_s))
        .float("W (ms)", ms(|s| s.weight_s))
        .float("B of the same layers (ms)", ms(|s| s.whole_s))
        .float("I + W − B (ms)", ms(SplitBackwardStage::penalty_s))
        .float(
            "(I + W) ÷ B",
            stages.iter().map(|s| ratio(Some(s.input_s.unwrap_or(0.0) + s.weight_s?), s.whole_s)).collect(),
        )
        .float("I predicted (ms)", ms(|s| s.predicted[0]))
        .float("W predicted (ms)", ms(|s| s.predicted[1]))
        .float("B predicted (ms)", ms(|s| s.predicted[2]))
        .maybe_text(
            "B measured in",
            stages.iter().map(|s| s.twin.as_ref().map(|twin| labels.strategy(&twin.key))).collect(),
        );
    columns.0.extend(tail.0);
    columns.1 = tail.1;
    columns.finish(
        "split_backward",
        "Zero-bubble's split backward: median I and W per micro-batch and stage against the median whole backward B of the same layers in a trial of the run that did not split it; the first stage's W is its whole backward",
    )
}

/// Measured and theoretical (GPipe) bubble share of each timeline (hand-built or scheduled
/// timelines; a run's stored pipeline trials are tabled by [`pipeline_stages_table`]).
pub fn bubble_table(timelines: &[PipelineTimeline]) -> Result<SummaryTable, ReportError> {
    let shares: Vec<_> = timelines.iter().map(bubble_share).collect();
    let micro_batches = timelines.iter().map(|t| {
        let mut ids: Vec<u32> =
            t.events.iter().filter(|e| e.kind == EventKind::Forward).filter_map(|e| e.micro_batch).collect();
        ids.sort_unstable();
        ids.dedup();
        (!ids.is_empty()).then_some(ids.len() as i64)
    });
    Columns::default()
        .text("timeline", timelines.iter().map(|t| t.title.clone()).collect())
        .int("workers", timelines.iter().map(|t| Some(i64::from(t.workers))).collect())
        .int("micro-batches", micro_batches.collect())
        .float("bubble measured (%)", shares.iter().map(|s| Some(s.measured * 100.0)).collect())
        .float("bubble theoretical (%)", shares.iter().map(|s| s.theoretical.map(|t| t * 100.0)).collect())
        .finish(
            "pipeline_bubble",
            "Pipeline bubble: idle share of the step span, measured and GPipe's (p − 1)/(m + p − 1)",
        )
}

/// Each straggler cell beside the same cell without one: how much longer its step took
/// (step samples/s without ÷ with: loader waits left out), against the slowdown its ranks'
/// compute was given; `None` when the run has no straggler cell.
pub fn straggler_table(aggregates: &RunAggregates) -> Option<Result<SummaryTable, ReportError>> {
    let slowed: Vec<_> = aggregates.throughput.iter().filter(|cell| cell.key.straggler.is_some()).collect();
    if slowed.is_empty() {
        return None;
    }
    let without = |key: &CellKey| {
        let unslowed = key.without_straggler();
        aggregates
            .throughput
            .iter()
            .find(|cell| cell.key == unslowed)
            .and_then(|cell| stat_of(&cell.step_samples_per_s))
    };
    let (mut median, mut low, mut high, mut share, mut notes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let factor: Vec<Option<f64>> = slowed.iter().map(|cell| cell.key.straggler.as_ref().map(|s| s.slowdown)).collect();
    for (cell, factor) in slowed.iter().zip(&factor) {
        let ratio = without(&cell.key).zip(stat_of(&cell.step_samples_per_s));
        median.push(ratio.map(|(without, with)| without.median / with.median));
        low.push(ratio.map(|(without, with)| without.min / with.max));
        high.push(ratio.map(|(without, with)| without.max / with.min));
        share.push(
            ratio
                .zip(*factor)
                .filter(|(_, factor)| *factor > 1.0)
                .map(|((without, with), factor)| (without.median / with.median - 1.0) / (factor - 1.0)),
        );
        notes.push(match ratio {
            Some(_) => failure_note(&cell.repeats),
            None => Some("no measured cell without a straggler to set it beside".to_owned()),
        });
    }
    let ranks = slowed.iter().map(|cell| cell.key.straggler.as_ref().map(|s| format!("{:?}", s.ranks))).collect();
    Some(
        Columns::default()
            .keys(&aggregates.labels, slowed.iter().map(|cell| &cell.key))
            .maybe_text("slowed ranks", ranks)
            .float("compute slowdown (×)", factor)
            .float("step time × without (median)", median)
            .float("step time × without (min)", low)
            .float("step time × without (max)", high)
            .float("share of the slowdown the step took", share)
            .repeats(slowed.iter().map(|cell| &cell.repeats))
            .maybe_text("note", notes)
            .finish("stragglers", "Straggler cells: step time against the same cell without a straggler"),
    )
}
