//! How fast this machine is right now, by one fixed piece of work: a small convolution
//! block's forward and backward, one copy on each core this process may use, each on one
//! thread, all at once. The runner times it just before every profile and every trial and
//! stores the seconds beside them, so a trial measured while the machine ran slower than
//! when its cell's profile was taken (a shared VM's neighbours, a throttled host) is seen as
//! such, apart from the model's own error; and a stored profile whose reference reads
//! slower than the machine does now is retaken (`profiles.rs`). Every core is loaded
//! because profiles and trials load every core: a spell that slows only the second core
//! slows a two-worker step, and a reference on one thread did not see it.
//!
//! The block mixes a dense 3×3 convolution (compute-bound) with a depthwise one and
//! activations (bound by memory traffic), the two kinds of work the networks' steps are
//! made of. Its tensors are 1 MiB each, a few MiB alive at once per copy: past one core's
//! L2 here, within the shared L3, where a neighbour's traffic shows.

use std::time::Instant;

use stratlab_results::stats::median;
use tch::{Device, Kind, Tensor};

/// Timed repetitions per copy, about 4.5 ms each on this machine's CPU in the runner (8 ms
/// in a process without `heap.rs`'s malloc tuning); each copy's median is kept. Not the
/// 10th percentile the trials' steps are judged by: a neighbour busy a few milliseconds in
/// every ten interrupts most repetitions and slows a profile's longer passes, yet leaves
/// one or two of fifteen whole, and the 10th percentile read such a spell as no slowdown.
const REPEATS: usize = 15;
/// Untimed repetitions first: the allocator's and the kernels' first calls.
const WARMUP: usize = 2;

/// The reference work's seconds on this process's cores: each core's copy reduced to its
/// median, and the slowest core's kept (a synchronous step waits for its slowest
/// worker). The thread count in force before is restored.
pub fn reference_seconds() -> f64 {
    reference_seconds_on(crate::fingerprint::cores_here())
}

/// The reference work's seconds with `copies` copies at once (the slowest copy's median): a
/// rank of a job step takes its share of its node's cores, its neighbours on the node the
/// rest, all at once.
pub fn reference_seconds_on(copies: usize) -> f64 {
    let threads_before = tch::get_num_threads();
    let seconds = std::thread::scope(|scope| {
        let copies: Vec<_> = (0..copies.max(1)).map(|_| scope.spawn(one_core_seconds)).collect();
        copies.into_iter().filter_map(|copy| copy.join().ok()).fold(f64::NAN, f64::max)
    });
    tch::set_num_threads(threads_before);
    seconds
}

/// The median of the reference work's repetitions on the calling thread alone.
fn one_core_seconds() -> f64 {
    // Intra-op parallelism off for this thread: each copy is one core's work.
    tch::set_num_threads(1);
    // Constant tensors: the values do not change a convolution's time, and drawing random
    // ones would move the runner's generator.
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
    median(&times).unwrap_or(f64::NAN)
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
