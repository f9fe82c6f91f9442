//! A pipeline step, simulated on the action lists the stage workers run
//! ([`Schedule::actions`], [`pipedream_actions`]): each stage takes its actions in order,
//! a forward waits for its activation and a backward for its gradient (the neighbour's
//! pass plus the link's transfer; sends are asynchronous, so the sender never waits, but
//! each direction of a hop carries one message at a time, in the order they were sent),
//! checkpointed micro-batches recompute their forward in the backward, PipeDream updates
//! after every backward, and a synchronous step ends with the replicas' gradient
//! all-reduce (hybrid), the update, and the last stage's loss reaching every stage.

use serde::Serialize;
use stratlab_strategy_spec::{pipedream_actions, Action, Checkpoint, Schedule};

use crate::{AllReduce, CollectiveCurve, Link, StepBreakdown};

/// What one pipeline stage costs, per micro-batch of the size the step runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageCost {
    /// Forward seconds of one micro-batch.
    pub forward_s: f64,
    /// Backward seconds of one micro-batch (without recomputing its forward).
    pub backward_s: f64,
    /// Bytes of the activation this stage sends on per micro-batch (and of the gradient it
    /// gets back for it).
    pub output_bytes: f64,
    /// Bytes of this stage's gradients (all-reduced across replicas in hybrid).
    pub gradient_bytes: f64,
    /// Seconds of this stage's optimizer step.
    pub optimizer_s: f64,
}

impl StageCost {
    /// The same stage with its compute (passes and update) `slowdown` times longer.
    pub fn slowed(&self, slowdown: f64) -> StageCost {
        StageCost {
            forward_s: self.forward_s * slowdown,
            backward_s: self.backward_s * slowdown,
            optimizer_s: self.optimizer_s * slowdown,
            ..self.clone()
        }
    }
}

/// The pipeline to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline<'a> {
    /// The order every stage runs.
    pub schedule: Schedule,
    /// Micro-batches per batch as requested (model-parallel runs 1).
    pub micro_batches: usize,
    /// Which micro-batches recompute their forward in the backward.
    pub checkpoint: Checkpoint,
    /// One entry per stage, first to last.
    pub stages: &'a [StageCost],
    /// The link between neighbouring stages.
    pub link: Link,
    /// Pipelines side by side (hybrid's data parallelism; 1 otherwise), all-reducing each
    /// stage's gradients over the same link.
    pub replicas: usize,
    /// The probe's all-reduce against size on that link, where measured.
    pub measured_all_reduce: Option<&'a CollectiveCurve>,
}

/// One simulated pass.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimulatedAction {
    /// The stage, from 0.
    pub stage: usize,
    /// The pass, by micro-batch id (global across steps for PipeDream).
    pub action: Action,
    /// Seconds from the step's start.
    pub start_s: f64,
    /// Seconds from the step's start, the pass (and any recompute or update in it) done.
    pub end_s: f64,
}

/// Where one stage's step time went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageTime {
    /// Forward and backward passes, recompute excluded.
    pub compute_s: f64,
    /// Forwards recomputed in backward passes.
    pub recompute_s: f64,
    /// Optimizer steps.
    pub optimizer_s: f64,
    /// The replicas' gradient all-reduce (hybrid).
    pub all_reduce_s: f64,
    /// The share of the pipeline's compute span this stage did not compute.
    pub bubble: f64,
}

/// A simulated step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineStep {
    /// Seconds per step: a flushed step's length, PipeDream's steady-state period.
    pub step_s: f64,
    /// Per stage, first to last.
    pub stages: Vec<StageTime>,
    /// Every pass, stage by stage in the order each stage ran them.
    pub actions: Vec<SimulatedAction>,
}

impl PipelineStep {
    /// The mean bubble over stages.
    pub fn bubble(&self) -> f64 {
        self.stages.iter().map(|stage| stage.bubble).sum::<f64>() / self.stages.len().max(1) as f64
    }

    /// Per stage, how many stages compute at once while it computes, weighted by time over
    /// its passes, itself included: 1 where the stages take turns (model-parallel), up to
    /// the number of stages where all of them overlap.
    pub fn concurrency(&self) -> Vec<f64> {
        (0..self.stages.len())
            .map(|stage| {
                let own = self.actions.iter().filter(|pass| pass.stage == stage);
                let (mut busy_s, mut overlapped_s) = (0.0, 0.0);
                for pass in own {
                    busy_s += pass.end_s - pass.start_s;
                    overlapped_s += self
                        .actions
                        .iter()
                        .filter(|other| other.stage != stage)
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

    /// The step split as every strategy's is, from the busiest stage's view: its passes,
    /// its share of the replicas' all-reduce and its update; the rest of the step it waits
    /// (the bubble, transfers included).
    pub fn breakdown(&self) -> StepBreakdown {
        let busy = |stage: &StageTime| stage.compute_s + stage.recompute_s + stage.optimizer_s + stage.all_reduce_s;
        let busiest = self.stages.iter().max_by(|a, b| busy(a).total_cmp(&busy(b)));
        let Some(stage) = busiest else {
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
            compute_s: stage.compute_s + stage.recompute_s,
            exposed_comm_s: stage.all_reduce_s,
            bubble_s: (self.step_s - busy(stage)).max(0.0),
            optimizer_s: stage.optimizer_s,
        }
    }
}

/// Why a pipeline cannot be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    /// No stage to run.
    #[error("a pipeline needs at least one stage")]
    NoStages,
    /// The action lists wait on each other (a schedule bug, not an input error).
    #[error("the schedule deadlocks: stage {stage} waits for {action:?}")]
    Deadlock {
        /// The stuck stage.
        stage: usize,
        /// What it waits to run.
        action: Action,
    },
}

/// Steps of PipeDream simulated to reach its steady state (its warm-up spans the first).
const PIPEDREAM_STEPS: usize = 4;

/// Simulates one step of `pipeline`.
pub fn simulate(pipeline: &Pipeline<'_>) -> Result<PipelineStep, SimulationError> {
    let p = pipeline.stages.len();
    if p == 0 {
        return Err(SimulationError::NoStages);
    }
    let m = pipeline.schedule.micro_batches(pipeline.micro_batches);
    let steps = if pipeline.schedule == Schedule::PipeDream { PIPEDREAM_STEPS } else { 1 };
    let lists: Vec<Vec<(usize, Action)>> = (0..p)
        .map(|stage| match pipeline.schedule {
            Schedule::PipeDream => (0..steps)
                .flat_map(|step| pipedream_actions(stage, p, m, step).into_iter().map(move |action| (step, action)))
                .collect(),
            schedule => schedule.actions(stage, p, m).into_iter().map(|action| (0, action)).collect(),
        })
        .collect();
    let passes = run_actions(pipeline, &lists, m)?;
    // Statistics come from the last step: PipeDream's first steps hold its warm-up.
    let measured: Vec<&Pass> = passes.iter().filter(|pass| pass.step + 1 == steps).collect();
    let span_start = measured.iter().map(|pass| pass.start_s).fold(f64::INFINITY, f64::min);
    let span_end = measured.iter().map(|pass| pass.end_s - pass.optimizer_s).fold(f64::NEG_INFINITY, f64::max);
    let span = span_end - span_start;

    let synchronous = !pipeline.schedule.updates_per_micro_batch();
    let mut stage_times = Vec::with_capacity(p);
    // When each stage is done with each step: its last pass, then (synchronous schedules)
    // the replicas' all-reduce and the update.
    let mut done = vec![vec![0.0f64; steps]; p];
    for (stage, cost) in pipeline.stages.iter().enumerate() {
        let own: Vec<&&Pass> = measured.iter().filter(|pass| pass.stage == stage).collect();
        let recompute_s: f64 = own.iter().map(|pass| pass.recompute_s).sum();
        let compute_s: f64 =
            own.iter().map(|pass| pass.end_s - pass.start_s - pass.recompute_s - pass.optimizer_s).sum();
        let all_reduce_s = match pipeline.replicas > 1 && synchronous {
            true => AllReduce { link: &pipeline.link, measured: pipeline.measured_all_reduce }
                .seconds(cost.gradient_bytes, pipeline.replicas),
            false => 0.0,
        };
        let flush_optimizer_s = if synchronous { cost.optimizer_s } else { 0.0 };
        stage_times.push(StageTime {
            compute_s,
            recompute_s,
            optimizer_s: own.iter().map(|pass| pass.optimizer_s).sum::<f64>() + flush_optimizer_s,
            all_reduce_s,
            bubble: if span > 0.0 { (1.0 - (compute_s + recompute_s) / span).clamp(0.0, 1.0) } else { 0.0 },
        });
        for (step, end) in done[stage].iter_mut().enumerate() {
            let last = passes.iter().filter(|pass| pass.stage == stage && pass.step == step).map(|pass| pass.end_s);
            *end = last.fold(0.0, f64::max) + all_reduce_s + flush_optimizer_s;
        }
    }
    // The last stage sends each step's loss (8 bytes) to the others after its update; a
    // stage's step is over when it has it.
    let loss_s = pipeline.link.transfer_s(8.0);
    let step_end = |step: usize| {
        let last_stage = done[p - 1][step];
        (0..p)
            .map(|stage| if stage + 1 == p { last_stage } else { done[stage][step].max(last_stage + loss_s) })
            .fold(0.0, f64::max)
    };
    let step_s = match steps {
        1 => step_end(0),
        _ => step_end(steps - 1) - step_end(steps - 2),
    };
    let actions = passes
        .iter()
        .map(|pass| SimulatedAction {
            stage: pass.stage,
            action: pass.action,
            start_s: pass.start_s,
            end_s: pass.end_s,
        })
        .collect();
    Ok(PipelineStep { step_s, stages: stage_times, actions })
}

/// One simulated pass with its parts.
struct Pass {
    stage: usize,
    /// Which step's action list the pass came from.
    step: usize,
    action: Action,
    start_s: f64,
    end_s: f64,
    recompute_s: f64,
    optimizer_s: f64,
}

/// One direction of the hop between two neighbouring stages: messages go out in the order
/// they are sent, each taking the wire for its bytes ÷ bandwidth, and arrive a latency
/// after they finish going out. Transfers over a hop therefore never add up to more than
/// its bandwidth, however many micro-batches a schedule keeps in flight.
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

/// Runs every stage's list in order, each pass as soon as its stage is free and its input
/// has arrived.
fn run_actions(
    pipeline: &Pipeline<'_>,
    lists: &[Vec<(usize, Action)>],
    m: usize,
) -> Result<Vec<Pass>, SimulationError> {
    let p = lists.len();
    let mut next = vec![0usize; p];
    let mut free_at = vec![0.0f64; p];
    // When each (stage, micro-batch)'s input arrived there: a forward's activation from
    // the stage before, a backward's gradient from the stage after. A stage's sends enter
    // its wires in the order it runs its passes, as the stage workers issue them.
    let mut activation_at: Vec<std::collections::HashMap<usize, f64>> = vec![Default::default(); p];
    let mut gradient_at: Vec<std::collections::HashMap<usize, f64>> = vec![Default::default(); p];
    let mut downstream: Vec<Wire> = (0..p).map(|_| Wire::default()).collect();
    let mut upstream: Vec<Wire> = (0..p).map(|_| Wire::default()).collect();
    let mut passes = Vec::new();
    loop {
        let mut progressed = false;
        for stage in 0..p {
            while let Some(&(step, action)) = lists[stage].get(next[stage]) {
                let cost = &pipeline.stages[stage];
                let input_at = match action {
                    Action::Forward(id) if stage > 0 => activation_at[stage].get(&id).copied(),
                    Action::Backward(id) if stage + 1 < p => gradient_at[stage].get(&id).copied(),
                    _ => Some(0.0),
                };
                let Some(input_at) = input_at else { break };
                let start_s = free_at[stage].max(input_at);
                let (recompute_s, optimizer_s, work_s) = match action {
                    Action::Forward(_) => (0.0, 0.0, cost.forward_s),
                    Action::Backward(id) => {
                        let recompute = recomputes(pipeline, stage, p, id, m);
                        let recompute_s = if recompute { cost.forward_s } else { 0.0 };
                        let optimizer_s =
                            if pipeline.schedule.updates_per_micro_batch() { cost.optimizer_s } else { 0.0 };
                        (recompute_s, optimizer_s, cost.backward_s + recompute_s + optimizer_s)
                    }
                };
                let end_s = start_s + work_s;
                match action {
                    Action::Forward(id) if stage + 1 < p => {
                        let arrives = downstream[stage].send(&pipeline.link, end_s, cost.output_bytes);
                        activation_at[stage + 1].insert(id, arrives);
                    }
                    Action::Backward(id) if stage > 0 => {
                        let bytes = pipeline.stages[stage - 1].output_bytes;
                        let arrives = upstream[stage].send(&pipeline.link, end_s, bytes);
                        gradient_at[stage - 1].insert(id, arrives);
                    }
                    _ => {}
                };
                passes.push(Pass { stage, step, action, start_s, end_s, recompute_s, optimizer_s });
                free_at[stage] = end_s;
                next[stage] += 1;
                progressed = true;
            }
        }
        if (0..p).all(|stage| next[stage] == lists[stage].len()) {
            return Ok(passes);
        }
        if !progressed {
            let stage = (0..p).find(|&stage| next[stage] < lists[stage].len()).expect("some stage is stuck");
            return Err(SimulationError::Deadlock { stage, action: lists[stage][next[stage]].1 });
        }
    }
}

/// Whether the backward of micro-batch `id` on `stage` recomputes its forward, as the
/// stage workers decide it.
fn recomputes(pipeline: &Pipeline<'_>, stage: usize, stages: usize, id: usize, m: usize) -> bool {
    match pipeline.schedule {
        Schedule::PipeDream => stages - stage > 1,
        _ => pipeline.checkpoint.recomputes(id % m, m),
    }
}

#[cfg(test)]
mod tests;
