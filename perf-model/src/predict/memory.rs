//! The peak memory of a trial's fullest worker, from the profile's counted bytes (or, for
//! a single cell, its training steps' measured peak) and the strategy's structure.

use std::ops::Range;

use stratlab_strategy_spec::{Schedule, ServerPlacement, StrategyKind};

use super::{StepQuestion, Unpredictable};
use crate::memory::{max_in_flight, WorkerMemory, WorkerShape};
use crate::pipeline::SimulationError;
use crate::profile::{curve, value_at};

impl StepQuestion<'_> {
    /// What every worker holds beside the network: its optimizer state, the loader's
    /// batches (prefetched, being built, in use) of the trial's batch, whole even for a
    /// pipeline's stage (its loader reads the batch before cutting micro-batches).
    fn worker_basics(&self) -> WorkerShape {
        WorkerShape {
            optimizer_states: self.optimizer.states,
            loader_bytes: (self.prefetch + 2) as f64 * self.batch as f64 * self.sample_bytes,
            in_flight: 1,
            ..WorkerShape::default()
        }
    }

    /// What a forward over network stages `stages` at `samples` samples keeps, and the
    /// high-water of its forward and backward: over the stages, what the stages up to each
    /// keep plus that stage's temporaries.
    fn activations(&self, stages: Range<usize>, samples: usize) -> Result<(f64, f64), Unpredictable> {
        let profiled = &self.profile.stages[stages];
        if profiled.iter().any(|stage| stage.kept_bytes.is_empty()) {
            return Err(Unpredictable::NoMemoryCounts);
        }
        let (mut kept, mut pass_peak) = (0.0, 0.0f64);
        for stage in profiled {
            kept += curve(&stage.kept_bytes).at(samples);
            pass_peak = pass_peak.max(kept + curve(&stage.transient_bytes).at(samples));
        }
        Ok((kept, pass_peak))
    }

    /// A whole replica per worker (single, data-parallel, parameter server): the network at
    /// the worker's batch, and the flattened buffers its communication goes through.
    pub(super) fn replica_memory(&self) -> Result<WorkerMemory, Unpredictable> {
        if self.strategy.kind() == StrategyKind::Single {
            if let Some(peak_bytes) = value_at(&self.profile.training_step_peak_bytes, self.batch) {
                return Ok(self.measured_single_memory(peak_bytes));
            }
        }
        let network = 0..self.profile.stages.len();
        let parameter_bytes = self.gradient_bytes(network.clone()) as f64;
        let (kept_bytes, pass_peak_bytes) = self.activations(network.clone(), self.batch)?;
        if self.strategy.kind() == StrategyKind::ShardedDataParallel {
            return Ok(self.sharded_memory(parameter_bytes, pass_peak_bytes));
        }
        // Whole-model message buffers. Data parallelism: every bucket's flat copy stays
        // until the last all-reduce is waited for. A parameter server's ranks keep theirs
        // from round to round: one each for its gradients out and weights in, and the
        // server one more per remote worker, its gradients received: a colocated server
        // trains beside W of them.
        let server = self.strategy.server_placement();
        let comm_buffers = match self.strategy.kind() {
            StrategyKind::DataParallel if self.workers > 1 => 1,
            StrategyKind::ParameterServer if server == ServerPlacement::Colocated => self.workers.max(1),
            StrategyKind::ParameterServer => 1,
            _ => 0,
        };
        let worker = WorkerShape {
            parameter_bytes,
            kept_bytes,
            pass_peak_bytes,
            update_peak_bytes: self.update_peak_bytes(network.clone()),
            comm_buffer_bytes: comm_buffers as f64 * parameter_bytes,
            ..self.worker_basics()
        }
        .peak();
        if self.strategy.kind() != StrategyKind::ParameterServer || server == ServerPlacement::Colocated {
            return Ok(worker);
        }
        // A dedicated server trains on nothing but holds W buffers (W - 1 workers' and its
        // own); it is the fullest rank where they outweigh a worker's passes and batches.
        let dedicated = WorkerShape {
            parameter_bytes,
            optimizer_states: self.optimizer.states,
            update_peak_bytes: self.update_peak_bytes(0..self.profile.stages.len()),
            comm_buffer_bytes: self.workers.max(1) as f64 * parameter_bytes,
            ..WorkerShape::default()
        }
        .peak();
        Ok(if dedicated.total_bytes() > worker.total_bytes() { dedicated } else { worker })
    }

    /// What the update of network stages `stages` allocates at once: its temporaries on
    /// their largest weight tensor.
    fn update_peak_bytes(&self, stages: Range<usize>) -> f64 {
        self.optimizer.temporaries as f64 * self.largest_parameter_bytes(stages)
    }

    /// A sharded worker's peak, the larger of two moments. In a pass: its 1/N chunk of the
    /// weights (beside the whole weights at ZeRO-1 and 2; beside one gathered unit at
    /// ZeRO-3), the gradient chunk and whole gradients (all of them at ZeRO-1, kept to the
    /// step's end; from ZeRO-2 the unit in its backward), the optimizer state of the chunk,
    /// the pass's activations, and the two largest units' gradients packed for
    /// reduce-scatters in flight, with, on Gloo at ZeRO-1, the copy of the running one that
    /// Gloo all-reduces. In the update: the same without activations, gathered units or
    /// packed gradients, and with the update's temporaries on its largest chunk.
    fn sharded_memory(&self, parameter_bytes: f64, pass_peak_bytes: f64) -> WorkerMemory {
        let stage = self.strategy.zero_stage().unwrap_or_default();
        let workers = self.workers.max(1) as f64;
        let chunk = parameter_bytes / workers;
        let mut units: Vec<f64> = self.shard_units().into_iter().map(|unit| self.gradient_bytes(unit) as f64).collect();
        units.sort_by(|a, b| b.total_cmp(a));
        let largest_unit = units.first().copied().unwrap_or(0.0);
        let in_flight: f64 = units.iter().take(2).sum();
        let basics = self.worker_basics();
        let optimizer_bytes = basics.optimizer_states as f64 * chunk;
        let kept_weights = chunk + if stage.shards_weights() { 0.0 } else { parameter_bytes };
        let kept_gradients = chunk + if stage.shards_gradients() { 0.0 } else { parameter_bytes };
        // Gloo reduce-scatters by all-reducing a copy of the packed input and keeping this
        // rank's chunk of it: a unit-sized buffer while the collective runs. From ZeRO-2 it
        // takes the place of the unit's gradient, freed once packed (counted below); at
        // ZeRO-1 the gradients stay, so it comes on top. NCCL reduce-scatters in place.
        let gloo_copy = match self.shares_a_host() && !stage.shards_gradients() {
            true => largest_unit,
            false => 0.0,
        };
        let pass = WorkerMemory {
            weights_bytes: kept_weights + if stage.shards_weights() { largest_unit } else { 0.0 },
            gradients_bytes: kept_gradients + if stage.shards_gradients() { largest_unit } else { 0.0 },
            optimizer_bytes,
            activations_bytes: 0.0,
            transient_bytes: pass_peak_bytes,
            buffers_bytes: basics.loader_bytes + in_flight + gloo_copy,
        };
        let update = WorkerMemory {
            weights_bytes: kept_weights,
            gradients_bytes: kept_gradients,
            optimizer_bytes,
            activations_bytes: 0.0,
            transient_bytes: self.optimizer.temporaries as f64 * largest_unit / workers,
            buffers_bytes: basics.loader_bytes,
        };
        if update.total_bytes() > pass.total_bytes() {
            update
        } else {
            pass
        }
    }

    /// One worker's peak as its training steps measured it: what the weights, gradients,
    /// optimizer state and the loader's batches account for, and the rest, the passes'.
    fn measured_single_memory(&self, peak_bytes: f64) -> WorkerMemory {
        let parameter_bytes = self.gradient_bytes(0..self.profile.stages.len()) as f64;
        let basics = self.worker_basics();
        let optimizer_bytes = basics.optimizer_states as f64 * parameter_bytes;
        let held = 2.0 * parameter_bytes + optimizer_bytes + basics.loader_bytes;
        WorkerMemory {
            weights_bytes: parameter_bytes,
            gradients_bytes: parameter_bytes,
            optimizer_bytes,
            activations_bytes: 0.0,
            transient_bytes: (peak_bytes - held).max(0.0),
            buffers_bytes: basics.loader_bytes,
        }
    }

    /// The fullest stage worker of a pipeline: its part of the network (its stages, when
    /// interleaved), the micro-batches its schedule keeps in flight (inputs only where it
    /// recomputes), PipeDream's stashed weights, the received activations. A replicated
    /// stage's worker keeps its share of the micro-batches in flight.
    pub(super) fn pipeline_memory(&self, partition: &[Range<usize>]) -> Result<WorkerMemory, Unpredictable> {
        let schedule = self.strategy.schedule().ok_or(Unpredictable::NotAPipeline)?;
        let m = self.strategy.micro_batches();
        let samples = self.strategy.stage_samples(self.batch);
        let layout = self.strategy.stage_replicas();
        let ranks = layout.map_or(partition.len() / schedule.virtual_stages(), |layout| layout.workers());
        let (_, replicas) = self.strategy.pipeline_shape(self.workers)?;
        let mut fullest: Option<WorkerMemory> = None;
        for rank in 0..ranks {
            let stages = match layout {
                Some(layout) => vec![layout.place_of(rank).0],
                None => schedule.stages_of_rank(rank, ranks),
            };
            let held: Vec<Range<usize>> = stages.iter().map(|&stage| partition[stage].clone()).collect();
            // Per micro-batch in flight, the mean over the rank's stages (one, unless
            // interleaved); a pass's own high-water, the largest.
            let (mut kept_bytes, mut pass_peak_bytes, mut received_bytes) = (0.0, 0.0f64, 0.0);
            let (mut parameter_bytes, mut update_peak_bytes) = (0.0, 0.0f64);
            for range in &held {
                let (kept, pass_peak) = self.activations(range.clone(), samples)?;
                kept_bytes += kept / held.len() as f64;
                pass_peak_bytes = pass_peak_bytes.max(pass_peak);
                received_bytes += match range.start {
                    0 => 0.0,
                    first => (self.profile.stages[first - 1].output_bytes_per_sample * samples as u64) as f64,
                } / held.len() as f64;
                parameter_bytes += self.gradient_bytes(range.clone()) as f64;
                update_peak_bytes = update_peak_bytes.max(self.update_peak_bytes(range.clone()));
            }
            let (in_flight, stage_replicas) = match layout {
                Some(layout) => {
                    let (stage, replica) = layout.place_of(rank);
                    (layout.in_flight(stage, replica, m), layout.replicas_of(stage))
                }
                None => (max_in_flight(schedule, rank, ranks, m), 1),
            };
            let input_only = match schedule {
                Schedule::PipeDream if rank + 1 < ranks => in_flight,
                Schedule::PipeDream => 0,
                _ => {
                    let recomputed = (0..m).filter(|&id| self.strategy.checkpoint().recomputes(id, m)).count();
                    (recomputed * held.len()).min(in_flight)
                }
            };
            let shape = WorkerShape {
                parameter_bytes,
                update_peak_bytes,
                // Replicas all-reduce the stage's gradients flattened.
                comm_buffer_bytes: if replicas * stage_replicas > 1 { parameter_bytes } else { 0.0 },
                kept_bytes,
                pass_peak_bytes,
                received_bytes,
                in_flight,
                input_only,
                stashed_weight_copies: if schedule == Schedule::PipeDream { input_only } else { 0 },
                ..self.worker_basics()
            };
            let peak = shape.peak();
            if fullest.is_none_or(|fullest| peak.total_bytes() > fullest.total_bytes()) {
                fullest = Some(peak);
            }
        }
        fullest.ok_or(Unpredictable::Simulation(SimulationError::NoStages))
    }
}
