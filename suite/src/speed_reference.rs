//! How fast this machine is right now, by one fixed piece of work: a small convolution
//! block's forward and backward on one thread. The runner times it just before every
//! profile and every trial and stores the seconds beside them, so a trial measured while
//! the machine ran slower than when its cell's profile was taken (a shared VM's neighbours,
//! a throttled host) is seen as such, apart from the model's own error. Nothing is
//! corrected by it: a prediction stays what the profile said.
//!
//! The block mixes a dense 3×3 convolution (compute-bound) with a depthwise one and
//! activations (bound by memory traffic), the two kinds of work the networks' steps are
//! made of. Its tensors are 1 MiB each, a few MiB alive at once: past one core's L2 here,
//! within the shared L3, where a neighbour's traffic shows.

use std::time::Instant;

use stratlab_results::stats::quantile;
use tch::{Device, Kind, Tensor};

/// Timed repetitions, about 4.5 ms each on this machine's CPU in the runner (8 ms in a
/// process without `heap.rs`'s malloc tuning); their 10th percentile is kept, the
/// statistic the trials' steps are judged by.
const REPEATS: usize = 15;
/// Untimed repetitions first: the allocator's and the kernels' first calls.
const WARMUP: usize = 2;

/// The 10th percentile of the reference work's seconds on one thread of this process's
/// CPU; the thread count in force before is restored.
pub fn reference_seconds() -> f64 {
    let threads_before = tch::get_num_threads();
    tch::set_num_threads(1);
    let seconds = {
        // Constant tensors: the values do not change a convolution's time, and drawing
        // random ones would move the runner's generator.
        let options = (Kind::Float, Device::Cpu);
        let input = Tensor::ones([8, 32, 32, 32], options);
        let mut dense = Tensor::full([32, 32, 3, 3], 0.01, options).set_requires_grad(true);
        let mut depthwise = Tensor::full([32, 1, 3, 3], 0.1, options).set_requires_grad(true);
        let mut times = Vec::with_capacity(REPEATS);
        for repetition in 0..WARMUP + REPEATS {
            let started = Instant::now();
            let hidden = input.conv2d(&dense, None::<Tensor>, [1, 1], [1, 1], [1, 1], 1).relu();
            let out = hidden.conv2d(&depthwise, None::<Tensor>, [1, 1], [1, 1], [1, 1], 32).relu();
            out.sum(Kind::Float).backward();
            if repetition >= WARMUP {
                times.push(started.elapsed().as_secs_f64());
            }
            dense.zero_grad();
            depthwise.zero_grad();
        }
        quantile(&times, 0.1).unwrap_or(f64::NAN)
    };
    tch::set_num_threads(threads_before);
    seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_a_positive_time_and_leaves_the_thread_count_alone() {
        tch::set_num_threads(2);
        let seconds = reference_seconds();
        assert!(seconds.is_finite() && seconds > 0.0, "{seconds}");
        assert_eq!(tch::get_num_threads(), 2);
    }
}
