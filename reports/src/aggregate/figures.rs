//! The aggregates as the figures' inputs: whatever the run holds is drawn, failures included.

use stratlab_strategy_spec::StrategyKind;

use super::{CellKey, PipelineTrial, RunAggregates};
use crate::{
    AccuracyCurve, BubblePoint, DeviceUsageBar, LossCurve, LossCurves, PipelineBubble, Plotted, ScalingLine,
    ScalingPoint, SpeedupBar, Stat, StepBreakdownBar, StepSegments, ThroughputBar, TimeToAccuracy,
};

/// The schedules whose bubble the arithmetic (p − 1) ÷ (m + p − 1) describes: synchronous,
/// flushed every step.
const FLUSHED_SCHEDULES: [StrategyKind; 3] =
    [StrategyKind::Gpipe, StrategyKind::OneFOneB, StrategyKind::Interleaved1F1B];

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
                        series: self.labels.series(&cell.key),
                        network: cell.key.network.clone(),
                        dataset: cell.key.dataset_label(),
                        workers: w,
                        speedup: cell.speedup.plotted(),
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
                line: ScalingLine::Strategy(self.labels.series(&cell.key)),
                network: cell.key.network.clone(),
                dataset: cell.key.dataset_label(),
                workers: cell.key.workers,
                speedup: cell.speedup.plotted(),
            })
            .collect()
    }

    /// One bar per cell: headline throughput (wall samples/s) and seconds per epoch.
    pub fn throughput_bars(&self) -> Vec<ThroughputBar> {
        self.throughput
            .iter()
            .map(|cell| ThroughputBar {
                series: self.labels.series(&cell.key),
                network: cell.key.network.clone(),
                dataset: cell.key.dataset_label(),
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
                series: self.labels.series(&cell.key),
                network: cell.key.network.clone(),
                dataset: cell.key.dataset_label(),
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
                series: self.labels.series(key),
                workers: key.workers,
                points: trial.points.clone(),
                failure: trial.trial.failure.as_ref().map(|failed| failed.outcome),
            };
            let dataset = key.dataset_label();
            let same = |f: &&mut TimeToAccuracy| {
                f.network == key.network && f.dataset == dataset && f.target_accuracy == trial.target_accuracy
            };
            match figures.iter_mut().find(same) {
                Some(figure) => figure.curves.push(curve),
                None => figures.push(TimeToAccuracy {
                    network: key.network.clone(),
                    dataset,
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
                series: self.labels.series(key),
                workers: key.workers,
                points: trial.points.clone(),
                failure: trial.trial.failure.as_ref().map(|failed| failed.outcome),
            };
            let dataset = key.dataset_label();
            match figures.iter_mut().find(|f| f.network == key.network && f.dataset == dataset) {
                Some(figure) => figure.curves.push(curve),
                None => figures.push(LossCurves { network: key.network.clone(), dataset, curves: vec![curve] }),
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
                dataset: rank.trial.key.dataset_label(),
                series: self.labels.series(&rank.trial.key),
                workers: rank.trial.key.workers,
                batch_size: rank.trial.key.batch_size,
                repeat: rank.trial.repeat,
                rank: rank.rank,
                failure: rank.trial.failure.as_ref().map(|failed| failed.outcome),
                per_step: rank.per_step.map(|step| StepSegments {
                    compute_s: step.compute_s,
                    exposed_communication_s: step.exposed_communication_s,
                    overlapped_communication_s: step.overlapped_communication_s,
                    idle_s: step.idle_s,
                }),
            })
            .collect()
    }

    /// One figure per network, data set and stage count in which `gpipe` or `1f1b` trials
    /// ran with more than one micro-batch count: a point per schedule and count, the `ok`
    /// trials' measured bubbles over repeats, or the first failure when none was measured.
    pub fn pipeline_bubbles(&self) -> Vec<PipelineBubble> {
        // (network, data set, p) → its flushed-schedule trials, in matrix order.
        let mut groups: Vec<(BubbleGroup, Vec<&PipelineTrial>)> = Vec::new();
        for pipeline in self.pipelines.iter().filter(|p| FLUSHED_SCHEDULES.contains(&p.schedule())) {
            let key = &pipeline.trial.key;
            let group = (key.network.clone(), key.dataset_label(), pipeline.stage_count());
            match groups.iter_mut().find(|(known, _)| *known == group) {
                Some((_, trials)) => trials.push(pipeline),
                None => groups.push((group, vec![pipeline])),
            }
        }
        groups
            .into_iter()
            .filter_map(|((network, dataset, stages), trials)| {
                let mut cases: Vec<(StrategyKind, u32, u32)> =
                    trials.iter().map(|p| (p.schedule(), p.virtual_stages(), p.micro_batches())).collect();
                cases.sort_unstable();
                cases.dedup();
                let counts = cases.iter().map(|(_, _, m)| *m);
                if counts.clone().min() == counts.max() {
                    return None;
                }
                let points = cases
                    .into_iter()
                    .map(|(schedule, virtual_stages, micro_batches)| {
                        let case: Vec<&PipelineTrial> = trials
                            .iter()
                            .copied()
                            .filter(|p| {
                                (p.schedule(), p.virtual_stages(), p.micro_batches())
                                    == (schedule, virtual_stages, micro_batches)
                            })
                            .collect();
                        BubblePoint { schedule, virtual_stages, micro_batches, bubble: bubble_over_repeats(&case) }
                    })
                    .collect();
                Some(PipelineBubble { network, dataset, stages, points })
            })
            .collect()
    }
}

/// The measured bubbles of the `ok` trials of one case over its repeats; the first failure
/// when none was measured, or "not recorded" when `ok` trials timed no step.
fn bubble_over_repeats(trials: &[&PipelineTrial]) -> Plotted {
    let measured: Vec<f64> =
        trials.iter().filter(|p| p.trial.failure.is_none()).filter_map(|p| p.bubble_measured()).collect();
    match Stat::from_samples(&measured) {
        Some(stat) => Plotted::Measured(stat),
        None => trials
            .iter()
            .find_map(|p| p.trial.failure.as_ref().map(|failed| Plotted::Failed(failed.outcome)))
            .unwrap_or_else(Plotted::not_recorded),
    }
}

/// A bubble figure's cells: network, data set and pipeline stages.
type BubbleGroup = (String, String, u32);
