//! The parameter server that answers each worker on its own: the asynchronous modes
//! (`async`, `bounded`) and `sync` with backup workers. Workers speak the synchronous
//! protocol unchanged (a control message, the gradients, then the weights back); what
//! differs is when the server applies a gradient and when it answers.
//!
//! - `async` applies each gradient as its own optimizer step when it arrives and answers at
//!   once; `bounded` (k) does the same but holds the answer to a worker that has pushed more
//!   than k gradients beyond the slowest worker still training, until that one catches up.
//! - `sync` with b backup workers averages the first N − b gradients computed on the current
//!   weights into one update and answers their workers; a gradient computed on weights a
//!   round has since replaced arrives late and is dropped (counted), its worker answered
//!   with the current weights.
//!
//! Gloo completes a receive only inside `wait`, so nothing can ask it whether a message
//! has arrived. Each posted control receive is waited on by a thread of its own, which
//! reports the rank to an in-process queue ([`Inbox`]); the server reads the queue, blocking
//! when it has nothing else to do, or not when it also trains (a colocated server serves
//! between its own steps, on the same cores, so its workers wait for its step to end).

use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use stratlab_comm::{CommError, Completed, ProcessGroup};
use stratlab_datasets::Dataset;
use stratlab_results::GradientRecord;
use stratlab_strategy_spec::Consistency;
use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use super::party::{Party, TAG_CONTROL, TAG_GRADIENTS, TAG_PARAMETERS};
use crate::evaluate::evaluate_shard;
use crate::flat::{buffer_for, pack, unpack};
use crate::loss_scale;
use crate::record::EvalRecord;
use crate::timeline::{EventKind, Timeline};
use crate::TrainError;

/// Control messages as they arrive, whatever their order: one waiting thread per posted
/// receive puts its rank on the queue when the receive completes.
struct Inbox {
    sender: Sender<(usize, Result<Completed, CommError>)>,
    receiver: Receiver<(usize, Result<Completed, CommError>)>,
}

impl Inbox {
    fn new() -> Inbox {
        let (sender, receiver) = mpsc::channel();
        Inbox { sender, receiver }
    }

    /// Posts the receive of `rank`'s next control message into `control`.
    fn post(&self, group: &ProcessGroup, control: &Tensor, rank: usize) -> Result<(), TrainError> {
        let mut control = control.shallow_clone();
        let work = group.recv_async(&mut control, rank, TAG_CONTROL)?;
        let sender = self.sender.clone();
        // The thread only waits: the message is read on the server's thread, after the
        // queue hands it over.
        std::thread::spawn(move || {
            let _ = sender.send((rank, work.wait()));
        });
        Ok(())
    }

    /// The next rank whose control message is in, waiting for one if `block`.
    fn next(&self, block: bool) -> Result<Option<(usize, Completed)>, TrainError> {
        let message = if block {
            self.receiver.recv().ok()
        } else {
            match self.receiver.try_recv() {
                Ok(message) => Some(message),
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => None,
            }
        };
        let (rank, done) = message.expect("the inbox keeps a sender of its own");
        Ok(Some((rank, done?)))
    }
}

/// What the server knows of one training rank.
struct WorkerState {
    rank: usize,
    /// The version of the weights it last received (or started from).
    pulled: u64,
    /// Gradients it has pushed.
    pushes: u64,
    /// It has pushed and waits for weights.
    waiting: bool,
    /// It said it has finished.
    finished: bool,
    /// The loss scaler's verdict on its last gradient: every update it went into skipped.
    overflowed: bool,
    /// Its control message: `[continue, lr, out_of_time]`.
    control: Tensor,
    /// Its gradients, received into this.
    gradients: Tensor,
}

/// The gradients a `sync` round with backup workers has gathered.
struct Round {
    sum: Tensor,
    count: usize,
    lr: f64,
}

/// The server of the per-worker modes; see the module docs.
pub(super) struct EventServer {
    consistency: Consistency,
    workers: Vec<WorkerState>,
    /// Index in `workers` of the server's own rank, where it also trains.
    local: Option<usize>,
    /// Updates applied.
    version: u64,
    /// The version whose weights the reply buffer holds.
    packed: Option<u64>,
    round: Option<Round>,
    /// Each per-gradient update's learning rate is the worker's times this.
    lr_scale: f64,
    records: Vec<GradientRecord>,
    started: Instant,
    inbox: Inbox,
}

impl EventServer {
    /// A server for `party`'s training ranks that posts every remote worker's first control
    /// receive; per-gradient updates take the workers' rate times `lr_scale`.
    pub(super) fn start(party: &Party<'_>, consistency: Consistency, lr_scale: f64) -> Result<Self, TrainError> {
        let comm = party.comm_device();
        let workers: Vec<WorkerState> = party
            .workers
            .iter()
            .map(|&rank| WorkerState {
                rank,
                pulled: 0,
                pushes: 0,
                waiting: false,
                finished: false,
                overflowed: false,
                control: Tensor::zeros([3], (Kind::Double, comm)),
                gradients: buffer_for(&party.params, 0, comm),
            })
            .collect();
        let local = workers.iter().position(|worker| worker.rank == party.server);
        let server = EventServer {
            consistency,
            workers,
            local,
            version: 0,
            packed: None,
            round: None,
            lr_scale,
            records: Vec::new(),
            started: Instant::now(),
            inbox: Inbox::new(),
        };
        for worker in server.workers.iter().filter(|worker| Some(worker.rank) != Some(party.server)) {
            server.inbox.post(party.group, &worker.control, worker.rank)?;
        }
        Ok(server)
    }

    /// Updates applied so far.
    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// Every gradient pushed so far, as recorded.
    pub(super) fn into_records(self) -> Vec<GradientRecord> {
        self.records
    }

    fn remote_active(&self) -> bool {
        self.workers.iter().enumerate().any(|(index, worker)| Some(index) != self.local && !worker.finished)
    }

    /// Serves until every remote worker has finished (a dedicated server's life, and a
    /// colocated one's after its own training), evaluating the weights as `evaluation`
    /// asks.
    pub(super) fn serve_until_finished(
        &mut self,
        party: &mut Party<'_>,
        mut evaluation: Option<&mut ServerEvaluation<'_>>,
        timeline: &mut Timeline,
    ) -> Result<(), TrainError> {
        if let Some(local) = self.local {
            self.workers[local].finished = true;
            self.workers[local].waiting = false;
            self.progress(party, timeline)?;
        }
        while self.remote_active() {
            timeline.set_step(self.version);
            self.serve_next(party, true, timeline)?;
            if let Some(evaluation) = evaluation.as_deref_mut() {
                evaluation.after(self.version)?;
            }
        }
        Ok(())
    }

    /// The colocated server's own gradient (in its parameters' `.grad`) at rate `lr`:
    /// pushed like any worker's, then served until its own weights may go on, then every
    /// message already in. Returns whether the loss scaler skipped the update it went into.
    pub(super) fn push_own(
        &mut self,
        party: &mut Party<'_>,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<bool, TrainError> {
        let local = self.local.expect("only a colocated server trains");
        pack(party.params.iter().map(Tensor::grad), &self.workers[local].gradients);
        self.arrive(party, local, lr, timeline)?;
        while self.workers[local].waiting {
            self.serve_next(party, true, timeline)?;
        }
        while self.serve_next(party, false, timeline)? {}
        Ok(self.workers[local].overflowed)
    }

    /// Handles the next control message (waiting for one if `block`); `false` when none was in.
    fn serve_next(&mut self, party: &mut Party<'_>, block: bool, timeline: &mut Timeline) -> Result<bool, TrainError> {
        let Some((rank, done)) = self.inbox.next(block)? else {
            return Ok(false);
        };
        timeline.communication(EventKind::Recv, format!("control from rank {rank}"), &done);
        let index = self.workers.iter().position(|worker| worker.rank == rank).expect("a training rank");
        let values = Vec::<f64>::try_from(self.workers[index].control.to_device(Device::Cpu))?;
        if values[0] == 0.0 {
            self.workers[index].finished = true;
            return self.progress(party, timeline).map(|()| true);
        }
        let mut gradients = self.workers[index].gradients.shallow_clone();
        let received = party.group.recv_async(&mut gradients, rank, TAG_GRADIENTS)?.wait()?;
        timeline.communication(EventKind::Recv, format!("gradients from rank {rank}"), &received);
        self.inbox.post(party.group, &self.workers[index].control, rank)?;
        self.arrive(party, index, values[1], timeline)?;
        Ok(true)
    }

    /// Worker `index`'s gradient is in (in its buffer), computed at rate `lr`.
    fn arrive(
        &mut self,
        party: &mut Party<'_>,
        index: usize,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<(), TrainError> {
        let worker = &mut self.workers[index];
        worker.pushes += 1;
        worker.waiting = true;
        let (pulled, gradients) = (worker.pulled, worker.gradients.shallow_clone());
        let mut record = GradientRecord {
            worker: worker.rank as u32,
            pulled_version: pulled,
            arrived_version: self.version,
            applied: true,
            time_s: self.started.elapsed().as_secs_f64(),
        };
        match self.consistency {
            Consistency::PerGradient { .. } => {
                let overflowed = self.apply(party, &gradients, lr * self.lr_scale, timeline)?;
                self.workers[index].overflowed = overflowed;
            }
            Consistency::Sync { .. } if pulled < self.version => {
                // Computed on weights a round has replaced: too late for any round.
                record.applied = false;
            }
            Consistency::Sync { .. } => {
                let round = self.round.get_or_insert_with(|| Round { sum: gradients.zeros_like(), count: 0, lr });
                round.sum += &gradients;
                round.count += 1;
            }
        }
        self.records.push(record);
        self.progress(party, timeline)
    }

    /// Completes a round that has enough gradients, then answers every waiting worker that
    /// may go on.
    fn progress(&mut self, party: &mut Party<'_>, timeline: &mut Timeline) -> Result<(), TrainError> {
        if let Consistency::Sync { backup_workers } = self.consistency {
            let active = self.workers.iter().filter(|worker| !worker.finished).count();
            let needed = self.workers.len().saturating_sub(backup_workers).min(active).max(1);
            if self.round.as_ref().is_some_and(|round| round.count >= needed) {
                let Round { sum, count, lr } = self.round.take().expect("checked above");
                let mean = sum / count as f64;
                let overflowed = self.apply(party, &mean, lr, timeline)?;
                for worker in self.workers.iter_mut().filter(|worker| worker.waiting) {
                    worker.overflowed = overflowed;
                }
            }
        }
        for index in 0..self.workers.len() {
            if self.workers[index].waiting && self.may_go_on(index) {
                self.answer(party, index, timeline)?;
            }
        }
        Ok(())
    }

    /// Whether waiting worker `index` may have the current weights.
    fn may_go_on(&self, index: usize) -> bool {
        let worker = &self.workers[index];
        match self.consistency {
            Consistency::PerGradient { staleness: None } => true,
            Consistency::PerGradient { staleness: Some(bound) } => {
                let slowest = self.workers.iter().filter(|other| !other.finished).map(|other| other.pushes).min();
                slowest.is_none_or(|slowest| worker.pushes - slowest <= bound as u64)
            }
            // In a round that has not completed yet, or late (its round is long done).
            Consistency::Sync { .. } => worker.pulled < self.version,
        }
    }

    /// Sends worker `index` the current weights (a colocated server's own rank just reads
    /// them: its parameters are the server's).
    fn answer(&mut self, party: &mut Party<'_>, index: usize, timeline: &mut Timeline) -> Result<(), TrainError> {
        let version = self.version;
        let worker = &mut self.workers[index];
        (worker.waiting, worker.pulled) = (false, version);
        if Some(index) == self.local {
            return Ok(());
        }
        if self.packed != Some(version) {
            pack(party.params.iter().map(Tensor::detach), &party.buffers.values());
            self.packed = Some(version);
        }
        let _ = party.buffers.flag().fill_(0.0);
        let _ = party.buffers.overflow().fill_(if worker.overflowed { 1.0 } else { 0.0 });
        let rank = worker.rank;
        let sent = party.group.send_async(&party.buffers.flat, rank, TAG_PARAMETERS)?.wait()?;
        timeline.communication(EventKind::Send, format!("parameters to rank {rank}"), &sent);
        Ok(())
    }

    /// One optimizer step with `gradients` (flat, on the communication device) at `lr`;
    /// whether the loss scaler skipped it.
    fn apply(
        &mut self,
        party: &mut Party<'_>,
        gradients: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<bool, TrainError> {
        let start = timeline.now();
        unpack(&gradients.to_device(party.device), party.params.iter().map(Tensor::grad));
        party.optimizer.set_lr(lr);
        let optimizer = &mut party.optimizer;
        let scaling = loss_scale::step(party.loss_scaler.as_mut(), &party.params, Ok, || optimizer.step())?;
        timeline.record(EventKind::Optimizer, "optimizer step (server)", start, timeline.now(), None);
        self.version += 1;
        Ok(scaling.is_some_and(|scaled| scaled.skipped))
    }
}

/// A dedicated server's evaluation of its own weights every `every` applied updates: the
/// weights the workers pull, which in the asynchronous modes no worker holds.
pub(super) struct ServerEvaluation<'a> {
    pub(super) every: u64,
    pub(super) model: &'a dyn ModuleT,
    pub(super) test: &'a Arc<dyn Dataset>,
    pub(super) config: &'a crate::TrainConfig,
    pub(super) device: Device,
    /// The version last evaluated.
    pub(super) done: u64,
    pub(super) records: Vec<EvalRecord>,
    pub(super) time_to_accuracy_s: Option<f64>,
    /// When training started: evaluations and the time to accuracy count from it.
    pub(super) started: Instant,
}

impl ServerEvaluation<'_> {
    /// Evaluates if `version` updates reach the next multiple of `every`.
    fn after(&mut self, version: u64) -> Result<(), TrainError> {
        if version / self.every <= self.done / self.every {
            return Ok(());
        }
        self.evaluate(version)
    }

    /// Evaluates the final weights, unless they were just evaluated.
    pub(super) fn last(&mut self, version: u64) -> Result<(), TrainError> {
        if self.records.last().is_some_and(|last| last.after_step as u64 == version) {
            return Ok(());
        }
        self.evaluate(version)
    }

    fn evaluate(&mut self, version: u64) -> Result<(), TrainError> {
        self.done = version;
        let eval_started = Instant::now();
        let sums = evaluate_shard(self.model, self.test, self.config, self.device, (0, 1))?;
        let result = sums.into_evaluation(eval_started.elapsed().as_secs_f64())?;
        let elapsed_s = self.started.elapsed().as_secs_f64();
        if self.time_to_accuracy_s.is_none() && result.accuracy >= self.config.target_accuracy {
            self.time_to_accuracy_s = Some(elapsed_s);
        }
        self.records.push(EvalRecord {
            after_step: version as usize,
            loss: result.loss,
            accuracy: result.accuracy,
            samples: result.samples,
            time_s: result.time_s,
            elapsed_s,
        });
        Ok(())
    }
}
