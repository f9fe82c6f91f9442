//! One pipeline rank: its stages, its schedule's actions, and the sends and receives that
//! connect it to its neighbours.
//!
//! Ranks are laid out replica-major: rank = replica × stages + stage, so a pipeline's
//! neighbours are adjacent ranks; an interleaved rank holds several pipeline stages, and
//! its last stage's successor is on the first rank again. Replicated stages are laid out
//! stage-major instead, and a micro-batch's neighbour is the replica that runs it
//! ([`StageReplicas`]). Activations travel forward and
//! gradients backward with asynchronous c10d send/receive, tagged by the receiving stage
//! and micro-batch: sends complete in the background
//! while the next action computes, and the receive an action needs is posted one action
//! ahead, so it is usually in flight (or done) before the stage waits for it.
//!
//! Loss scaling: the last stage scales micro-batch *i*'s mean loss by `nᵢ / n`, so the
//! accumulated gradients equal those of the whole batch's mean loss (single-device
//! training on the same batch). Batch norm therefore normalises per micro-batch (as
//! torchgpipe does by default, without its deferred statistics), which is why
//! equivalence holds only for networks without batch norm.

pub(super) mod build;
mod hand_over;
mod passes;
mod split_passes;

use std::collections::BTreeMap;

use stratlab_comm::{ProcessGroup, ReduceOp};
use stratlab_networks::Network;
use tch::nn::{self, ModuleT};
use tch::{Device, Kind, Tensor};

use super::layout::Layout;
use super::links::{activation_tag, gradient_tag, Endpoint, PendingRecv, Sends};
use crate::loss_scale::{self, LossScaler, ScaledStep};
use crate::memory;
use crate::traffic::Traffic;
use stratlab_results::PipelineStageInfo;
use stratlab_strategy_spec::{
    micro_batch_sizes, pipedream_actions, Action, Checkpoint, Pass, Schedule, StageReplicas, StrategyKind,
};

use super::partition::StagePlan;
use crate::timeline::{EventKind, Timeline};
use crate::train_loop::StepOutput;
use crate::{Precision, PrecisionOps, TrainError};

/// What a stage holds for one micro-batch between its forward and its backward.
#[derive(Default)]
pub(super) struct MicroBatch {
    /// The stage's input: the images' slice on the first stage, else the received
    /// activation as a leaf that collects its gradient.
    input: Option<Tensor>,
    /// The output with its graph, unless the forward is recomputed in backward.
    output: Option<Tensor>,
    /// The scaled loss with its graph (last stage, not recomputed).
    loss: Option<Tensor>,
    /// Weights the forward ran with, when an update comes before the backward (PipeDream).
    stash: Option<Vec<Tensor>>,
    /// The micro-batch's labels (last stage), for a recomputed loss.
    labels: Option<Tensor>,
    /// A split backward's weights' half, waiting for its `W` (zero-bubble).
    weights: Option<crate::split_backward::WeightGradients>,
    /// The output's gradient, kept from `I` to `W` on the first stage, whose `W` is its
    /// whole backward (it has no input gradient to send).
    output_gradient: Option<Tensor>,
    pub(super) activation: Option<Incoming>,
    pub(super) gradient: Option<Incoming>,
}

/// What a stage gets from a neighbouring stage: a receive posted to another rank, or, where
/// this rank holds that stage too (zero-bubble's V turns on the last rank), the tensor
/// handed over in place.
pub(super) enum Incoming {
    Posted(PendingRecv),
    HandedOver(Tensor),
}

/// Which way a tensor travels between stages.
#[derive(Clone, Copy)]
pub(super) enum Carried {
    /// A forward's output, to the next stage.
    Activation,
    /// A backward's input gradient, to the stage before.
    Gradient,
}

/// One pipeline stage a rank holds: its index in the pipeline and its range of the network.
pub(super) struct Chunk {
    pub(super) stage: usize,
    pub(super) network: Network,
}

/// One rank's share of a pipeline and what it needs to run its schedule. Built by
/// [`StageWorker::new`]; the sibling modules (sends and receives, evaluation) read only
/// where it sits and what it computes in.
pub struct StageWorker<'a> {
    pub(super) world: &'a ProcessGroup,
    /// This stage's replicas (hybrid's, or a replicated stage's workers), for the
    /// gradient all-reduce.
    pub(super) replica_group: Option<ProcessGroup>,
    pub(super) layout: Layout,
    /// Workers per stage where stages are replicated (micro-batches round robin over a
    /// stage's workers, their gradients summed at the flush, or averaged each round under
    /// PipeDream); `None` for one worker per stage.
    stage_replicas: Option<StageReplicas>,
    schedule: Schedule,
    micro_batches: usize,
    checkpoint: Checkpoint,
    /// Per-sample output shape of every network stage (batch axis 1), inferred once: what
    /// crosses each possible cut, so a receive buffer is shaped without re-analysing.
    stage_output_dims: Vec<Vec<i64>>,
    plan: StagePlan,
    /// The pipeline stages this rank holds, first to last (one, unless interleaved).
    chunks: Vec<Chunk>,
    optimizer: nn::Optimizer,
    /// float16's loss scale; the stages agree on each step's verdict ([`crate::loss_scale`]).
    loss_scaler: Option<LossScaler>,
    params: Vec<Tensor>,
    pub(super) device: Device,
    precision: Precision,
    /// The element type of activations and gradients, and so of every receive buffer.
    pub(super) kind: Kind,
    /// Steps run so far, and how many are warm-up (not counted in the memory peak).
    steps_done: usize,
    warmup_steps: usize,
    peak_activation_bytes: Option<u64>,
    /// Micro-batches whose forward ran and whose backward has not, by pipeline stage and
    /// global id (step × m + index): empty between steps except under PipeDream, which
    /// never flushes.
    in_flight: BTreeMap<(usize, usize), MicroBatch>,
    /// Sends not known to be complete, carried across steps (see [`Sends`]).
    sends: Sends,
}

/// The batch a step trains on, cut into micro-batches.
struct StepBatch<'t> {
    images: &'t Tensor,
    labels: &'t Tensor,
    /// Global id of the step's first micro-batch.
    first_id: usize,
    sizes: Vec<usize>,
    offsets: Vec<i64>,
}

impl StepBatch<'_> {
    fn index(&self, id: usize) -> usize {
        id - self.first_id
    }

    fn slice(&self, tensor: &Tensor, id: usize) -> Tensor {
        let index = self.index(id);
        tensor.narrow(0, self.offsets[index], self.sizes[index] as i64)
    }

    fn batch(&self) -> usize {
        self.sizes.iter().sum()
    }
}

/// What the last stage adds up over a step.
struct StepSums {
    loss: Tensor,
    correct: Tensor,
}

impl<'a> StageWorker<'a> {
    /// This rank's first stage's range of the network.
    pub(super) fn model(&self) -> &Network {
        &self.chunks[0].network
    }

    /// The stages this rank holds, first to last.
    pub(super) fn held_stages(&self) -> impl Iterator<Item = usize> + '_ {
        self.chunks.iter().map(|chunk| chunk.stage)
    }

    /// Stages of the whole pipeline (`v` per rank when interleaved).
    pub(super) fn pipeline_stages(&self) -> usize {
        self.plan.ranges.len()
    }

    /// Whether `stage` is the pipeline's last (it computes the loss).
    pub(super) fn is_last_stage(&self, stage: usize) -> bool {
        stage + 1 == self.pipeline_stages()
    }

    /// The world rank that runs micro-batch `id` (a global id) on pipeline stage `stage`
    /// of this rank's pipeline: the stage's rank, or its replica `id mod r` where stages
    /// are replicated.
    pub(super) fn rank_of_stage(&self, stage: usize, id: usize) -> usize {
        match &self.stage_replicas {
            Some(layout) => layout.rank_for(stage, id),
            None => self.layout.rank_of(self.schedule.rank_of_stage(stage, self.layout.stages)),
        }
    }

    /// The shape of network stage `index`'s output for `samples` samples.
    fn boundary_shape(&self, index: usize, samples: usize) -> Vec<i64> {
        std::iter::once(samples as i64).chain(self.stage_output_dims[index][1..].iter().copied()).collect()
    }

    /// The input shape of pipeline stage `stage` (what the stage before sends) for
    /// `samples` samples.
    pub(super) fn input_shape(&self, stage: usize, samples: usize) -> Vec<i64> {
        self.boundary_shape(self.plan.ranges[stage].start - 1, samples)
    }

    /// The output shape of pipeline stage `stage` (and of the gradient it receives) for
    /// `samples` samples.
    pub(super) fn output_shape(&self, stage: usize, samples: usize) -> Vec<i64> {
        self.boundary_shape(self.plan.ranges[stage].end - 1, samples)
    }

    pub(super) fn comm_device(&self) -> Device {
        self.endpoint().comm_device()
    }

    /// How this rank reaches the others.
    pub(super) fn endpoint(&self) -> Endpoint<'a> {
        let loss_holder = self.schedule.rank_of_stage(self.pipeline_stages() - 1, self.layout.stages);
        Endpoint { world: self.world, layout: self.layout, kind: self.kind, device: self.device, loss_holder }
    }

    /// Posts the receive `action` needs, if it needs one and it is not posted yet; every
    /// micro-batch has `size` samples.
    fn prefetch(&mut self, action: Action, size: usize) -> Result<(), TrainError> {
        let (stage, id) = (action.stage, action.micro_batch);
        match action.pass {
            Pass::Forward if stage > 0 && !self.in_flight.contains_key(&(stage, id)) => {
                let from = self.rank_of_stage(stage - 1, id);
                if from != self.world.rank() {
                    let shape = self.input_shape(stage, size);
                    let pending = self.endpoint().post_recv(&shape, from, activation_tag(stage, id))?;
                    self.in_flight.entry((stage, id)).or_default().activation = Some(Incoming::Posted(pending));
                }
            }
            Pass::Backward | Pass::InputBackward if !self.is_last_stage(stage) => {
                let posted = self.in_flight.get(&(stage, id)).is_some_and(|slot| slot.gradient.is_some());
                let from = self.rank_of_stage(stage + 1, id);
                if !posted && from != self.world.rank() {
                    let shape = self.output_shape(stage, size);
                    let pending = self.endpoint().post_recv(&shape, from, gradient_tag(stage, id))?;
                    self.in_flight.entry((stage, id)).or_default().gradient = Some(Incoming::Posted(pending));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Pipeline stage `stage`'s forward in the trial's precision; what it sends on, in the
    /// messages' type.
    pub(super) fn forward_local(&self, stage: usize, input: &Tensor, train: bool) -> Result<Tensor, TrainError> {
        let network = &self.chunks.iter().find(|chunk| chunk.stage == stage).expect("a stage this rank holds").network;
        let _pass = crate::memory::in_pass(EventKind::Forward, Some(stage));
        let output = self.precision.autocast(self.device, || network.forward_t(input, train))?;
        Ok(if self.is_last_stage(stage) { output } else { output.to_kind(self.kind) })
    }

    /// The last stage's loss for micro-batch `mb`: its mean cross-entropy scaled to its
    /// share of the batch (PipeDream updates per micro-batch, so it keeps the plain mean).
    fn scaled_loss(&self, logits: &Tensor, labels: &Tensor, size: usize, batch: usize) -> Tensor {
        let loss = logits.cross_entropy_for_logits(labels);
        if self.schedule.updates_per_micro_batch() {
            loss
        } else {
            loss * (size as f64 / batch as f64)
        }
    }

    /// Trains one batch with the schedule; returns the batch's loss and correct count (the
    /// last stage computes them and sends them to the rest of its pipeline).
    pub(super) fn run_step(
        &mut self,
        images: &Tensor,
        labels: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<StepOutput, TrainError> {
        self.optimizer.set_lr(lr);
        if !self.schedule.updates_per_micro_batch() {
            self.optimizer.zero_grad();
        }
        let layout = self.layout;
        let batch = labels.size()[0] as usize;
        // The plan refused more micro-batches than samples, and training batches are full.
        let m = self.micro_batches;
        let sizes = micro_batch_sizes(batch, m);
        let offsets = sizes.iter().scan(0i64, |at, &n| Some(std::mem::replace(at, *at + n as i64))).collect();
        let step = StepBatch { images, labels, first_id: self.steps_done * m, sizes, offsets };
        let actions: Vec<Action> = match (self.schedule, &self.stage_replicas) {
            (Schedule::PipeDream, Some(replicas)) => {
                replicas.pipedream_actions(layout.stage, self.stage_replica(), m, self.steps_done)
            }
            (Schedule::PipeDream, None) => pipedream_actions(layout.stage, layout.stages, m, self.steps_done),
            (schedule, replicated) => {
                let own = match replicated {
                    Some(replicas) => replicas.actions(layout.stage, self.stage_replica(), m),
                    None => schedule.actions(layout.stage, layout.stages, m),
                };
                own.into_iter().map(|action| action.offset(step.first_id)).collect()
            }
        };
        let mut traffic = Traffic::default();
        let mut scaling = None;
        // Replicated last stages each hold part of the loss: every rank sums them instead.
        let holds_loss = self.held_stages().any(|stage| self.is_last_stage(stage));
        let loss_recv = match holds_loss || self.stage_replicas.is_some() {
            true => None,
            false => Some(self.endpoint().post_loss_recv()?),
        };
        let mut sums = StepSums {
            loss: Tensor::zeros([], (Kind::Float, self.device)),
            correct: Tensor::zeros([], (Kind::Int64, self.device)),
        };
        // The step's peak counts from here (the train loop reset it just before, but a stage
        // measures its own step whatever calls it).
        memory::reset_peak(self.device);
        let baseline = memory::allocated_bytes(self.device);
        // Every micro-batch of a run has the same size but possibly the last: drop_last keeps
        // batches equal, and a PipeDream backward of the previous step has its size too.
        let size_of = |id: usize| step.sizes[id % m];

        self.sends.begin_step(self.steps_done);
        for (index, &action) in actions.iter().enumerate() {
            for &ahead in actions[index..].iter().take(2) {
                self.prefetch(ahead, size_of(ahead.micro_batch))?;
            }
            timeline.set_micro_batch(Some(action.micro_batch % m));
            timeline.set_pipeline_stage(Some(action.stage));
            match action.pass {
                Pass::Forward => {
                    let recompute = self.keeps_only_input(action.micro_batch, m);
                    self.forward(action, recompute, &step, &mut sums, timeline, &mut traffic)?;
                }
                Pass::Backward => {
                    self.backward(action, Some(&step), m, timeline, &mut traffic)?;
                }
                Pass::InputBackward => self.backward_input(action, m, timeline, &mut traffic)?,
                Pass::WeightBackward => self.backward_weight(action, timeline)?,
            }
            // Completed sends free their buffers as the schedule goes on.
            self.sends.settle(false, timeline, &mut traffic)?;
        }
        timeline.set_micro_batch(None);
        timeline.set_pipeline_stage(None);
        if self.schedule.updates_per_micro_batch() {
            self.sends.settle_earlier_steps(timeline, &mut traffic)?;
        } else {
            // Synchronous schedules flush: every receive of this step is matched in it.
            self.sends.settle(true, timeline, &mut traffic)?;
            if let Some(group) = &self.replica_group {
                // Hybrid's replicas trained batches of their own (mean); a replicated
                // stage's workers shared one batch's micro-batches, each gradient already
                // scaled to its share of the batch (sum).
                let op = if self.stage_replicas.is_some() { ReduceOp::Sum } else { ReduceOp::Average };
                self.endpoint().all_reduce_gradients(group, &self.params, op, timeline, &mut traffic)?;
            }
            scaling = self.step_optimizer(timeline)?;
        }
        let (loss, correct) = match self.stage_replicas {
            Some(_) => self.sum_loss(sums.loss, sums.correct, timeline)?,
            None => self.endpoint().share_loss(sums.loss, sums.correct, loss_recv, timeline, &mut traffic)?,
        };

        if self.steps_done >= self.warmup_steps {
            if let (Some(base), Some(top)) = (baseline, memory::peak_bytes(self.device)) {
                let grown = top.saturating_sub(base);
                self.peak_activation_bytes = Some(self.peak_activation_bytes.map_or(grown, |p| p.max(grown)));
            }
        }
        self.steps_done += 1;
        Ok(StepOutput { loss, correct, comm_bytes: traffic.bytes, comm_s: traffic.seconds, scaling })
    }

    /// The step's update, once every micro-batch's gradient has accumulated. Under loss
    /// scaling each stage holds only its own gradients, so its verdict goes through an
    /// all-reduce (max) over every stage and replica: one overflow skips every update.
    fn step_optimizer(&mut self, timeline: &mut Timeline) -> Result<Option<ScaledStep>, TrainError> {
        let (world, comm) = (self.world, self.comm_device());
        let agree = |found_inf: Tensor| -> Result<Tensor, TrainError> {
            let mut verdict = found_inf.to_device(comm);
            world.all_reduce(&mut verdict, ReduceOp::Max)?;
            Ok(verdict)
        };
        let optimizer = &mut self.optimizer;
        timeline.span(EventKind::Optimizer, "optimizer step", || {
            loss_scale::step(self.loss_scaler.as_mut(), &self.params, agree, || optimizer.step())
        })
    }

    /// Which of its stage's workers this rank is (0 unless stages are replicated).
    fn stage_replica(&self) -> usize {
        self.stage_replicas.as_ref().map_or(0, |layout| layout.place_of(self.world.rank()).1)
    }

    /// The batch's loss and correct count summed over every rank (only last stages hold
    /// any): a replicated last stage's workers each computed their micro-batches' share.
    fn sum_loss(&self, loss: Tensor, correct: Tensor, timeline: &mut Timeline) -> Result<(Tensor, Tensor), TrainError> {
        let metrics = Tensor::stack(&[loss.to_kind(Kind::Float), correct.to_kind(Kind::Float)], 0);
        let mut totals = metrics.to_device(self.comm_device());
        let start = timeline.now();
        self.world.all_reduce(&mut totals, ReduceOp::Sum)?;
        // The time is the wait for the slowest rank's step (8 bytes move), so idle, as a
        // received loss's wait is.
        timeline.record(EventKind::Idle, "waiting for the loss (all-reduce)", start, timeline.now(), None);
        let totals = totals.to_device(self.device);
        Ok((totals.get(0), totals.get(1).to_kind(Kind::Int64)))
    }

    /// Whether micro-batch `id`'s forward keeps only its input (recomputing the rest in
    /// backward): checkpointing says so, or PipeDream updates the weights before its
    /// backward, which must then run on the weights this forward used (stashed).
    fn keeps_only_input(&self, id: usize, m: usize) -> bool {
        match self.schedule {
            Schedule::PipeDream => self.layout.stages - self.layout.stage > 1,
            _ => self.checkpoint.recomputes(id % m, m),
        }
    }

    /// Ends training: PipeDream's micro-batches still in flight run their backwards (and
    /// updates), and every send completes.
    pub(super) fn drain(&mut self, timeline: &mut Timeline) -> Result<(), TrainError> {
        let mut traffic = Traffic::default();
        let m = self.schedule.micro_batches(self.micro_batches);
        // The drained work belongs to no trained batch: it is recorded after the last step.
        timeline.set_step(self.steps_done as u64);
        let pending: Vec<(usize, usize)> =
            self.in_flight.iter().filter(|(_, slot)| slot.input.is_some()).map(|(&key, _)| key).collect();
        for (stage, id) in pending {
            let size = self.in_flight[&(stage, id)].input.as_ref().map_or(1, |input| input.size()[0] as usize);
            let action = Action::backward(stage, id);
            self.prefetch(action, size)?;
            timeline.set_micro_batch(Some(id % m));
            timeline.set_pipeline_stage(Some(stage));
            self.backward(action, None, m, timeline, &mut traffic)?;
        }
        timeline.set_micro_batch(None);
        timeline.set_pipeline_stage(None);
        self.sends.settle(true, timeline, &mut traffic)
    }

    /// What this rank reports about its stage, as the `pipeline_stages` table takes it: its
    /// place, the plan every rank ran and the memory its activations took. `strategy`
    /// names the strategy that ran it. A rank holding several stages (interleaved) reports
    /// them together: from its first stage's first layer, all their layers and costs.
    pub(super) fn stage_info(&self, strategy: StrategyKind) -> PipelineStageInfo {
        let Layout { stage, stages, replica, .. } = self.layout;
        let held: Vec<usize> = self.held_stages().collect();
        let layer_count: usize = held.iter().map(|&held| self.plan.ranges[held].len()).sum();
        let names: Vec<String> = self.chunks.iter().map(|chunk| chunk.network.stage_names().join("+")).collect();
        PipelineStageInfo {
            rank: self.world.rank() as u32,
            replica: replica as u32,
            stage: stage as u32,
            stage_replica: self.stage_replicas.as_ref().map(|_| self.stage_replica() as u32),
            stages: stages as u32,
            virtual_stages: (self.chunks.len() > 1).then_some(self.chunks.len() as u32),
            schedule: strategy,
            micro_batches: self.schedule.micro_batches(self.micro_batches) as u32,
            balance: self.plan.balance.to_string(),
            layers: names.join(" | "),
            first_layer: self.plan.ranges[held[0]].start as u32,
            layer_count: layer_count as u32,
            parameters: self.params.iter().map(|p| p.numel() as u64).sum(),
            predicted_cost: held.iter().map(|&held| self.plan.costs[held]).sum(),
            cost_unit: self.plan.unit.clone(),
            predicted_imbalance: self.plan.predicted_imbalance(),
            peak_activation_bytes: self.peak_activation_bytes,
        }
    }
}
