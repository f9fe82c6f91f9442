//! Peak memory of one worker during a step, from what the profile counts per stage (bytes a
//! forward keeps for its backward, and the passes' transient high-water above that) and
//! what the strategy's implementation holds beside: weights, gradients, the optimizer's
//! state, PipeDream's stashed weights, the data loader's batches, the flattened buffers
//! its communication goes through. A pipeline stage's micro-batches alive at once come
//! from the same action lists its worker runs ([`max_in_flight`]).

use serde::Serialize;
use stratlab_strategy_spec::{pipedream_actions, Action, Pass, Schedule};

/// What one worker holds, as the model needs it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkerShape {
    /// Bytes of the weights it trains.
    pub parameter_bytes: f64,
    /// Tensors of the parameters' size the optimizer keeps (SGD: 1 with momentum, else 0; Adam: 2).
    pub optimizer_states: usize,
    /// Bytes one micro-batch's forward keeps until its backward, over the worker's stages.
    pub kept_bytes: f64,
    /// The high-water of one micro-batch's forward and backward above what was allocated
    /// before it: over the worker's stages `s`, the most of what stages up to `s` keep plus
    /// `s`'s own temporaries (the backward frees later stages' as it goes).
    pub pass_peak_bytes: f64,
    /// Bytes of one micro-batch's input where the worker receives it from another (a
    /// pipeline's activation, kept for the backward); 0 where it reads the data.
    pub received_bytes: f64,
    /// Micro-batches forwarded and not yet backwarded, at most.
    pub in_flight: usize,
    /// How many of those keep only their input and recompute the rest in the backward.
    pub input_only: usize,
    /// Copies of the weights stashed for backwards (PipeDream).
    pub stashed_weight_copies: usize,
    /// Bytes of the data batches the loader holds at once (prefetched and in use).
    pub loader_bytes: f64,
    /// Bytes the update allocates at once on the largest tensor it updates (its
    /// temporaries); the passes' activations are gone by then.
    pub update_peak_bytes: f64,
    /// Bytes of flattened communication buffers alive during the backward (data-parallel
    /// buckets, launched as it goes; a parameter server's messages, kept from round to
    /// round).
    pub comm_buffer_bytes: f64,
}

/// A worker's predicted peak, split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WorkerMemory {
    /// Weights, stashed copies included.
    pub weights_bytes: f64,
    /// Gradients.
    pub gradients_bytes: f64,
    /// Optimizer state.
    pub optimizer_bytes: f64,
    /// What the other micro-batches in flight keep, and every received input.
    pub activations_bytes: f64,
    /// The running micro-batch's own high-water (its recompute, for input-only ones).
    pub transient_bytes: f64,
    /// Data batches and communication buffers.
    pub buffers_bytes: f64,
}

impl WorkerMemory {
    /// The peak: everything above held at once.
    pub fn total_bytes(&self) -> f64 {
        self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.transient_bytes
            + self.buffers_bytes
    }
}

impl WorkerShape {
    /// The peak, at the moment the most micro-batches are in flight and one of them (a full
    /// one where there is one, else a recompute) is at its own high-water.
    pub fn peak(&self) -> WorkerMemory {
        let others = self.in_flight.saturating_sub(self.input_only).saturating_sub(1) as f64;
        let activations_bytes = others * self.kept_bytes + self.in_flight as f64 * self.received_bytes;
        WorkerMemory {
            weights_bytes: self.parameter_bytes * (1 + self.stashed_weight_copies) as f64,
            gradients_bytes: self.parameter_bytes,
            optimizer_bytes: self.parameter_bytes * self.optimizer_states as f64,
            activations_bytes,
            transient_bytes: self.pass_peak_bytes.max(self.update_peak_bytes),
            buffers_bytes: self.loader_bytes + self.comm_buffer_bytes,
        }
    }
}

/// The most micro-batches rank `rank` of `ranks` has forwarded and not yet backwarded
/// under `schedule` with `m` micro-batches per batch, over all the stages it holds
/// (PipeDream: in its steady state).
pub fn max_in_flight(schedule: Schedule, rank: usize, ranks: usize, m: usize) -> usize {
    let actions: Vec<Action> = match schedule {
        Schedule::PipeDream => (0..3).flat_map(|step| pipedream_actions(rank, ranks, m, step)).collect(),
        schedule => schedule.actions(rank, ranks, m),
    };
    let mut alive = 0usize;
    let mut most = 0;
    for action in actions {
        match action.pass {
            Pass::Forward => alive += 1,
            // A split backward keeps the micro-batch's graph until its weights' half.
            Pass::Backward | Pass::WeightBackward => alive = alive.saturating_sub(1),
            Pass::InputBackward => {}
        }
        most = most.max(alive);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpipe_keeps_every_micro_batch_and_1f1b_only_the_stages_ahead() {
        let (p, m) = (4, 8);
        for stage in 0..p {
            assert_eq!(max_in_flight(Schedule::GPipe, stage, p, m), m);
            assert_eq!(max_in_flight(Schedule::OneFOneB, stage, p, m), p - stage);
        }
        assert_eq!(max_in_flight(Schedule::PipeDream, 0, p, m), p);
        assert_eq!(max_in_flight(Schedule::PipeDream, p - 1, p, m), 1);
        // Interleaved rank 0 of 4 (v = 2, m = 8) warms up with 10 forwards over its two
        // stages and holds them until its first backward.
        assert_eq!(max_in_flight(Schedule::Interleaved { virtual_stages: 2 }, 0, p, m), 11);
    }

    #[test]
    fn the_peak_adds_what_is_held_at_once() {
        let shape = WorkerShape {
            parameter_bytes: 100.0,
            optimizer_states: 1,
            kept_bytes: 10.0,
            pass_peak_bytes: 15.0,
            received_bytes: 2.0,
            in_flight: 5,
            input_only: 3,
            stashed_weight_copies: 3,
            loader_bytes: 7.0,
            comm_buffer_bytes: 1.0,
            update_peak_bytes: 0.0,
        };
        let peak = shape.peak();
        // Two full micro-batches, one of them running at its high-water; five inputs kept.
        assert_eq!(peak.activations_bytes, 10.0 + 5.0 * 2.0);
        assert_eq!(peak.transient_bytes, 15.0);
        assert_eq!(peak.weights_bytes, 400.0);
        assert_eq!(peak.total_bytes(), 400.0 + 100.0 + 100.0 + 20.0 + 15.0 + 8.0);
        // All input-only: the running recompute is the high-water on top of the inputs.
        // An update allocating more than the pass's high-water sets the transient instead.
        let updating = WorkerShape { update_peak_bytes: 40.0, ..shape.clone() }.peak();
        assert_eq!(updating.transient_bytes, 40.0);
        let recomputing = WorkerShape { input_only: 5, ..shape }.peak();
        assert_eq!(recomputing.activations_bytes, 10.0);
        assert_eq!(recomputing.transient_bytes, 15.0);
    }
}
