//! The linear partition problem: cut a cost sequence into contiguous parts so that the
//! largest part is as small as possible (exact dynamic programming).

use std::ops::Range;

/// Relative slack under which two bottlenecks count as equal, so float sums that differ
/// only by rounding (`a + b` against `b + a`) fall to the tie-break, not to noise.
const TIE_TOLERANCE: f64 = 1e-9;

/// Cuts `costs` (one non-negative cost per network stage) into `parts` non-empty
/// contiguous ranges whose largest summed cost is the smallest possible.
///
/// Among optimal cuts it returns the one with the most even stage counts (least sum of
/// squared counts), then the one whose earlier parts hold more stages (lexicographically
/// largest counts), so equal costs give exactly `uniform`'s counts and zero-cost stages do
/// not pile up at one end. Two passes over suffixes, O(n²·parts) each: the first finds the
/// optimal bottleneck, the second the tie-break among cuts within it.
///
/// Panics unless `1 <= parts <= costs.len()` ([`super::check_balance`] says why not first).
pub fn linear_partition(costs: &[f64], parts: usize) -> Vec<Range<usize>> {
    shared_partition(costs, &vec![1; parts])
}

/// [`linear_partition`] into one part per entry of `shares`, part `k`'s cost divided by
/// `shares[k]`: a stage replicated over `shares[k]` workers (PipeDream's replicated
/// stages) may hold that many times the work of one on a single worker, as PipeDream's
/// planner divides a replicated stage's compute by its replicas.
///
/// Panics unless `1 <= shares.len() <= costs.len()` and every share is at least 1.
pub fn shared_partition(costs: &[f64], shares: &[usize]) -> Vec<Range<usize>> {
    let (n, parts) = (costs.len(), shares.len());
    assert!((1..=n).contains(&parts), "cannot cut {n} stages into {parts} parts");
    assert!(!shares.contains(&0), "every part runs on at least one worker: {shares:?}");
    debug_assert!(costs.iter().all(|c| *c >= 0.0), "costs must be non-negative: {costs:?}");
    let mut prefix = vec![0.0; n + 1];
    for (i, cost) in costs.iter().enumerate() {
        prefix[i + 1] = prefix[i] + cost;
    }
    // The first part of a suffix cut into k parts is part `parts − k`.
    let cost = |k: usize, i: usize, j: usize| (prefix[j] - prefix[i]) / shares[parts - k] as f64;

    // bottleneck[k][i]: the smallest largest part for stages i..n cut into k parts
    // (defined for i <= n - k, every part non-empty).
    let mut bottleneck = vec![vec![f64::INFINITY; n + 1]; parts + 1];
    for (i, best) in bottleneck[1].iter_mut().enumerate().take(n) {
        *best = cost(1, i, n);
    }
    for k in 2..=parts {
        for i in 0..=n - k {
            let best =
                (i + 1..=n - (k - 1)).map(|j| cost(k, i, j).max(bottleneck[k - 1][j])).fold(f64::INFINITY, f64::min);
            bottleneck[k][i] = best;
        }
    }
    let limit = bottleneck[parts][0] * (1.0 + TIE_TOLERANCE);

    // spread[k][i]: least sum of squared counts for stages i..n in k parts, each part's
    // cost within `limit`; end[k][i]: where the first of those parts ends (the largest
    // such end, so earlier parts take more stages).
    let mut spread: Vec<Vec<Option<usize>>> = vec![vec![None; n + 1]; parts + 1];
    let mut end = vec![vec![0; n + 1]; parts + 1];
    for i in 0..n {
        if cost(1, i, n) <= limit {
            spread[1][i] = Some((n - i) * (n - i));
            end[1][i] = n;
        }
    }
    for k in 2..=parts {
        for i in 0..=n - k {
            for j in (i + 1..=n - (k - 1)).rev() {
                let Some(rest) = spread[k - 1][j].filter(|_| cost(k, i, j) <= limit) else { continue };
                let total = (j - i) * (j - i) + rest;
                if spread[k][i].is_none_or(|best| total < best) {
                    spread[k][i] = Some(total);
                    end[k][i] = j;
                }
            }
        }
    }

    let mut ranges = Vec::with_capacity(parts);
    let mut start = 0;
    for k in (1..=parts).rev() {
        let stop = end[k][start];
        ranges.push(start..stop);
        start = stop;
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::partition::uniform_counts;

    /// A small deterministic generator (xorshift64*), so the tests need no `rand`.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    fn counts(ranges: &[Range<usize>]) -> Vec<usize> {
        ranges.iter().map(|r| r.len()).collect()
    }

    fn largest(costs: &[f64], counts: &[usize]) -> f64 {
        let mut start = 0;
        counts
            .iter()
            .map(|&c| {
                let sum: f64 = costs[start..start + c].iter().sum();
                start += c;
                sum
            })
            .fold(0.0, f64::max)
    }

    /// Every way to write `n` as `parts` positive counts, in order.
    fn compositions(n: usize, parts: usize) -> Vec<Vec<usize>> {
        if parts == 1 {
            return vec![vec![n]];
        }
        (1..=n - (parts - 1))
            .flat_map(|first| {
                compositions(n - first, parts - 1).into_iter().map(move |mut rest| {
                    rest.insert(0, first);
                    rest
                })
            })
            .collect()
    }

    #[test]
    fn matches_brute_force_bottleneck_and_tie_break_on_random_integer_costs() {
        // Small integers, zeros included, make many ties: the tie-break is checked too.
        let mut rng = Rng(0x5eed);
        for _ in 0..400 {
            let n = 1 + rng.below(8) as usize;
            let parts = 1 + rng.below(n as u64) as usize;
            let costs: Vec<f64> = (0..n).map(|_| rng.below(6) as f64).collect();
            let chosen = counts(&linear_partition(&costs, parts));
            let best = compositions(n, parts)
                .into_iter()
                .min_by(|a, b| {
                    let key = |c: &[usize]| (largest(&costs, c), c.iter().map(|x| x * x).sum::<usize>());
                    let (ka, kb) = (key(a), key(b));
                    ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1)).then(b.cmp(a))
                })
                .unwrap();
            assert_eq!(chosen, best, "costs {costs:?} into {parts}");
        }
    }

    #[test]
    fn matches_brute_force_bottleneck_on_random_real_costs() {
        let mut rng = Rng(42);
        for _ in 0..300 {
            let n = 1 + rng.below(9) as usize;
            let parts = 1 + rng.below(n as u64) as usize;
            let costs: Vec<f64> = (0..n).map(|_| rng.below(1_000_000) as f64 / 7919.0).collect();
            let chosen = counts(&linear_partition(&costs, parts));
            let brute = compositions(n, parts).iter().map(|c| largest(&costs, c)).fold(f64::INFINITY, f64::min);
            let got = largest(&costs, &chosen);
            assert!((got - brute).abs() <= 1e-9 * brute.max(1.0), "{costs:?} into {parts}: {got} vs {brute}");
        }
    }

    #[test]
    fn equal_costs_give_uniform_counts() {
        for n in 1..=12 {
            for parts in 1..=n {
                let ranges = linear_partition(&vec![2.5; n], parts);
                assert_eq!(counts(&ranges), uniform_counts(n, parts), "{n} stages into {parts}");
            }
        }
    }

    #[test]
    fn ranges_are_contiguous_and_cover_every_stage() {
        let costs = [0.0, 3.0, 0.0, 0.0, 9.0, 1.0, 0.0];
        for parts in 1..=costs.len() {
            let ranges = linear_partition(&costs, parts);
            assert_eq!(ranges.len(), parts);
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges[parts - 1].end, costs.len());
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            assert!(ranges.iter().all(|r| !r.is_empty()));
        }
    }

    #[test]
    fn heavy_stage_stands_alone_and_light_ones_share() {
        let ranges = linear_partition(&[1.0, 1.0, 10.0, 1.0, 1.0, 1.0], 3);
        assert_eq!(ranges, vec![0..2, 2..3, 3..6]);
    }

    #[test]
    fn a_part_on_two_workers_takes_twice_the_work() {
        // Six equal stages over a 2-1 layout: 4 and 2 stages give each worker 2 units.
        assert_eq!(shared_partition(&[1.0; 6], &[2, 1]), vec![0..4, 4..6]);
        assert_eq!(shared_partition(&[1.0; 6], &[1, 2]), vec![0..2, 2..6]);
        // Brute force: the smallest largest cost ÷ share over every cut.
        let costs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        for shares in [vec![2, 1], vec![1, 3], vec![2, 1, 1], vec![1, 2, 2]] {
            let best = compositions(costs.len(), shares.len())
                .iter()
                .map(|counts| {
                    let mut start = 0;
                    counts
                        .iter()
                        .zip(&shares)
                        .map(|(&count, &share)| {
                            let sum: f64 = costs[start..start + count].iter().sum();
                            start += count;
                            sum / share as f64
                        })
                        .fold(0.0, f64::max)
                })
                .fold(f64::INFINITY, f64::min);
            let got = shared_partition(&costs, &shares);
            let largest = got
                .iter()
                .zip(&shares)
                .map(|(range, &share)| costs[range.clone()].iter().sum::<f64>() / share as f64)
                .fold(0.0, f64::max);
            assert!((largest - best).abs() < 1e-12, "{shares:?}: {got:?} gives {largest}, best {best}");
        }
    }
}
