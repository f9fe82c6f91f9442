//! PipeDream's replicated stages (Narayanan et al., SOSP 2019; thesis §2.4.2, ch. 7): stage
//! `s` of the pipeline runs on `r_s` workers, micro-batch `i` goes to its replica
//! `i mod r_s` (round robin, so every `lcm(r)` micro-batches each replica of every stage has
//! had its share), and a stage's replicas sum their gradients before the update.
//!
//! Ranks are laid out stage-major: stage 0's replicas first, then stage 1's, …, so a
//! layout `[2, 1]` puts stage 0 on ranks 0 and 1 and stage 1 on rank 2.
//!
//! Each replica runs 1F1B over its own micro-batches, keeping
//! `ceil(Σ_{k ≥ s} r_k ÷ r_s)` of them in flight: the workers from its stage to the end
//! shared among its replicas, PipeDream's "number of optimal active mini-batches" (NOAM) at
//! the input stage, and `p − s` (1F1B's own) when nothing is replicated. Under PipeDream
//! (no flush) a replica keeps that many in flight across batches, and a stage's replicas
//! all-reduce each round's gradients (their n-th backwards) and update together.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Action;

/// How many workers each pipeline stage runs on, first stage first (`[2, 1]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "Vec<usize>", into = "Vec<usize>")]
pub struct StageReplicas(Vec<usize>);

impl TryFrom<Vec<usize>> for StageReplicas {
    type Error = String;

    /// Refuses fewer than two stages, a stage on no worker, and a layout with no stage
    /// replicated (that is plain 1F1B, which has its own cell).
    fn try_from(replicas: Vec<usize>) -> Result<StageReplicas, String> {
        if replicas.len() < 2 {
            return Err(format!("{replicas:?}: give a worker count for each of two or more stages, e.g. [2, 1]"));
        }
        if replicas.contains(&0) {
            return Err(format!("{replicas:?}: every stage runs on at least one worker"));
        }
        if replicas.iter().all(|&r| r == 1) {
            return Err(format!("{replicas:?} replicates no stage: leave stage_replicas out for plain 1f1b"));
        }
        Ok(StageReplicas(replicas))
    }
}

impl From<StageReplicas> for Vec<usize> {
    fn from(replicas: StageReplicas) -> Vec<usize> {
        replicas.0
    }
}

impl fmt::Display for StageReplicas {
    /// As PipeDream's papers write a layout: `2-1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&counts.join("-"))
    }
}

impl StageReplicas {
    /// Workers per stage, first stage first.
    pub fn counts(&self) -> &[usize] {
        &self.0
    }

    /// Pipeline stages.
    pub fn stages(&self) -> usize {
        self.0.len()
    }

    /// Workers in all: the cell's worker count.
    pub fn workers(&self) -> usize {
        self.0.iter().sum()
    }

    /// Workers stage `stage` runs on.
    pub fn replicas_of(&self, stage: usize) -> usize {
        self.0[stage]
    }

    /// Micro-batches after which every replica of every stage has had the same number:
    /// the least common multiple of the counts.
    pub fn cycle(&self) -> usize {
        self.0.iter().fold(1, |lcm, &r| lcm / gcd(lcm, r) * r)
    }

    /// Why `micro_batches` do not spread evenly over every stage's replicas, if they do
    /// not.
    pub fn check(&self, micro_batches: usize) -> Result<(), String> {
        let cycle = self.cycle();
        match micro_batches.is_multiple_of(cycle) {
            true => Ok(()),
            false => Err(format!(
                "micro_batches {micro_batches} do not go round the replicas of stage_replicas {self} evenly: \
                 give a multiple of {cycle}"
            )),
        }
    }

    /// The world rank of replica `replica` of `stage`.
    pub fn rank_of(&self, stage: usize, replica: usize) -> usize {
        self.0[..stage].iter().sum::<usize>() + replica
    }

    /// The world rank that runs micro-batch `micro_batch` (a global id) on `stage`.
    pub fn rank_for(&self, stage: usize, micro_batch: usize) -> usize {
        self.rank_of(stage, micro_batch % self.0[stage])
    }

    /// The `(stage, replica)` rank `rank` runs.
    pub fn place_of(&self, rank: usize) -> (usize, usize) {
        let mut first = 0;
        for (stage, &count) in self.0.iter().enumerate() {
            if rank < first + count {
                return (stage, rank - first);
            }
            first += count;
        }
        panic!("rank {rank} is outside stage_replicas {self}")
    }

    /// The ranks of `stage`'s replicas.
    pub fn ranks_of(&self, stage: usize) -> Vec<usize> {
        (0..self.0[stage]).map(|replica| self.rank_of(stage, replica)).collect()
    }

    /// Micro-batches replica `replica` of `stage` keeps in flight at most (before 1F1B's
    /// alternation starts): `ceil(Σ_{k ≥ stage} r_k ÷ r_stage)`, capped by its share of
    /// `micro_batches`.
    pub fn in_flight(&self, stage: usize, replica: usize, micro_batches: usize) -> usize {
        let downstream: usize = self.0[stage..].iter().sum();
        downstream.div_ceil(self.0[stage]).min(self.share(stage, replica, micro_batches).len())
    }

    /// The micro-batches (of `micro_batches`) replica `replica` of `stage` runs.
    fn share(&self, stage: usize, replica: usize, micro_batches: usize) -> Vec<usize> {
        (replica..micro_batches).step_by(self.0[stage]).collect()
    }

    /// The order of replica `replica` of `stage` for a batch of `micro_batches`: 1F1B
    /// over its share, `in_flight − 1` warm-up forwards, then one forward and one
    /// backward, then the remaining backwards, oldest first.
    pub fn actions(&self, stage: usize, replica: usize, micro_batches: usize) -> Vec<Action> {
        let ids = self.share(stage, replica, micro_batches);
        let warm_up = self.in_flight(stage, replica, micro_batches).saturating_sub(1);
        let mut actions: Vec<Action> = ids[..warm_up].iter().map(|&id| Action::forward(stage, id)).collect();
        for (i, &id) in ids[warm_up..].iter().enumerate() {
            actions.push(Action::forward(stage, id));
            actions.push(Action::backward(stage, ids[i]));
        }
        actions.extend(ids[ids.len() - warm_up..].iter().map(|&id| Action::backward(stage, id)));
        actions
    }
}

impl StageReplicas {
    /// PipeDream's order for replica `replica` of `stage` in optimizer step `step`, by
    /// global micro-batch id (`step × m + i`): its share of the step's micro-batches, each
    /// forward followed by the backward of its own micro-batch `in_flight − 1` before it,
    /// once there is one (what [`super::pipedream_actions`] does for one worker per stage).
    pub fn pipedream_actions(&self, stage: usize, replica: usize, micro_batches: usize, step: usize) -> Vec<Action> {
        let r = self.0[stage];
        let depth = self.0[stage..].iter().sum::<usize>().div_ceil(r) - 1;
        // Its n-th micro-batch over the whole run is replica + n·r (m is a multiple of r).
        let first = step * micro_batches / r;
        let mut actions = Vec::with_capacity(2 * micro_batches / r);
        for n in first..first + micro_batches / r {
            actions.push(Action::forward(stage, replica + n * r));
            if n >= depth {
                actions.push(Action::backward(stage, replica + (n - depth) * r));
            }
        }
        actions
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Schedule;

    fn layout(counts: &[usize]) -> StageReplicas {
        StageReplicas::try_from(counts.to_vec()).unwrap()
    }

    #[test]
    fn ranks_are_stage_major_and_micro_batches_go_round_robin() {
        let three_two = layout(&[3, 2]);
        assert_eq!((three_two.stages(), three_two.workers(), three_two.cycle()), (2, 5, 6));
        assert_eq!(three_two.ranks_of(1), [3, 4]);
        assert_eq!((0..6).map(|id| three_two.rank_for(0, id)).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2]);
        assert_eq!((0..6).map(|id| three_two.rank_for(1, id)).collect::<Vec<_>>(), [3, 4, 3, 4, 3, 4]);
        assert_eq!(
            (0..5).map(|rank| three_two.place_of(rank)).collect::<Vec<_>>(),
            [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
        );
        assert_eq!(three_two.to_string(), "3-2");
    }

    #[test]
    fn a_layout_of_one_stage_a_stage_on_no_worker_or_no_replica_is_refused() {
        for counts in [vec![2], vec![2, 0], vec![1, 1, 1]] {
            assert!(StageReplicas::try_from(counts.clone()).is_err(), "{counts:?}");
        }
        assert!(layout(&[2, 1]).check(4).is_ok());
        let refused = layout(&[2, 3]).check(4).unwrap_err();
        assert!(refused.contains("multiple of 6"), "{refused}");
    }

    #[test]
    fn the_input_stage_keeps_noam_micro_batches_in_flight() {
        // PipeDream's 2-1: ceil(3 / 2) = 2 in flight on each input replica, 1 on the last.
        let two_one = layout(&[2, 1]);
        assert_eq!(two_one.in_flight(0, 0, 8), 2);
        assert_eq!(two_one.in_flight(1, 0, 8), 1);
        let text = |actions: Vec<Action>| crate::schedule::pytorch::pytorch_order(&actions);
        assert_eq!(text(two_one.actions(0, 1, 8)), "0F1,0F3,0B1,0F5,0B3,0F7,0B5,0B7");
        assert_eq!(text(two_one.actions(1, 0, 4)), "1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3");
        // 1-2: the single input stage feeds three workers.
        assert_eq!(layout(&[1, 2]).in_flight(0, 0, 8), 3);
    }

    #[test]
    fn every_replica_runs_each_of_its_micro_batches_once_forward_then_backward() {
        for counts in [vec![2, 1], vec![1, 2], vec![3, 2], vec![1, 3], vec![2, 1, 1], vec![1, 2, 1]] {
            let layout = layout(&counts);
            let m = 2 * layout.cycle();
            let mut seen = vec![Vec::new(); layout.stages()];
            for rank in 0..layout.workers() {
                let (stage, replica) = layout.place_of(rank);
                let actions = layout.actions(stage, replica, m);
                for action in &actions {
                    assert_eq!(layout.rank_for(stage, action.micro_batch), rank, "{counts:?}");
                    let forward = actions.iter().position(|a| *a == Action::forward(stage, action.micro_batch));
                    let backward = actions.iter().position(|a| *a == Action::backward(stage, action.micro_batch));
                    assert!(forward < backward, "{counts:?} rank {rank}: {action:?}");
                }
                seen[stage].extend(actions.iter().filter(|a| a.pass == crate::Pass::Forward).map(|a| a.micro_batch));
            }
            for ids in &mut seen {
                ids.sort_unstable();
                assert_eq!(*ids, (0..m).collect::<Vec<_>>(), "{counts:?}");
            }
        }
    }

    #[test]
    fn pipedream_replicas_keep_their_share_in_flight_across_steps() {
        let text = |actions: Vec<Action>| crate::schedule::pytorch::pytorch_order(&actions);
        let two_one = layout(&[2, 1]);
        // Stage 0's replica 1: micro-batches 1, 3, 5, 7, …, one of its own in flight ahead.
        assert_eq!(text(two_one.pipedream_actions(0, 1, 4, 0)), "0F1,0F3,0B1");
        assert_eq!(text(two_one.pipedream_actions(0, 1, 4, 1)), "0F5,0B3,0F7,0B5");
        assert_eq!(text(two_one.pipedream_actions(1, 0, 4, 1)), "1F4,1B4,1F5,1B5,1F6,1B6,1F7,1B7");
        // Unreplicated stages of a layout run PipeDream's own order at their depth.
        let layout = layout(&[1, 1, 2]);
        for step in 0..3 {
            assert_eq!(layout.pipedream_actions(0, 0, 4, step), crate::pipedream_actions(0, 4, 4, step));
        }
    }

    #[test]
    fn with_one_worker_per_stage_the_order_is_1f1b() {
        // Unreplicated stages inside a replicated layout run exactly 1F1B's stage order.
        // Each of the first three stages has five workers from it to the end, as stage s of
        // a 5-stage 1F1B pipeline has 5 − s.
        let layout = layout(&[1, 1, 1, 2]);
        for stage in 0..3 {
            assert_eq!(layout.actions(stage, 0, 8), Schedule::OneFOneB.actions(stage, 5, 8));
        }
    }
}
