//! The parameters a recommender searches for each strategy at a worker count and global
//! batch (samples per optimizer step, the same for every candidate, so that their times
//! per sample compare like for like): the per-worker batch that gives that global batch,
//! the micro-batch counts up to 32 (powers of two) within a pipeline's batch, the
//! checkpoint modes, the balances that need no explicit list, the fusion thresholds Horovod
//! users try, both server placements, every hybrid split into pipelines of at least two
//! stages, interleaved 1F1B at 2 and 4 stages per worker, 1F1B over replicated stages
//! ([`replicated_layouts`]), zero-bubble as ZB-H1, ZB1P at 2 stages per worker and ZB-V,
//! and every ZeRO stage (stage 3 with either gathering unit).

use crate::{
    Balance, Checkpoint, Parameters, Placement, ServerPlacement, ShardUnit, StageReplicas, Strategy, StrategyKind,
    ZeroStage,
};

/// Fusion thresholds tried for data parallelism, MiB.
const FUSION_THRESHOLDS_MIB: [u64; 4] = [1, 4, 16, 64];
/// Stages per worker tried for interleaved 1F1B (`check` drops those the network has too
/// few stages for).
const VIRTUAL_STAGES: [usize; 2] = [2, 4];
/// Zero-bubble's shapes tried: ZB-H1, ZB1P at two stages per worker, ZB-V.
const ZERO_BUBBLE_SHAPES: [(Placement, usize); 3] = [(Placement::Loop, 1), (Placement::Loop, 2), (Placement::V, 2)];
/// The most micro-batches tried.
const MOST_MICRO_BATCHES: usize = 32;

/// One strategy of the search with the per-worker batch that gives the searched global batch.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchedStrategy {
    /// The strategy and its parameters.
    pub strategy: Strategy,
    /// Samples per worker per step (a pipeline's whole batch, split into its micro-batches).
    pub batch_per_worker: usize,
}

/// Every strategy, with every parameter value searched, that `workers` workers can run so
/// that a step trains `global_batch` samples over a network of `network_stages` stages;
/// and `single`, on one of them, at the same global batch: the baseline any parallel
/// strategy has to beat. A strategy whose workers (or replicas) do not divide the global
/// batch is left out.
pub fn search_space(workers: usize, global_batch: usize, network_stages: usize) -> Vec<SearchedStrategy> {
    let balances = [Balance::Time, Balance::Parameters, Balance::Uniform];
    let mut candidates = Vec::new();
    let mut add = |kind: StrategyKind, parameters: Parameters| {
        if let Ok(strategy) = Strategy::new(kind, parameters) {
            let workers = if kind.is_distributed() { workers } else { 1 };
            let Some(batch_per_worker) = strategy.batch_per_worker(global_batch, workers) else { return };
            if strategy.check(workers, batch_per_worker, "network", network_stages).is_ok() {
                candidates.push(SearchedStrategy { strategy, batch_per_worker });
            }
        }
    };
    // A pipeline's batch is the global batch (hybrid: a replica's share of it); `check`
    // drops the counts its batch cannot split.
    let micro_batches: Vec<usize> =
        (0..).map(|power| 1usize << power).take_while(|&m| m <= global_batch.min(MOST_MICRO_BATCHES)).collect();
    for &kind in StrategyKind::ALL {
        let none = Parameters::default;
        match kind {
            StrategyKind::Single => add(kind, none()),
            StrategyKind::DataParallel => {
                for mib in FUSION_THRESHOLDS_MIB {
                    add(kind, Parameters { fusion_threshold_mib: Some(mib), ..none() });
                }
            }
            StrategyKind::ParameterServer => {
                for server in ServerPlacement::ALL {
                    add(kind, Parameters { server: Some(server), ..none() });
                }
            }
            StrategyKind::ModelParallel => {
                for balance in &balances {
                    add(kind, Parameters { balance: Some(balance.clone()), ..none() });
                }
            }
            StrategyKind::Gpipe | StrategyKind::OneFOneB => {
                for (&m, balance, checkpoint) in cartesian(&micro_batches, &balances, &Checkpoint::ALL) {
                    add(
                        kind,
                        Parameters {
                            micro_batches: Some(m),
                            balance: Some(balance),
                            checkpoint: Some(checkpoint),
                            ..none()
                        },
                    );
                }
            }
            StrategyKind::Interleaved1F1B => {
                for (&m, balance, v) in cartesian(&micro_batches, &balances, &VIRTUAL_STAGES) {
                    let parameters = Parameters {
                        micro_batches: Some(m),
                        balance: Some(balance),
                        virtual_stages: Some(v),
                        ..none()
                    };
                    add(kind, parameters);
                }
            }
            StrategyKind::ZeroBubble => {
                for (&m, balance, (placement, v)) in cartesian(&micro_batches, &balances, &ZERO_BUBBLE_SHAPES) {
                    let parameters = Parameters {
                        micro_batches: Some(m),
                        balance: Some(balance),
                        placement: Some(placement),
                        virtual_stages: Some(v),
                        ..none()
                    };
                    add(kind, parameters);
                }
            }
            StrategyKind::PipeDream => {
                for (&m, balance, _) in cartesian(&micro_batches, &balances, &[()]) {
                    add(kind, Parameters { micro_batches: Some(m), balance: Some(balance), ..none() });
                }
            }
            StrategyKind::ShardedDataParallel => {
                for stage in ZeroStage::ALL {
                    let units: &[Option<ShardUnit>] = if stage.shards_weights() {
                        &[Some(ShardUnit::Stage), Some(ShardUnit::Network)]
                    } else {
                        &[None]
                    };
                    for &shard_unit in units {
                        add(kind, Parameters { stage: Some(stage), shard_unit, ..none() });
                    }
                }
            }
            StrategyKind::Hybrid => {
                for stages in (2..workers).filter(|&stages| workers.is_multiple_of(stages)) {
                    for (&m, balance, _) in cartesian(&micro_batches, &balances, &[()]) {
                        let parameters = Parameters {
                            micro_batches: Some(m),
                            balance: Some(balance),
                            pipeline_stages: Some(stages),
                            ..none()
                        };
                        add(kind, parameters);
                    }
                }
            }
        }
        // PipeDream's layouts, flushed (1f1b) and asynchronous: `check` drops the
        // micro-batch counts that do not go round a layout's replicas.
        if matches!(kind, StrategyKind::OneFOneB | StrategyKind::PipeDream) {
            for (&m, balance, layout) in cartesian(&micro_batches, &balances, &replicated_layouts(workers)) {
                let parameters = Parameters {
                    micro_batches: Some(m),
                    balance: Some(balance),
                    stage_replicas: Some(layout),
                    ..none()
                };
                add(kind, parameters);
            }
        }
    }
    candidates
}

/// The replicated layouts searched on `workers` workers: two stages split every way
/// (`[2, 1]`, `[1, 2]`, …) and, from four workers, one stage doubled among `workers − 1`
/// (`[2, 1, 1]`, `[1, 2, 1]`, …): where PipeDream's planner looks first, a slow stage
/// given a second worker. Layouts with no stage replicated are plain 1F1B.
pub fn replicated_layouts(workers: usize) -> Vec<StageReplicas> {
    let mut layouts: Vec<Vec<usize>> = (1..workers).map(|first| vec![first, workers - first]).collect();
    if workers >= 4 {
        layouts.extend(
            (0..workers - 1).map(|doubled| {
                (0..workers - 1).map(|stage| if stage == doubled { 2 } else { 1 }).collect::<Vec<usize>>()
            }),
        );
    }
    layouts.into_iter().filter_map(|counts| StageReplicas::try_from(counts).ok()).collect()
}

/// Every combination of one of each.
fn cartesian<'a, A, B: Clone, C: Clone>(a: &'a [A], b: &[B], c: &[C]) -> Vec<(&'a A, B, C)> {
    a.iter().flat_map(|a| b.iter().flat_map(move |b| c.iter().map(move |c| (a, b.clone(), c.clone())))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_is_searched_where_it_can_run() {
        let space: Vec<Strategy> = search_space(4, 64, 8).into_iter().map(|searched| searched.strategy).collect();
        let kinds: Vec<StrategyKind> =
            StrategyKind::ALL.iter().copied().filter(|kind| space.iter().any(|s| s.kind() == *kind)).collect();
        assert_eq!(kinds, StrategyKind::ALL, "every strategy can run 4 workers over 8 stages");
        // 1…32 micro-batches × 3 balances × 3 checkpoint modes.
        assert_eq!(space.iter().filter(|s| s.kind() == StrategyKind::Gpipe).count(), 6 * 3 * 3);
        assert!(space.iter().all(|s| s.micro_batches() <= 64));
        // Hybrid splits 4 workers into 2 pipelines of 2 stages only.
        assert!(space.iter().filter(|s| s.kind() == StrategyKind::Hybrid).all(|s| s.pipeline_shape(4) == Ok((2, 2))));
        // Three network stages cannot feed a 4-stage pipeline, only hybrid's and replicated
        // layouts' fewer stages; a batch of 2 allows m ≤ 2.
        let small: Vec<Strategy> = search_space(4, 2, 3).into_iter().map(|searched| searched.strategy).collect();
        let fewer_stages = |s: &Strategy| s.kind() == StrategyKind::Hybrid || s.stage_replicas().is_some();
        assert!(small.iter().all(|s| !s.kind().is_pipeline() || fewer_stages(s)));
        assert!(small.iter().all(|s| s.micro_batches() <= 2));
    }

    #[test]
    fn replicated_layouts_are_searched_on_their_workers_with_micro_batches_that_go_round() {
        let layouts: Vec<String> = replicated_layouts(4).iter().map(ToString::to_string).collect();
        assert_eq!(layouts, ["1-3", "2-2", "3-1", "2-1-1", "1-2-1", "1-1-2"]);
        assert_eq!(replicated_layouts(2), Vec::<StageReplicas>::new(), "1-1 is plain 1f1b");
        let replicated: Vec<Strategy> = search_space(3, 64, 8)
            .into_iter()
            .map(|searched| searched.strategy)
            .filter(|strategy| strategy.stage_replicas().is_some())
            .collect();
        let two_one = replicated.iter().filter(|s| s.stage_replicas().unwrap().to_string() == "2-1").count();
        assert!(two_one > 0 && replicated.iter().any(|s| s.stage_replicas().unwrap().to_string() == "1-2"));
        for strategy in &replicated {
            assert_eq!(strategy.stage_replicas().unwrap().workers(), 3);
            assert!(strategy.micro_batches().is_multiple_of(2), "{strategy:?}");
        }
    }

    #[test]
    fn every_candidate_trains_the_same_global_batch() {
        for searched in search_space(4, 64, 8) {
            let workers = if searched.strategy.kind().is_distributed() { 4 } else { 1 };
            let global = searched.strategy.global_batch(searched.batch_per_worker, workers);
            assert_eq!(global, 64, "{searched:?}");
            // A pipeline's micro-batches split its own batch, never more samples than it has.
            assert!(searched.strategy.micro_batches() <= searched.batch_per_worker, "{searched:?}");
        }
        let per_worker = |kind: StrategyKind| {
            search_space(4, 64, 8).into_iter().find(|s| s.strategy.kind() == kind).map(|s| s.batch_per_worker)
        };
        assert_eq!(per_worker(StrategyKind::Single), Some(64));
        assert_eq!(per_worker(StrategyKind::DataParallel), Some(16));
        assert_eq!(per_worker(StrategyKind::Gpipe), Some(64));
        assert_eq!(per_worker(StrategyKind::Hybrid), Some(32), "two replicas of a 2-stage pipeline");
        // 4 data-parallel workers cannot share 6 samples evenly; a pipeline can.
        let odd = search_space(4, 6, 8);
        assert!(odd.iter().all(|s| s.strategy.kind() != StrategyKind::DataParallel));
        assert!(odd.iter().any(|s| s.strategy.kind() == StrategyKind::Gpipe));
    }
}
