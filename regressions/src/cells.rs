//! A run's cells: its trials grouped by what was measured (network, data set, strategy and
//! its parameters, workers, batch, precision, memory format and optimizer), each with its
//! timed step times and outcomes.
//!
//! Two runs' cells match when their [`CellKey`]s are equal. How a cell was run (threads,
//! device, budget, numerics) is not part of the key but its [`CellSettings`]:
//! running the same cell with 1 thread instead of 2 is exactly the kind of change a
//! comparison must show, not a reason to stop matching.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use stratlab_results::stats::median;
/// A cell's key is the results crate's, the one every reader of a run groups by.
pub use stratlab_results::CellKey;
use stratlab_results::{Fingerprint, Outcome, PredictionRow, RunView, StepRow, TrialNodeRow, TrialRow};

use crate::bootstrap::{Statistic, StepSamples};
use crate::RegressionError;

/// How a cell was run, beyond what it measures: shown when it differs between runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellSettings {
    /// `(setting, value)` in a fixed order.
    pub values: Vec<(&'static str, String)>,
}

impl CellSettings {
    fn of(trial: &TrialRow) -> CellSettings {
        let show = |value: &Option<String>| value.clone().unwrap_or_else(|| "—".to_owned());
        let shown = |value: Option<String>| value.unwrap_or_else(|| "—".to_owned());
        let budget = [
            trial.epochs_budget.map(|e| format!("{e} epochs")),
            trial.steps_budget.map(|s| format!("{s} steps")),
            trial.seconds_budget.map(|s| format!("{s} s")),
            trial.min_timed_steps_budget.map(|timed| format!("≥ {timed} timed steps")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        CellSettings {
            values: vec![
                ("threads", trial.threads.to_string()),
                ("device", trial.device.to_string()),
                ("device_name", show(&trial.device_name)),
                ("budget", budget),
                ("warmup_steps", trial.warmup_steps.to_string()),
                ("cudnn_benchmark", shown(trial.cudnn_benchmark.map(|b| b.to_string()))),
                ("matmul_precision", shown(trial.matmul_precision.map(|p| p.to_string()))),
                ("cudnn_tf32", shown(trial.cudnn_tf32.map(|b| b.to_string()))),
            ],
        }
    }

    /// The settings whose values differ from `later`'s: `threads 2 → 1`.
    pub fn changes_to(&self, later: &CellSettings) -> Vec<String> {
        self.values
            .iter()
            .zip(&later.values)
            .filter(|(before, after)| before.1 != after.1)
            .map(|((name, before), (_, after))| format!("{name} {before} → {after}"))
            .collect()
    }
}

/// One cell of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// What it measures.
    pub key: CellKey,
    /// How its first trial was run.
    pub settings: CellSettings,
    /// Samples per optimiser step over all workers.
    pub global_batch: i64,
    /// Outcome of each repeat, in repeat order.
    pub outcomes: Vec<Outcome>,
    /// Timed step times of the repeats that finished `ok`.
    pub steps: StepSamples,
    /// The trial rows of its repeats, in repeat order (headline metrics for histories).
    pub trials: Vec<TrialRow>,
    /// The step the run's performance model predicted for it before training, seconds
    /// (runs made before predictions existed have none).
    pub predicted_step_s: Option<f64>,
}

impl Cell {
    /// (predicted − measured) ÷ measured of the step, the measurement taken as `statistic`.
    pub fn prediction_error(&self, statistic: Statistic) -> Option<f64> {
        Some(self.predicted_step_s? / self.step_time_s(statistic)? - 1.0)
    }

    /// How many repeats finished `ok`.
    pub fn ok_count(&self) -> usize {
        self.outcomes.iter().filter(|o| o.is_ok()).count()
    }

    /// The outcomes as one phrase: `ok`, `ok ×3`, `ok ×2, oom`.
    pub fn outcome_summary(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for outcome in &self.outcomes {
            *counts.entry(outcome.name()).or_default() += 1;
        }
        counts
            .into_iter()
            .map(|(outcome, n)| if n == 1 { outcome.to_owned() } else { format!("{outcome} ×{n}") })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `statistic` of the step times of the `ok` repeats, seconds.
    pub fn step_time_s(&self, statistic: Statistic) -> Option<f64> {
        self.steps.statistic(statistic)
    }

    /// Training throughput, samples/s: the global batch ÷ that step time.
    pub fn throughput(&self, statistic: Statistic) -> Option<f64> {
        self.step_time_s(statistic).map(|t| self.global_batch as f64 / t)
    }

    /// The median over the `ok` repeats of the runner's reference work timed before each
    /// (`TrialRow::speed_reference_s`): the machine's speed when the cell ran; `None` in
    /// runs from before it was timed.
    pub fn speed_reference_s(&self) -> Option<f64> {
        let timed: Vec<f64> = self
            .trials
            .iter()
            .filter(|trial| trial.outcome.is_ok())
            .filter_map(|trial| trial.speed_reference_s)
            .collect();
        median(&timed)
    }
}

/// Each node's environment fields, by host.
pub type NodeEnvironments = BTreeMap<String, BTreeMap<&'static str, String>>;

/// What changed on the nodes between two runs' cells across nodes: a field of a host both
/// ran on (`node2 nccl_version`), or the set of hosts itself (`nodes`). Runs on one host
/// have none.
pub fn node_changes(before: &NodeEnvironments, after: &NodeEnvironments) -> Vec<(String, String, String)> {
    let mut changes = Vec::new();
    if !before.is_empty() && !after.is_empty() && before.keys().ne(after.keys()) {
        let hosts = |nodes: &NodeEnvironments| nodes.keys().cloned().collect::<Vec<_>>().join(", ");
        changes.push(("nodes".to_owned(), hosts(before), hosts(after)));
    }
    for (host, fields) in before {
        for (field, value) in fields {
            if let Some(later) = after.get(host).and_then(|fields| fields.get(field)).filter(|later| *later != value) {
                changes.push((format!("{host} {field}"), value.clone(), later.clone()));
            }
        }
    }
    changes
}

/// A stored run read as cells.
#[derive(Debug, Clone)]
pub struct RunCells {
    /// The run id (folder name).
    pub run_id: String,
    /// The environment the run was measured in.
    pub fingerprint: Fingerprint,
    /// Each node its cells across nodes ran on, by host: that node's environment fields as
    /// its ranks fingerprinted it (`TrialNodeRow::environment`); empty for a run on one host.
    pub nodes: NodeEnvironments,
    /// Its cells, by key.
    pub cells: BTreeMap<CellKey, Cell>,
}

impl RunCells {
    /// Reads the run in `run_dir`: its trials and their timed steps.
    ///
    /// A step's time is the slowest worker's at that step (every worker of a synchronous
    /// step waits for it; the step rows of ranks that train nothing, a dedicated parameter
    /// server's, do not exist). Warm-up steps are left out.
    pub fn load(run_dir: &Path) -> Result<RunCells, RegressionError> {
        let run = RunView::open(run_dir)?;
        let steps: Vec<StepRow> = run.rows()?;
        let mut step_times: BTreeMap<&str, BTreeMap<usize, f64>> = BTreeMap::new();
        for step in steps.iter().filter(|step| !step.record.warmup) {
            let slowest = step_times.entry(&step.trial_id).or_default().entry(step.record.step).or_insert(0.0);
            *slowest = slowest.max(step.record.step_time_s);
        }
        let mut cells =
            RunCells::from_rows(run.run_id(), run.fingerprint().clone(), run.trials().to_vec(), |trial_id| {
                step_times.get(trial_id).map(|steps| steps.values().copied().collect()).unwrap_or_default()
            })?;
        let node_rows: Vec<TrialNodeRow> = run.rows()?;
        for row in &node_rows {
            let host = row.host_name.clone().unwrap_or_else(|| "unknown host".to_owned());
            let fields = row.environment().into_iter().map(|(field, value)| (field, value.unwrap_or_default()));
            cells.nodes.entry(host).or_insert_with(|| fields.collect());
        }
        let predictions: Vec<PredictionRow> = run.rows()?;
        let predicted: BTreeMap<&str, f64> =
            predictions.iter().filter_map(|row| Some((row.trial_id.as_str(), row.step_s?))).collect();
        for cell in cells.cells.values_mut() {
            cell.predicted_step_s =
                cell.trials.iter().find_map(|trial| predicted.get(trial.trial_id.as_str()).copied());
        }
        Ok(cells)
    }

    /// Groups `trials` into cells; `timed_steps` gives a trial's timed step times in order.
    pub fn from_rows(
        run_id: &str,
        fingerprint: Fingerprint,
        mut trials: Vec<TrialRow>,
        timed_steps: impl Fn(&str) -> Vec<f64>,
    ) -> Result<RunCells, RegressionError> {
        trials.sort_by_key(|trial| (trial.index, trial.repeat));
        let mut cells: BTreeMap<CellKey, Cell> = BTreeMap::new();
        for trial in trials {
            let key =
                CellKey::of(&trial).map_err(|source| RegressionError::Strategy { run: run_id.to_owned(), source })?;
            let cell = cells.entry(key.clone()).or_insert_with(|| Cell {
                key,
                settings: CellSettings::of(&trial),
                global_batch: trial.global_batch,
                outcomes: Vec::new(),
                steps: StepSamples::default(),
                trials: Vec::new(),
                predicted_step_s: None,
            });
            cell.outcomes.push(trial.outcome);
            if trial.outcome.is_ok() {
                let steps = timed_steps(&trial.trial_id);
                if !steps.is_empty() {
                    cell.steps.repeats.push(steps);
                }
            }
            cell.trials.push(trial);
        }
        Ok(RunCells { run_id: run_id.to_owned(), fingerprint, nodes: NodeEnvironments::new(), cells })
    }

    /// The suite's short name, from the run id (`20261123T204934Z-noise-study` →
    /// `noise-study`; a `-2` added to a run started in the same second is dropped).
    pub fn suite_label(&self) -> String {
        suite_label(&self.run_id)
    }
}

/// The suite part of a run id: after the UTC time stamp, without a same-second suffix.
pub fn suite_label(run_id: &str) -> String {
    let label = run_id.split_once('-').map_or(run_id, |(_, label)| label);
    match label.rsplit_once('-') {
        Some((stem, n)) if n.parse::<u32>().is_ok_and(|n| n >= 2) && !stem.is_empty() => stem.to_owned(),
        _ => label.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_labels_drop_the_time_stamp_and_a_same_second_suffix() {
        assert_eq!(suite_label("20261123T204934Z-noise-study"), "noise-study");
        assert_eq!(suite_label("20261123T204934Z-noise-study-2"), "noise-study");
        assert_eq!(suite_label("20261123T204934Z-default"), "default");
    }

    #[test]
    fn a_change_on_one_node_is_named_by_its_host_and_field() {
        let node = |nccl: &str| BTreeMap::from([("nccl_version", nccl.to_owned()), ("cpu_model", "Xeon".to_owned())]);
        let before: NodeEnvironments = BTreeMap::from([("node1".into(), node("2.21")), ("node2".into(), node("2.21"))]);
        let mut after = before.clone();
        after.get_mut("node2").unwrap().insert("nccl_version", "2.23".into());
        assert_eq!(
            node_changes(&before, &after),
            [("node2 nccl_version".to_owned(), "2.21".to_owned(), "2.23".to_owned())]
        );
        after.insert("node3".into(), node("2.21"));
        assert_eq!(
            node_changes(&before, &after)[0],
            ("nodes".into(), "node1, node2".into(), "node1, node2, node3".into())
        );
        assert!(
            node_changes(&before, &NodeEnvironments::new()).is_empty(),
            "a run on one host has no nodes to compare"
        );
    }
}
