//! A data-parallel step as stratlab runs it: every worker runs the forward, then the
//! backward stage by stage from the last; after each stage its gradients are packed into
//! buckets of at most the fusion threshold ([`plan_buckets`]), whose all-reduces run one
//! after another on the communication thread while the remaining backward computes; once
//! the backward is done, each bucket is unpacked back into the gradients as its all-reduce
//! completes, and the update follows the last.

use serde::Serialize;
use stratlab_strategy_spec::buckets::plan_buckets;

use crate::{AllReduce, StepBreakdown};

/// What one network stage costs one worker at the per-worker batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageWork {
    /// Forward seconds.
    pub forward_s: f64,
    /// Backward seconds.
    pub backward_s: f64,
    /// Bytes of each of the stage's trainable parameters, in the network's order.
    pub parameter_bytes: Vec<u64>,
}

/// A data-parallel step's time, split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataParallelStep {
    /// Seconds per step.
    pub step_s: f64,
    /// Forward and backward.
    pub compute_s: f64,
    /// All-reduce time not hidden behind the backward, and the buckets' copies.
    pub exposed_comm_s: f64,
    /// All-reduce time in all.
    pub comm_s: f64,
    /// The update.
    pub optimizer_s: f64,
    /// All-reduces launched.
    pub buckets: usize,
    /// The gradients' copies into the buckets and back, on the compute thread.
    pub gradient_copies_s: f64,
}

impl DataParallelStep {
    /// The step split as every strategy's is.
    pub fn breakdown(&self) -> StepBreakdown {
        StepBreakdown {
            step_s: self.step_s,
            compute_s: self.compute_s,
            exposed_comm_s: self.exposed_comm_s,
            bubble_s: 0.0,
            optimizer_s: self.optimizer_s,
        }
    }
}

/// The step of `workers` workers running `stages`, all-reducing (at `all_reduce`'s cost) in
/// buckets of at most `fusion_threshold_bytes`, then taking an update of `optimizer_s`.
/// `gradient_copy_s` is one copy of every gradient between the parameters and a flat buffer
/// (the profile's whole-model copy): a bucket's packing and its unpacking each cost its
/// share by bytes, on the compute thread, so packing delays the remaining backward and
/// unpacking follows each bucket's all-reduce.
pub fn data_parallel_step(
    stages: &[StageWork],
    workers: usize,
    all_reduce: &AllReduce<'_>,
    fusion_threshold_bytes: u64,
    optimizer_s: f64,
    gradient_copy_s: f64,
) -> DataParallelStep {
    let mut ranges = Vec::with_capacity(stages.len());
    let mut bytes = Vec::new();
    for stage in stages {
        ranges.push(bytes.len()..bytes.len() + stage.parameter_bytes.len());
        bytes.extend_from_slice(&stage.parameter_bytes);
    }
    let total_bytes = bytes.iter().sum::<u64>() as f64;
    let plan = plan_buckets(&ranges, &bytes, fusion_threshold_bytes.max(1));
    let forward_s: f64 = stages.iter().map(|stage| stage.forward_s).sum();
    let (mut now, mut comm_free, mut comm_s) = (forward_s, 0.0f64, 0.0);
    let mut completions = Vec::new();
    for (stage, buckets) in stages.iter().zip(&plan).rev() {
        now += stage.backward_s;
        for bucket in buckets {
            let copy_s = share_of_copy(gradient_copy_s, bucket.bytes as f64, total_bytes);
            now += copy_s;
            let reduce_s = all_reduce.seconds(bucket.bytes as f64, workers);
            comm_free = comm_free.max(now) + reduce_s;
            comm_s += reduce_s;
            completions.push((comm_free, copy_s));
        }
    }
    let compute_s: f64 = forward_s + stages.iter().map(|stage| stage.backward_s).sum::<f64>();
    let mut synced = now;
    for &(completed, unpack_s) in &completions {
        synced = synced.max(completed) + unpack_s;
    }
    DataParallelStep {
        step_s: synced + optimizer_s,
        compute_s,
        exposed_comm_s: synced - compute_s,
        comm_s,
        optimizer_s,
        buckets: completions.len(),
        // Every gradient is packed once and unpacked once.
        gradient_copies_s: 2.0 * share_of_copy(gradient_copy_s, total_bytes, total_bytes),
    }
}

/// The seconds of copying `bytes` of the gradients, where copying all `total_bytes` of them
/// once takes `gradient_copy_s` (nothing where there are none).
pub(crate) fn share_of_copy(gradient_copy_s: f64, bytes: f64, total_bytes: f64) -> f64 {
    if total_bytes > 0.0 {
        gradient_copy_s * bytes / total_bytes
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::closed_forms::thesis_data_parallel_s;
    use crate::{CollectiveCurve, Link};

    fn ring(link: &Link) -> AllReduce<'_> {
        AllReduce { link, measured: None }
    }

    fn stage(forward_s: f64, backward_s: f64, parameter_bytes: Vec<u64>) -> StageWork {
        StageWork { forward_s, backward_s, parameter_bytes }
    }

    #[test]
    fn one_bucket_without_overlap_is_the_thesis_equation_5_1() {
        // One stage: its bucket can only start after the whole backward, as eq. 5.1 assumes.
        let link = Link::new(1e9, 20e-6);
        let (t_seq, workers, gradients) = (0.8, 4, 40e6);
        let stages = [stage(0.3 * t_seq / workers as f64, 0.7 * t_seq / workers as f64, vec![10_000_000, 30_000_000])];
        let step = data_parallel_step(&stages, workers, &ring(&link), 64 << 20, 0.0, 0.0);
        let thesis = thesis_data_parallel_s(t_seq, workers, gradients, 64.0 * 1024.0 * 1024.0, &link);
        assert!((step.step_s - thesis).abs() < 1e-12, "{} vs {thesis}", step.step_s);
        assert_eq!(step.buckets, 1);
        assert!((step.exposed_comm_s - step.comm_s).abs() < 1e-15, "nothing to hide it behind");
    }

    #[test]
    fn buckets_launched_early_hide_behind_the_remaining_backward() {
        let link = Link::new(1e8, 0.0);
        // Two workers: a 10 MB bucket takes 2 × 1 × 5 MB ÷ 100 MB/s = 0.1 s.
        let stages = [stage(0.1, 0.5, vec![1_000]), stage(0.1, 0.2, vec![10_000_000])];
        let step = data_parallel_step(&stages, 2, &ring(&link), 64 << 20, 0.05, 0.0);
        // Stage 1's bucket runs 0.4–0.5 s under stage 0's backward (0.4–0.9 s); stage 0's
        // tiny bucket follows at 0.9 s.
        assert!((step.compute_s - 0.9).abs() < 1e-12);
        assert!(step.exposed_comm_s < 1e-4 && step.exposed_comm_s > 0.0, "{}", step.exposed_comm_s);
        assert!((step.step_s - (0.9 + step.exposed_comm_s + 0.05)).abs() < 1e-12);
        // One worker all-reduces nothing.
        assert_eq!(data_parallel_step(&stages, 1, &ring(&link), 64 << 20, 0.0, 0.0).comm_s, 0.0);
    }

    #[test]
    fn a_small_threshold_splits_the_gradients_into_more_all_reduces_each_paying_the_latency() {
        let link = Link::new(1e9, 1e-3);
        let stages = [stage(0.0, 0.01, vec![1_000; 8])];
        let fused = data_parallel_step(&stages, 2, &ring(&link), 1 << 20, 0.0, 0.0);
        let split = data_parallel_step(&stages, 2, &ring(&link), 1_000, 0.0, 0.0);
        assert_eq!((fused.buckets, split.buckets), (1, 8));
        // Each all-reduce of 2 workers pays 2 latencies: 8 buckets pay 14 more.
        assert!((split.comm_s - fused.comm_s - 14e-3).abs() < 1e-9, "{} {}", split.comm_s, fused.comm_s);
    }

    #[test]
    fn a_measured_all_reduce_sets_the_exposed_tail_where_the_ring_formula_would_not() {
        // The link says a 4 KB bucket costs microseconds; the probe, under load, measured 3 ms.
        let link = Link::new(1e9, 20e-6);
        let loaded = CollectiveCurve::new(2, vec![(4, 3e-3), (1 << 20, 5e-3)]).unwrap();
        let stages = [stage(0.01, 0.02, vec![4_000]), stage(0.01, 0.02, vec![4_000])];
        let measured =
            data_parallel_step(&stages, 2, &AllReduce { link: &link, measured: Some(&loaded) }, 1_000, 0.0, 0.0);
        let formula = data_parallel_step(&stages, 2, &ring(&link), 1_000, 0.0, 0.0);
        // The last stage's bucket hides behind the first's backward; the first's is exposed.
        assert!((measured.exposed_comm_s - loaded.seconds(4_000.0)).abs() < 1e-12, "{}", measured.exposed_comm_s);
        assert!(formula.exposed_comm_s < 1e-4, "{}", formula.exposed_comm_s);
        assert_eq!(measured.buckets, 2);
    }

    #[test]
    fn packing_delays_the_remaining_backward_and_unpacking_follows_each_all_reduce() {
        // Two workers over 100 MB/s: stage 1's 6 MB bucket takes 0.06 s, stage 0's 2 MB 0.02 s.
        // Copying every gradient one way takes 0.08 s: 0.06 s for stage 1's, 0.02 s for stage 0's.
        let link = Link::new(1e8, 0.0);
        let stages = [stage(0.1, 0.5, vec![2_000_000]), stage(0.1, 0.2, vec![6_000_000])];
        let step = data_parallel_step(&stages, 2, &ring(&link), 64 << 20, 0.05, 0.08);
        // Backward of stage 1 ends at 0.4, its bucket is packed by 0.46 and reduced by 0.52;
        // stage 0's backward runs 0.46-0.96, its bucket is packed by 0.98 and reduced by 1.0.
        // Unpacking: stage 1's bucket 0.98-1.04, stage 0's (done at 1.0) 1.04-1.06.
        assert!((step.step_s - (1.06 + 0.05)).abs() < 1e-9, "{}", step.step_s);
        assert!((step.compute_s - 0.9).abs() < 1e-12);
        assert!((step.gradient_copies_s - 0.16).abs() < 1e-12);
        assert!(
            (step.exposed_comm_s - 0.16).abs() < 1e-9,
            "the copies, nothing left to wait for: {}",
            step.exposed_comm_s
        );
        // Without copies stage 0's bucket is reduced 0.90-0.92, exposed 0.02 s: the copies
        // cost 0.14 s more, not 0.16, as stage 1's reduction now hides behind stage 0's packing.
        let free = data_parallel_step(&stages, 2, &ring(&link), 64 << 20, 0.05, 0.0);
        assert!((free.step_s - 0.97).abs() < 1e-9, "{}", free.step_s);
    }
}
