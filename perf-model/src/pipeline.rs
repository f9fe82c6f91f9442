//! A pipeline step, simulated on the action lists the stage workers run
//! ([`Schedule::actions`], [`pipedream_actions`]): each rank takes its actions in order
//! (interleaved ranks hold several stages), a forward waits for its activation and a
//! backward for its gradient (the neighbouring stage's pass plus the link's transfer;
//! sends are asynchronous, so the sender never waits, but each direction between two ranks
//! carries one message at a time, in the order they were sent; stages on the same rank
//! hand over in place), checkpointed micro-batches recompute their forward in the
//! backward, PipeDream updates after every backward, and a synchronous step ends with the
//! replicas' gradient all-reduce (hybrid), the update, and the last stage's loss reaching
//! every rank.

use std::collections::HashMap;

use serde::Serialize;
use stratlab_strategy_spec::{Action, Pass, Schedule, StageReplicas};

pub use crate::pipeline_input::{Pipeline, SplitBackward, StageCost};
use crate::{AllReduce, Link, StepBreakdown};

/// One simulated pass.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimulatedAction {
    /// The rank that ran it, from 0 (the stage's rank).
    pub rank: usize,
    /// Which simulated step's list it came from (PipeDream runs several; 0 otherwise).
    pub step: usize,
    /// The pass, its stage and micro-batch (ids global across steps for PipeDream).
    pub action: Action,
    /// Seconds from the step's start.
    pub start_s: f64,
    /// Seconds from the step's start, the pass (and any recompute or update in it) done.
    pub end_s: f64,
    /// Seconds of the forward recomputed at the start of a backward (0 without).
    pub recompute_s: f64,
    /// Seconds of the all-reduce before that update (a replicated stage's under PipeDream;
    /// 0 otherwise).
    pub all_reduce_s: f64,
    /// Seconds of the update at the end of a backward (PipeDream's; 0 otherwise).
    pub optimizer_s: f64,
}

/// Where one rank's step time went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankTime {
    /// Forward and backward passes, recompute excluded.
    pub compute_s: f64,
    /// Forwards recomputed in backward passes.
    pub recompute_s: f64,
    /// Optimizer steps.
    pub optimizer_s: f64,
    /// The replicas' gradient all-reduces (hybrid's and replicated stages' after the flush,
    /// a replicated stage's after each backward under PipeDream).
    pub all_reduce_s: f64,
    /// The part of `all_reduce_s` after the flush (synchronous schedules).
    pub flush_all_reduce_s: f64,
    /// The update after the flush, after that all-reduce (synchronous schedules; part of
    /// `optimizer_s`).
    pub flush_optimizer_s: f64,
    /// The share of the pipeline's compute span this rank did not compute.
    pub bubble: f64,
}

/// A simulated step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineStep {
    /// Seconds per step: a flushed step's length, PipeDream's steady-state period.
    pub step_s: f64,
    /// Per rank, first to last.
    pub ranks: Vec<RankTime>,
    /// Every pass, rank by rank in the order each rank ran them.
    pub actions: Vec<SimulatedAction>,
    /// Steps simulated: PipeDream's last is its steady state; 1 for flushed schedules.
    pub steps: usize,
    /// Micro-batches per step as the schedule ran them.
    pub micro_batches: usize,
}

impl PipelineStep {
    /// The mean bubble over ranks.
    pub fn bubble(&self) -> f64 {
        self.ranks.iter().map(|rank| rank.bubble).sum::<f64>() / self.ranks.len().max(1) as f64
    }

    /// Per rank, how many ranks compute at once while it computes, weighted by time over
    /// its passes, itself included: 1 where the ranks take turns (model-parallel), up to
    /// the number of ranks where all of them overlap.
    pub fn concurrency(&self) -> Vec<f64> {
        (0..self.ranks.len())
            .map(|rank| {
                let own = self.actions.iter().filter(|pass| pass.rank == rank);
                let (mut busy_s, mut overlapped_s) = (0.0, 0.0);
                for pass in own {
                    busy_s += pass.end_s - pass.start_s;
                    overlapped_s += self
                        .actions
                        .iter()
                        .filter(|other| other.rank != rank)
                        .map(|other| (pass.end_s.min(other.end_s) - pass.start_s.max(other.start_s)).max(0.0))
                        .sum::<f64>();
                }
                if busy_s > 0.0 {
                    1.0 + overlapped_s / busy_s
                } else {
                    1.0
                }
            })
            .collect()
    }

    /// The step split as every strategy's is, from the busiest rank's view: its passes,
    /// its share of the replicas' all-reduce and its update; the rest of the step it waits
    /// (the bubble, transfers included).
    pub fn breakdown(&self) -> StepBreakdown {
        let busy = |rank: &RankTime| rank.compute_s + rank.recompute_s + rank.optimizer_s + rank.all_reduce_s;
        let busiest = self.ranks.iter().max_by(|a, b| busy(a).total_cmp(&busy(b)));
        let Some(rank) = busiest else {
            return StepBreakdown {
                step_s: self.step_s,
                compute_s: 0.0,
                exposed_comm_s: 0.0,
                bubble_s: 0.0,
                optimizer_s: 0.0,
            };
        };
        StepBreakdown {
            step_s: self.step_s,
            compute_s: rank.compute_s + rank.recompute_s,
            exposed_comm_s: rank.all_reduce_s,
            bubble_s: (self.step_s - busy(rank)).max(0.0),
            optimizer_s: rank.optimizer_s,
        }
    }
}

/// Why a pipeline cannot be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    /// No stage to run.
    #[error("a pipeline needs at least one stage")]
    NoStages,
    /// The stages do not divide over the ranks (`v` per rank when interleaved).
    #[error("{stages} pipeline stages do not give each rank {per_rank}")]
    Uneven {
        /// The stages given.
        stages: usize,
        /// The stages each rank holds.
        per_rank: usize,
    },
    /// The replicated stages' layout counts other stages than the costs.
    #[error("stage_replicas {layout} has {} stages; the costs have {stages}", layout.stages())]
    Layout {
        /// The costs' stages.
        stages: usize,
        /// The layout.
        layout: StageReplicas,
    },
    /// The action lists wait on each other (a schedule bug, not an input error).
    #[error("the schedule deadlocks: rank {rank} waits for {action:?}")]
    Deadlock {
        /// The stuck rank.
        rank: usize,
        /// What it waits to run.
        action: Action,
    },
}

/// Steps of PipeDream simulated to reach its steady state (its warm-up spans the first).
const PIPEDREAM_STEPS: usize = 4;

/// Simulates one step of `pipeline`.
pub fn simulate(pipeline: &Pipeline<'_>) -> Result<PipelineStep, SimulationError> {
    let per_rank = pipeline.schedule.virtual_stages();
    if pipeline.stages.is_empty() {
        return Err(SimulationError::NoStages);
    }
    if !pipeline.stages.len().is_multiple_of(per_rank) {
        return Err(SimulationError::Uneven { stages: pipeline.stages.len(), per_rank });
    }
    if let Some(layout) = pipeline.stage_replicas.filter(|layout| layout.stages() != pipeline.stages.len()) {
        return Err(SimulationError::Layout { stages: pipeline.stages.len(), layout: layout.clone() });
    }
    let p = pipeline.ranks();
    let m = pipeline.schedule.micro_batches(pipeline.micro_batches);
    let steps = if pipeline.schedule == Schedule::PipeDream { PIPEDREAM_STEPS } else { 1 };
    let lists: Vec<Vec<(usize, Action)>> = (0..p)
        .map(|rank| match pipeline.schedule {
            Schedule::PipeDream => (0..steps)
                .flat_map(|step| {
                    pipeline.pipedream_actions(rank, m, step).into_iter().map(move |action| (step, action))
                })
                .collect(),
            _ => pipeline.actions(rank, m).into_iter().map(|action| (0, action)).collect(),
        })
        .collect();
    let passes = run_actions(pipeline, &lists, m)?;
    // Statistics come from the last step: PipeDream's first steps hold its warm-up.
    let measured: Vec<&Timed> = passes.iter().filter(|pass| pass.step + 1 == steps).collect();
    let span_start = measured.iter().map(|pass| pass.start_s).fold(f64::INFINITY, f64::min);
    let span_end =
        measured.iter().map(|pass| pass.end_s - pass.all_reduce_s - pass.optimizer_s).fold(f64::NEG_INFINITY, f64::max);
    let span = span_end - span_start;

    let synchronous = !pipeline.schedule.updates_per_micro_batch();
    let mut rank_times = Vec::with_capacity(p);
    // When each rank is done with each step: its last pass, then (synchronous schedules)
    // the replicas' all-reduce and the update.
    let mut done = vec![vec![0.0f64; steps]; p];
    for (rank, rank_done) in done.iter_mut().enumerate() {
        let held = pipeline.stages_of_rank(rank);
        let own: Vec<&&Timed> = measured.iter().filter(|pass| pass.rank == rank).collect();
        let recompute_s: f64 = own.iter().map(|pass| pass.recompute_s).sum();
        let compute_s: f64 = own
            .iter()
            .map(|pass| pass.end_s - pass.start_s - pass.recompute_s - pass.all_reduce_s - pass.optimizer_s)
            .sum();
        // A rank all-reduces all its stages' gradients in one buffer and updates them at once.
        let gradient_bytes: f64 = held.iter().map(|&stage| pipeline.stages[stage].gradient_bytes).sum();
        let peers = pipeline.gradient_peers(rank);
        let all_reduce_s = match peers > 1 && synchronous {
            true => AllReduce { link: &pipeline.link, measured: pipeline.measured_all_reduce }
                .seconds(gradient_bytes, peers),
            false => 0.0,
        };
        let flush_optimizer_s = match synchronous {
            true => held.iter().map(|&stage| pipeline.stages[stage].optimizer_s).sum(),
            false => 0.0,
        };
        rank_times.push(RankTime {
            compute_s,
            recompute_s,
            optimizer_s: own.iter().map(|pass| pass.optimizer_s).sum::<f64>() + flush_optimizer_s,
            all_reduce_s: all_reduce_s + own.iter().map(|pass| pass.all_reduce_s).sum::<f64>(),
            flush_all_reduce_s: all_reduce_s,
            flush_optimizer_s,
            bubble: if span > 0.0 { (1.0 - (compute_s + recompute_s) / span).clamp(0.0, 1.0) } else { 0.0 },
        });
        for (step, end) in rank_done.iter_mut().enumerate() {
            let last = passes.iter().filter(|pass| pass.rank == rank && pass.step == step).map(|pass| pass.end_s);
            *end = last.fold(0.0, f64::max) + all_reduce_s + flush_optimizer_s;
        }
    }
    // The last stage's ranks send each step's loss (8 bytes) to the others after their
    // update; a rank's step is over when it has it.
    let loss_s = pipeline.link.transfer_s(8.0);
    let last_stage = pipeline.stages.len() - 1;
    let last_ranks: Vec<usize> = (0..p).filter(|&rank| pipeline.stages_of_rank(rank).contains(&last_stage)).collect();
    let step_end = |step: usize| {
        let last = last_ranks.iter().map(|&rank| done[rank][step]).fold(0.0, f64::max);
        (0..p)
            .map(|rank| if last_ranks.contains(&rank) { last } else { done[rank][step].max(last + loss_s) })
            .fold(0.0, f64::max)
    };
    let step_s = match steps {
        1 => step_end(0),
        _ => step_end(steps - 1) - step_end(steps - 2),
    };
    let actions = passes
        .iter()
        .map(|pass| SimulatedAction {
            rank: pass.rank,
            step: pass.step,
            action: pass.action,
            start_s: pass.start_s,
            end_s: pass.end_s,
            recompute_s: pass.recompute_s,
            all_reduce_s: pass.all_reduce_s,
            optimizer_s: pass.optimizer_s,
        })
        .collect();
    Ok(PipelineStep { step_s, steps, micro_batches: m, ranks: rank_times, actions })
}

/// One simulated pass with its parts.
struct Timed {
    rank: usize,
    /// Which step's action list the pass came from.
    step: usize,
    action: Action,
    start_s: f64,
    end_s: f64,
    recompute_s: f64,
    all_reduce_s: f64,
    optimizer_s: f64,
}

/// One direction between two ranks: messages go out in the order they are sent, each
/// taking the wire for its bytes ÷ bandwidth, and arrive a latency after they finish going
/// out. Transfers between two ranks therefore never add up to more than the link's
/// bandwidth, however many micro-batches a schedule keeps in flight.
#[derive(Default)]
struct Wire {
    free_at: f64,
}

impl Wire {
    /// When a message of `bytes` sent at `sent_s` arrives.
    fn send(&mut self, link: &Link, sent_s: f64, bytes: f64) -> f64 {
        let start_s = self.free_at.max(sent_s);
        self.free_at = start_s + bytes / link.bandwidth.0;
        self.free_at + link.latency.0
    }
}

/// The wires between a pipeline's ranks, and when each stage's inputs arrive.
struct Links<'p> {
    pipeline: &'p Pipeline<'p>,
    wires: HashMap<(usize, usize), Wire>,
    /// When each (stage, micro-batch)'s forward input arrived there.
    activation_at: HashMap<(usize, usize), f64>,
    /// When each (stage, micro-batch)'s output gradient arrived there.
    gradient_at: HashMap<(usize, usize), f64>,
}

impl Links<'_> {
    /// When `action`'s input is there, or `None` while it is not (the first stage's
    /// forwards and the last stage's backwards need none).
    fn input_at(&self, action: Action) -> Option<f64> {
        let last = self.pipeline.stages.len() - 1;
        match action.pass {
            Pass::Forward if action.stage > 0 => self.activation_at.get(&(action.stage, action.micro_batch)).copied(),
            Pass::Backward | Pass::InputBackward if action.stage < last => {
                self.gradient_at.get(&(action.stage, action.micro_batch)).copied()
            }
            _ => Some(0.0),
        }
    }

    /// `from`'s message to `stage` about micro-batch `id`, `bytes` long, sent at `sent_s`:
    /// when it arrives.
    fn deliver(&mut self, from: usize, to_stage: usize, id: usize, sent_s: f64, bytes: f64) -> f64 {
        let to = self.pipeline.rank_for(to_stage, id);
        match from == to {
            true => sent_s,
            false => self.wires.entry((from, to)).or_default().send(&self.pipeline.link, sent_s, bytes),
        }
    }

    /// Sends on what `action`, done at `end_s` on `rank`, produced.
    fn sent(&mut self, rank: usize, action: Action, end_s: f64) {
        let (stage, id) = (action.stage, action.micro_batch);
        match action.pass {
            Pass::Forward if stage + 1 < self.pipeline.stages.len() => {
                let arrives = self.deliver(rank, stage + 1, id, end_s, self.pipeline.stages[stage].output_bytes);
                self.activation_at.insert((stage + 1, id), arrives);
            }
            Pass::Backward | Pass::InputBackward if stage > 0 => {
                let arrives = self.deliver(rank, stage - 1, id, end_s, self.pipeline.stages[stage - 1].output_bytes);
                self.gradient_at.insert((stage - 1, id), arrives);
            }
            _ => {}
        }
    }
}

/// Runs every rank's list in order, each pass as soon as its rank is free and its input
/// has arrived. A rank's sends enter its wires in the order it runs its passes, as the
/// stage workers issue them.
fn run_actions(
    pipeline: &Pipeline<'_>,
    lists: &[Vec<(usize, Action)>],
    m: usize,
) -> Result<Vec<Timed>, SimulationError> {
    let p = lists.len();
    let mut next = vec![0usize; p];
    let mut free_at = vec![0.0f64; p];
    let mut links =
        Links { pipeline, wires: HashMap::new(), activation_at: HashMap::new(), gradient_at: HashMap::new() };
    let mut passes = Vec::new();
    let mut rounds = Rounds::default();
    loop {
        let mut progressed = false;
        for rank in 0..p {
            while let Some(&(step, action)) = lists[rank].get(next[rank]) {
                let Some(input_at) = links.input_at(action) else { break };
                let cost = &pipeline.stages[action.stage];
                let start_s = free_at[rank].max(input_at);
                let per_micro_batch = pipeline.schedule.updates_per_micro_batch();
                // When the pass's message leaves: at its end, or, where a replicated stage
                // all-reduces a round under PipeDream, when its backward is computed (the
                // stage worker sends before it joins the all-reduce).
                let mut sent_s = None;
                let (recompute_s, all_reduce_s, optimizer_s, end_s) = match action.pass {
                    Pass::Forward => (0.0, 0.0, 0.0, start_s + cost.forward_s),
                    Pass::InputBackward => (0.0, 0.0, 0.0, start_s + cost.split_s(action.stage).input_s),
                    Pass::WeightBackward => (0.0, 0.0, 0.0, start_s + cost.split_s(action.stage).weight_s),
                    Pass::Backward => {
                        let recompute = recomputes(pipeline, action.stage, action.micro_batch, m);
                        let recompute_s = if recompute { cost.forward_s } else { 0.0 };
                        let optimizer_s = if per_micro_batch { cost.optimizer_s } else { 0.0 };
                        let computed_s = start_s + recompute_s + cost.backward_s;
                        let peers = pipeline.gradient_peers(rank);
                        match per_micro_batch && peers > 1 {
                            // PipeDream's replicated stage averages each round's gradients
                            // first, once every worker of the stage has its round's.
                            true => {
                                let Some(round_s) = rounds.finished(pipeline, rank, computed_s) else { break };
                                let transfer_s =
                                    AllReduce { link: &pipeline.link, measured: pipeline.measured_all_reduce }
                                        .seconds(cost.gradient_bytes, peers);
                                let all_reduce_s = round_s + transfer_s - computed_s;
                                sent_s = Some(computed_s);
                                (recompute_s, all_reduce_s, optimizer_s, computed_s + all_reduce_s + optimizer_s)
                            }
                            // Summed in the order the golden prediction rows were made with.
                            false => {
                                (recompute_s, 0.0, optimizer_s, start_s + (cost.backward_s + recompute_s + optimizer_s))
                            }
                        }
                    }
                };
                links.sent(rank, action, sent_s.unwrap_or(end_s));
                passes.push(Timed { rank, step, action, start_s, end_s, recompute_s, all_reduce_s, optimizer_s });
                free_at[rank] = end_s;
                next[rank] += 1;
                progressed = true;
            }
        }
        if (0..p).all(|rank| next[rank] == lists[rank].len()) {
            return Ok(passes);
        }
        if !progressed {
            let rank = (0..p).find(|&rank| next[rank] < lists[rank].len()).expect("some rank is stuck");
            return Err(SimulationError::Deadlock { rank, action: lists[rank][next[rank]].1 });
        }
    }
}

/// PipeDream's replicated stages: a worker's n-th backward is followed by its stage's
/// all-reduce of round n, which starts once every worker of the stage has computed its
/// n-th backward (the stage workers' collective blocks until then).
#[derive(Default)]
struct Rounds {
    /// Per rank, rounds whose all-reduce it has joined.
    joined: HashMap<usize, usize>,
    /// Per rank, the round it computed a backward of and waits to all-reduce.
    waiting: HashMap<usize, usize>,
    /// Per (stage, round), when each of its workers had that round's backward computed.
    computed: HashMap<(usize, usize), Vec<f64>>,
}

impl Rounds {
    /// When every worker of `rank`'s stage has computed the backward of `rank`'s current
    /// round (`rank`'s own done at `computed_s`), or `None` while one has not.
    fn finished(&mut self, pipeline: &Pipeline<'_>, rank: usize, computed_s: f64) -> Option<f64> {
        let stage = pipeline.stages_of_rank(rank)[0];
        let round = *self.joined.get(&rank).unwrap_or(&0);
        if self.waiting.insert(rank, round).is_none() {
            self.computed.entry((stage, round)).or_default().push(computed_s);
        }
        let workers = pipeline.gradient_peers(rank);
        let times = self.computed.get(&(stage, round)).filter(|times| times.len() == workers)?;
        self.waiting.remove(&rank);
        *self.joined.entry(rank).or_default() += 1;
        Some(times.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    }
}

/// Whether the backward of micro-batch `id` on `stage` recomputes its forward, as the
/// stage workers decide it.
fn recomputes(pipeline: &Pipeline<'_>, stage: usize, id: usize, m: usize) -> bool {
    match pipeline.schedule {
        Schedule::PipeDream => pipeline.stages.len() - stage > 1,
        _ => pipeline.checkpoint.recomputes(id % m, m),
    }
}

#[cfg(test)]
mod tests;
