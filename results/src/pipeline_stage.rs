//! What each pipeline stage was given and what it did: its layers and predicted cost next to
//! its measured compute time, load imbalance and bubble.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;
use stratlab_strategy_spec::StrategyKind;

use crate::intervals::{merge, total_length, Interval};
use crate::{EventRow, Table};

/// What a pipeline rank knows about its stage (from its worker's report): the input of
/// [`pipeline_stage_rows`], and the first columns of its row.
///
/// A rank runs one stage of one pipeline replica: `rank = replica × stages + stage`; an
/// interleaved rank runs `virtual_stages` pipeline stages and reports them together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct PipelineStageInfo {
    /// Rank of the worker running the stage, from 0.
    pub rank: u32,
    /// Data-parallel replica of the pipeline, from 0 (always 0 outside `hybrid`).
    pub replica: u32,
    /// Stage index within the pipeline, from 0 (the first layers).
    pub stage: u32,
    /// Which of its stage's workers the rank is, where stages are replicated (1F1B's
    /// `stage_replicas`); null for one worker per stage and in runs stored before the
    /// column existed.
    #[serde(default)]
    pub stage_replica: Option<u32>,
    /// Ranks per pipeline (p).
    pub stages: u32,
    /// Pipeline stages the rank holds (interleaved 1F1B's v); null for the schedules of one
    /// stage per rank and in runs stored before the column existed.
    #[serde(default)]
    pub virtual_stages: Option<u32>,
    /// The pipeline strategy: `model-parallel`, `gpipe`, `1f1b`, `pipedream`,
    /// `interleaved-1f1b` or `hybrid`.
    pub schedule: stratlab_strategy_spec::StrategyKind,
    /// Micro-batches per step (m); 1 for `model-parallel`.
    pub micro_batches: u32,
    /// How layers were split into stages: `uniform`, `parameters`, `time`, `size` or an
    /// explicit list such as `[2,3]`.
    pub balance: String,
    /// The network's stage names this stage holds, joined with `+` (an interleaved rank's
    /// pipeline stages separated by ` | `).
    pub layers: String,
    /// Index of the stage's first layer in the network's stage list.
    pub first_layer: u32,
    /// Number of layers the stage holds (all its pipeline stages' when interleaved).
    pub layer_count: u32,
    /// Parameters (scalars) of the stage.
    pub parameters: u64,
    /// The partitioner's cost of the stage, in `cost_unit`.
    pub predicted_cost: f64,
    /// Unit of `predicted_cost`: `parameters`, `seconds`, `bytes`, `layers`, …
    pub cost_unit: String,
    /// The partitioner's imbalance of the whole pipeline: max stage cost ÷ mean stage cost
    /// − 1 (0 = perfectly balanced); the same on every stage of a trial.
    pub predicted_imbalance: f64,
    /// Peak bytes of activations the stage held for backward, when measured.
    pub peak_activation_bytes: Option<u64>,
}

/// One pipeline rank of a trial, as stored in `pipeline_stages`: its [`PipelineStageInfo`]
/// (flattened into columns of the same names) and what its events measured over the timed
/// steps (after warm-up).
///
/// Compute is forward, backward and recompute passes; sends, receives, all-reduces, the
/// optimizer and waits are not, so the bubble is the share of the compute span a stage sat
/// without computing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct PipelineStageRow {
    /// The run this row belongs to.
    pub run_id: String,
    /// The trial this row belongs to.
    pub trial_id: String,
    /// What the rank knew about its stage; stored as columns `rank`, `replica`, `stage`, ….
    #[serde(flatten)]
    pub info: PipelineStageInfo,
    /// Mean over the timed steps of the union of the rank's forward, backward and
    /// recompute time, seconds per step; 0 without timed steps.
    pub compute_s: f64,
    /// The trial's measured imbalance: max over stages of `compute_s` ÷ mean over stages
    /// − 1, replicas of a stage averaged first; the same on every row of the trial; 0 when
    /// no stage has timed steps.
    pub measured_imbalance: f64,
    /// 1 − Σ busy ÷ Σ span over the rank's timed steps: a step's span runs from the first
    /// compute event of its pipeline (the rank's replica, all stages) to the last, busy is
    /// the union of the rank's own compute events; 0 without timed steps (see `timed_steps`).
    pub bubble_measured: f64,
    /// The schedule's bubble (p − 1) ÷ (v·m + p − 1) ([`theoretical_bubble`]).
    pub bubble_theoretical: f64,
    /// Steps after warm-up in which the rank ran a compute event.
    pub timed_steps: u32,
}

impl Table for PipelineStageRow {
    const NAME: &'static str = crate::table_names::PIPELINE_STAGES;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// The idle ("bubble") share of a synchronous pipeline step over `stages` ranks with
/// `micro_batches` micro-batches of equal cost, each rank holding `virtual_stages` stages:
/// (p − 1) ÷ (v·m + p − 1). GPipe's and 1F1B's alike at v = 1 (1F1B reorders the passes,
/// not the fill and drain); interleaving v stages per rank shrinks the fill and drain
/// v-fold (Narayanan et al., SC '21), exactly when p divides m.
///
/// Counts below 1 are taken as 1: a pipeline has at least one stage and one micro-batch
/// (`model-parallel` is m = 1).
pub fn theoretical_bubble(stages: u32, micro_batches: u32, virtual_stages: u32) -> f64 {
    let p = f64::from(stages.max(1));
    let vm = f64::from(virtual_stages.max(1)) * f64::from(micro_batches.max(1));
    (p - 1.0) / (vm + p - 1.0)
}

/// ZB-H1's idle share at equal pass times (T_F = T_I = T_W, Qi et al., ICLR 2024):
/// (p − 1)(T_F + T_I − T_W) over a step of 3m + p − 1 passes, (p − 1) ÷ (3m + p − 1), a
/// third of 1F1B's at large m. Zero-bubble's other placements idle less still; the table
/// shows this bound beside what they measured and the model predicted.
pub fn zero_bubble_h1_bubble(stages: u32, micro_batches: u32) -> f64 {
    let p = f64::from(stages.max(1));
    (p - 1.0) / (3.0 * f64::from(micro_batches.max(1)) + p - 1.0)
}

/// What a rank's timed steps add up to.
#[derive(Debug, Default, Clone, Copy)]
struct StageTotals {
    steps: u32,
    busy_s: f64,
    span_s: f64,
}

impl StageTotals {
    /// Mean compute seconds per timed step; 0 without one.
    fn compute_s(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            self.busy_s / f64::from(self.steps)
        }
    }

    /// 1 − busy ÷ span; 0 without time to divide by.
    fn bubble(&self) -> f64 {
        if self.span_s > 0.0 {
            // Clamped: busy lies inside the span, so only rounding could leave the range.
            (1.0 - self.busy_s / self.span_s).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// One row per entry of `infos` (ranks in order), measured from the events of steps
/// `>= skip_steps` (warm-up steps are skipped, as in [`crate::rank_breakdown()`]).
///
/// Only forward, backward and recompute events count. A step's span is that of its
/// pipeline: from the first compute event of any stage of the rank's replica to the last,
/// so a stage waiting for the fill or the drain is idle, as in the schedule's own
/// (p − 1) ÷ (m + p − 1). Busy time is the union of the rank's compute events within the
/// step, so overlapping events count once. Events with non-finite times or ending before
/// they start cover no time; events of ranks `infos` does not name are ignored. A rank
/// without timed steps gets `timed_steps` 0 and zeros, and is left out of the trial's
/// measured imbalance.
///
/// `pipedream` overlaps consecutive steps (no flush), so its steps' spans overlap too and
/// both bubbles describe a flushed schedule rather than its steady state.
pub fn pipeline_stage_rows(
    run_id: &str,
    trial_id: &str,
    infos: &[PipelineStageInfo],
    events: &[EventRow],
    skip_steps: u64,
) -> Vec<PipelineStageRow> {
    let replica_of: BTreeMap<u32, u32> = infos.iter().map(|info| (info.rank, info.replica)).collect();
    // rank → step → intervals of its compute events.
    let mut by_rank: BTreeMap<u32, BTreeMap<u64, Vec<Interval>>> = BTreeMap::new();
    // (replica, step) → the step's span over the replica's stages.
    let mut spans: BTreeMap<(u32, u64), Interval> = BTreeMap::new();
    for event in events {
        let compute = event.kind.is_pass();
        let finite = event.start_s.is_finite() && event.end_s.is_finite() && event.end_s >= event.start_s;
        let Some(&replica) = replica_of.get(&event.rank) else { continue };
        if !(compute && finite && event.step >= skip_steps) {
            continue;
        }
        let interval = Interval { start_s: event.start_s, end_s: event.end_s };
        by_rank.entry(event.rank).or_default().entry(event.step).or_default().push(interval);
        spans
            .entry((replica, event.step))
            .and_modify(|span| {
                span.start_s = span.start_s.min(interval.start_s);
                span.end_s = span.end_s.max(interval.end_s);
            })
            .or_insert(interval);
    }
    let totals: Vec<StageTotals> = infos
        .iter()
        .map(|info| by_rank.get(&info.rank).map(|steps| rank_totals(info.replica, steps, &spans)).unwrap_or_default())
        .collect();
    let measured_imbalance = measured_imbalance(infos, &totals);

    let mut rows: Vec<PipelineStageRow> = infos
        .iter()
        .zip(&totals)
        .map(|(info, totals)| PipelineStageRow {
            run_id: run_id.to_owned(),
            trial_id: trial_id.to_owned(),
            info: info.clone(),
            compute_s: totals.compute_s(),
            measured_imbalance,
            bubble_measured: totals.bubble(),
            bubble_theoretical: match info.schedule {
                StrategyKind::ZeroBubble => zero_bubble_h1_bubble(info.stages, info.micro_batches),
                _ => theoretical_bubble(info.stages, info.micro_batches, info.virtual_stages.unwrap_or(1)),
            },
            timed_steps: totals.steps,
        })
        .collect();
    rows.sort_by_key(|row| row.info.rank);
    rows
}

/// Sums one rank's timed steps: the union of its compute intervals and its pipeline's span.
fn rank_totals(
    replica: u32,
    steps: &BTreeMap<u64, Vec<Interval>>,
    spans: &BTreeMap<(u32, u64), Interval>,
) -> StageTotals {
    let mut totals = StageTotals::default();
    for (step, intervals) in steps {
        let Some(span) = spans.get(&(replica, *step)) else { continue };
        totals.steps += 1;
        totals.span_s += span.end_s - span.start_s;
        totals.busy_s += total_length(&merge(intervals));
    }
    totals
}

/// Max over stages of the mean compute per step ÷ the mean over stages − 1, each stage's
/// replicas averaged first; ranks without timed steps are left out, and a trial with no
/// stage measured (or no compute at all) gets 0.
fn measured_imbalance(infos: &[PipelineStageInfo], totals: &[StageTotals]) -> f64 {
    // stage → (sum of its replicas' compute, replicas counted).
    let mut per_stage: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
    for (info, totals) in infos.iter().zip(totals).filter(|(_, totals)| totals.steps > 0) {
        let (sum, count) = per_stage.entry(info.stage).or_default();
        *sum += totals.compute_s();
        *count += 1;
    }
    let stage_means: Vec<f64> = per_stage.values().map(|&(sum, count)| sum / f64::from(count)).collect();
    if stage_means.is_empty() {
        return 0.0;
    }
    let mean = stage_means.iter().sum::<f64>() / stage_means.len() as f64;
    let max = stage_means.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if mean > 0.0 {
        max / mean - 1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theoretical_bubble_is_p_minus_1_over_m_plus_p_minus_1() {
        assert_eq!(theoretical_bubble(2, 4, 1), 0.2);
        assert_eq!(theoretical_bubble(4, 1, 1), 0.75);
        assert_eq!(theoretical_bubble(1, 8, 1), 0.0);
        assert_eq!(theoretical_bubble(2, 4, 2), 1.0 / 9.0, "interleaved: v·m = 8");
        // Counts of 0 read as 1: no division by zero, no NaN in a stored column.
        assert_eq!(theoretical_bubble(0, 0, 0), 0.0);
        assert_eq!(theoretical_bubble(4, 0, 1), 0.75);
    }
}
