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

use std::collections::VecDeque;

use stratlab_comm::{Completed, ProcessGroup, ReduceOp, Work};
use stratlab_networks::{Network, NetworkSpec};
use tch::nn::{self, ModuleT};
use tch::{Device, Kind, Tensor};

use super::memory;
use super::schedule::{micro_batch_sizes, Action, Schedule};
use super::{Checkpoint, PipelineStageReport, StagePlan};
use crate::autograd::backward_with_grad;
use crate::evaluate::correct_on_device;
use crate::timeline::{EventKind, Timeline};
use crate::train_loop::StepOutput;
use crate::TrainError;

/// Where a rank sits: its pipeline stage and data-parallel replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Position in the pipeline.
    pub stage: usize,
    /// Stages per pipeline (pp).
    pub stages: usize,
    /// Replica of the pipeline.
    pub replica: usize,
    /// Replicas (dp).
    pub replicas: usize,
}

impl Layout {
    /// The layout of `rank` in a world of `stages × replicas` ranks.
    pub fn of(rank: usize, stages: usize, replicas: usize) -> Layout {
        Layout { stage: rank % stages, stages, replica: rank / stages, replicas }
    }

    pub(super) fn is_first(&self) -> bool {
        self.stage == 0
    }

    pub(super) fn is_last(&self) -> bool {
        self.stage + 1 == self.stages
    }

    /// World rank of stage `stage` of this rank's pipeline.
    pub(super) fn rank_of(&self, stage: usize) -> usize {
        self.replica * self.stages + stage
    }
}

// Tags keep a pipeline's messages apart: activations and gradients per micro-batch, the
// step's loss, and evaluation batches.
fn activation_tag(micro_batch: usize) -> u32 {
    2 * micro_batch as u32
}
fn gradient_tag(micro_batch: usize) -> u32 {
    2 * micro_batch as u32 + 1
}
const LOSS_TAG: u32 = 1 << 20;
pub(super) const EVAL_TAG: u32 = 1 << 21;

/// A receive in flight into its buffer.
struct PendingRecv {
    buffer: Tensor,
    work: Work,
}

/// What a stage holds for one micro-batch between its forward and its backward.
#[derive(Default)]
struct MicroBatch {
    /// The stage's input: the images' slice on the first stage, else the received
    /// activation as a leaf that collects its gradient.
    input: Option<Tensor>,
    /// The output with its graph, unless the forward is recomputed in backward.
    output: Option<Tensor>,
    /// The scaled loss with its graph (last stage, not recomputed).
    loss: Option<Tensor>,
    /// Weights the forward ran with, when an update comes before the backward (PipeDream).
    stash: Option<Vec<Tensor>>,
    activation: Option<PendingRecv>,
    gradient: Option<PendingRecv>,
}

/// Communication totals of a step.
#[derive(Default)]
struct Traffic {
    bytes: u64,
    seconds: f64,
}

impl Traffic {
    fn add(&mut self, done: &Completed) {
        self.bytes += done.bytes;
        self.seconds += (done.completed_ns - done.launched_ns).max(0) as f64 * 1e-9;
    }
}

/// One rank's share of a pipeline and what it needs to run its schedule.
pub struct StageWorker<'a> {
    pub(super) world: &'a ProcessGroup,
    /// This stage's replicas (hybrid), for the gradient all-reduce.
    pub(super) replica_group: Option<ProcessGroup>,
    pub(super) layout: Layout,
    pub(super) schedule: Schedule,
    pub(super) micro_batches: usize,
    pub(super) checkpoint: Checkpoint,
    pub(super) spec: &'a NetworkSpec,
    pub(super) plan: StagePlan,
    pub(super) local: Network,
    pub(super) optimizer: nn::Optimizer,
    pub(super) params: Vec<Tensor>,
    pub(super) device: Device,
    /// Steps run so far, and how many are warm-up (not counted in the memory peak).
    pub(super) steps_done: usize,
    pub(super) warmup_steps: usize,
    pub(super) peak_activation_bytes: Option<u64>,
}

impl StageWorker<'_> {
    /// The input shape of this stage for `samples` samples.
    pub(super) fn input_shape(&self, samples: usize) -> Result<Vec<i64>, TrainError> {
        let first = self.plan.ranges[self.layout.stage].start;
        let analysis = self.spec.analyze(samples as i64)?;
        Ok(analysis.stages[first - 1].output_shape.clone())
    }

    pub(super) fn comm_device(&self) -> Device {
        self.world.tensor_device(self.device)
    }

    fn post_recv(&self, shape: &[i64], src: usize, tag: u32) -> Result<PendingRecv, TrainError> {
        let mut buffer = Tensor::empty(shape, (Kind::Float, self.comm_device()));
        let work = self.world.recv_async(&mut buffer, src, tag)?;
        Ok(PendingRecv { buffer, work })
    }

    /// Posts the receive `action` needs, if it needs one and it is not posted yet.
    fn prefetch(&self, action: Action, slots: &mut [MicroBatch], sizes: &[usize]) -> Result<(), TrainError> {
        let layout = self.layout;
        match action {
            Action::Forward(mb) if !layout.is_first() && slots[mb].activation.is_none() && slots[mb].input.is_none() => {
                let shape = self.input_shape(sizes[mb])?;
                slots[mb].activation =
                    Some(self.post_recv(&shape, layout.rank_of(layout.stage - 1), activation_tag(mb))?);
            }
            Action::Backward(mb) if !layout.is_last() && slots[mb].gradient.is_none() => {
                let first_next = self.plan.ranges[layout.stage + 1].start;
                let shape = self.spec.analyze(sizes[mb] as i64)?.stages[first_next - 1].output_shape.clone();
                slots[mb].gradient = Some(self.post_recv(&shape, layout.rank_of(layout.stage + 1), gradient_tag(mb))?);
            }
            _ => {}
        }
        Ok(())
    }

    /// Waits for a receive, recording the wait (idle) and the transfer.
    fn complete_recv(
        &self,
        pending: PendingRecv,
        what: &str,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<Tensor, TrainError> {
        let waited = timeline.now();
        let done = pending.work.wait()?;
        timeline.record(EventKind::Idle, format!("waiting for {what}"), waited, timeline.now(), None);
        timeline.communication(EventKind::Recv, what, &done);
        traffic.add(&done);
        Ok(pending.buffer.to_device(self.device))
    }

    fn send(&self, tensor: &Tensor, dst: usize, tag: u32, sends: &mut VecDeque<(Work, Tensor, String)>, what: String) -> Result<(), TrainError> {
        let buffer = tensor.detach().to_device(self.comm_device()).contiguous();
        let work = self.world.send_async(&buffer, dst, tag)?;
        sends.push_back((work, buffer, what));
        Ok(())
    }

    fn forward_local(&self, input: &Tensor) -> Tensor {
        self.local.forward_t(input, true)
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
        self.optimizer.zero_grad();
        let layout = self.layout;
        let batch = labels.size()[0] as usize;
        let m = self.schedule.micro_batches(self.micro_batches).min(batch);
        let sizes = micro_batch_sizes(batch, m);
        let offsets: Vec<i64> = sizes.iter().scan(0i64, |at, &n| { let start = *at; *at += n as i64; Some(start) }).collect();
        let actions = self.schedule.actions(layout.stage, layout.stages, m);
        let mut slots: Vec<MicroBatch> = (0..m).map(|_| MicroBatch::default()).collect();
        let mut sends = VecDeque::new();
        let mut traffic = Traffic::default();
        let loss_recv = match layout.is_last() {
            true => None,
            false => Some(self.post_recv(&[2], layout.rank_of(layout.stages - 1), LOSS_TAG)?),
        };
        let mut loss_total = Tensor::zeros([], (Kind::Float, self.device));
        let mut correct_total = Tensor::zeros([], (Kind::Int64, self.device));
        let baseline = memory::allocated_bytes(self.device);
        let mut peak = baseline;

        for (index, &action) in actions.iter().enumerate() {
            for &ahead in actions[index..].iter().take(2) {
                self.prefetch(ahead, &mut slots, &sizes)?;
            }
            let mb = action.micro_batch();
            timeline.set_micro_batch(Some(mb));
            match action {
                Action::Forward(_) => {
                    let input = match slots[mb].activation.take() {
                        Some(pending) => self
                            .complete_recv(pending, &format!("activation F{mb}"), timeline, &mut traffic)?
                            .set_requires_grad(true),
                        None => images.narrow(0, offsets[mb], sizes[mb] as i64),
                    };
                    // PipeDream: an update lands between this forward and its backward,
                    // so the backward must see the weights this forward used.
                    let updates_before_backward = self.schedule.updates_per_micro_batch()
                        && actions[index..].iter().take_while(|&&a| a != Action::Backward(mb)).any(|a| matches!(a, Action::Backward(_)));
                    if updates_before_backward {
                        slots[mb].stash = Some(tch::no_grad(|| self.params.iter().map(|p| p.detach().copy()).collect()));
                    }
                    let recompute = updates_before_backward || self.checkpoint.recomputes(mb, m);
                    let start = timeline.now();
                    let output = if recompute {
                        tch::no_grad(|| self.forward_local(&input))
                    } else {
                        self.forward_local(&input)
                    };
                    timeline.record(EventKind::Forward, self.layer_name(), start, timeline.now(), None);
                    if layout.is_last() {
                        let labels = labels.narrow(0, offsets[mb], sizes[mb] as i64);
                        let loss = self.scaled_loss(&output, &labels, sizes[mb], batch);
                        let _ = tch::no_grad(|| {
                            loss_total += loss.detach() * if self.schedule.updates_per_micro_batch() { sizes[mb] as f64 / batch as f64 } else { 1.0 };
                            correct_total += correct_on_device(&output, &labels);
                        });
                        if !recompute {
                            slots[mb].loss = Some(loss);
                        }
                    } else {
                        self.send(&output, layout.rank_of(layout.stage + 1), activation_tag(mb), &mut sends, format!("activation F{mb}"))?;
                        if !recompute {
                            slots[mb].output = Some(output);
                        }
                    }
                    slots[mb].input = Some(input);
                }
                Action::Backward(_) => {
                    let slot = &mut slots[mb];
                    let input = slot.input.take().expect("a micro-batch's forward runs before its backward");
                    let stash = slot.stash.take();
                    let (mut output, mut loss) = (slot.output.take(), slot.loss.take());
                    let latest = match &stash {
                        Some(stashed) => Some(swap_weights(&self.params, stashed)),
                        None => None,
                    };
                    if output.is_none() && loss.is_none() {
                        let start = timeline.now();
                        let recomputed = self.forward_local(&input);
                        timeline.record(EventKind::Recompute, self.layer_name(), start, timeline.now(), None);
                        if layout.is_last() {
                            let labels = labels.narrow(0, offsets[mb], sizes[mb] as i64);
                            loss = Some(self.scaled_loss(&recomputed, &labels, sizes[mb], batch));
                        } else {
                            output = Some(recomputed);
                        }
                    }
                    let gradient = match slots[mb].gradient.take() {
                        Some(pending) => Some(self.complete_recv(pending, &format!("gradient B{mb}"), timeline, &mut traffic)?),
                        None => None,
                    };
                    let start = timeline.now();
                    match (loss, output, gradient) {
                        (Some(loss), _, _) => loss.f_backward()?,
                        (None, Some(output), Some(gradient)) => backward_with_grad(&output, &gradient)?,
                        _ => unreachable!("a stage before the last receives its output's gradient"),
                    }
                    timeline.record(EventKind::Backward, self.layer_name(), start, timeline.now(), None);
                    if !layout.is_first() {
                        self.send(&input.grad(), layout.rank_of(layout.stage - 1), gradient_tag(mb), &mut sends, format!("gradient B{mb}"))?;
                    }
                    if let Some(latest) = latest {
                        swap_weights(&self.params, &latest);
                    }
                    if self.schedule.updates_per_micro_batch() {
                        timeline.span(EventKind::Optimizer, "sgd", || self.optimizer.step());
                        self.optimizer.zero_grad();
                    }
                }
            }
            if let (Some(now), Some(top)) = (memory::allocated_bytes(self.device), peak.as_mut()) {
                *top = (*top).max(now);
            }
            // Completed sends free their buffers as the schedule goes on.
            while sends.front().is_some_and(|(work, _, _)| work.is_completed()) {
                let (work, _, what) = sends.pop_front().expect("checked");
                let done = work.wait()?;
                timeline.communication(EventKind::Send, what, &done);
                traffic.add(&done);
            }
        }
        timeline.set_micro_batch(None);
        for (work, _, what) in sends {
            let done = work.wait()?;
            timeline.communication(EventKind::Send, what, &done);
            traffic.add(&done);
        }
        if let Some(group) = &self.replica_group {
            self.all_reduce_gradients(group, timeline, &mut traffic)?;
        }
        if !self.schedule.updates_per_micro_batch() {
            timeline.span(EventKind::Optimizer, "sgd", || self.optimizer.step());
        }
        let (loss, correct) = self.share_loss(loss_total, correct_total, loss_recv, timeline, &mut traffic)?;

        if self.steps_done >= self.warmup_steps {
            if let (Some(base), Some(top)) = (baseline, peak) {
                let grown = top.saturating_sub(base);
                self.peak_activation_bytes = Some(self.peak_activation_bytes.map_or(grown, |p| p.max(grown)));
            }
        }
        self.steps_done += 1;
        Ok(StepOutput { loss, correct, comm_bytes: traffic.bytes, comm_s: traffic.seconds })
    }

    /// Averages this stage's gradients over its replicas, in one fused buffer.
    fn all_reduce_gradients(&self, group: &ProcessGroup, timeline: &mut Timeline, traffic: &mut Traffic) -> Result<(), TrainError> {
        let grads: Vec<Tensor> = self.params.iter().map(|p| p.grad().view([-1])).collect();
        if grads.is_empty() {
            return Ok(());
        }
        let mut flat = tch::no_grad(|| Tensor::cat(&grads, 0)).to_device(group.tensor_device(self.device));
        let done = group.all_reduce_async(&mut flat, ReduceOp::Average)?.wait()?;
        timeline.communication(EventKind::AllReduce, format!("stage {} replicas", self.layout.stage), &done);
        traffic.add(&done);
        let flat = flat.to_device(self.device);
        let mut offset = 0;
        tch::no_grad(|| {
            for param in &self.params {
                let mut grad = param.grad();
                let numel = grad.numel() as i64;
                grad.copy_(&flat.narrow(0, offset, numel).view_as(&grad));
                offset += numel;
            }
        });
        Ok(())
    }

    /// The last stage sends the batch's loss and correct count to the other stages of its
    /// pipeline, so every rank records the same metrics.
    fn share_loss(
        &self,
        loss: Tensor,
        correct: Tensor,
        pending: Option<PendingRecv>,
        timeline: &mut Timeline,
        traffic: &mut Traffic,
    ) -> Result<(Tensor, Tensor), TrainError> {
        let layout = self.layout;
        match pending {
            None => {
                let metrics = Tensor::stack(&[loss.to_kind(Kind::Float), correct.to_kind(Kind::Float)], 0);
                let buffer = metrics.to_device(self.comm_device());
                let works: Vec<Work> = (0..layout.stages - 1)
                    .map(|stage| self.world.send_async(&buffer, layout.rank_of(stage), LOSS_TAG))
                    .collect::<Result<_, _>>()?;
                for work in works {
                    traffic.add(&work.wait()?);
                }
                Ok((loss, correct))
            }
            Some(pending) => {
                let metrics = self.complete_recv(pending, "loss", timeline, traffic)?;
                Ok((metrics.get(0), metrics.get(1).to_kind(Kind::Int64)))
            }
        }
    }

    /// This rank's report.
    pub(super) fn report(&self) -> PipelineStageReport {
        PipelineStageReport {
            stage: self.layout.stage,
            stages: self.layout.stages,
            replica: self.layout.replica,
            replicas: self.layout.replicas,
            micro_batches: self.schedule.micro_batches(self.micro_batches),
            plan: self.plan.clone(),
            layers: self.local.stage_names().iter().map(|name| name.to_string()).collect(),
            parameters: self.params.iter().map(|p| p.numel() as u64).sum(),
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
