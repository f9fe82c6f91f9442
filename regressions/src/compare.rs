//! `stratlab compare`: every cell of two runs side by side, with a verdict per cell, the
//! cells that appear, vanish or change outcome, and the fastest strategy per network and
//! data set in each run.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::bootstrap::{statistic_ratio, RatioEstimate, Statistic};
use crate::cells::{Cell, CellKey, RunCells};
use crate::error::RegressionError;
use crate::thresholds::{Thresholds, Verdict};

/// How the numbers of a comparison are computed, printed with it so a reader never has to
/// guess which statistic a column holds.
pub fn statistics_text(statistic: Statistic) -> String {
    format!(
        "step time: the {0} of the timed steps (warm-up excluded; a step's time is its slowest worker's), pooled over \
         a cell's ok repeats; throughput: global batch ÷ that step time. Change: new ÷ baseline {0}; interval: \
         percentile bootstrap of that ratio (repeats resampled, then circular blocks of ⌈√n⌉ consecutive steps).",
        statistic.name()
    )
}

/// One run as the comparison names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSide {
    /// Run id.
    pub run_id: String,
    /// When its fingerprint was taken.
    pub collected_at: String,
}

/// An environment field that differs between the two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvironmentChange {
    /// Fingerprint field (`nvidia_driver_version`, `git_commit`, …), or a node's
    /// (`node2 nccl_version`) where a run's cells across nodes ran.
    pub field: String,
    /// Its value in the baseline.
    pub baseline: String,
    /// Its value in the new run.
    pub new: String,
}

/// One cell present in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellChange {
    /// The cell, as one line.
    pub cell: String,
    /// What it measures.
    pub key: CellKey,
    /// Outcomes of the baseline's repeats (`ok ×3`).
    pub baseline_outcome: String,
    /// Outcomes of the new run's repeats.
    pub new_outcome: String,
    /// Step time (the comparison's statistic) in the baseline, seconds.
    pub baseline_step_time_s: Option<f64>,
    /// Step time in the new run, seconds.
    pub new_step_time_s: Option<f64>,
    /// Throughput in the baseline, samples/s.
    pub baseline_throughput: Option<f64>,
    /// Throughput in the new run, samples/s.
    pub new_throughput: Option<f64>,
    /// Timed steps behind each side's median (baseline, new).
    pub timed_steps: (usize, usize),
    /// New ÷ baseline step time with its interval (above 1: slower).
    pub step_time_ratio: Option<RatioEstimate>,
    /// New ÷ baseline throughput with its interval (below 1: slower).
    pub throughput_ratio: Option<RatioEstimate>,
    /// Whether fewer (or more) repeats finished `ok` than in the baseline.
    pub outcome_changed: bool,
    /// The verdict.
    pub verdict: Verdict,
    /// Settings that differ (`threads 2 → 1`): a cause to look at first.
    pub settings_changed: Vec<String>,
    /// How much longer the runner's fixed reference work took before the new run's trials
    /// than before the baseline's (0.25: the machine itself ran 25 % slower), where both
    /// timed it: a change of the host, not of the code, when it matches the cell's. The
    /// verdict uses it only where [`Thresholds::per_machine_speed`] asks.
    pub machine_slowdown: Option<f64>,
    /// The step-time ratio divided by the machine's (`1 + machine_slowdown`), where both
    /// runs timed the reference work: the change left once the host's own is taken out.
    pub per_machine_step_time_ratio: Option<RatioEstimate>,
    /// The performance model's error on the cell in each run (baseline, new), where both
    /// runs predicted it.
    pub prediction_errors: Option<(f64, f64)>,
    /// New ÷ baseline predicted step: the change the model foresaw.
    pub predicted_step_ratio: Option<f64>,
    /// Whether the model's error moved beyond noise: the change it foresaw lies outside
    /// the measured change's interval. A regression the model foresaw (its profile got
    /// slower too) keeps its error; one it did not (communication, the implementation, a
    /// driver) moves it.
    pub prediction_error_moved: bool,
}

/// Whether the fastest strategy of a network and data set changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ranking {
    /// The same cell leads in both runs.
    Unchanged,
    /// Another cell leads, and beats the old leader by more than the noise threshold in
    /// the new run (or the old leader no longer finishes).
    Flipped,
    /// Another cell leads, but within noise of the old leader in the new run.
    LeaderWithinNoise,
    /// The baseline's leader is not in the new run (or one run has no measured cell).
    Incomparable,
}

/// The fastest strategy of one network and data set in each run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leadership {
    /// Network name.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// The baseline's fastest cell (`strategy ×W …`, batch) and its throughput.
    pub baseline_leader: Option<(String, f64)>,
    /// The new run's fastest cell and its throughput.
    pub new_leader: Option<(String, f64)>,
    /// New leader ÷ old leader throughput, both measured in the new run, with its interval.
    pub margin: Option<RatioEstimate>,
    /// What happened to the ranking.
    pub ranking: Ranking,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The run compared against.
    pub baseline: RunSide,
    /// The run under test.
    pub new: RunSide,
    /// What a change had to clear.
    pub thresholds: Thresholds,
    /// How the numbers are computed.
    pub statistics: String,
    /// Environment fields that differ, in fingerprint order.
    pub environment_changes: Vec<EnvironmentChange>,
    /// Cells in both runs, in key order.
    pub cells: Vec<CellChange>,
    /// Cells only the baseline has: they fail the gate unless `missing_allowed`.
    pub only_in_baseline: Vec<String>,
    /// Whether cells the new run lacks are only listed (`--allow-missing`) rather than
    /// failing the gate: a run that lost trials measured less than its baseline did.
    pub missing_allowed: bool,
    /// Cells only the new run has.
    pub only_in_new: Vec<String>,
    /// Per network × data set, the fastest cell in each run.
    pub leaders: Vec<Leadership>,
}

impl Comparison {
    /// The cells whose verdict is `verdict`.
    pub fn cells_with(&self, verdict: Verdict) -> impl Iterator<Item = &CellChange> {
        self.cells.iter().filter(move |cell| cell.verdict == verdict)
    }

    /// The rankings that flipped.
    pub fn flips(&self) -> impl Iterator<Item = &Leadership> {
        self.leaders.iter().filter(|leader| leader.ranking == Ranking::Flipped)
    }

    /// Whether a CI job should fail: a cell regressed (slower, or fewer repeats finish), the
    /// fastest strategy of a network and data set flipped, or a baseline cell is missing from
    /// the new run (unless `missing_allowed`).
    pub fn fails_gate(&self) -> bool {
        self.cells_with(Verdict::Regressed).next().is_some()
            || self.flips().next().is_some()
            || self.fails_for_missing_cells()
    }

    /// Whether the gate fails because baseline cells are missing from the new run.
    pub fn fails_for_missing_cells(&self) -> bool {
        !self.missing_allowed && !self.only_in_baseline.is_empty()
    }
}

/// Compares `new` against `baseline`; `allow_missing` lists baseline cells the new run lacks
/// without failing the gate. Runs with no cell in common are an error: nothing was compared.
pub fn compare(
    baseline: &RunCells,
    new: &RunCells,
    thresholds: &Thresholds,
    allow_missing: bool,
) -> Result<Comparison, RegressionError> {
    let environment_changes = baseline
        .fingerprint
        .changes_to(&new.fingerprint)
        .into_iter()
        .map(|(field, before, after)| (field.to_owned(), before, after))
        .chain(crate::cells::node_changes(&baseline.nodes, &new.nodes))
        .map(|(field, before, after)| EnvironmentChange { field, baseline: before, new: after })
        .collect();
    let cells: Vec<CellChange> = baseline
        .cells
        .iter()
        .filter_map(|(key, before)| new.cells.get(key).map(|after| cell_change(before, after, thresholds)))
        .collect();
    let only = |a: &RunCells, b: &RunCells| {
        a.cells.keys().filter(|key| !b.cells.contains_key(*key)).map(ToString::to_string).collect()
    };
    let (only_in_baseline, only_in_new): (Vec<String>, Vec<String>) = (only(baseline, new), only(new, baseline));
    if cells.is_empty() {
        return Err(RegressionError::NothingToCompare {
            baseline: baseline.run_id.clone(),
            new: new.run_id.clone(),
            only_in_baseline: only_in_baseline.len(),
            only_in_new: only_in_new.len(),
        });
    }
    Ok(Comparison {
        baseline: side(baseline),
        new: side(new),
        thresholds: *thresholds,
        statistics: statistics_text(thresholds.statistic),
        environment_changes,
        cells,
        only_in_baseline,
        missing_allowed: allow_missing,
        only_in_new,
        leaders: leaders(baseline, new, thresholds),
    })
}

fn side(run: &RunCells) -> RunSide {
    RunSide { run_id: run.run_id.clone(), collected_at: run.fingerprint.collected_at.clone() }
}

fn cell_change(before: &Cell, after: &Cell, thresholds: &Thresholds) -> CellChange {
    let statistic = thresholds.statistic;
    let step_time_ratio =
        statistic_ratio(&after.steps, &before.steps, statistic, thresholds.confidence(), thresholds.bootstrap);
    let machine_slowdown = before
        .speed_reference_s()
        .zip(after.speed_reference_s())
        .filter(|(before, _)| *before > 0.0)
        .map(|(before, after)| after / before - 1.0);
    let per_machine_step_time_ratio =
        step_time_ratio.zip(machine_slowdown).map(|(ratio, slowdown)| ratio.scaled(1.0 / (1.0 + slowdown)));
    let judged_ratio = match per_machine_step_time_ratio {
        Some(per_machine) if thresholds.per_machine_speed => Some(per_machine),
        _ => step_time_ratio,
    };
    // A smaller share of repeats finishing is worse whatever the speed of those that did.
    let share_ok = |cell: &Cell| cell.ok_count() as f64 / cell.outcomes.len().max(1) as f64;
    let (ok_before, ok_after) = (share_ok(before), share_ok(after));
    let verdict = if ok_after < ok_before {
        Verdict::Regressed
    } else {
        match judged_ratio {
            Some(ratio) => thresholds.verdict(ratio),
            None if ok_after > ok_before => Verdict::Improved,
            None => Verdict::Unmeasured,
        }
    };
    let predicted_step_ratio = before
        .predicted_step_s
        .zip(after.predicted_step_s)
        .filter(|(before, _)| *before > 0.0)
        .map(|(before, after)| after / before);
    let prediction_errors = before.prediction_error(statistic).zip(after.prediction_error(statistic));
    let prediction_error_moved = predicted_step_ratio
        .zip(step_time_ratio)
        .is_some_and(|(foreseen, measured)| foreseen < measured.low || foreseen > measured.high);
    CellChange {
        cell: before.key.to_string(),
        key: before.key.clone(),
        baseline_outcome: before.outcome_summary(),
        new_outcome: after.outcome_summary(),
        baseline_step_time_s: before.step_time_s(statistic),
        new_step_time_s: after.step_time_s(statistic),
        baseline_throughput: before.throughput(statistic),
        new_throughput: after.throughput(statistic),
        timed_steps: (before.steps.len(), after.steps.len()),
        step_time_ratio,
        throughput_ratio: step_time_ratio.map(RatioEstimate::reciprocal),
        outcome_changed: ok_before != ok_after,
        verdict,
        settings_changed: before.settings.changes_to(&after.settings),
        machine_slowdown,
        per_machine_step_time_ratio,
        prediction_errors,
        predicted_step_ratio,
        prediction_error_moved,
    }
}

/// The fastest measured cell of each network × data set of a run.
fn fastest(run: &RunCells, statistic: Statistic) -> BTreeMap<(String, String), &Cell> {
    let mut best: BTreeMap<(String, String), &Cell> = BTreeMap::new();
    for cell in run.cells.values() {
        let Some(throughput) = cell.throughput(statistic) else { continue };
        let slot = best.entry((cell.key.network.clone(), cell.key.dataset_label())).or_insert(cell);
        if slot.throughput(statistic).is_some_and(|leader| throughput > leader) {
            *slot = cell;
        }
    }
    best
}

fn leaders(baseline: &RunCells, new: &RunCells, thresholds: &Thresholds) -> Vec<Leadership> {
    let statistic = thresholds.statistic;
    let (before, after) = (fastest(baseline, statistic), fastest(new, statistic));
    let pairs: BTreeSet<&(String, String)> = before.keys().chain(after.keys()).collect();
    let named = |cell: &Cell| {
        (
            format!("{} · b{}", cell.key.strategy_label(), cell.key.batch_size),
            cell.throughput(statistic).unwrap_or(f64::NAN),
        )
    };
    pairs
        .into_iter()
        .map(|pair| {
            let (old_leader, new_leader) = (before.get(pair).copied(), after.get(pair).copied());
            let old_in_new = old_leader.and_then(|old| new.cells.get(&old.key));
            let (margin, ranking) = match (old_leader, new_leader, old_in_new) {
                (Some(old), Some(now), _) if old.key == now.key => (None, Ranking::Unchanged),
                (Some(_), Some(now), Some(old_now)) if old_now.throughput(statistic).is_some() => {
                    // Within the new run: how much faster the new leader is than the old one.
                    let confidence = thresholds.confidence();
                    let margin =
                        statistic_ratio(&old_now.steps, &now.steps, statistic, confidence, thresholds.bootstrap)
                            .map(|ratio| ratio.scaled(now.global_batch as f64 / old_now.global_batch as f64));
                    let decisive = margin.is_some_and(|m| m.low > 1.0 + thresholds.noise);
                    (margin, if decisive { Ranking::Flipped } else { Ranking::LeaderWithinNoise })
                }
                // The old leader is still in the suite but measured nothing: it failed.
                (Some(_), Some(_), Some(_)) => (None, Ranking::Flipped),
                _ => (None, Ranking::Incomparable),
            };
            Leadership {
                network: pair.0.clone(),
                dataset: pair.1.clone(),
                baseline_leader: old_leader.map(named),
                new_leader: new_leader.map(named),
                margin,
                ranking,
            }
        })
        .collect()
}
