//! One pipeline rank: its stages, its schedule's actions, and the sends and receives that
//! connect it to its neighbours.
//!
//! Ranks are laid out replica-major: rank = replica × stages + stage, so a pipeline's
//! neighbours are adjacent ranks. Activations travel forward and gradients backward with
//! asynchronous c10d send/receive, tagged by micro-batch: sends complete in the background
//! while the next action computes, and the receive an action needs is posted one action
//! ahead, so it is usually in flight (or done) before the stage waits for it.
//!
//! Loss scaling: the last stage scales micro-batch *i*'s mean loss by `nᵢ / n`, so the
//! accumulated gradients equal those of the whole batch's mean loss (single-device
//! training on the same batch). Batch norm therefore normalises per micro-batch (as
//! torchgpipe does by default, without its deferred statistics), which is why
//! equivalence holds only for networks without batch norm.

pub(super) mod build;

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
use stratlab_strategy_spec::{micro_batch_sizes, pipedream_actions, Action, Checkpoint, Schedule, StrategyKind};

use super::partition::StagePlan;
use crate::autograd::backward_with_grad;
use crate::evaluate::correct_on_device;
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
    pub(super) activation: Option<PendingRecv>,
    pub(super) gradient: Option<PendingRecv>,
}

/// One rank's share of a pipeline and what it needs to run its schedule. Built by
/// [`StageWorker::new`]; the sibling modules (sends and receives, evaluation) read only
/// where it sits and what it computes in.
pub struct StageWorker<'a> {
    pub(super) world: &'a ProcessGroup,
    /// This stage's replicas (hybrid), for the gradient all-reduce.
    replica_group: Option<ProcessGroup>,
    pub(super) layout: Layout,
    schedule: Schedule,
    micro_batches: usize,
    checkpoint: Checkpoint,
    /// Per-sample output shape of every network stage (batch axis 1), inferred once: what
    /// crosses each possible cut, so a receive buffer is shaped without re-analysing.
    stage_output_dims: Vec<Vec<i64>>,
    plan: StagePlan,
    local: Network,
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
    /// Micro-batches whose forward ran and whose backward has not, by global id (step × m
    /// + index): empty between steps except under PipeDream, which never flushes.
    in_flight: BTreeMap<usize, MicroBatch>,
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
    /// This stage's range of the network.
    pub(super) fn model(&self) -> &Network {
        &self.local
    }

    /// The shape of network stage `index`'s output for `samples` samples.
    fn boundary_shape(&self, index: usize, samples: usize) -> Vec<i64> {
        std::iter::once(samples as i64).chain(self.stage_output_dims[index][1..].iter().copied()).collect()
    }

    /// The input shape of this stage (what the previous stage sends) for `samples` samples.
    pub(super) fn input_shape(&self, samples: usize) -> Vec<i64> {
        self.boundary_shape(self.plan.ranges[self.layout.stage].start - 1, samples)
    }

    /// The output shape of this stage (and of the gradient it receives) for `samples` samples.
    pub(super) fn output_shape(&self, samples: usize) -> Vec<i64> {
        self.boundary_shape(self.plan.ranges[self.layout.stage].end - 1, samples)
    }

    pub(super) fn comm_device(&self) -> Device {
        self.endpoint().comm_device()
    }

    /// How this rank reaches the others.
    pub(super) fn endpoint(&self) -> Endpoint<'a> {
        Endpoint { world: self.world, layout: self.layout, kind: self.kind, device: self.device }
    }

    /// Posts the receive `action` needs, if it needs one and it is not posted yet; every
    /// micro-batch has `size` samples.
    fn prefetch(&mut self, action: Action, size: usize) -> Result<(), TrainError> {
        let layout = self.layout;
        match action {
            Action::Forward(id) if !layout.is_first() && !self.in_flight.contains_key(&id) => {
                let shape = self.input_shape(size);
                let pending =
                    self.endpoint().post_recv(&shape, layout.rank_of(layout.stage - 1), activation_tag(id))?;
                self.in_flight.entry(id).or_default().activation = Some(pending);
            }
            Action::Backward(id) if !layout.is_last() => {
                let posted = self.in_flight.get(&id).is_some_and(|slot| slot.gradient.is_some());
                if !posted {
                    let shape = self.output_shape(size);
                    let pending =
                        self.endpoint().post_recv(&shape, layout.rank_of(layout.stage + 1), gradient_tag(id))?;
                    self.in_flight.entry(id).or_default().gradient = Some(pending);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// This stage's forward in the trial's precision; what it sends on, in the messages'
    /// type.
    pub(super) fn forward_local(&self, input: &Tensor, train: bool) -> Result<Tensor, TrainError> {
        let _pass = crate::memory::in_pass(EventKind::Forward, Some(self.layout.stage));
        let output = self.precision.autocast(self.device, || self.local.forward_t(input, train))?;
        Ok(if self.layout.is_last() { output } else { output.to_kind(self.kind) })
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

    fn layer_name(&self) -> String {
        format!("stage {}", self.layout.stage)
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
        let actions: Vec<Action> = match self.schedule {
            Schedule::PipeDream => pipedream_actions(layout.stage, layout.stages, m, self.steps_done),
            schedule => schedule
                .actions(layout.stage, layout.stages, m)
                .into_iter()
                .map(|action| match action {
                    Action::Forward(mb) => Action::Forward(step.first_id + mb),
                    Action::Backward(mb) => Action::Backward(step.first_id + mb),
                })
                .collect(),
        };
        let mut traffic = Traffic::default();
        let mut scaling = None;
        let loss_recv = match layout.is_last() {
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
                let id = match ahead {
                    Action::Forward(id) | Action::Backward(id) => id,
                };
                self.prefetch(ahead, size_of(id))?;
            }
            timeline.set_micro_batch(Some(action.micro_batch() % m));
            match action {
                Action::Forward(id) => {
                    let recompute = self.keeps_only_input(id, m);
                    self.forward(id, recompute, &step, &mut sums, timeline, &mut traffic)?;
                }
                Action::Backward(id) => {
                    self.backward(id, Some(&step), m, timeline, &mut traffic)?;
                }
            }
            // Completed sends free their buffers as the schedule goes on.
            self.sends.settle(false, timeline, &mut traffic)?;
        }
        timeline.set_micro_batch(None);
        if self.schedule.updates_per_micro_batch() {
            self.sends.settle_earlier_steps(timeline, &mut traffic)?;
        } else {
            // Synchronous schedules flush: every receive of this step is matched in it.
            self.sends.settle(true, timeline, &mut traffic)?;
            if let Some(group) = &self.replica_group {
                self.endpoint().all_reduce_gradients(group, &self.params, timeline, &mut traffic)?;
            }
            scaling = self.step_optimizer(timeline)?;
        }
        let (loss, correct) = self.endpoint().share_loss(sums.loss, sums.correct, loss_recv, timeline, &mut traffic)?;

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

    /// Whether micro-batch `id`'s forward keeps only its input (recomputing the rest in
    /// backward): checkpointing says so, or PipeDream updates the weights before its
    /// backward, which must then run on the weights this forward used (stashed).
    fn keeps_only_input(&self, id: usize, m: usize) -> bool {
        match self.schedule {
            Schedule::PipeDream => self.layout.stages - self.layout.stage > 1,
            _ => self.checkpoint.recomputes(id % m, m),
        }
    }

    fn forward(
        &mut self,
        id: usize,
        keep_only_input: bool,
        step: &StepBatch<'_>,
        sums: &mut StepSums,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        let layout = self.layout;
        let mut slot = self.in_flight.remove(&id).unwrap_or_default();
        let input = match slot.activation.take() {
            Some(pending) => self
                .endpoint()
                .complete_recv(pending, &format!("activation F{}", step.index(id)), timeline, traffic)?
                .set_requires_grad(true),
            None => step.slice(step.images, id),
        };
        if keep_only_input && self.schedule.updates_per_micro_batch() {
            slot.stash = Some(tch::no_grad(|| self.params.iter().map(|p| p.detach().copy()).collect()));
        }
        let start = timeline.now();
        let output = if keep_only_input {
            tch::no_grad(|| self.forward_local(&input, true))
        } else {
            self.forward_local(&input, true)
        }?;
        timeline.record(EventKind::Forward, self.layer_name(), start, timeline.now(), None);
        if layout.is_last() {
            let labels = step.slice(step.labels, id);
            let size = step.sizes[step.index(id)];
            let loss = self.scaled_loss(&output, &labels, size, step.batch());
            // The step's loss is the batch mean whatever each micro-batch's scale.
            let share = if self.schedule.updates_per_micro_batch() { size as f64 / step.batch() as f64 } else { 1.0 };
            tch::no_grad(|| {
                sums.loss += loss.detach() * share;
                sums.correct += correct_on_device(&output, &labels);
            });
            if !keep_only_input {
                slot.loss = Some(loss);
            }
            slot.labels = Some(labels);
        } else {
            let endpoint = self.endpoint();
            self.sends.push(
                endpoint,
                &output,
                layout.rank_of(layout.stage + 1),
                activation_tag(id),
                format!("activation F{}", step.index(id)),
            )?;
            if !keep_only_input {
                slot.output = Some(output);
            }
        }
        slot.input = Some(input);
        self.in_flight.insert(id, slot);
        Ok(())
    }

    /// Backward of micro-batch `id` (of `m` per batch); PipeDream then updates.
    fn backward(
        &mut self,
        id: usize,
        step: Option<&StepBatch<'_>>,
        m: usize,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(), TrainError> {
        let layout = self.layout;
        let label = format!("B{}", id % m);
        let mut slot = self.in_flight.remove(&id).expect("a micro-batch's forward runs before its backward");
        let input = slot.input.take().expect("a micro-batch's forward runs before its backward");
        let latest = slot.stash.take().map(|stashed| swap_weights(&self.params, &stashed));
        let (mut output, mut loss) = (slot.output.take(), slot.loss.take());
        if output.is_none() && loss.is_none() {
            let start = timeline.now();
            let pass = crate::memory::in_pass(EventKind::Recompute, Some(layout.stage));
            let recomputed = self.forward_local(&input, true)?;
            drop(pass);
            timeline.record(EventKind::Recompute, self.layer_name(), start, timeline.now(), None);
            if layout.is_last() {
                let labels = slot.labels.take().expect("the last stage keeps its labels");
                let batch = step.map_or(labels.size()[0] as usize * m, StepBatch::batch);
                loss = Some(self.scaled_loss(&recomputed, &labels, labels.size()[0] as usize, batch));
            } else {
                output = Some(recomputed);
            }
        }
        let gradient = match slot.gradient.take() {
            Some(pending) => {
                Some(self.endpoint().complete_recv(pending, &format!("gradient {label}"), timeline, traffic)?)
            }
            None => None,
        };
        let start = timeline.now();
        let pass = crate::memory::in_pass(EventKind::Backward, Some(layout.stage));
        match (loss, output, gradient) {
            (Some(loss), _, _) => loss_scale::backward(self.loss_scaler.as_ref(), &loss)?,
            (None, Some(output), Some(gradient)) => backward_with_grad(&output, &gradient)?,
            _ => unreachable!("a stage before the last receives its output's gradient"),
        }
        drop(pass);
        timeline.record(EventKind::Backward, self.layer_name(), start, timeline.now(), None);
        if !layout.is_first() {
            let endpoint = self.endpoint();
            let to = layout.rank_of(layout.stage - 1);
            self.sends.push(endpoint, &input.grad(), to, gradient_tag(id), format!("gradient {label}"))?;
        }
        if let Some(latest) = latest {
            swap_weights(&self.params, &latest);
        }
        if self.schedule.updates_per_micro_batch() {
            timeline.span(EventKind::Optimizer, "optimizer step", || self.optimizer.step());
            self.optimizer.zero_grad();
        }
        Ok(())
    }

    /// Ends training: PipeDream's micro-batches still in flight run their backwards (and
    /// updates), and every send completes.
    pub(super) fn drain(&mut self, timeline: &mut Timeline) -> Result<(), TrainError> {
        let mut traffic = Traffic::default();
        let m = self.schedule.micro_batches(self.micro_batches);
        // The drained work belongs to no trained batch: it is recorded after the last step.
        timeline.set_step(self.steps_done as u64);
        let pending: Vec<usize> =
            self.in_flight.iter().filter(|(_, slot)| slot.input.is_some()).map(|(&id, _)| id).collect();
        for id in pending {
            let size = self.in_flight[&id].input.as_ref().map_or(1, |input| input.size()[0] as usize);
            self.prefetch(Action::Backward(id), size)?;
            timeline.set_micro_batch(Some(id % m));
            self.backward(id, None, m, timeline, &mut traffic)?;
        }
        timeline.set_micro_batch(None);
        self.sends.settle(true, timeline, &mut traffic)
    }

    /// What this rank reports about its stage, as the `pipeline_stages` table takes it: its
    /// place, the plan every rank ran and the memory its activations took. `strategy`
    /// names the strategy that ran it.
    pub(super) fn stage_info(&self, strategy: StrategyKind) -> PipelineStageInfo {
        let Layout { stage, stages, replica, .. } = self.layout;
        let layers = self.plan.ranges[stage].clone();
        PipelineStageInfo {
            rank: (replica * stages + stage) as u32,
            replica: replica as u32,
            stage: stage as u32,
            stages: stages as u32,
            schedule: strategy,
            micro_batches: self.schedule.micro_batches(self.micro_batches) as u32,
            balance: self.plan.balance.to_string(),
            layers: self.local.stage_names().join("+"),
            first_layer: layers.start as u32,
            layer_count: layers.len() as u32,
            parameters: self.params.iter().map(|p| p.numel() as u64).sum(),
            predicted_cost: self.plan.costs[stage],
            cost_unit: self.plan.unit.clone(),
            predicted_imbalance: self.plan.predicted_imbalance(),
            peak_activation_bytes: self.peak_activation_bytes,
        }
    }
}

/// Copies `weights` into `params` and returns the values they had.
fn swap_weights(params: &[Tensor], weights: &[Tensor]) -> Vec<Tensor> {
    tch::no_grad(|| {
        params
            .iter()
            .zip(weights)
            .map(|(param, weights)| {
                let previous = param.detach().copy();
                param.detach().copy_(weights);
                previous
            })
            .collect()
    })
}
