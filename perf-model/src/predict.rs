//! A trial's step and memory predicted from its network's profile: the strategy's own
//! structure (its bucket plan, its pipeline's cut and schedule) put to the model's
//! simulations, beside the thesis's closed forms on the same inputs. The caller measures
//! (a [`NetworkProfile`], a probed [`Link`]) and says how the strategy cuts the network;
//! everything from there to the prediction is here.

use std::ops::Range;

use stratlab_strategy_spec::{Infeasible, PartitionError, ShardUnit, Straggler, Strategy, StrategyKind};

use crate::closed_forms::{thesis_data_parallel_s, thesis_gpipe_comm_s, thesis_gpipe_compute_s};
use crate::data_parallel::{data_parallel_step, StageWork};
use crate::memory::WorkerMemory;
use crate::pipeline::{simulate, Pipeline, PipelineStep, SimulationError, StageCost};
use crate::profile::{curve, value_at, NetworkProfile};
use crate::sharded_data_parallel::{sharded_step, ShardCollectives};
use crate::{AllReduce, CollectiveCurve, Link, MeasuredCollectives, StepBreakdown};
use stratlab_strategy_spec::OptimizerFootprint;

/// One trial to predict: the strategy and its workers, the per-worker batch, the network's
/// profile (holding every stage at [`Strategy::stage_samples`] of the batch) and, for a
/// pipeline, its cut; for multi-worker strategies, the link between workers; and what the
/// trial's workers hold beside the network and share: the optimizer's state, the
/// loader's batches, threads and cores.
pub struct StepQuestion<'a> {
    /// The strategy with its parameters.
    pub strategy: &'a Strategy,
    /// Workers of the trial.
    pub workers: usize,
    /// Per-worker (per-pipeline) batch.
    pub batch: usize,
    /// The network's profile on the trial's device and threads.
    pub profile: &'a NetworkProfile,
    /// For a pipeline, the network stages each of its stages holds, as the strategy cuts
    /// them (`stratlab_strategies::pipeline_cuts`), or why it cannot; `None` otherwise.
    pub cuts: Option<Result<Vec<Range<usize>>, PartitionError>>,
    /// Bytes of one sample as the data loader holds it (its input and its label).
    pub sample_bytes: f64,
    /// The link between workers, where known.
    pub link: Option<&'a Link>,
    /// The collectives' times against size over that link, where the probe measured them
    /// (with the cores busy, where the workers share them, as a step's buckets find them).
    pub collectives: Option<&'a MeasuredCollectives>,
    /// What the optimizer keeps per weight (SGD with momentum 1 state, without 0; Adam 2)
    /// and allocates while it updates one.
    pub optimizer: OptimizerFootprint,
    /// Batches the data loader prefetches.
    pub prefetch: usize,
    /// libtorch threads of each worker.
    pub threads: usize,
    /// Cores the workers share.
    pub cores: usize,
    /// Where the workers share a machine and talk through its kernel (loopback, veth): the
    /// bytes per second one core copies through it, the loopback probe's bandwidth. Each
    /// byte between workers costs that core time at the sender and again at the receiver,
    /// taken from compute when the workers' threads fill the cores. `None` where
    /// transfers do not run on the workers' cores (a cluster's devices and NICs).
    pub host_copy_bandwidth: Option<f64>,
    /// Ranks whose forwards and backwards are slowed, and by how much (a suite's
    /// `straggler` axis): synchronous replicas are paced by the slowest, a pipeline by its
    /// slowed stages.
    pub straggler: Option<&'a Straggler>,
}

/// Why the model, the thesis's forms or the memory have no answer for a trial.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unpredictable {
    /// The thesis has closed forms for single, data parallelism and the flushed pipelines.
    #[error("the thesis has no closed form for it")]
    NoClosedForm,
    /// A pipeline's prediction asked of a strategy that does not pipeline.
    #[error("not a pipeline")]
    NotAPipeline,
    /// A pipeline's prediction asked without the cut of its network.
    #[error("the pipeline's cut of the network was not given")]
    NoCuts,
    /// Multi-worker strategies need the link between the workers.
    #[error("needs a link: give --probe <a stratlab probe run>")]
    NoLink,
    /// The strategy cannot run on these workers as configured.
    #[error(transparent)]
    Infeasible(#[from] Infeasible),
    /// The balance cannot cut the network into the pipeline's stages.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// The schedule cannot be simulated.
    #[error(transparent)]
    Simulation(#[from] SimulationError),
    /// The profile was taken where the allocator does not count bytes.
    #[error("the profile has no memory counts (the device's allocator cannot count)")]
    NoMemoryCounts,
}

/// A trial predicted two ways, and its memory, or why there is none.
pub struct StepPrediction {
    /// The performance model: the strategy's own structure simulated, the step split.
    pub model: Result<StepBreakdown, Unpredictable>,
    /// The thesis's closed forms on the same profile and link: the baseline.
    pub thesis_s: Result<f64, Unpredictable>,
    /// Peak memory of the fullest worker.
    pub memory: Result<WorkerMemory, Unpredictable>,
    /// How much slower compute runs because the workers' threads outnumber the cores
    /// (1 when they do not).
    pub core_sharing: f64,
    /// A pipeline's simulated step, pass by pass, as the model's step rests on it (the
    /// predicted timeline); `None` for other strategies and where the model has no step.
    pub pipeline: Option<PipelineStep>,
}

impl StepPrediction {
    /// The model's seconds per step.
    pub fn model_s(&self) -> Result<f64, Unpredictable> {
        self.model.as_ref().map(|step| step.step_s).map_err(Clone::clone)
    }
}

impl<'a> StepQuestion<'a> {
    /// The model's and the thesis's step, and the memory. A pipeline is partitioned once,
    /// as the strategy partitions it (a `time` balance profiles the network again, as the
    /// strategy does). Where the workers' threads outnumber the cores, they share them in
    /// proportion to how busy each is: the step is predicted again with compute slowed by
    /// the demand on the cores (one fixed-point step: the slowed step makes each worker's
    /// share of busy time smaller again only where communication or bubbles are large).
    pub fn predict(&self) -> StepPrediction {
        let partition = self.strategy.schedule().map(|_| self.partition());
        let uncontended = self.model(partition.as_ref(), 1.0);
        let core_sharing = match &uncontended {
            Ok((step, _)) => self.core_sharing(step, partition.as_ref().and_then(|partition| partition.as_ref().ok())),
            Err(_) => 1.0,
        };
        let (model, pipeline) = match core_sharing > 1.0 {
            true => self.model(partition.as_ref(), core_sharing),
            false => uncontended,
        }
        .map_or_else(|why| (Err(why), None), |(step, pipeline)| (Ok(step), pipeline));
        let thesis_s = match (self.strategy.kind(), &partition) {
            (StrategyKind::Single, _) => Ok(self.single_s()),
            (StrategyKind::DataParallel, _) => self.thesis_data_parallel_s(),
            (StrategyKind::ModelParallel | StrategyKind::Gpipe | StrategyKind::OneFOneB, Some(partition)) => {
                partition.clone().and_then(|ranges| self.thesis_pipeline_s(&ranges))
            }
            _ => Err(Unpredictable::NoClosedForm),
        };
        let memory = match &partition {
            Some(partition) => partition.clone().and_then(|ranges| self.pipeline_memory(&ranges)),
            None => self.replica_memory(),
        };
        StepPrediction { model, thesis_s, memory, core_sharing, pipeline }
    }

    /// The step with every compute cost multiplied by `slowdown`, and a pipeline's
    /// simulated step behind it.
    fn model(
        &self,
        partition: Option<&Result<Vec<Range<usize>>, Unpredictable>>,
        slowdown: f64,
    ) -> Result<(StepBreakdown, Option<PipelineStep>), Unpredictable> {
        if let (Some(_), Some(partition)) = (self.strategy.schedule(), partition) {
            let step = partition.clone().and_then(|ranges| self.pipeline(&ranges, slowdown))?;
            return Ok((step.breakdown(), Some(step)));
        }
        let step = match (self.strategy.kind(), partition) {
            (StrategyKind::Single, _) => {
                let step_s = self.single_s() * slowdown;
                let optimizer_s = self.profile.optimizer_s * slowdown;
                Ok(StepBreakdown {
                    step_s,
                    compute_s: step_s - optimizer_s,
                    exposed_comm_s: 0.0,
                    bubble_s: 0.0,
                    optimizer_s,
                })
            }
            (StrategyKind::DataParallel, _) => self.data_parallel(slowdown),
            (StrategyKind::ParameterServer, _) => self.parameter_server(slowdown),
            (StrategyKind::ShardedDataParallel, _) => self.sharded(slowdown),
            (_, _) => Err(Unpredictable::NotAPipeline),
        }?;
        Ok((step, None))
    }

    /// The demand on the cores over their number (at least 1): every computing worker's
    /// threads times the share of the step it computes, summed, and the core time the step's transfers
    /// take where the host copies them.
    fn core_sharing(&self, step: &StepBreakdown, partition: Option<&Vec<Range<usize>>>) -> f64 {
        if step.step_s <= 0.0 || self.cores == 0 {
            return 1.0;
        }
        let busy = (step.compute_s + step.optimizer_s) / step.step_s;
        // A dedicated parameter server computes nothing: it waits for messages, updates
        // and sends (its share is the transfers' copying below).
        let computing = match self.strategy.kind() {
            StrategyKind::ParameterServer => self.strategy.server_placement().training_ranks(self.workers),
            _ => self.workers,
        };
        let compute = (computing * self.threads) as f64 * busy.min(1.0);
        let copying = match self.host_copy_bandwidth {
            Some(bandwidth) if bandwidth > 0.0 => 2.0 * self.bytes_between_workers(partition) / bandwidth / step.step_s,
            _ => 0.0,
        };
        ((compute + copying) / self.cores as f64).max(1.0)
    }

    /// Bytes sent from one worker to another in a step, over all workers: data
    /// parallelism's ring all-reduce (each worker sends 2(W−1)/W of the gradients), the
    /// parameter server's pushes and pulls, a pipeline's activations and their gradients
    /// at every cut for every micro-batch, and hybrid's per-stage all-reduce.
    fn bytes_between_workers(&self, partition: Option<&Vec<Range<usize>>>) -> f64 {
        let gradients = self.gradient_bytes(0..self.profile.stages.len()) as f64;
        let ring = |bytes: f64, ranks: usize| 2.0 * ranks.saturating_sub(1) as f64 * bytes;
        match (self.strategy.kind(), partition) {
            (StrategyKind::DataParallel, _) => ring(gradients, self.workers),
            (StrategyKind::ShardedDataParallel, _) => {
                // Gloo's reduce-scatter is an all-reduce; every gather sends N − 1 chunks
                // from each rank, once per step at ZeRO-1 and 2, twice at ZeRO-3.
                let gathers = if self.strategy.zero_stage().unwrap_or_default().shards_weights() { 2.0 } else { 1.0 };
                ring(gradients, self.workers) + gathers * self.workers.saturating_sub(1) as f64 * gradients
            }
            (StrategyKind::ParameterServer, _) => 2.0 * self.remote_workers() as f64 * gradients,
            (StrategyKind::Single, _) | (_, None) => 0.0,
            (_, Some(partition)) => {
                let replicas = self.strategy.pipeline_shape(self.workers).map_or(1, |(_, replicas)| replicas);
                let samples = self.strategy.stage_samples(self.batch) as u64;
                let micro_batches = self
                    .strategy
                    .schedule()
                    .map_or(1, |schedule| schedule.micro_batches(self.strategy.micro_batches()));
                let cuts: f64 = partition[..partition.len().saturating_sub(1)]
                    .iter()
                    .map(|range| (self.profile.stages[range.end - 1].output_bytes_per_sample * samples) as f64)
                    .sum();
                let all_reduce: f64 =
                    partition.iter().map(|range| ring(self.gradient_bytes(range.clone()) as f64, replicas)).sum();
                replicas as f64 * 2.0 * micro_batches as f64 * cuts + all_reduce
            }
        }
    }

    fn link(&self) -> Result<Link, Unpredictable> {
        self.link.copied().ok_or(Unpredictable::NoLink)
    }

    /// Which network stages each pipeline stage holds: the strategy's cut, for a pipeline
    /// its workers can form.
    fn partition(&self) -> Result<Vec<Range<usize>>, Unpredictable> {
        self.strategy.pipeline_shape(self.workers)?;
        Ok(self.cuts.clone().ok_or(Unpredictable::NoCuts)??)
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

    /// One worker's step at the batch: the training steps measured at it where the profile
    /// has them (the trials' own statistic), else the stages summed.
    fn single_s(&self) -> f64 {
        value_at(&self.profile.training_step_s, self.batch).unwrap_or_else(|| self.sequential_s(self.batch))
    }

    /// Bytes of all the network's gradients.
    fn gradient_bytes(&self, stages: Range<usize>) -> u64 {
        self.profile.stages[stages].iter().flat_map(|stage| &stage.parameter_bytes).sum()
    }

    /// Bytes of the largest weight tensor of network stages `stages`.
    fn largest_parameter_bytes(&self, stages: Range<usize>) -> f64 {
        self.profile.stages[stages].iter().flat_map(|stage| &stage.parameter_bytes).max().copied().unwrap_or(0) as f64
    }

    /// How much slower compute at `samples` samples runs while `concurrent` of the
    /// machine's workers compute at once (the profile's measured contention; 1 without).
    fn contention(&self, concurrent: f64, samples: usize) -> f64 {
        let concurrent = concurrent.min(self.workers as f64);
        self.profile.contention.as_ref().map_or(1.0, |contention| contention.slowdown(concurrent, samples))
    }

    /// Every network stage's passes at the worker's batch, slowed by `slowdown`.
    fn stage_works(&self, slowdown: f64) -> Vec<StageWork> {
        (0..self.profile.stages.len())
            .map(|stage| {
                let (forward_s, backward_s) = self.stage_s(stage, self.batch);
                StageWork {
                    forward_s: forward_s * slowdown,
                    backward_s: backward_s * slowdown,
                    parameter_bytes: self.profile.stages[stage].parameter_bytes.clone(),
                }
            })
            .collect()
    }

    /// Every data-parallel worker computes at once.
    fn data_parallel(&self, slowdown: f64) -> Result<StepBreakdown, Unpredictable> {
        let slowdown = slowdown * self.contention(self.workers as f64, self.batch);
        let stages = self.stage_works(slowdown * self.slowest_rank());
        let fusion = self.strategy.fusion_threshold_bytes();
        let optimizer_s = self.profile.optimizer_s * slowdown;
        let link = self.link()?;
        let all_reduce = AllReduce { link: &link, measured: self.measured_all_reduce() };
        let copy_s = self.profile.whole_model_copy_s * slowdown;
        Ok(data_parallel_step(&stages, self.workers, &all_reduce, fusion, optimizer_s, copy_s).breakdown())
    }

    /// Every sharded worker computes at once, as data parallelism's do.
    fn sharded(&self, slowdown: f64) -> Result<StepBreakdown, Unpredictable> {
        let slowdown = slowdown * self.contention(self.workers as f64, self.batch);
        let stages = self.stage_works(slowdown * self.slowest_rank());
        let link = self.link()?;
        let collectives = ShardCollectives {
            all_reduce: AllReduce { link: &link, measured: self.measured_all_reduce() },
            all_gather: self.collectives.and_then(|measured| measured.all_gather.as_ref()),
            reduce_scatter: self.collectives.and_then(|measured| measured.reduce_scatter.as_ref()),
            link: &link,
            reduce_scatter_is_all_reduce: self.shares_a_host(),
        };
        let stage = self.strategy.zero_stage().unwrap_or_default();
        let optimizer_s = self.profile.optimizer_s * slowdown;
        let copy_s = self.profile.whole_model_copy_s * slowdown;
        Ok(sharded_step(&stages, &self.shard_units(), self.workers, stage, &collectives, optimizer_s, copy_s)
            .breakdown())
    }

    /// The network stages each sharding unit holds: one unit per stage, or at ZeRO-3 with
    /// `shard_unit: network` the whole network.
    pub(super) fn shard_units(&self) -> Vec<Range<usize>> {
        let stages = self.profile.stages.len();
        let stage = self.strategy.zero_stage().unwrap_or_default();
        match (stage.shards_weights(), self.strategy.shard_unit()) {
            (true, ShardUnit::Network) => std::iter::once(0..stages).collect(),
            _ => (0..stages).map(|stage| stage..stage + 1).collect(),
        }
    }

    /// Whether the workers share one host (its cores copy their transfers): there the
    /// collectives are Gloo's.
    fn shares_a_host(&self) -> bool {
        self.host_copy_bandwidth.is_some() || self.measured_all_reduce().is_some()
    }

    /// The all-reduce the probe measured, where it did.
    fn measured_all_reduce(&self) -> Option<&'a CollectiveCurve> {
        self.collectives.and_then(|measured| measured.all_reduce.as_ref())
    }

    /// Eq. 5.1. Its sequential time of the global batch is, as the thesis took it, the
    /// sequential run at the per-worker batch scaled by the samples: compute proportional
    /// to the batch is the form's own assumption (thesis table 6.1 shows where it fails),
    /// and profiling every global batch cost half of the stage profiles' time (ResNet-18
    /// at 128 samples, 1 thread: 79 of 157 s of the validation suite's stage timing).
    fn thesis_data_parallel_s(&self) -> Result<f64, Unpredictable> {
        Ok(thesis_data_parallel_s(
            self.workers as f64 * self.sequential_s(self.batch),
            self.workers,
            self.gradient_bytes(0..self.profile.stages.len()) as f64,
            self.strategy.fusion_threshold_bytes() as f64,
            &self.link()?,
        ))
    }

    /// Each part's costs summed from the profile, and the schedule simulated. Where the
    /// profile measured contention, each rank's passes are slowed by how many workers
    /// compute beside it in the simulated schedule (its ranks times hybrid's replicas);
    /// slower passes overlap differently, so that is simulated again, a few rounds.
    fn pipeline(&self, partition: &[Range<usize>], slowdown: f64) -> Result<PipelineStep, Unpredictable> {
        let schedule = self.strategy.schedule().ok_or(Unpredictable::NotAPipeline)?;
        let (_, replicas) = self.strategy.pipeline_shape(self.workers)?;
        let samples = self.strategy.stage_samples(self.batch);
        let costs = self.stage_costs(partition, samples);
        let simulate_slowed = |slowdowns: &[f64]| -> Result<PipelineStep, Unpredictable> {
            let slowed: Vec<StageCost> =
                costs.iter().zip(slowdowns).map(|(cost, &slowdown)| cost.slowed(slowdown)).collect();
            let pipeline = Pipeline {
                schedule,
                micro_batches: self.strategy.micro_batches(),
                checkpoint: self.strategy.checkpoint(),
                stages: &slowed,
                link: self.link()?,
                replicas,
                stage_replicas: self.strategy.stage_replicas(),
                measured_all_reduce: self.measured_all_reduce(),
            };
            Ok(simulate(&pipeline)?)
        };
        let layout = self.strategy.stage_replicas();
        let ranks = layout.map_or(costs.len() / schedule.virtual_stages(), |layout| layout.workers());
        let stragglers = self.slowed_ranks(ranks);
        // Every stage computes on its rank, at its rank's pace; a replicated stage at its
        // slowest replica's.
        let per_stage = |per_rank: &[f64]| -> Vec<f64> {
            (0..costs.len())
                .map(|stage| match layout {
                    Some(layout) => layout.ranks_of(stage).iter().map(|&rank| per_rank[rank]).fold(0.0, f64::max),
                    None => per_rank[schedule.rank_of_stage(stage, ranks)],
                })
                .collect()
        };
        let first: Vec<f64> = stragglers.iter().map(|straggler| slowdown * straggler).collect();
        let mut step = simulate_slowed(&per_stage(&first))?;
        if self.profile.contention.is_some() {
            for _ in 0..CONTENTION_ROUNDS {
                let slowdowns: Vec<f64> = step
                    .concurrency()
                    .iter()
                    .zip(&stragglers)
                    .map(|(&ranks, straggler)| slowdown * straggler * self.contention(ranks * replicas as f64, samples))
                    .collect();
                step = simulate_slowed(&per_stage(&slowdowns))?;
            }
        }
        Ok(step)
    }

    /// How much slower the slowest rank computes: what synchronous replicas wait for every
    /// step (a jittered factor's mean is its slowdown). 1 without a straggler among them.
    fn slowest_rank(&self) -> f64 {
        match self.straggler {
            Some(straggler) if straggler.fits(self.workers).is_ok() => straggler.slowdown,
            _ => 1.0,
        }
    }

    /// Each of a pipeline's `ranks` slowed by its slowest replica (world rank r is rank
    /// r mod ranks of its pipeline), 1 where none is slowed.
    fn slowed_ranks(&self, ranks: usize) -> Vec<f64> {
        let mut slowed = vec![1.0; ranks];
        if let Some(straggler) = self.straggler {
            for &rank in &straggler.ranks {
                if let Some(slot) = slowed.get_mut(rank as usize % ranks.max(1)) {
                    *slot = f64::max(*slot, straggler.slowdown);
                }
            }
        }
        slowed
    }

    /// Eq. 6.1 + 6.2: the sequential time of the micro-batches, and the largest activation
    /// crossing the strategy's own cuts.
    fn thesis_pipeline_s(&self, partition: &[Range<usize>]) -> Result<f64, Unpredictable> {
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

/// Rounds of simulating a pipeline again with the contention its last simulation implies:
/// slower passes overlap a little differently, and each round moves the step less.
const CONTENTION_ROUNDS: usize = 2;

mod memory;
mod server;
mod stage_costs;
#[cfg(test)]
mod tests;
