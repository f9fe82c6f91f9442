//! The run's predictions set beside its measurements: one judged cell per prediction, and
//! per group of cells that answer the same question (network × data set × batch × threads
//! × link) which strategy each predictor would recommend and what that would have cost.

use std::collections::{BTreeMap, BTreeSet};

use stratlab_perf_model::recommend::recommended;
use stratlab_results::stats::{kendall_tau, median};
use stratlab_results::{CellKey, PredictionRow, RunView, TrialRow};
use stratlab_units::Link;

use super::machine_speed::trial_slowdowns;

/// One cell: what was predicted before training and what its trials measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JudgedCell {
    /// The cell.
    pub(crate) key: CellKey,
    /// The strategy with the parameters it was given, and what it computes in where that is
    /// not float32 with SGD: `sharded-data-parallel (ZeRO-1) · adam`, `gpipe (m4)`.
    pub(crate) label: String,
    /// Samples per step over all workers: steps of different strategies compare per sample.
    pub(crate) global_batch: f64,
    pub(crate) prediction: PredictionRow,
    /// Medians over the cell's ok repeats of their 10th-percentile and median step.
    pub(crate) measured_p10_s: f64,
    pub(crate) measured_median_s: f64,
    /// The run-to-run spread of the cell's 10th-percentile steps, largest ÷ smallest − 1
    /// (`None` with fewer than two ok repeats).
    pub(crate) run_to_run_spread: Option<f64>,
    /// The largest peak over the cell's repeats and workers.
    pub(crate) measured_memory_bytes: Option<f64>,
    /// How much slower the machine ran during the cell's repeats than while the profiles
    /// were taken (their median; [`trial_slowdowns`]), where the run timed it.
    pub(crate) machine_slowdown: Option<f64>,
}

/// The question a cell answers with the others of its group: its network, data set, batch,
/// threads, numerics, link, nodes and straggler, whatever the strategy and workers (a single
/// cell's key with the group's link, nodes and straggler).
pub(crate) fn group_of(key: &CellKey) -> CellKey {
    CellKey { link: key.link, nodes: key.nodes, straggler: key.straggler.clone(), ..key.baseline() }
}

/// How tables name a group: `small-cnn · mnist · b128 · 2 threads · bf16 · 1 Gbit/s`
/// (` on 2 nodes` for a group across nodes).
pub(crate) fn group_label(group: &CellKey) -> String {
    let threads = group.swept_threads.map(|threads| format!(" · {threads} threads")).unwrap_or_default();
    let link = group.link.map(|link| format!(" · {}", link.name())).unwrap_or_default();
    format!(
        "{} · {} · b{}{threads}{}{link}{}{}",
        group.network,
        group.dataset,
        group.batch_size,
        group.compute_label(),
        group.nodes_label(),
        group.straggler_label()
    )
}

impl JudgedCell {
    /// (predicted − measured p10) ÷ measured p10 of the model.
    pub(crate) fn model_error(&self) -> Option<f64> {
        self.prediction.step_s.map(|predicted| relative(predicted, self.measured_p10_s))
    }
    /// The same for the thesis's closed forms.
    pub(crate) fn thesis_error(&self) -> Option<f64> {
        self.prediction.thesis_step_s.map(|predicted| relative(predicted, self.measured_p10_s))
    }
    /// The same for the peak memory.
    pub(crate) fn memory_error(&self) -> Option<f64> {
        let measured = self.measured_memory_bytes?;
        self.prediction.peak_memory_bytes.map(|predicted| relative(predicted, measured))
    }
    /// Whether its errors count in the summaries: `single`'s prediction is its own training steps.
    pub(crate) fn judged(&self) -> bool {
        self.key.workers > 1
    }
    /// Measured seconds per sample (the ranking's measure).
    fn measured_per_sample(&self) -> f64 {
        self.measured_p10_s / self.global_batch
    }
    /// The noise a pick within which of the fastest still counts as right (SPEC §10: the
    /// measured run-to-run noise): the spread of its repeats where it has several, and never
    /// less than the spread of its steps within a trial, median ÷ p10 − 1.
    fn noise(&self) -> f64 {
        let within = (self.measured_median_s / self.measured_p10_s - 1.0).max(0.0);
        self.run_to_run_spread.map_or(within, |spread| spread.max(within))
    }
}

fn relative(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured
}

/// Every prediction whose cell has an ok trial in `run`, judged; in the predictions' order.
pub(crate) fn judge_cells(predictions: &[PredictionRow], run: &RunView) -> Vec<JudgedCell> {
    let mut cells: BTreeMap<&CellKey, Vec<&TrialRow>> = BTreeMap::new();
    for (trial, key) in run.trials_with_cells().filter(|(trial, _)| trial.outcome.is_ok()) {
        cells.entry(key).or_default().push(trial);
    }
    let by_id: BTreeMap<&str, (&TrialRow, &CellKey)> =
        run.trials_with_cells().map(|(trial, key)| (trial.trial_id.as_str(), (trial, key))).collect();
    let slowdowns = trial_slowdowns(predictions, run.trials());
    predictions
        .iter()
        .filter_map(|prediction| {
            let &(first, key) = by_id.get(prediction.trial_id.as_str())?;
            let repeats = cells.get(key)?;
            let all = |get: fn(&TrialRow) -> Option<f64>| repeats.iter().filter_map(|t| get(t)).collect::<Vec<_>>();
            let of = |get: fn(&TrialRow) -> Option<f64>| median(&all(get));
            let p10s = all(|t| t.training.step_time_p10_s);
            let low = p10s.iter().copied().fold(f64::INFINITY, f64::min);
            let high = p10s.iter().copied().fold(0.0, f64::max);
            let run_to_run_spread = (p10s.len() > 1 && low > 0.0).then(|| high / low - 1.0);
            Some(JudgedCell {
                key: key.clone(),
                label: key.strategy.report_label(|_| true)
                    + &key.nodes_label()
                    + &key.straggler_label()
                    + &key.compute_label(),
                global_batch: first.global_batch.max(1) as f64,
                prediction: prediction.clone(),
                measured_p10_s: median(&p10s)?,
                measured_median_s: of(|t| t.training.step_time_median_s)?,
                run_to_run_spread,
                measured_memory_bytes: repeats
                    .iter()
                    .filter_map(|t| t.training.peak_memory_bytes)
                    .max()
                    .map(|bytes| bytes as f64),
                machine_slowdown: median(
                    &repeats.iter().filter_map(|t| slowdowns.get(&t.trial_id).copied()).collect::<Vec<_>>(),
                ),
            })
        })
        .collect()
}

/// Which predictor is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Predictor {
    /// stratlab's performance model.
    Model,
    /// The thesis's closed forms.
    Thesis,
}

impl Predictor {
    pub(crate) const BOTH: [Predictor; 2] = [Predictor::Model, Predictor::Thesis];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Predictor::Model => "stratlab model",
            Predictor::Thesis => "thesis closed forms",
        }
    }

    pub(crate) fn step_s(self, cell: &JudgedCell) -> Option<f64> {
        match self {
            Predictor::Model => cell.prediction.step_s,
            Predictor::Thesis => cell.prediction.thesis_step_s,
        }
    }

    pub(crate) fn error(self, cell: &JudgedCell) -> Option<f64> {
        match self {
            Predictor::Model => cell.model_error(),
            Predictor::Thesis => cell.thesis_error(),
        }
    }
}

/// A predictor's recommendation for one group, judged by what the group measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recommendation {
    /// The group ([`group_of`]); its link is the one its cells talked over.
    pub(crate) group: CellKey,
    /// Cells the predictor ranked (those it predicts).
    pub(crate) ranked: usize,
    /// The cell it predicts fastest per sample, as `strategy×W`.
    pub(crate) recommended: String,
    /// The measured fastest of the same cells.
    pub(crate) fastest: String,
    /// The recommended cell's and the measured fastest's keys.
    pub(crate) keys: (CellKey, CellKey),
    /// The recommended one is the fastest or within the noise of the two measurements.
    pub(crate) right: bool,
    /// The recommended one is the measured fastest itself.
    pub(crate) exact: bool,
    /// The noise of the comparison: the larger of the fastest's and the recommended one's
    /// ([`JudgedCell::noise`]; equal when they are the same cell).
    pub(crate) noise: f64,
    /// Measured time per sample of the recommended ÷ of the fastest, − 1.
    pub(crate) regret: f64,
    /// Kendall τ of predicted against measured time per sample.
    pub(crate) tau: Option<f64>,
}

/// Per group with at least two cells the predictor predicts: its pick, judged.
pub(crate) fn recommend(cells: &[JudgedCell], predictor: Predictor) -> Vec<Recommendation> {
    recommend_in(cells, predictor, group_of)
}

/// [`recommend`] over groups of another shape: `group` maps a cell's key to its group's
/// (the thesis's table 8.1 ranks a network and data set's cells whatever their batch, so
/// GPipe at its own batch meets data parallelism at its).
pub(crate) fn recommend_in(
    cells: &[JudgedCell],
    predictor: Predictor,
    group: fn(&CellKey) -> CellKey,
) -> Vec<Recommendation> {
    // Where its group's ranks talked: an emulated link, or several nodes.
    let mut placements: BTreeMap<CellKey, BTreeSet<(Option<Link>, u32)>> = BTreeMap::new();
    for cell in cells.iter().filter(|cell| cell.key.link.is_some() || cell.key.nodes > 1) {
        placements.entry(group(&cell.key.baseline())).or_default().insert((cell.key.link, cell.key.nodes));
    }
    let mut groups: BTreeMap<CellKey, Vec<&JudgedCell>> = BTreeMap::new();
    for cell in cells.iter().filter(|cell| predictor.step_s(cell).is_some()) {
        groups.entry(group(&cell.key)).or_default().push(cell);
        // A single worker talks to no one: it runs once, on loopback and one node, and
        // joins the group of every link and node count its group ran over.
        if cell.key.workers == 1 && cell.key.link.is_none() && cell.key.nodes == 1 {
            for &(link, nodes) in placements.get(&group(&cell.key.baseline())).into_iter().flatten() {
                groups.entry(group(&CellKey { link, nodes, ..cell.key.baseline() })).or_default().push(cell);
            }
        }
    }
    groups
        .into_iter()
        .filter(|(_, members)| members.len() >= 2)
        .map(|(group, members)| {
            let predicted: Vec<f64> = members
                .iter()
                .map(|cell| predictor.step_s(cell).unwrap_or(f64::INFINITY) / cell.global_batch)
                .collect();
            let measured: Vec<f64> = members.iter().map(|cell| cell.measured_per_sample()).collect();
            let options: Vec<(f64, usize)> = members
                .iter()
                .zip(&predicted)
                .map(|(cell, &per_sample)| (per_sample, cell.key.workers as usize))
                .collect();
            let pick = recommended(&options).unwrap_or(0);
            let best = argmin(&measured);
            let regret = measured[pick] / measured[best] - 1.0;
            // Whether the pick is slower than the fastest is known only up to the noise of
            // both measurements: a cell whose repeats spread by 14 % cannot be said to lose
            // by 6 % to one measured once.
            let noise = members[best].noise().max(members[pick].noise());
            // The group's label says what its cells share (numerics, link, straggler).
            let name = |cell: &JudgedCell| format!("{}×{}", cell.key.strategy.report_label(|_| true), cell.key.workers);
            Recommendation {
                group,
                ranked: members.len(),
                recommended: name(members[pick]),
                fastest: name(members[best]),
                keys: (members[pick].key.clone(), members[best].key.clone()),
                right: pick == best || regret <= noise,
                exact: pick == best,
                noise,
                regret,
                tau: kendall_tau(&predicted, &measured),
            }
        })
        .collect()
}

fn argmin(values: &[f64]) -> usize {
    (0..values.len()).min_by(|&a, &b| values[a].total_cmp(&values[b])).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(strategy: &str, workers: u32, predicted_s: f64, measured_p10_s: f64, spread: Option<f64>) -> JudgedCell {
        let kind: stratlab_strategy_spec::StrategyKind = strategy.parse().unwrap();
        JudgedCell {
            key: CellKey {
                network: "small-cnn".into(),
                dataset: "mnist".into(),
                data_source: stratlab_results::DataSource::Real,
                strategy: stratlab_strategy_spec::Strategy::new(kind, Default::default()).unwrap(),
                workers,
                batch_size: 16,
                swept_threads: None,
                link: None,
                nodes: 1,
                straggler: None,
                precision: Default::default(),
                memory_format: Default::default(),
                optimizer: Default::default(),
            },
            label: strategy.into(),
            global_batch: (16 * workers) as f64,
            prediction: PredictionRow {
                run_id: "r".into(),
                trial_id: format!("{strategy}__r0"),
                label: strategy.into(),
                step_s: Some(predicted_s),
                compute_s: None,
                exposed_comm_s: None,
                bubble_s: None,
                optimizer_s: None,
                step_unavailable: None,
                thesis_step_s: None,
                peak_memory_bytes: None,
                memory_unavailable: None,
                core_sharing: 1.0,
                link_bandwidth_bytes_per_s: None,
                link_latency_s: None,
                link_source: None,
                profile_s: 0.0,
                speed_reference_s: None,
                profile_retaken: None,
            },
            measured_p10_s,
            // Steps 2 % apart within a trial.
            measured_median_s: 1.02 * measured_p10_s,
            run_to_run_spread: spread,
            measured_memory_bytes: None,
            machine_slowdown: None,
        }
    }

    /// Data parallel is predicted fastest per sample; single measured 8 % ahead of it.
    fn group(single_spread: Option<f64>) -> Recommendation {
        group_with(single_spread, None)
    }

    fn group_with(single_spread: Option<f64>, data_parallel_spread: Option<f64>) -> Recommendation {
        let cells = [
            cell("single", 1, 0.120, 0.100, single_spread),
            cell("data-parallel", 2, 0.200, 0.216, data_parallel_spread),
        ];
        let picks = recommend(&cells, Predictor::Model);
        assert_eq!(picks.len(), 1);
        picks.into_iter().next().unwrap()
    }

    #[test]
    fn a_pick_within_the_fastests_run_to_run_spread_counts_as_top_1_but_not_as_exact() {
        let pick = group(Some(0.12));
        assert_eq!((pick.recommended.as_str(), pick.fastest.as_str()), ("data-parallel×2", "single×1"));
        assert!((pick.regret - 0.08).abs() < 1e-9, "{}", pick.regret);
        assert!((pick.noise - 0.12).abs() < 1e-9, "the repeats' spread, wider than the steps' 2 %");
        assert!(pick.right && !pick.exact);
    }

    #[test]
    fn the_picks_own_run_to_run_spread_counts_too() {
        let pick = group_with(None, Some(0.10));
        assert!((pick.noise - 0.10).abs() < 1e-9, "{}", pick.noise);
        assert!(pick.right && !pick.exact);
        assert!(!group_with(None, Some(0.05)).right, "8 % regret is outside both cells' 5 % and 2 %");
    }

    #[test]
    fn without_repeats_the_noise_is_the_spread_of_the_steps_within_a_trial() {
        let pick = group(None);
        assert!((pick.noise - 0.02).abs() < 1e-9, "{}", pick.noise);
        assert!(!pick.right && !pick.exact, "8 % regret is outside 2 %");
        // Repeats that agree closer than the steps vary do not narrow the noise.
        assert!((group(Some(0.005)).noise - 0.02).abs() < 1e-9);
    }
}
