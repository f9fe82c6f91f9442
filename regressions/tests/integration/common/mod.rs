//! Hand-made runs: cells with step times around a chosen level, on a chosen fingerprint.

#![allow(dead_code)]

use stratlab_regressions::RunCells;
use stratlab_results::{Fingerprint, Outcome, TrialRow};
use stratlab_strategy_spec::{ParameterColumns, Parameters, Strategy, StrategyKind};

#[path = "../../../../results/tests/integration/common/mod.rs"]
mod results_fixtures;

/// A ±2 % deterministic wiggle: steps of a steady trial.
pub fn steps_around(level: f64, n: usize) -> Vec<f64> {
    (0..n).map(|i| level * (1.0 + 0.02 * (((i * 7919) % 13) as f64 / 6.0 - 1.0))).collect()
}

/// The sample fingerprint, taken at `minute` minutes past an hour.
pub fn fingerprint_at(minute: usize) -> Fingerprint {
    let mut fingerprint = results_fixtures::fingerprint();
    fingerprint.collected_at = format!("2026-11-23T{:02}:{:02}:00Z", 10 + minute / 60, minute % 60);
    fingerprint
}

/// One cell of a hand-made run: strategy, workers, median step time (None: the trial
/// failed with `oom`).
pub struct Made<'a> {
    pub network: &'a str,
    pub strategy: &'a str,
    pub workers: i64,
    pub step_time: Option<f64>,
    pub threads: i64,
    /// The `precision` column: `None` as in runs stored before it existed.
    pub precision: Option<&'a str>,
    /// The `optimizer` column: `None` as in runs stored before it existed.
    pub optimizer: Option<&'a str>,
}

impl<'a> Made<'a> {
    pub fn new(strategy: &'a str, workers: i64, step_time: Option<f64>) -> Self {
        Made { network: "resnet18", strategy, workers, step_time, threads: 1, precision: None, optimizer: None }
    }
}

/// A run of `cells`, each one trial of 40 timed steps.
pub fn run(run_id: &str, fingerprint: Fingerprint, cells: &[Made]) -> RunCells {
    let trials: Vec<TrialRow> = cells
        .iter()
        .enumerate()
        .map(|(index, made)| {
            let mut trial = results_fixtures::trial(run_id, &format!("t{index}"), index as i64);
            trial.network = made.network.into();
            let kind: StrategyKind = made.strategy.parse().unwrap();
            let parameters =
                Parameters { pipeline_stages: (kind == StrategyKind::Hybrid).then_some(2), ..Parameters::default() };
            trial.strategy = kind;
            trial.parameters = ParameterColumns::from(&Strategy::new(kind, parameters).unwrap());
            trial.workers = made.workers;
            trial.global_batch = 32 * made.workers;
            trial.threads = made.threads;
            trial.stored_precision = made.precision.map(|name| name.parse().unwrap());
            trial.stored_optimizer = made.optimizer.map(|name| name.parse().unwrap());
            trial.outcome = if made.step_time.is_some() { Outcome::Ok } else { Outcome::Oom };
            trial
        })
        .collect();
    let levels: Vec<Option<f64>> = cells.iter().map(|made| made.step_time).collect();
    RunCells::from_rows(run_id, fingerprint, trials, |trial_id| {
        let index: usize = trial_id[1..].parse().unwrap();
        levels[index].map(|level| steps_around(level, 40)).unwrap_or_default()
    })
    .unwrap()
}
