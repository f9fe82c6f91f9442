//! Zero-bubble pipelines (Qi et al., ICLR 2024, "Zero bubble pipeline parallelism"), in the
//! forms `torch.distributed.pipelining` runs, so a trial here and one there do the same
//! work in the same order.
//!
//! Each backward is split into the input's gradient `I` (what the stage before waits for)
//! and the weights' gradient `W` (what nobody waits for), and the `W` passes fill the
//! bubble. Two placements:
//!
//! - **loop** (`ScheduleInterleavedZeroBubble`, ZB1P; ZB-H1 with one stage per rank): rank
//!   `r` of `p` holds stages `r, r + p, …` as interleaved 1F1B does, warms up with
//!   `min((v − 1)·round + p − 1 − r, v·m)` forwards, then runs one forward and one `I`
//!   per op, and from its `r`-th steady op on one deferred `W` each, oldest first; the
//!   remaining `W`s drain at the end. Micro-batches go in whole rounds as interleaved's.
//! - **v** (`ScheduleZBVZeroBubble`, ZB-V): exactly two stages per rank placed in a V, rank
//!   `r` holding stages `r` and `2p − 1 − r`, so the first and last stage share rank 0 and
//!   a micro-batch's forward runs down the ranks and back up.

use std::collections::HashMap;

use super::action::{Action, Pass};
use super::interleaved;

/// Each stage numbers its passes of one kind as it meets them.
#[derive(Default)]
struct Counters(HashMap<(usize, Pass), usize>);

impl Counters {
    fn next(&mut self, stage: usize, pass: Pass) -> Action {
        let slot = self.0.entry((stage, pass)).or_default();
        *slot += 1;
        Action { pass, stage, micro_batch: *slot - 1 }
    }
}

/// Why ZB1P cannot order `micro_batches` micro-batches over `ranks` ranks (it runs whole
/// rounds, as interleaved 1F1B does).
pub(super) fn check_loop(ranks: usize, micro_batches: usize) -> Result<(), String> {
    interleaved::check(ranks, micro_batches).map_err(|why| why.replace("interleaved 1F1B", "zero-bubble (loop)"))
}

/// Rank `rank`'s ZB1P order over its `virtual_stages` stages, loop placement.
pub(super) fn loop_actions(rank: usize, ranks: usize, virtual_stages: usize, micro_batches: usize) -> Vec<Action> {
    let (_, per_round) = interleaved::rounds(ranks, micro_batches);
    let passes = virtual_stages * micro_batches;
    let warm_up = ((virtual_stages - 1) * per_round + (ranks - 1 - rank)).min(passes);
    let stage = |chunk: usize| chunk * ranks + rank;
    let forward_stage = |op: usize| stage((op / per_round) % virtual_stages);
    let backward_stage = |op: usize| stage(virtual_stages - 1 - ((op - warm_up) / per_round) % virtual_stages);
    let mut counters = Counters::default();
    let mut actions = Vec::with_capacity(3 * passes);
    // The ops whose `I` ran, in order: each one's `W` follows later, oldest first.
    let mut backward_ops = Vec::with_capacity(passes);
    let mut weights_done = 0;
    for op in 0..warm_up + passes {
        if op < passes {
            actions.push(counters.next(forward_stage(op), Pass::Forward));
        }
        if op < warm_up {
            continue;
        }
        actions.push(counters.next(backward_stage(op), Pass::InputBackward));
        backward_ops.push(op);
        // Rank r runs r steady ops with `I` alone before the first `W`.
        if op - warm_up >= rank {
            actions.push(counters.next(backward_stage(backward_ops[weights_done]), Pass::WeightBackward));
            weights_done += 1;
        }
    }
    for &op in &backward_ops[weights_done..] {
        actions.push(counters.next(backward_stage(op), Pass::WeightBackward));
    }
    actions
}

/// Rank `rank`'s ZB-V order over its two stages, `rank` and `2·ranks − 1 − rank`.
pub(super) fn v_actions(rank: usize, ranks: usize, micro_batches: usize) -> Vec<Action> {
    let (down, up) = (rank, 2 * ranks - 1 - rank);
    // The order is laid out for at least 2p − 1 micro-batches; the passes of those beyond
    // `micro_batches` are then left out.
    let laid_out = micro_batches.max(2 * ranks - 1);
    let mut counters = Counters::default();
    let mut actions = Vec::with_capacity(6 * laid_out);
    let mut push = |counters: &mut Counters, stage, pass| actions.push(counters.next(stage, pass));
    for _ in 0..2 * (ranks - rank) - 1 {
        push(&mut counters, down, Pass::Forward);
    }
    for _ in 0..rank {
        push(&mut counters, up, Pass::Forward);
        push(&mut counters, down, Pass::Forward);
    }
    for _ in 0..ranks - rank {
        push(&mut counters, up, Pass::Forward);
        push(&mut counters, up, Pass::InputBackward);
        push(&mut counters, up, Pass::WeightBackward);
    }
    let count = |counters: &Counters, stage, pass| counters.0.get(&(stage, pass)).copied().unwrap_or(0);
    while count(&counters, up, Pass::Forward) < count(&counters, down, Pass::Forward)
        || count(&counters, down, Pass::Forward) < laid_out
    {
        if count(&counters, down, Pass::Forward) < laid_out {
            push(&mut counters, down, Pass::Forward);
        }
        for stage in [down, up] {
            if stage == up {
                push(&mut counters, up, Pass::Forward);
            }
            push(&mut counters, stage, Pass::InputBackward);
            push(&mut counters, stage, Pass::WeightBackward);
        }
    }
    for _ in 0..rank {
        push(&mut counters, down, Pass::InputBackward);
        push(&mut counters, up, Pass::InputBackward);
    }
    for _ in 0..ranks - rank {
        push(&mut counters, down, Pass::InputBackward);
        push(&mut counters, down, Pass::WeightBackward);
    }
    for stage in [up, down] {
        while count(&counters, stage, Pass::WeightBackward) < count(&counters, stage, Pass::InputBackward) {
            push(&mut counters, stage, Pass::WeightBackward);
        }
    }
    actions.retain(|action| action.micro_batch < micro_batches);
    actions
}

#[cfg(test)]
mod tests {
    use super::super::pytorch::pytorch_order;
    use super::*;

    /// ZB-H1 on two ranks, four micro-batches: the last rank defers its first `W` by one
    /// op, so its `I`s reach rank 0 a pass earlier than 1F1B's `B` would.
    #[test]
    fn zb_h1_defers_weights_on_later_ranks() {
        assert_eq!(pytorch_order(&loop_actions(0, 2, 1, 4)), "0F0,0F1,0I0,0W0,0F2,0I1,0W1,0F3,0I2,0W2,0I3,0W3");
        assert_eq!(pytorch_order(&loop_actions(1, 2, 1, 4)), "1F0,1I0,1F1,1I1,1W0,1F2,1I2,1W1,1F3,1I3,1W2,1W3");
    }

    #[test]
    fn zb_v_places_first_and_last_stage_on_rank_zero() {
        let order = pytorch_order(&v_actions(0, 2, 4));
        assert!(order.starts_with("0F0,0F1,0F2,3F0,3I0,3W0,"), "{order}");
        assert!(order.ends_with("0I3,0W3"), "{order}");
    }
}
