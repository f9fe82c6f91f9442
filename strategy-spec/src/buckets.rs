//! Gradient fusion: which gradients data-parallel all-reduces together, and when (the
//! strategies crate runs this plan; the performance model times it).
//!
//! Horovod fuses the gradients that are ready in one cycle into buffers of at most
//! `HOROVOD_FUSION_THRESHOLD` bytes (64 MB by default) and reduces each buffer as soon as its
//! cycle ends. Here a cycle is one stage's backward: when stage *i* finishes, its gradients
//! (last stage first, last parameter first, the order backward produces them) are packed
//! into buckets of at most the threshold, and each bucket's asynchronous all-reduce starts
//! while stage *i − 1* computes. A single gradient larger than the threshold gets a bucket
//! of its own.

use std::ops::Range;

/// One fused all-reduce: the parameters (indices into the trainable variables) it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// Parameter indices, in the order they are packed.
    pub params: Vec<usize>,
    /// Bytes of the fused buffer.
    pub bytes: u64,
}

/// The buckets launched after each stage's backward: `plan[i]` after stage `i`.
pub fn plan_buckets(stage_params: &[Range<usize>], param_bytes: &[u64], threshold: u64) -> Vec<Vec<Bucket>> {
    stage_params
        .iter()
        .map(|range| {
            let mut buckets: Vec<Bucket> = Vec::new();
            for param in range.clone().rev() {
                let bytes = param_bytes[param];
                match buckets.last_mut() {
                    Some(open) if open.bytes + bytes <= threshold => {
                        open.params.push(param);
                        open.bytes += bytes;
                    }
                    _ => buckets.push(Bucket { params: vec![param], bytes }),
                }
            }
            buckets
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_packs_its_gradients_backwards_into_buckets_up_to_the_threshold() {
        // stage 0: params 0,1 (40 + 40 bytes); stage 1: params 2,3,4 (30, 30, 100 bytes).
        let plan = plan_buckets(&[0..2, 2..5], &[40, 40, 30, 30, 100], 64);
        assert_eq!(plan[0], vec![Bucket { params: vec![1], bytes: 40 }, Bucket { params: vec![0], bytes: 40 }]);
        assert_eq!(
            plan[1],
            vec![Bucket { params: vec![4], bytes: 100 }, Bucket { params: vec![3, 2], bytes: 60 }],
            "an oversized gradient travels alone; the rest fuse up to 64 bytes"
        );
        let fused = plan_buckets(&[0..2, 2..5], &[40, 40, 30, 30, 100], 1 << 20);
        assert_eq!(fused[1], vec![Bucket { params: vec![4, 3, 2], bytes: 160 }]);
        assert!(
            plan_buckets(std::slice::from_ref(&(0..0)), &[], 64)[0].is_empty(),
            "a stage without parameters launches nothing"
        );
    }
}
