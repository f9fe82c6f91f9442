//! The aggregates as the figures' inputs: whatever the run holds is drawn, failures included.

use super::{CellKey, RunAggregates};
use crate::{
    AccuracyCurve, DeviceUsageBar, LossCurve, LossCurves, ScalingPoint, SpeedupBar, StepBreakdownBar, StepSegments,
    ThroughputBar, TimeToAccuracy,
};

impl RunAggregates {
    /// Speedup bars of every cell with W > 1, ordered by W; a run with only W = 1 gives its
    /// W = 1 cells (`single` at speedup 1). [`crate::speedup_bars`] draws one W per figure:
    /// see [`RunAggregates::speedup_bars_by_workers`].
    pub fn speedup_bars(&self) -> Vec<SpeedupBar> {
        self.speedup_bars_by_workers().into_iter().flatten().collect()
    }

    /// [`RunAggregates::speedup_bars`] split into one set per worker count, W ascending,
    /// each ready for [`crate::speedup_bars`].
    pub fn speedup_bars_by_workers(&self) -> Vec<Vec<SpeedupBar>> {
        let multi = self.throughput.iter().any(|cell| cell.key.workers > 1);
        let mut workers: Vec<u32> =
            self.throughput.iter().map(|cell| cell.key.workers).filter(|w| !multi || *w > 1).collect();
        workers.sort_unstable();
        workers.dedup();
        workers
            .into_iter()
            .map(|w| {
                self.throughput
                    .iter()
                    .filter(|cell| cell.key.workers == w)
                    .map(|cell| SpeedupBar {
                        strategy: cell.key.strategy.clone(),
                        network: cell.key.network.clone(),
                        dataset: cell.key.dataset.clone(),
                        workers: w,
                        speedup: cell.speedup.outcome(),
                    })
                    .collect()
            })
            .collect()
    }

    /// One scaling point per cell: speedup against W for every strategy, `single` at W = 1.
    pub fn scaling_points(&self) -> Vec<ScalingPoint> {
        self.throughput
            .iter()
            .map(|cell| ScalingPoint {
                strategy: cell.key.strategy.clone(),
                network: cell.key.network.clone(),
                dataset: cell.key.dataset.clone(),
                workers: cell.key.workers,
                speedup: cell.speedup.outcome(),
            })
            .collect()
    }

    /// One bar per cell: headline throughput (wall samples/s) and seconds per epoch.
    pub fn throughput_bars(&self) -> Vec<ThroughputBar> {
        self.throughput
            .iter()
            .map(|cell| ThroughputBar {
                strategy: cell.key.strategy.clone(),
                network: cell.key.network.clone(),
                dataset: cell.key.dataset.clone(),
                workers: cell.key.workers,
                samples_per_s: cell.wall_samples_per_s.clone(),
                epoch_time_s: cell.seconds_per_epoch.clone(),
            })
            .collect()
    }

    /// One bar per cell: utilisation and memory, medians over the repeats.
    pub fn device_usage_bars(&self) -> Vec<DeviceUsageBar> {
        self.device_usage
            .iter()
            .map(|cell| DeviceUsageBar {
                strategy: cell.key.strategy.clone(),
                network: cell.key.network.clone(),
                dataset: cell.key.dataset.clone(),
                workers: cell.key.workers,
                utilisation_mean_pct: cell.utilisation_mean_pct.clone(),
                utilisation_max_pct: cell.utilisation_max_pct.clone(),
                memory_mean_bytes: cell.memory_mean_bytes.clone(),
                memory_max_bytes: cell.memory_max_bytes.clone(),
            })
            .collect()
    }

    /// One figure per network, data set and target accuracy, with one curve per trial
    /// (failed trials carry their failure). Targets are kept apart because a figure draws
    /// one target line.
    pub fn time_to_accuracy(&self) -> Vec<TimeToAccuracy> {
        let mut figures: Vec<TimeToAccuracy> = Vec::new();
        for trial in &self.accuracy {
            let key = &trial.trial.key;
            let curve = AccuracyCurve {
                strategy: key.strategy.clone(),
                workers: key.workers,
                points: trial.points.clone(),
                failure: trial.trial.failure.as_ref().map(|failed| failed.failure()),
            };
            let same = |f: &&mut TimeToAccuracy| {
                f.network == key.network && f.dataset == key.dataset && f.target_accuracy == trial.target_accuracy
            };
            match figures.iter_mut().find(same) {
                Some(figure) => figure.curves.push(curve),
                None => figures.push(TimeToAccuracy {
                    network: key.network.clone(),
                    dataset: key.dataset.clone(),
                    target_accuracy: trial.target_accuracy,
                    curves: vec![curve],
                }),
            }
        }
        figures
    }

    /// One figure per network and data set, with one curve per trial (failed trials carry
    /// their failure; a non-finite loss ends its curve as diverged).
    pub fn loss_curves(&self) -> Vec<LossCurves> {
        let mut figures: Vec<LossCurves> = Vec::new();
        for trial in &self.loss {
            let key: &CellKey = &trial.trial.key;
            let curve = LossCurve {
                strategy: key.strategy.clone(),
                workers: key.workers,
                points: trial.points.clone(),
                failure: trial.trial.failure.as_ref().map(|failed| failed.failure()),
            };
            match figures.iter_mut().find(|f| f.network == key.network && f.dataset == key.dataset) {
                Some(figure) => figure.curves.push(curve),
                None => figures.push(LossCurves {
                    network: key.network.clone(),
                    dataset: key.dataset.clone(),
                    curves: vec![curve],
                }),
            }
        }
        figures
    }

    /// One bar per trial and rank with a step-time breakdown, in matrix order then by rank;
    /// failed trials carry their failure (their bar is what they recorded before it).
    pub fn step_breakdown_bars(&self) -> Vec<StepBreakdownBar> {
        self.step_breakdown
            .iter()
            .map(|rank| StepBreakdownBar {
                network: rank.trial.key.network.clone(),
                dataset: rank.trial.key.dataset.clone(),
                strategy: rank.trial.key.strategy.clone(),
                workers: rank.trial.key.workers,
                batch_size: rank.trial.key.batch_size,
                repeat: rank.trial.repeat,
                rank: rank.rank,
                failure: rank.trial.failure.as_ref().map(|failed| failed.failure()),
                per_step: rank.per_step.map(|step| StepSegments {
                    compute_s: step.compute_s,
                    exposed_communication_s: step.exposed_communication_s,
                    overlapped_communication_s: step.overlapped_communication_s,
                    idle_s: step.idle_s,
                }),
            })
            .collect()
    }
}
