//! `parameter-server` (synchronous, as TensorFlow's ParameterServerStrategy and DistBelief
//! without staleness): workers compute gradients on their shard of the global batch and
//! send them to a server rank, which averages them, takes the optimizer step (it alone
//! holds the optimizer state) and sends the new weights back to every worker.
//!
//! Placement ([`ServerPlacement`]): `colocated` makes rank 0 both a worker and the server
//! (W ranks train); `dedicated` gives the server a rank of its own, the last one, which
//! trains on nothing (W − 1 ranks train). The cost of that choice is measured by running
//! both: a dedicated server frees rank 0 from serving but removes one worker's compute.
//!
//! Each round a worker sends a control message `[continue, lr, out_of_time]`, then its
//! flattened gradients; the server replies with the flattened parameters plus two flags:
//! "some worker is out of wall time", so every rank stops after the same step, and "the
//! averaged gradients overflowed" (float16's loss scaling: the server skipped the update),
//! so every rank moves its loss scale alike.
//!
//! Every whole-model message goes through buffers each rank allocates once and keeps
//! ([`FlatBuffers`], [`crate::flat`]).
//!
//! The asynchronous modes and backup workers ([`Consistency`]) keep the workers' side of
//! this protocol and answer each worker on its own ([`event_server`]). There a worker's
//! budget is its own (no round makes the ranks stop together); per-gradient updates take
//! the suite's learning rate divided by the training ranks, so that N updates move the
//! weights as far as one synchronous round; a dedicated server evaluates its weights every
//! `eval_every_steps` updates and once at the end.

mod event_server;
mod party;

use stratlab_comm::{ProcessGroup, Work};
use stratlab_strategy_spec::{Consistency, ServerPlacement, ServerSettings};
use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use crate::evaluate::correct_on_device;
use crate::flat::{pack, unpack};
use crate::loss_scale::{self, ScaledStep};
use crate::setup::{self, Replica};
use crate::timeline::{EventKind, Timeline};
use crate::traffic::Traffic;
use crate::train_loop::{self, StepOutput, StepRunner, TrainContext};
use crate::{Precision, PrecisionOps, TrainError, TrainObserver, TrainReport};
use event_server::{EventServer, ServerEvaluation};
use party::{FlatBuffers, Party, TAG_CONTROL, TAG_GRADIENTS, TAG_PARAMETERS};

/// Trains with a parameter server over `group` as `settings` say; every rank calls this.
pub fn train(
    context: &TrainContext<'_>,
    group: &ProcessGroup,
    settings: ServerSettings,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let config = context.config;
    let placement = settings.placement;
    // Rounds of every gradient keep the lockstep protocol; anything else answers per worker.
    let per_worker = settings.consistency != Consistency::Sync { backup_workers: 0 };
    if per_worker && config.precision.needs_loss_scale() {
        return Err(TrainError::InvalidConfig {
            field: "precision",
            reason: format!(
                "{} scales its loss, which a server answering each worker on its own does not agree on yet; \
                 train these modes in fp32 or bf16",
                config.precision
            ),
        });
    }
    let device = setup::prepare(config)?;
    let Replica { store, model, optimizer, loss_scaler } =
        setup::replica(config, device, |store| Ok(context.network.build(&store.root())))?;
    let mut timeline = Timeline::of_rank(device, group.rank(), config.straggler.as_ref(), config.seed);
    crate::replica_sync::broadcast_variables(group, &store, &mut timeline)?;
    let world_size = group.world_size();
    let server = placement.server_rank(world_size);
    let params = store.trainable_variables();
    let workers: Vec<usize> =
        (0..world_size).filter(|&rank| placement == ServerPlacement::Colocated || rank != server).collect();
    let remote = workers.iter().filter(|&&rank| rank != server).count();
    let buffers =
        FlatBuffers::new(&params, if group.rank() == server { remote } else { 0 }, group.tensor_device(device));
    let training_ranks = workers.len();
    let mut party = Party { group, server, workers, params, optimizer, loss_scaler, device, buffers };
    let started = std::time::Instant::now();
    if placement == ServerPlacement::Dedicated && group.rank() == server {
        party.give_gradients()?;
        let mut report = TrainReport {
            outcome: crate::TrainOutcome::Completed,
            reason: None,
            device: crate::device::device_label(device),
            threads: config.threads,
            numerics: crate::Numerics::current().unwrap_or(config.numerics),
            steps_per_epoch: 0,
            steps: Vec::new(),
            epochs: Vec::new(),
            evaluations: Vec::new(),
            time_to_accuracy_s: None,
            target_accuracy: config.target_accuracy,
            wall_time_s: 0.0,
            events: Vec::new(),
            pipeline: None,
            gradients: Vec::new(),
        };
        if per_worker {
            let mut server =
                EventServer::start(&party, settings.consistency, settings.lr_scale(config.lr, training_ranks))?;
            let mut evaluation = ServerEvaluation {
                every: config.eval_every_steps.map_or(u64::MAX, |every| every.max(1) as u64),
                model: &model,
                test: &context.test,
                config,
                device,
                done: 0,
                records: Vec::new(),
                time_to_accuracy_s: None,
                started,
            };
            server.serve_until_finished(&mut party, Some(&mut evaluation), &mut timeline)?;
            evaluation.last(server.version())?;
            (report.evaluations, report.time_to_accuracy_s) = (evaluation.records, evaluation.time_to_accuracy_s);
            report.gradients = server.into_records();
        } else {
            party.serve_rounds_until_finished(&mut timeline)?;
        }
        report.wall_time_s = started.elapsed().as_secs_f64();
        report.events = timeline.into_events();
        return Ok(report);
    }
    let shard = party.workers.iter().position(|&rank| rank == group.rank()).expect("a training rank");
    let event_server = match per_worker && group.rank() == server {
        true => Some(EventServer::start(&party, settings.consistency, settings.lr_scale(config.lr, training_ranks))?),
        false => None,
    };
    let mut runner = ParameterServerStep {
        event_server,
        per_worker,
        dedicated: placement == ServerPlacement::Dedicated,
        party,
        model: Box::new(model),
        precision: config.precision,
        shard: (shard, placement.training_ranks(world_size)),
        wall_time_budget: config.budget.seconds.is_some(),
        steps_budget: config.budget.steps,
        steps_done: 0,
        out_of_time: false,
        server_says_stop: false,
    };
    let result = train_loop::run(context, device, &mut runner, &mut timeline, observer);
    if !runner.party.is_server() && (placement == ServerPlacement::Dedicated || per_worker) {
        // Tell the server this worker is done, whatever ended its training.
        runner.party.send_control(false, 0.0, false)?;
    }
    let mut report = result?;
    observer.on_trained(&store);
    report.events = timeline.into_events();
    report.gradients = runner.event_server.map(EventServer::into_records).unwrap_or_default();
    Ok(report)
}

impl Party<'_> {
    /// One server round. `own` is the server's own gradient when it also trains.
    /// Returns `None` once every worker said it has finished, else what it sent.
    fn serve_round(
        &mut self,
        own: Option<(f64, bool)>,
        timeline: &mut Timeline,
    ) -> Result<Option<ServedRound>, TrainError> {
        let remote: Vec<usize> = self.workers.iter().copied().filter(|&rank| rank != self.server).collect();
        let comm = self.comm_device();
        let mut controls: Vec<(usize, Tensor, Work)> = Vec::new();
        for &rank in &remote {
            let mut control = Tensor::zeros([3], (Kind::Double, comm));
            let work = self.group.recv_async(&mut control, rank, TAG_CONTROL)?;
            controls.push((rank, control, work));
        }
        let mut lr = own.map(|(lr, _)| lr);
        let mut out_of_time = own.is_some_and(|(_, stop)| stop);
        let mut finished = 0;
        for (rank, control, work) in controls {
            let done = work.wait()?;
            timeline.communication(EventKind::Recv, format!("control from rank {rank}"), &done);
            let values = Vec::<f64>::try_from(control.to_device(Device::Cpu))?;
            if values[0] == 0.0 {
                finished += 1;
                continue;
            }
            lr.get_or_insert(values[1]);
            out_of_time |= values[2] != 0.0;
        }
        if finished > 0 {
            if finished == remote.len() && own.is_none() {
                return Ok(None);
            }
            return Err(TrainError::InvalidConfig {
                field: "workers",
                reason: format!("{finished} of {} workers finished while the others went on", remote.len()),
            });
        }
        let mut incoming = Vec::new();
        for (&rank, received) in remote.iter().zip(&self.buffers.received) {
            let mut received = received.shallow_clone();
            let work = self.group.recv_async(&mut received, rank, TAG_GRADIENTS)?;
            incoming.push((rank, received, work));
        }
        let mut sum = match own {
            Some(_) => self.pack_gradients(),
            None => self.buffers.values().zero_(),
        };
        for (rank, received, work) in incoming {
            let done = work.wait()?;
            timeline.communication(EventKind::Recv, format!("gradients from rank {rank}"), &done);
            sum += received;
        }
        let start = timeline.now();
        sum /= self.workers.len() as f64;
        unpack(&sum.to_device(self.device), self.params.iter().map(Tensor::grad));
        self.optimizer.set_lr(lr.unwrap_or(0.0));
        let optimizer = &mut self.optimizer;
        // The server alone holds the averaged gradients: its verdict is every rank's.
        let scaling = loss_scale::step(self.loss_scaler.as_mut(), &self.params, Ok, || optimizer.step())?;
        timeline.record(EventKind::Optimizer, "optimizer step (server)", start, timeline.now(), None);
        pack(self.params.iter().map(Tensor::detach), &self.buffers.values());
        let _ = self.buffers.flag().fill_(if out_of_time { 1.0 } else { 0.0 });
        let _ = self.buffers.overflow().fill_(if scaling.is_some_and(|scaled| scaled.skipped) { 1.0 } else { 0.0 });
        let reply = &self.buffers.flat;
        let sends: Vec<(usize, Work)> = remote
            .iter()
            .map(|&rank| self.group.send_async(reply, rank, TAG_PARAMETERS).map(|work| (rank, work)))
            .collect::<Result<_, _>>()?;
        for (rank, work) in sends {
            let done = work.wait()?;
            timeline.communication(EventKind::Send, format!("parameters to rank {rank}"), &done);
        }
        Ok(Some(ServedRound { out_of_time, scaling }))
    }

    /// The dedicated server's life in lockstep rounds: until every worker has finished.
    fn serve_rounds_until_finished(&mut self, timeline: &mut Timeline) -> Result<(), TrainError> {
        let mut round = 0;
        loop {
            timeline.set_step(round);
            if self.serve_round(None, timeline)?.is_none() {
                return Ok(());
            }
            round += 1;
        }
    }
}

/// What a server round decided.
struct ServedRound {
    /// Some worker is out of wall time: every rank stops after this step.
    out_of_time: bool,
    /// What the loss scaler did, where the trial scales its loss.
    scaling: Option<ScaledStep>,
}

struct ParameterServerStep<'a> {
    /// A colocated server's rank in a per-worker mode: the server it also is.
    event_server: Option<EventServer>,
    /// The server answers each worker on its own: budgets are each rank's own.
    per_worker: bool,
    /// The server has a rank of its own.
    dedicated: bool,
    party: Party<'a>,
    model: Box<dyn ModuleT>,
    precision: Precision,
    shard: (usize, usize),
    wall_time_budget: bool,
    /// Every rank reaches a step budget at the same step, so it needs no agreement.
    steps_budget: Option<usize>,
    steps_done: usize,
    /// This rank's own view of the wall-time budget, sent with the next round.
    out_of_time: bool,
    /// The server's verdict from the last round: some worker is out of wall time.
    server_says_stop: bool,
}

impl StepRunner for ParameterServerStep<'_> {
    fn model(&self) -> &dyn ModuleT {
        self.model.as_ref()
    }

    fn shard(&self) -> (usize, usize) {
        self.shard
    }

    fn step(
        &mut self,
        images: &Tensor,
        labels: &Tensor,
        lr: f64,
        timeline: &mut Timeline,
    ) -> Result<StepOutput, TrainError> {
        self.steps_done += 1;
        let party = &mut self.party;
        party.optimizer.zero_grad();
        let (logits, loss) = self.precision.autocast(party.device, || {
            let logits = timeline.span(EventKind::Forward, "network", || self.model.forward_t(images, true));
            let loss = logits.cross_entropy_for_logits(labels);
            (logits, loss)
        })?;
        let start = timeline.now();
        let pass = crate::memory::in_pass(EventKind::Backward, None);
        loss_scale::backward(party.loss_scaler.as_ref(), &loss)?;
        drop(pass);
        timeline.record(EventKind::Backward, "network", start, timeline.now(), None);
        let mut comm_bytes = 0;
        let mut comm_s = 0.0;
        let scaling;
        if let Some(server) = self.event_server.as_mut() {
            let start = timeline.now();
            server.push_own(party, lr, timeline)?;
            scaling = None;
            comm_s += (timeline.now() - start) as f64 * 1e-9;
        } else if party.is_server() {
            let start = timeline.now();
            let round = party.serve_round(Some((lr, self.out_of_time)), timeline)?;
            self.server_says_stop = round.as_ref().is_none_or(|round| round.out_of_time);
            scaling = round.and_then(|round| round.scaling);
            let bytes = party.param_numel() as u64 * party.kind().elt_size_in_bytes() as u64;
            comm_bytes += bytes * 2 * (party.workers.len() as u64 - 1);
            comm_s += (timeline.now() - start) as f64 * 1e-9;
        } else {
            party.send_control(true, lr, self.out_of_time)?;
            let grads = party.pack_gradients();
            let sent = party.group.send_async(&grads, party.server, TAG_GRADIENTS)?.wait()?;
            timeline.communication(EventKind::Send, "gradients", &sent);
            // The send is complete: the same buffer takes the weights.
            let mut reply = party.buffers.flat.shallow_clone();
            let received = party.group.recv_async(&mut reply, party.server, TAG_PARAMETERS)?.wait()?;
            timeline.communication(EventKind::Recv, "parameters", &received);
            let mut traffic = Traffic::default();
            traffic.add(&sent);
            traffic.add(&received);
            (comm_bytes, comm_s) = (comm_bytes + traffic.bytes, comm_s + traffic.seconds);
            unpack(&party.buffers.values().to_device(party.device), party.params.iter().map(Tensor::shallow_clone));
            self.server_says_stop = party.buffers.flag().double_value(&[0]) != 0.0;
            let overflowed = party.buffers.overflow().double_value(&[0]) != 0.0;
            scaling = party.loss_scaler.as_mut().map(|scaler| scaler.update(overflowed));
        }
        Ok(StepOutput { correct: correct_on_device(&logits, labels), loss, comm_bytes, comm_s, scaling })
    }

    fn evaluates_every_steps(&self) -> bool {
        // A dedicated server evaluates the weights it serves, which no worker holds.
        !(self.per_worker && self.dedicated)
    }

    fn finish(&mut self, timeline: &mut Timeline) -> Result<(), TrainError> {
        match self.event_server.as_mut() {
            Some(server) => server.serve_until_finished(&mut self.party, None, timeline),
            None => Ok(()),
        }
    }

    fn agree_to_stop(&mut self, local_stop: bool) -> Result<bool, TrainError> {
        if self.per_worker {
            return Ok(local_stop);
        }
        // A reached step budget stops every rank now; only running out of wall time, which
        // ranks see at different steps, goes through the server (one round later). Sending a
        // reached step budget that way too trained one step past it.
        let steps_reached = self.steps_budget.is_some_and(|steps| self.steps_done >= steps);
        if !self.wall_time_budget || steps_reached {
            return Ok(local_stop);
        }
        self.out_of_time = local_stop;
        Ok(self.server_says_stop)
    }
}
