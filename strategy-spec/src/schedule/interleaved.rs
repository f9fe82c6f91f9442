//! Interleaved 1F1B (Narayanan et al., SC '21, "Efficient large-scale language model
//! training on GPU clusters"), in the flexible form `torch.distributed.pipelining`'s
//! `ScheduleInterleaved1F1B` runs, so a trial here and one there do the same work in the
//! same order.
//!
//! Rank `r` of `p` holds `v` stages. Micro-batches go in rounds of `m ÷ rounds` with
//! `rounds = max(1, m ÷ p)` (integer division), and `m` must be a whole number of rounds.
//! The rank first runs `min((v − 1)·round + 2(p − 1 − r), v·m)` warm-up forwards, then
//! alternates one forward and one backward, then drains the backwards. Forwards visit the
//! rank's stages first to last one round at a time; backwards visit them last to first.
//! Each stage takes its micro-batches in order.

use std::collections::HashMap;

use super::action::Action;

/// How many rounds `micro_batches` micro-batches make on `ranks` ranks, and the
/// micro-batches in each.
pub(super) fn rounds(ranks: usize, micro_batches: usize) -> (usize, usize) {
    let rounds = (micro_batches / ranks.max(1)).max(1);
    (rounds, micro_batches / rounds)
}

/// Why interleaving cannot order `micro_batches` micro-batches over `ranks` ranks.
pub(super) fn check(ranks: usize, micro_batches: usize) -> Result<(), String> {
    let (rounds, _) = rounds(ranks, micro_batches);
    match micro_batches.is_multiple_of(rounds) {
        true => Ok(()),
        false => Err(format!(
            "interleaved 1F1B runs micro-batches in rounds: {micro_batches} micro-batches on {ranks} ranks make \
             {rounds} rounds (micro_batches ÷ workers), and {micro_batches} is not a multiple of {rounds}; \
             give a multiple of {rounds}, or at most {ranks} micro-batches"
        )),
    }
}

/// Rank `rank`'s order over its `virtual_stages` stages.
pub(super) fn actions(rank: usize, ranks: usize, virtual_stages: usize, micro_batches: usize) -> Vec<Action> {
    let (_, per_round) = rounds(ranks, micro_batches);
    let passes = virtual_stages * micro_batches;
    let warm_up = ((virtual_stages - 1) * per_round + 2 * (ranks - 1 - rank)).min(passes);
    let stage = |chunk: usize| chunk * ranks + rank;
    let forward_stage = |k: usize| stage((k / per_round) % virtual_stages);
    let backward_stage = |j: usize| stage(virtual_stages - 1 - (j / per_round) % virtual_stages);
    // Each stage numbers its micro-batches as it meets them.
    let mut next_forward: HashMap<usize, usize> = HashMap::new();
    let mut next_backward: HashMap<usize, usize> = HashMap::new();
    let take = |counters: &mut HashMap<usize, usize>, stage: usize| {
        let slot = counters.entry(stage).or_default();
        *slot += 1;
        *slot - 1
    };
    let mut actions = Vec::with_capacity(2 * passes);
    for k in 0..warm_up {
        let stage = forward_stage(k);
        actions.push(Action::forward(stage, take(&mut next_forward, stage)));
    }
    for j in 0..passes {
        if warm_up + j < passes {
            let stage = forward_stage(warm_up + j);
            actions.push(Action::forward(stage, take(&mut next_forward, stage)));
        }
        let stage = backward_stage(j);
        actions.push(Action::backward(stage, take(&mut next_backward, stage)));
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::super::pytorch::pytorch_order;
    use super::super::Schedule;
    use super::*;

    /// Megatron's figure 4 shape: 4 ranks, 2 stages each, 8 micro-batches. Rank 0 warms
    /// up with (v − 1)·4 + 2·3 = 10 forwards: micro-batches 0–3 through stage 0, 0–3
    /// through stage 4, then 4–5 through stage 0.
    #[test]
    fn rank_zero_of_four_warms_up_through_both_its_stages() {
        let order = pytorch_order(&Schedule::Interleaved { virtual_stages: 2 }.actions(0, 4, 8));
        assert!(order.starts_with("0F0,0F1,0F2,0F3,4F0,4F1,4F2,4F3,0F4,0F5,0F6,4B0,"), "{order}");
        assert!(order.ends_with("0B7"), "{order}");
        // The last rank starts backward of its last stage (7) right after its round.
        let last = pytorch_order(&Schedule::Interleaved { virtual_stages: 2 }.actions(3, 4, 8));
        assert!(last.starts_with("3F0,3F1,3F2,3F3,7F0,7B0,7F1,7B1,"), "{last}");
    }

    #[test]
    fn micro_batches_must_fill_whole_rounds() {
        assert!(check(4, 10).is_ok(), "10 on 4 ranks: two rounds of 5");
        assert!(check(4, 3).is_ok(), "fewer than the ranks: one round");
        let refused = check(4, 9).unwrap_err();
        assert!(refused.contains("not a multiple of 2"), "{refused}");
    }
}
