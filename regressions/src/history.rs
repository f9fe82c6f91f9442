//! `stratlab history`: every run of a suite in one table, keyed by the environment it was
//! measured in, and the step changes of each cell's headline metrics over time, each
//! attributed to the fingerprint fields that changed where it happened.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use stratlab_columns::Columns;
use stratlab_results::{Fingerprint, Table};
use strum::VariantArray;

use crate::bootstrap::Statistic;
use crate::cells::{suite_label, Cell, CellKey, RunCells};
use crate::compare::EnvironmentChange;
use crate::step_detection::level_steps;
use crate::thresholds::Thresholds;
use crate::RegressionError;

/// One cell of one run: a row of the history table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct HistoryRow {
    /// Suite label (`default`).
    pub suite: String,
    /// Run id.
    pub run_id: String,
    /// When the run's fingerprint was taken, RFC 3339 UTC (the run's date).
    pub run_started: String,
    /// Key of the run's environment: the first 12 hex digits of the SHA-256 of its
    /// fingerprint's environment fields (`Fingerprint::environment`).
    pub environment: String,
    /// stratlab commit the binary was built from.
    pub git_commit: Option<String>,
    /// Host name.
    pub host_name: Option<String>,
    /// GPU models, or the CPU model without GPUs.
    pub devices: Option<String>,
    /// NVIDIA driver.
    pub nvidia_driver_version: Option<String>,
    /// Highest CUDA the driver supports.
    pub cuda_driver_version: Option<String>,
    /// libtorch release.
    pub libtorch_version: Option<String>,
    /// CUDA libtorch was built with.
    pub libtorch_cuda_version: Option<String>,
    /// cuDNN loaded at run time.
    pub cudnn_runtime_version: Option<i64>,
    /// NCCL loaded at run time.
    pub nccl_version: Option<String>,
    /// The cell, as one line.
    pub cell: String,
    /// Network.
    pub network: String,
    /// Data set.
    pub dataset: String,
    /// Strategy with workers and parameters (`gpipe ×2 m4`).
    pub strategy: String,
    /// Outcomes of the repeats (`ok ×3`).
    pub outcome: String,
    /// Timed steps behind the statistics.
    pub timed_steps: i64,
    /// Which statistic `step_time_s` and `throughput` use (`median`, `10th percentile`).
    pub statistic: String,
    /// That statistic of the step times, seconds.
    pub step_time_s: Option<f64>,
    /// Median step time, seconds (slowest worker per step, warm-up excluded).
    pub step_time_median_s: Option<f64>,
    /// 10th percentile of the same step times.
    pub step_time_p10_s: Option<f64>,
    /// 90th percentile of the same step times.
    pub step_time_p90_s: Option<f64>,
    /// Global batch ÷ `step_time_s`, samples/s.
    pub throughput: Option<f64>,
    /// Median over repeats of the seconds to the target accuracy.
    pub time_to_accuracy_s: Option<f64>,
    /// Median over repeats of the final test accuracy.
    pub final_accuracy: Option<f64>,
    /// Median over repeats of the peak device memory, bytes.
    pub peak_memory_bytes: Option<f64>,
}

impl Table for HistoryRow {
    const NAME: &'static str = "history";
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}

/// A headline metric tracked over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum HeadlineMetric {
    /// Training throughput, samples/s (higher is better).
    Throughput,
    /// Step time (the history's statistic), seconds.
    StepTime,
    /// Seconds to the target accuracy.
    TimeToAccuracy,
    /// Peak device memory.
    PeakMemory,
}

impl HeadlineMetric {
    /// Every metric, in the order figures are drawn (declaration order). An array, not a
    /// slice, so that callers iterate by value.
    pub const ALL: [HeadlineMetric; 4] = *Self::VARIANTS.as_array().expect("four headline metrics");

    /// File-name stem and JSON name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Axis label with unit.
    pub fn axis_label(self) -> &'static str {
        match self {
            HeadlineMetric::Throughput => "throughput (samples/s)",
            HeadlineMetric::StepTime => "step time (ms)",
            HeadlineMetric::TimeToAccuracy => "time to target accuracy (s)",
            HeadlineMetric::PeakMemory => "peak device memory (MiB)",
        }
    }

    /// Whether a rise is an improvement.
    pub fn higher_is_better(self) -> bool {
        self == HeadlineMetric::Throughput
    }

    /// The metric's value in `row`, in the axis's unit.
    pub fn value(self, row: &HistoryRow) -> Option<f64> {
        match self {
            HeadlineMetric::Throughput => row.throughput,
            HeadlineMetric::StepTime => row.step_time_s.map(|s| s * 1e3),
            HeadlineMetric::TimeToAccuracy => row.time_to_accuracy_s,
            HeadlineMetric::PeakMemory => row.peak_memory_bytes.map(|b| b / (1024.0 * 1024.0)),
        }
        .filter(|v| v.is_finite())
    }
}

/// A run of the history: its id, date and environment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRun {
    /// Run id.
    pub run_id: String,
    /// When it started (fingerprint time).
    pub run_started: String,
    /// Its environment key.
    pub environment: String,
    /// `run_started` as Unix seconds (for date axes).
    pub started_unix_s: i64,
    /// Its fingerprint.
    #[serde(skip)]
    pub fingerprint: Fingerprint,
    /// The environments of the nodes its cells across nodes ran on.
    #[serde(skip)]
    pub nodes: crate::cells::NodeEnvironments,
}

/// A lasting change of one cell's metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryStep {
    /// The cell.
    pub cell: String,
    /// The metric.
    pub metric: HeadlineMetric,
    /// The last run at the old level.
    pub from_run: String,
    /// The first run at the new level.
    pub to_run: String,
    /// Index of `to_run` in [`History::runs`].
    pub to_run_index: usize,
    /// Median level before.
    pub before: f64,
    /// Median level after.
    pub after: f64,
    /// Whether the change is for the worse.
    pub worse: bool,
    /// The fingerprint fields that differ between `from_run` and `to_run`: the suspects.
    pub environment_changes: Vec<EnvironmentChange>,
}

/// Every run of one suite, oldest first, as a table and its step changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    /// The suite label.
    pub suite: String,
    /// The runs, oldest first.
    pub runs: Vec<HistoryRun>,
    /// One row per run and cell, runs oldest first.
    pub rows: Vec<HistoryRow>,
    /// Step changes per cell and metric, in time order.
    pub steps: Vec<HistoryStep>,
    /// The relative noise threshold the steps had to clear.
    pub noise_threshold: f64,
    /// The statistic of the step times behind `step_time_s` and `throughput`.
    pub statistic: Statistic,
}

/// Reads every run folder directly under `runs_folder` and groups them by suite label,
/// oldest first. Folders that are not runs, and probe runs, are skipped.
pub fn gather_runs(runs_folder: &Path) -> Result<BTreeMap<String, Vec<RunCells>>, RegressionError> {
    let entries =
        fs::read_dir(runs_folder).map_err(|source| RegressionError::Io { path: runs_folder.to_path_buf(), source })?;
    let mut suites: BTreeMap<String, Vec<RunCells>> = BTreeMap::new();
    for entry in entries {
        let path = entry.map_err(|source| RegressionError::Io { path: runs_folder.to_path_buf(), source })?.path();
        if !path.join("fingerprint.json").is_file() || !path.join("suite.yaml").is_file() {
            continue;
        }
        let run = RunCells::load(&path)?;
        suites.entry(suite_label(&run.run_id)).or_default().push(run);
    }
    for runs in suites.values_mut() {
        runs.sort_by(|a, b| (&a.fingerprint.collected_at, &a.run_id).cmp(&(&b.fingerprint.collected_at, &b.run_id)));
    }
    Ok(suites)
}

/// The environment key of a fingerprint: 12 hex digits of the SHA-256 of its environment.
pub fn environment_key(fingerprint: &Fingerprint) -> String {
    let mut hasher = Sha256::new();
    for (field, value) in fingerprint.environment() {
        hasher.update(field.as_bytes());
        hasher.update([0]);
        hasher.update(value.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().take(6).map(|byte| format!("{byte:02x}")).collect()
}

impl History {
    /// The history of `runs` (one suite, any order): cells summarised by `thresholds`'
    /// statistic, steps found at its noise threshold.
    pub fn new(suite: &str, mut runs: Vec<RunCells>, thresholds: &Thresholds) -> History {
        let (noise_threshold, statistic) = (thresholds.noise, thresholds.statistic);
        runs.sort_by(|a, b| (&a.fingerprint.collected_at, &a.run_id).cmp(&(&b.fingerprint.collected_at, &b.run_id)));
        let mut previous_s = 0;
        let history_runs: Vec<HistoryRun> = runs
            .iter()
            .map(|run| {
                // An unreadable time stamp (a hand-edited fingerprint) keeps the run's place.
                let started_unix_s = chrono::DateTime::parse_from_rfc3339(&run.fingerprint.collected_at)
                    .map_or(previous_s + 1, |time| time.timestamp());
                previous_s = started_unix_s;
                HistoryRun {
                    run_id: run.run_id.clone(),
                    run_started: run.fingerprint.collected_at.clone(),
                    environment: environment_key(&run.fingerprint),
                    started_unix_s,
                    fingerprint: run.fingerprint.clone(),
                    nodes: run.nodes.clone(),
                }
            })
            .collect();
        let rows: Vec<HistoryRow> = runs
            .iter()
            .zip(&history_runs)
            .flat_map(|(run, info)| run.cells.values().map(move |cell| history_row(suite, info, cell, statistic)))
            .collect();
        let mut history = History {
            suite: suite.to_owned(),
            runs: history_runs,
            rows,
            steps: Vec::new(),
            noise_threshold,
            statistic,
        };
        history.steps = history.find_steps();
        history
    }

    /// The cells in the history, in key order, with their rows' run indices.
    pub fn series(&self, metric: HeadlineMetric) -> BTreeMap<String, Vec<(usize, f64)>> {
        let index: BTreeMap<&str, usize> =
            self.runs.iter().enumerate().map(|(i, run)| (run.run_id.as_str(), i)).collect();
        let mut series: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
        for row in &self.rows {
            if let Some(value) = metric.value(row) {
                series.entry(row.cell.clone()).or_default().push((index[row.run_id.as_str()], value));
            }
        }
        series
    }

    /// Between consecutive runs, the fingerprint fields that changed: `(index of the later
    /// run, changes)` for every run whose environment differs from the one before.
    pub fn environment_changes(&self) -> Vec<(usize, Vec<EnvironmentChange>)> {
        self.runs
            .windows(2)
            .enumerate()
            .map(|(i, pair)| (i + 1, changes_between(&pair[0], &pair[1])))
            .filter(|(_, changes)| !changes.is_empty())
            .collect()
    }

    fn find_steps(&self) -> Vec<HistoryStep> {
        let mut steps = Vec::new();
        for metric in HeadlineMetric::ALL {
            for (cell, points) in self.series(metric) {
                let values: Vec<f64> = points.iter().map(|(_, value)| *value).collect();
                for step in level_steps(&values, self.noise_threshold) {
                    let (from, to) = (points[step.at - 1].0, points[step.at].0);
                    let rose = step.after > step.before;
                    steps.push(HistoryStep {
                        cell: cell.clone(),
                        metric,
                        from_run: self.runs[from].run_id.clone(),
                        to_run: self.runs[to].run_id.clone(),
                        to_run_index: to,
                        before: step.before,
                        after: step.after,
                        worse: rose != metric.higher_is_better(),
                        environment_changes: changes_between(&self.runs[from], &self.runs[to]),
                    });
                }
            }
        }
        steps.sort_by(|a, b| (a.to_run_index, &a.cell, a.metric).cmp(&(b.to_run_index, &b.cell, b.metric)));
        steps
    }
}

/// What changed from run `before` to run `after`: its fingerprint's fields, and the
/// nodes' of its cells across nodes.
fn changes_between(before: &HistoryRun, after: &HistoryRun) -> Vec<EnvironmentChange> {
    before
        .fingerprint
        .changes_to(&after.fingerprint)
        .into_iter()
        .map(|(field, before, after)| (field.to_owned(), before, after))
        .chain(crate::cells::node_changes(&before.nodes, &after.nodes))
        .map(|(field, before, after)| EnvironmentChange { field, baseline: before, new: after })
        .collect()
}

fn history_row(suite: &str, run: &HistoryRun, cell: &Cell, statistic: Statistic) -> HistoryRow {
    let f = &run.fingerprint;
    let median_of = |value: fn(&stratlab_results::TrialRow) -> Option<f64>| {
        stratlab_results::stats::median(
            &cell.trials.iter().filter(|t| t.outcome.is_ok()).filter_map(value).collect::<Vec<_>>(),
        )
    };
    let key: &CellKey = &cell.key;
    HistoryRow {
        suite: suite.to_owned(),
        run_id: run.run_id.clone(),
        run_started: run.run_started.clone(),
        environment: run.environment.clone(),
        git_commit: f.git_commit.clone(),
        host_name: f.host_name.clone(),
        devices: if f.gpu_models.is_empty() { f.cpu_model.clone() } else { Some(f.gpu_models.join(", ")) },
        nvidia_driver_version: f.nvidia_driver_version.clone(),
        cuda_driver_version: f.cuda_driver_version.clone(),
        libtorch_version: f.libtorch_version.clone(),
        libtorch_cuda_version: f.libtorch_cuda_version.clone(),
        cudnn_runtime_version: f.cudnn_runtime_version,
        nccl_version: f.nccl_version.clone(),
        cell: key.to_string(),
        network: key.network.clone(),
        dataset: key.dataset_label(),
        strategy: key.strategy_label(),
        outcome: cell.outcome_summary(),
        timed_steps: cell.steps.len() as i64,
        statistic: statistic.name().to_owned(),
        step_time_s: cell.step_time_s(statistic),
        step_time_median_s: cell.steps.median(),
        step_time_p10_s: cell.steps.quantile(0.1),
        step_time_p90_s: cell.steps.quantile(0.9),
        throughput: cell.throughput(statistic),
        time_to_accuracy_s: median_of(|t| t.training.time_to_accuracy_s),
        final_accuracy: median_of(|t| t.training.final_accuracy),
        peak_memory_bytes: median_of(|t| t.load.memory_max_bytes.map(|b| b as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_metric_names_stay_the_stored_ones() {
        assert_eq!(
            HeadlineMetric::ALL.map(HeadlineMetric::name),
            ["throughput", "step_time", "time_to_accuracy", "peak_memory"]
        );
        // Serialised (a `HistoryStep`'s `metric`) in kebab case, unlike `name()`.
        let serde_names = HeadlineMetric::ALL.map(|metric| serde_json::to_string(&metric).unwrap());
        assert_eq!(serde_names, ["\"throughput\"", "\"step-time\"", "\"time-to-accuracy\"", "\"peak-memory\""]);
    }
}
