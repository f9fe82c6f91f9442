//! A sharded-data-parallel (ZeRO) step as stratlab runs it. The weights are grouped into
//! units (each network stage, or the whole network); each unit's gradients are packed and
//! reduce-scattered when its backward ends, overlapping the stages below, with at most two
//! in flight (the strategy waits for older ones before starting more). ZeRO-3 gathers each
//! unit's weights before its forward and again before its backward, synchronously (nothing
//! prefetches); ZeRO-1 and 2 gather the updated chunks after the update. The update itself
//! runs over this rank's 1/N chunk only.

use std::ops::Range;

use stratlab_strategy_spec::ZeroStage;

use crate::data_parallel::{share_of_copy, DataParallelStep, StageWork};
use crate::{AllReduce, CollectiveCurve, Link};

/// Reduce-scatters the strategy waits on before starting another (`IN_FLIGHT` in the
/// strategy).
const IN_FLIGHT: usize = 2;

/// What a unit's collectives cost over the workers' link: as the probe measured them where
/// it did (over as many ranks), else from the link.
#[derive(Debug, Clone, Copy)]
pub struct ShardCollectives<'a> {
    /// The all-reduce, measured or a ring over the link.
    pub all_reduce: AllReduce<'a>,
    /// The all-gather as measured, against the gathered bytes.
    pub all_gather: Option<&'a CollectiveCurve>,
    /// The reduce-scatter as measured, against the reduced bytes.
    pub reduce_scatter: Option<&'a CollectiveCurve>,
    /// The link, for the all-gather's ring.
    pub link: &'a Link,
    /// Where the workers' collectives are Gloo's (they share a host's kernel): its
    /// reduce-scatter is an all-reduce of the whole buffer. Elsewhere (NCCL) a ring
    /// reduce-scatter moves half of an all-reduce's bytes.
    pub reduce_scatter_is_all_reduce: bool,
}

impl ShardCollectives<'_> {
    /// Seconds to gather `bytes` of weights (every rank's 1/N chunk) over `workers` ranks:
    /// as measured, else a ring, N − 1 rounds of a chunk.
    pub fn all_gather_s(&self, bytes: f64, workers: usize) -> f64 {
        if workers < 2 {
            return 0.0;
        }
        match CollectiveCurve::over(self.all_gather, workers) {
            Some(curve) => curve.seconds(bytes),
            None => self.ring_pass_s(bytes, workers),
        }
    }

    /// Seconds to reduce-scatter `bytes` of gradients over `workers` ranks: as measured,
    /// else on Gloo its all-reduce, elsewhere a ring's N − 1 rounds of a chunk.
    pub fn reduce_scatter_s(&self, bytes: f64, workers: usize) -> f64 {
        if workers < 2 {
            return 0.0;
        }
        match CollectiveCurve::over(self.reduce_scatter, workers) {
            Some(curve) => curve.seconds(bytes),
            None if self.reduce_scatter_is_all_reduce => self.all_reduce.seconds(bytes, workers),
            None => self.ring_pass_s(bytes, workers),
        }
    }

    /// One pass of a ring over `bytes`: N − 1 rounds of a 1/N chunk.
    fn ring_pass_s(&self, bytes: f64, workers: usize) -> f64 {
        (workers - 1) as f64 * self.link.transfer_s(bytes / workers as f64)
    }
}

/// The step of `workers` workers at ZeRO stage `stage` over network `stages` grouped into
/// `units` (ranges of stages), with a whole-model update of `optimizer_s` on one worker.
/// `gradient_copy_s` is one copy of every gradient into a flat buffer: each unit's packing
/// costs its share by bytes on the compute thread before its reduce-scatter starts.
pub fn sharded_step(
    stages: &[StageWork],
    units: &[Range<usize>],
    workers: usize,
    stage: ZeroStage,
    collectives: &ShardCollectives<'_>,
    optimizer_s: f64,
    gradient_copy_s: f64,
) -> DataParallelStep {
    let unit_bytes = |unit: &Range<usize>| -> f64 {
        stages[unit.clone()].iter().flat_map(|stage| &stage.parameter_bytes).sum::<u64>() as f64
    };
    let total_bytes: f64 = stages.iter().flat_map(|stage| &stage.parameter_bytes).sum::<u64>() as f64;
    let gathers = stage.shards_weights();
    let (mut now, mut comm_s, mut blocked_s) = (0.0, 0.0, 0.0);
    for unit in units {
        if gathers {
            // Synchronous: the unit's pass waits for its weights.
            let gather_s = collectives.all_gather_s(unit_bytes(unit), workers);
            (now, comm_s, blocked_s) = (now + gather_s, comm_s + gather_s, blocked_s + gather_s);
        }
        now += stages[unit.clone()].iter().map(|stage| stage.forward_s).sum::<f64>();
    }
    let (mut comm_free, mut completions, mut scattered_s, mut packed_s) = (0.0f64, Vec::new(), 0.0, 0.0);
    for unit in units.iter().rev() {
        if gathers {
            // Synchronous: the unit's pass waits for its weights.
            let gather_s = collectives.all_gather_s(unit_bytes(unit), workers);
            (now, comm_s, blocked_s) = (now + gather_s, comm_s + gather_s, blocked_s + gather_s);
        }
        now += stages[unit.clone()].iter().map(|stage| stage.backward_s).sum::<f64>();
        let pack_s = share_of_copy(gradient_copy_s, unit_bytes(unit), total_bytes);
        (now, blocked_s, packed_s) = (now + pack_s, blocked_s + pack_s, packed_s + pack_s);
        let reduce_s = collectives.reduce_scatter_s(unit_bytes(unit), workers);
        comm_free = comm_free.max(now) + reduce_s;
        scattered_s += reduce_s;
        completions.push(comm_free);
        if completions.len() > IN_FLIGHT {
            let oldest = completions[completions.len() - IN_FLIGHT - 1];
            if oldest > now {
                blocked_s += oldest - now;
                now = oldest;
            }
        }
    }
    let synced = now.max(comm_free);
    blocked_s += synced - now;
    let update_s = optimizer_s / workers.max(1) as f64;
    let regather_s: f64 = match gathers {
        true => 0.0,
        false => units.iter().map(|unit| collectives.all_gather_s(unit_bytes(unit), workers)).sum(),
    };
    let compute_s: f64 = stages.iter().map(|stage| stage.forward_s + stage.backward_s).sum();
    DataParallelStep {
        step_s: synced + update_s + regather_s,
        compute_s,
        exposed_comm_s: blocked_s + regather_s,
        comm_s: comm_s + scattered_s + regather_s,
        optimizer_s: update_s,
        buckets: units.len(),
        gradient_copies_s: packed_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(forward_s: f64, backward_s: f64, bytes: u64) -> StageWork {
        StageWork { forward_s, backward_s, parameter_bytes: vec![bytes] }
    }

    #[test]
    fn zero3_pays_two_gathers_per_unit_in_line_and_zero1_one_after_the_update() {
        // 100 MB/s, no latency, two workers: a 10 MB unit's gather moves one 5 MB chunk,
        // 0.05 s; its reduce-scatter over Gloo is the all-reduce, 0.1 s.
        let link = Link::new(1e8, 0.0);
        let collectives = ShardCollectives {
            all_reduce: AllReduce { link: &link, measured: None },
            all_gather: None,
            reduce_scatter: None,
            link: &link,
            reduce_scatter_is_all_reduce: true,
        };
        let stages = [stage(0.1, 0.2, 10_000_000), stage(0.1, 0.2, 10_000_000)];
        let units = [0..1, 1..2];
        let zero3 = sharded_step(&stages, &units, 2, ZeroStage::Three, &collectives, 0.4, 0.0);
        // Forward 2 × (0.05 + 0.1), backward 2 × (0.05 + 0.2); the last unit's
        // reduce-scatter (0.1 s) starts when the backward ends, the first one's is hidden.
        assert!((zero3.step_s - (0.3 + 0.5 + 0.1 + 0.2)).abs() < 1e-12, "{}", zero3.step_s);
        assert!((zero3.exposed_comm_s - (0.2 + 0.1)).abs() < 1e-12, "{}", zero3.exposed_comm_s);
        assert!((zero3.optimizer_s - 0.2).abs() < 1e-12, "each worker updates its half");
        let zero1 = sharded_step(&stages, &units, 2, ZeroStage::One, &collectives, 0.4, 0.0);
        assert!((zero1.step_s - (0.6 + 0.1 + 0.2 + 0.1)).abs() < 1e-12, "{}", zero1.step_s);
        // Packing each unit's gradients (0.03 s for both) delays every reduce-scatter behind it.
        let packed = sharded_step(&stages, &units, 2, ZeroStage::One, &collectives, 0.4, 0.03);
        assert!((packed.step_s - zero1.step_s - 0.03).abs() < 1e-12, "{}", packed.step_s);
        assert!((packed.gradient_copies_s - 0.03).abs() < 1e-12);
        // On NCCL the reduce-scatter is a ring's half of an all-reduce.
        let nccl = ShardCollectives { reduce_scatter_is_all_reduce: false, ..collectives };
        assert!(sharded_step(&stages, &units, 2, ZeroStage::One, &nccl, 0.4, 0.0).step_s < zero1.step_s);
        // Measured curves answer for the ranks they were measured over.
        let gather = CollectiveCurve::new(2, vec![(4, 1e-3), (10_000_000, 0.3)]).unwrap();
        let scatter = CollectiveCurve::new(2, vec![(4, 1e-3), (10_000_000, 0.2)]).unwrap();
        let measured = ShardCollectives { all_gather: Some(&gather), reduce_scatter: Some(&scatter), ..collectives };
        assert_eq!((measured.all_gather_s(1e7, 2), measured.reduce_scatter_s(1e7, 2)), (0.3, 0.2));
        assert_eq!(measured.all_gather_s(1e7, 4), collectives.all_gather_s(1e7, 4), "4 ranks: the ring");
        // One worker moves nothing.
        assert_eq!(sharded_step(&stages, &units, 1, ZeroStage::Three, &collectives, 0.4, 0.0).comm_s, 0.0);
    }
}
