//! The parameters a recommender searches for each strategy at a worker count and batch:
//! the micro-batch counts that divide the batch (up to 32), the checkpoint modes, the
//! balances that need no explicit list, the fusion thresholds Horovod users try, both
//! server placements, and every hybrid split into pipelines of at least two stages.

use crate::{Balance, Checkpoint, Parameters, ServerPlacement, Strategy, StrategyKind};

/// Fusion thresholds tried for data parallelism, MiB.
const FUSION_THRESHOLDS_MIB: [u64; 4] = [1, 4, 16, 64];
/// The most micro-batches tried.
const MOST_MICRO_BATCHES: usize = 32;

/// Every strategy, with every parameter value searched, that `workers` workers can run
/// with a per-worker batch of `batch` over a network of `network_stages` stages; and
/// `single`, on one of them, the baseline any parallel strategy has to beat.
pub fn search_space(workers: usize, batch: usize, network_stages: usize) -> Vec<Strategy> {
    let micro_batches: Vec<usize> =
        (0..).map(|power| 1usize << power).take_while(|&m| m <= batch.min(MOST_MICRO_BATCHES)).collect();
    let balances = [Balance::Time, Balance::Parameters, Balance::Uniform];
    let mut candidates = Vec::new();
    let mut add = |kind: StrategyKind, parameters: Parameters| {
        if let Ok(strategy) = Strategy::new(kind, parameters) {
            let workers = if kind.is_distributed() { workers } else { 1 };
            if strategy.check(workers, batch, "network", network_stages).is_ok() {
                candidates.push(strategy);
            }
        }
    };
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
            StrategyKind::PipeDream => {
                for (&m, balance, _) in cartesian(&micro_batches, &balances, &[()]) {
                    add(kind, Parameters { micro_batches: Some(m), balance: Some(balance), ..none() });
                }
            }
            StrategyKind::Hybrid => {
                for stages in (2..workers).filter(|stages| workers % stages == 0) {
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
    }
    candidates
}

/// Every combination of one of each.
fn cartesian<'a, A, B: Clone, C: Copy>(a: &'a [A], b: &[B], c: &[C]) -> Vec<(&'a A, B, C)> {
    a.iter().flat_map(|a| b.iter().flat_map(move |b| c.iter().map(move |&c| (a, b.clone(), c)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_is_searched_where_it_can_run() {
        let space = search_space(4, 64, 8);
        let kinds: Vec<StrategyKind> =
            StrategyKind::ALL.iter().copied().filter(|kind| space.iter().any(|s| s.kind() == *kind)).collect();
        assert_eq!(kinds, StrategyKind::ALL, "every strategy can run 4 workers over 8 stages");
        // 1…32 micro-batches × 3 balances × 3 checkpoint modes.
        assert_eq!(space.iter().filter(|s| s.kind() == StrategyKind::Gpipe).count(), 6 * 3 * 3);
        assert!(space.iter().all(|s| s.micro_batches() <= 64));
        // Hybrid splits 4 workers into 2 pipelines of 2 stages only.
        assert!(space.iter().filter(|s| s.kind() == StrategyKind::Hybrid).all(|s| s.pipeline_shape(4) == Ok((2, 2))));
        // Three network stages cannot feed a 4-stage pipeline; a batch of 2 allows m ≤ 2.
        let small = search_space(4, 2, 3);
        assert!(small.iter().all(|s| !s.kind().is_pipeline() || s.kind() == StrategyKind::Hybrid));
        assert!(small.iter().all(|s| s.micro_batches() <= 2));
    }
}
