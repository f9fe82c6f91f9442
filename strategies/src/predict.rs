//! A trial's step predicted from its network's profile: the strategy's own structure
//! (its bucket plan, its pipeline partition and schedule) put to the performance model's
//! simulation (`stratlab_perf_model`), beside the thesis's closed forms on the same inputs.
//! Here, not in the binary, because it reads every strategy's parameters.

use std::ops::Range;

use stratlab_networks::NetworkSpec;
use stratlab_perf_model::closed_forms::{thesis_data_parallel_s, thesis_gpipe_comm_s, thesis_gpipe_compute_s};
use stratlab_perf_model::data_parallel::{data_parallel_step, StageWork};
use stratlab_perf_model::pipeline::{simulate, Pipeline, StageCost};
use stratlab_perf_model::{CostCurve, Link};
use stratlab_strategy_spec::{Strategy, StrategyKind};
use tch::Device;

use crate::pipeline::plan_stages;
use crate::profile::NetworkProfile;

/// Every sample count a stage is profiled at for `strategy` with `workers` workers and a
/// per-worker batch of `batch`: what a stage runs at once ([`Strategy::stage_samples`]),
/// and for data parallelism also the global batch, the sequential time the thesis's
/// eq. 5.1 starts from.
pub fn profiled_samples(strategy: &Strategy, workers: usize, batch: usize) -> Vec<usize> {
    let mut sizes = vec![strategy.stage_samples(batch)];
    if strategy.kind() == StrategyKind::DataParallel {
        sizes.push(batch * workers);
    }
    sizes
}

/// One trial to predict: the strategy and its workers, the per-worker batch, the network,
/// its profile (holding the sizes [`profiled_samples`] names) and, for multi-worker
/// strategies, the link between workers.
pub struct StepQuestion<'a> {
    /// The strategy with its parameters.
    pub strategy: &'a Strategy,
    /// Workers of the trial.
    pub workers: usize,
    /// Per-worker (per-pipeline) batch.
    pub batch: usize,
    /// The network.
    pub spec: &'a NetworkSpec,
    /// The network's profile on the trial's device and threads.
    pub profile: &'a NetworkProfile,
    /// The link between workers, where known.
    pub link: Option<&'a Link>,
}

/// Seconds per step predicted two ways, or why there is none.
pub struct StepPrediction {
    /// The performance model: the strategy's own structure simulated.
    pub model_s: Result<f64, String>,
    /// The thesis's closed forms on the same profile and link: the baseline.
    pub thesis_s: Result<f64, String>,
}

impl StepQuestion<'_> {
    /// The model's and the thesis's step. A pipeline is partitioned once, as the strategy
    /// partitions it (a `time` balance profiles the network again, as the strategy does).
    pub fn predict(&self) -> StepPrediction {
        let partition = match self.strategy.schedule() {
            Some(_) => Some(self.partition()),
            None => None,
        };
        let model_s = match (self.strategy.kind(), &partition) {
            (StrategyKind::Single, _) => Ok(self.sequential_s(self.batch)),
            (StrategyKind::DataParallel, _) => self.data_parallel_s(),
            (StrategyKind::ParameterServer, _) => Err("parameter-server is not modelled yet".into()),
            (_, Some(partition)) => partition.clone().and_then(|ranges| self.pipeline_s(&ranges)),
            (_, None) => Err("not a pipeline".into()),
        };
        let thesis_s = match (self.strategy.kind(), &partition) {
            (StrategyKind::Single, _) => Ok(self.sequential_s(self.batch)),
            (StrategyKind::DataParallel, _) => self.thesis_data_parallel_s(),
            (StrategyKind::ModelParallel | StrategyKind::Gpipe | StrategyKind::OneFOneB, Some(partition)) => {
                partition.clone().and_then(|ranges| self.thesis_pipeline_s(&ranges))
            }
            _ => Err("the thesis has no closed form for it".into()),
        };
        StepPrediction { model_s, thesis_s }
    }

    fn link(&self) -> Result<Link, String> {
        self.link.copied().ok_or_else(|| "needs a link: give --probe <a stratlab probe run>".to_string())
    }

    /// Which network stages each pipeline stage holds, as the strategy plans them.
    fn partition(&self) -> Result<Vec<Range<usize>>, String> {
        let (stages, _) = self.strategy.pipeline_shape(self.workers).map_err(|error| error.to_string())?;
        let samples = self.strategy.stage_samples(self.batch) as i64;
        plan_stages(self.spec, &self.strategy.balance(), stages, samples, Device::Cpu)
            .map(|plan| plan.ranges)
            .map_err(|error| error.to_string())
    }

    /// Seconds of network stage `stage`'s forward and backward on `samples` samples.
    fn stage_s(&self, stage: usize, samples: usize) -> (f64, f64) {
        let stage = &self.profile.stages[stage];
        (curve(&stage.forward_s).at(samples), curve(&stage.backward_s).at(samples))
    }

    /// A forward and backward of the whole network on `samples` samples, and the update:
    /// one sequential step.
    fn sequential_s(&self, samples: usize) -> f64 {
        (0..self.profile.stages.len())
            .map(|stage| {
                let (forward, backward) = self.stage_s(stage, samples);
                forward + backward
            })
            .sum::<f64>()
            + self.profile.optimizer_s
    }

    /// Bytes of all the network's gradients.
    fn gradient_bytes(&self, stages: Range<usize>) -> u64 {
        self.profile.stages[stages].iter().flat_map(|stage| &stage.parameter_bytes).sum()
    }

    fn data_parallel_s(&self) -> Result<f64, String> {
        let stages: Vec<StageWork> = (0..self.profile.stages.len())
            .map(|stage| {
                let (forward_s, backward_s) = self.stage_s(stage, self.batch);
                StageWork { forward_s, backward_s, parameter_bytes: self.profile.stages[stage].parameter_bytes.clone() }
            })
            .collect();
        let fusion = self.strategy.fusion_threshold_bytes();
        Ok(data_parallel_step(&stages, self.workers, &self.link()?, fusion, self.profile.optimizer_s).step_s)
    }

    /// Eq. 5.1, from the sequential time of the global batch.
    fn thesis_data_parallel_s(&self) -> Result<f64, String> {
        Ok(thesis_data_parallel_s(
            self.sequential_s(self.batch * self.workers),
            self.workers,
            self.gradient_bytes(0..self.profile.stages.len()) as f64,
            self.strategy.fusion_threshold_bytes() as f64,
            &self.link()?,
        ))
    }

    /// Each part's costs summed from the profile, and the schedule simulated.
    fn pipeline_s(&self, partition: &[Range<usize>]) -> Result<f64, String> {
        let schedule = self.strategy.schedule().ok_or("not a pipeline")?;
        let (_, replicas) = self.strategy.pipeline_shape(self.workers).map_err(|error| error.to_string())?;
        let samples = self.strategy.stage_samples(self.batch);
        let total_parameters = self.gradient_bytes(0..self.profile.stages.len());
        let costs: Vec<StageCost> = partition
            .iter()
            .map(|range| {
                let (forward_s, backward_s) = range
                    .clone()
                    .map(|stage| self.stage_s(stage, samples))
                    .fold((0.0, 0.0), |(forward, backward), (f, b)| (forward + f, backward + b));
                let gradient_bytes = self.gradient_bytes(range.clone());
                StageCost {
                    forward_s,
                    backward_s,
                    output_bytes: (self.profile.stages[range.end - 1].output_bytes_per_sample * samples as u64) as f64,
                    gradient_bytes: gradient_bytes as f64,
                    optimizer_s: self.profile.optimizer_s * gradient_bytes as f64 / total_parameters.max(1) as f64,
                }
            })
            .collect();
        let pipeline = Pipeline {
            schedule,
            micro_batches: self.strategy.micro_batches(),
            checkpoint: self.strategy.checkpoint(),
            stages: &costs,
            link: self.link()?,
            replicas,
        };
        simulate(&pipeline).map(|step| step.step_s).map_err(|error| error.to_string())
    }

    /// Eq. 6.1 + 6.2: the sequential time of the micro-batches, and the largest activation
    /// crossing the strategy's own cuts.
    fn thesis_pipeline_s(&self, partition: &[Range<usize>]) -> Result<f64, String> {
        let samples = self.strategy.stage_samples(self.batch);
        let m = self.strategy.micro_batches();
        let activation_bytes = partition[..partition.len().saturating_sub(1)]
            .iter()
            .map(|range| self.profile.stages[range.end - 1].output_bytes_per_sample * samples as u64)
            .max()
            .unwrap_or(0);
        let t_seq = m as f64 * (self.sequential_s(samples) - self.profile.optimizer_s);
        let stages = partition.len();
        Ok(thesis_gpipe_compute_s(t_seq, stages, m)
            + thesis_gpipe_comm_s(stages, m, activation_bytes as f64, &self.link()?)
            + self.profile.optimizer_s)
    }
}

/// The cost curve of measured `(samples, seconds)` points.
fn curve(points: &[(usize, f64)]) -> CostCurve {
    CostCurve::new(points.to_vec()).unwrap_or_else(|_| CostCurve::proportional(0.0))
}
