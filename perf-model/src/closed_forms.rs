//! The thesis's closed forms, kept beside the simulation as the named baseline its
//! predictions are compared with: eq. 5.1 (Horovod), 6.1 (GPipe's compute) and 6.2 (its
//! communication). Links are uniform here: every worker pair has the same latency and
//! bandwidth, so the maxima over links are that link.

use crate::Link;

/// Eq. 5.1: `T_seq / W + 2(W − 1) · (L + min(G, th) ÷ (W · BW))`, seconds per batch, for a
/// sequential batch time `t_seq_s`, `workers`, `gradient_bytes` of gradients and a fusion
/// threshold of `threshold_bytes`.
pub fn thesis_data_parallel_s(
    t_seq_s: f64,
    workers: usize,
    gradient_bytes: f64,
    threshold_bytes: f64,
    link: &Link,
) -> f64 {
    let w = workers as f64;
    t_seq_s / w + 2.0 * (w - 1.0) * (link.latency.0 + gradient_bytes.min(threshold_bytes) / (w * link.bandwidth.0))
}

/// Eq. 6.1: GPipe's compute, `T_seq · (W + #mb − 1) ÷ (W · #mb)`, where `t_seq_s` is the
/// sequential time of the whole batch.
pub fn thesis_gpipe_compute_s(t_seq_s: f64, workers: usize, micro_batches: usize) -> f64 {
    let (w, m) = (workers as f64, micro_batches.max(1) as f64);
    t_seq_s * (w + m - 1.0) / (w * m)
}

/// Eq. 6.2 on a uniform link: every one of the `2 · (#mb + W − 2)` lockstep communication
/// steps of forward and backward costs `L + mb · A ÷ BW`, with `activation_bytes` the largest
/// activation a micro-batch sends between stages.
pub fn thesis_gpipe_comm_s(workers: usize, micro_batches: usize, activation_bytes: f64, link: &Link) -> f64 {
    if workers < 2 {
        return 0.0;
    }
    let (w, m) = (workers as f64, micro_batches.max(1) as f64);
    let per_step = link.transfer_s(activation_bytes);
    // Fill (W − 2 steps), the full pipeline (#mb − (W − 2)), drain (W − 2): #mb + W − 2.
    2.0 * (m + w - 2.0) * per_step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpipe_compute_is_t_seq_with_one_micro_batch_and_tends_to_t_seq_over_w() {
        assert_eq!(thesis_gpipe_compute_s(1.0, 4, 1), 1.0);
        assert!((thesis_gpipe_compute_s(1.0, 4, 1000) - 0.25).abs() < 1e-3);
        assert!((thesis_gpipe_compute_s(2.0, 2, 4) - 2.0 * 5.0 / 8.0).abs() < 1e-15);
    }

    #[test]
    fn gpipe_communication_counts_the_lockstep_steps_of_both_directions() {
        let link = Link::new(1e6, 1e-3);
        // 2 workers, 3 micro-batches: 3 steps each way of 1 ms + 1 ms.
        assert!((thesis_gpipe_comm_s(2, 3, 1000.0, &link) - 2.0 * 3.0 * 2e-3).abs() < 1e-15);
        assert_eq!(thesis_gpipe_comm_s(1, 3, 1000.0, &link), 0.0);
    }

    #[test]
    fn horovod_sends_at_most_one_threshold_of_gradients() {
        let link = Link::new(1e9, 0.0);
        let small = thesis_data_parallel_s(1.0, 2, 1e6, 64e6, &link);
        let capped = thesis_data_parallel_s(1.0, 2, 1e9, 64e6, &link);
        assert!((small - (0.5 + 2.0 * 1e6 / 2e9)).abs() < 1e-15);
        assert!((capped - (0.5 + 2.0 * 64e6 / 2e9)).abs() < 1e-15);
    }
}
