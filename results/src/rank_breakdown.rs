//! Where each rank's step time went, the way Holistic Trace Analysis reports it: computing,
//! communicating (hidden behind computation or exposed), or idle.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::intervals::{intersection_length, merge, total_length, Interval};
use crate::{EventKind, EventRow, Table};

/// One rank's time over the counted steps of a trial, as stored in `rank_breakdown`.
///
/// `wall_s = compute_s + exposed_communication_s + idle_s`, and
/// `communication_s = exposed_communication_s + overlapped_communication_s`: communication
/// only costs step time where no computation runs beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct RankBreakdownRow {
    /// The run this row belongs to.
    pub run_id: String,
    /// The trial this row belongs to.
    pub trial_id: String,
    /// The rank, from 0.
    pub rank: u32,
    /// Steps counted (after warm-up) that have events of this rank.
    pub steps: u64,
    /// Sum over counted steps of each step's span, from its first event's start to its
    /// last event's end, seconds.
    pub wall_s: f64,
    /// Time computing (union of computation events), seconds.
    pub compute_s: f64,
    /// Time communicating (union of communication events), seconds.
    pub communication_s: f64,
    /// Communication during which nothing was computed, seconds: it lengthens the step.
    pub exposed_communication_s: f64,
    /// Communication hidden behind computation, seconds.
    pub overlapped_communication_s: f64,
    /// Time in a step with neither computation nor communication (loader waits, pipeline
    /// bubbles, gaps), seconds.
    pub idle_s: f64,
    /// `overlapped_communication_s ÷ communication_s`, 0–1; `None` without communication.
    pub overlap_share: Option<f64>,
}

impl Table for RankBreakdownRow {
    const NAME: &'static str = crate::table_names::RANK_BREAKDOWN;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}

/// What an event's time counts as in the breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    /// Work on the rank's own data: h2d, forward, backward, optimizer, and a straggler's
    /// wait, which stands for the slower compute it emulates (a slower device computes
    /// through it, and communication beside it is hidden as behind computation).
    Compute,
    /// Data moving between ranks.
    Communication,
    /// Part of the step's span but no work: loader waits and recorded idle time.
    Waiting,
}

/// Sorts an event into the breakdown; `None` for evaluation, which is no part of a
/// training step (as epoch times leave it out).
///
/// By kind rather than lane, so a blocking send on the training thread still counts as
/// communication.
fn category(event: &EventRow) -> Option<Category> {
    match event.kind {
        EventKind::Eval => None,
        EventKind::DataWait | EventKind::Idle => Some(Category::Waiting),
        kind if kind.is_communication() => Some(Category::Communication),
        _ => Some(Category::Compute),
    }
}

/// Sums of one rank's counted steps.
#[derive(Debug, Default)]
struct Totals {
    steps: u64,
    wall_s: f64,
    compute_s: f64,
    communication_s: f64,
    overlapped_s: f64,
    idle_s: f64,
}

/// One row per rank present in `events` (ranks in order), over the steps `>= skip_steps`.
///
/// Each step is measured on its own: its span runs from the first to the last of its
/// events, and computation and communication are unions of intervals (sorted and merged)
/// within it, so nested or overlapping events count once. Events with non-finite times or
/// ending before they start cover no time. A rank whose every step is warm-up still gets a
/// row, with `steps` 0 and zero times.
pub fn rank_breakdown(run_id: &str, trial_id: &str, events: &[EventRow], skip_steps: u64) -> Vec<RankBreakdownRow> {
    // rank → step → (category, interval) of the step's events.
    let mut by_rank: BTreeMap<u32, BTreeMap<u64, Vec<(Category, Interval)>>> = BTreeMap::new();
    for event in events {
        let steps = by_rank.entry(event.rank).or_default();
        let Some(category) = category(event) else { continue };
        let finite = event.start_s.is_finite() && event.end_s.is_finite() && event.end_s >= event.start_s;
        if event.step < skip_steps || !finite {
            continue;
        }
        let interval = Interval { start_s: event.start_s, end_s: event.end_s };
        steps.entry(event.step).or_default().push((category, interval));
    }
    by_rank
        .into_iter()
        .map(|(rank, steps)| {
            let mut totals = Totals::default();
            for step_events in steps.values() {
                add_step(&mut totals, step_events);
            }
            row(run_id, trial_id, rank, &totals)
        })
        .collect()
}

/// Adds one step's span, unions and overlap to the rank's totals.
fn add_step(totals: &mut Totals, step_events: &[(Category, Interval)]) {
    let start_s = step_events.iter().map(|(_, i)| i.start_s).fold(f64::INFINITY, f64::min);
    let end_s = step_events.iter().map(|(_, i)| i.end_s).fold(f64::NEG_INFINITY, f64::max);
    let of = |wanted: Category| -> Vec<Interval> {
        merge(&step_events.iter().filter(|(c, _)| *c == wanted).map(|(_, i)| *i).collect::<Vec<_>>())
    };
    let compute = of(Category::Compute);
    let communication = of(Category::Communication);
    let compute_s = total_length(&compute);
    let communication_s = total_length(&communication);
    let overlapped_s = intersection_length(&compute, &communication);
    let wall_s = end_s - start_s;
    totals.steps += 1;
    totals.wall_s += wall_s;
    totals.compute_s += compute_s;
    totals.communication_s += communication_s;
    totals.overlapped_s += overlapped_s;
    // Clamped: the busy union is inside the span, so only rounding could make this negative.
    totals.idle_s += (wall_s - (compute_s + communication_s - overlapped_s)).max(0.0);
}

/// The table row of one rank's totals.
fn row(run_id: &str, trial_id: &str, rank: u32, totals: &Totals) -> RankBreakdownRow {
    RankBreakdownRow {
        run_id: run_id.to_owned(),
        trial_id: trial_id.to_owned(),
        rank,
        steps: totals.steps,
        wall_s: totals.wall_s,
        compute_s: totals.compute_s,
        communication_s: totals.communication_s,
        exposed_communication_s: totals.communication_s - totals.overlapped_s,
        overlapped_communication_s: totals.overlapped_s,
        idle_s: totals.idle_s,
        overlap_share: (totals.communication_s > 0.0).then(|| totals.overlapped_s / totals.communication_s),
    }
}
