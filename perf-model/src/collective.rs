//! What a collective costs: as `stratlab probe` measured it where it did, over as many
//! ranks as the step's collective runs among, else a ring over the link's α–β. A probe
//! times what the ring formula leaves out: Gloo's per-collective overheads, its copies, and
//! (the probe's loaded rows) the wait for a core when the workers' cores are busy
//! computing, which on a machine whose workers share its cores costs a small bucket
//! milliseconds.

use crate::{CostCurve, CurveError, Link};

/// A collective's seconds against message bytes over a fixed number of ranks, measured:
/// linear between the probe's sizes, along the last two sizes' line beyond them.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveCurve {
    ranks: usize,
    seconds: CostCurve,
}

impl CollectiveCurve {
    /// The curve of `ranks` ranks through `(bytes, seconds)` points (any order).
    pub fn new(ranks: usize, points: Vec<(u64, f64)>) -> Result<CollectiveCurve, CurveError> {
        let points = points.into_iter().map(|(bytes, seconds)| (bytes as usize, seconds)).collect();
        Ok(CollectiveCurve { ranks, seconds: CostCurve::new(points)? })
    }

    /// Ranks the curve was measured over.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Seconds to run the collective on `bytes` over [`Self::ranks`] ranks.
    pub fn seconds(&self, bytes: f64) -> f64 {
        self.seconds.at(bytes.round().max(1.0) as usize)
    }

    /// The curve where it was measured over `ranks` ranks.
    pub fn over(curve: Option<&CollectiveCurve>, ranks: usize) -> Option<&CollectiveCurve> {
        curve.filter(|curve| curve.ranks == ranks)
    }
}

/// The collectives a probe measured over a link, each where it did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeasuredCollectives {
    /// All-reduce against its buffer's bytes.
    pub all_reduce: Option<CollectiveCurve>,
    /// All-gather against the gathered buffer's bytes.
    pub all_gather: Option<CollectiveCurve>,
    /// Reduce-scatter against the reduced buffer's bytes.
    pub reduce_scatter: Option<CollectiveCurve>,
}

/// The all-reduces of a step: the measured curve where it was taken over the step's ranks,
/// else a ring over the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllReduce<'a> {
    /// The link between the ranks.
    pub link: &'a Link,
    /// The probe's all-reduce against size, where measured.
    pub measured: Option<&'a CollectiveCurve>,
}

impl AllReduce<'_> {
    /// Seconds to all-reduce `bytes` over `ranks` ranks (0 for one rank).
    pub fn seconds(&self, bytes: f64, ranks: usize) -> f64 {
        if ranks < 2 {
            return 0.0;
        }
        match CollectiveCurve::over(self.measured, ranks) {
            Some(curve) => curve.seconds(bytes),
            None => self.link.ring_all_reduce_s(bytes, ranks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_curve_answers_for_its_ranks_and_the_ring_for_the_others() {
        let link = Link::new(1e9, 10e-6);
        let curve = CollectiveCurve::new(2, vec![(1 << 20, 4e-3), (4, 1e-3), (16 << 20, 34e-3)]).unwrap();
        let cost = AllReduce { link: &link, measured: Some(&curve) };
        // Measured points are returned as measured, and between them on the line.
        assert!((cost.seconds(4.0, 2) - 1e-3).abs() < 1e-15);
        assert!((cost.seconds((1 << 20) as f64, 2) - 4e-3).abs() < 1e-15);
        let half_way = ((1u64 << 20) + (16u64 << 20)) as f64 / 2.0;
        assert!((cost.seconds(half_way, 2) - 19e-3).abs() < 1e-9, "{}", cost.seconds(half_way, 2));
        // Past the largest size: the last segment's slope, 2 ms per MiB.
        assert!((cost.seconds((32u64 << 20) as f64, 2) - 66e-3).abs() < 1e-9);
        // Four ranks were not measured: the ring over the link.
        assert_eq!(cost.seconds(4e6, 4), link.ring_all_reduce_s(4e6, 4));
        assert_eq!(cost.seconds(4e6, 1), 0.0);
        assert_eq!(AllReduce { link: &link, measured: None }.seconds(4e6, 2), link.ring_all_reduce_s(4e6, 2));
        assert!(CollectiveCurve::new(2, vec![]).is_err());
    }
}
