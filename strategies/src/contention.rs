//! How much a machine's workers slow each other's compute: copies of the whole network's
//! forward and backward running at once in threads of their own, each on a worker's
//! libtorch threads and started together every pass, timed against the profile's own
//! seconds for that pass (its stages' passes summed), which the model multiplies. Each copy
//! has cores of its own; what it loses is the caches and memory bandwidth they share, and
//! what a stage timed alone keeps in cache that a whole network does not (VGG-11 on MNIST
//! at 2 samples: its stages summed 35 ms, two copies together 57 ms a pass).
//!
//! Timing the copies against a whole-network pass alone, as this did before, gave a ratio
//! that left out the second effect and cost as many passes again: VGG-11 at 2 samples,
//! 36 ms alone; MobileNetV2 on MNIST at 16 samples, 323 ms alone against its stages' 242.

use std::sync::Barrier;
use std::time::Instant;

use stratlab_networks::NetworkSpec;
use stratlab_perf_model::Contention;
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};

use crate::autograd::backward_with_grad;
use crate::profile::NetworkProfile;
use crate::staged_model::StagedModel;
use crate::TrainError;

/// Timed passes per copy after one untimed warm-up, at least and at most: small passes
/// repeat until about [`ENOUGH_S`] of them, the least a stable median of a millisecond
/// pass needs. Long passes take two each, four among the copies: a third cost ResNet-18 on
/// CIFAR 2.7 of its 12 s of contention (12.1 and 12.3 s with three, 9.7 and 9.4 s with
/// two), while its ratios moved between runs by as much either way (at 2 samples 1.06 and
/// 1.04 with three, 1.11 and 1.12 with two).
const MIN_PASSES: usize = 2;
const MAX_PASSES: usize = 40;
const ENOUGH_S: f64 = 0.5;

/// The slowdown of `spec`'s passes on the CPU with `copies` copies computing at once, each
/// on `threads` libtorch threads, at each of `sizes` samples, against `profile`'s stages
/// at those sizes. Weights are drawn from libtorch's generator: measure before seeding
/// what a trial trains.
pub fn measure_contention(
    spec: &NetworkSpec,
    sizes: &[usize],
    copies: usize,
    threads: usize,
    profile: &NetworkProfile,
) -> Result<Contention, TrainError> {
    let mut ratio = Vec::with_capacity(sizes.len());
    for &samples in sizes {
        let profiled = profile.stage_sum_s(samples).ok_or_else(|| {
            TrainError::Torch(tch::TchError::Torch(format!(
                "contention at {samples} samples needs the profile's stages at that size"
            )))
        })?;
        let passes = ((ENOUGH_S / profiled.max(1e-6)).ceil() as usize).clamp(MIN_PASSES, MAX_PASSES);
        let together = median_pass_s(spec, samples, copies, threads, passes)?;
        if profiled > 0.0 {
            ratio.push((samples, together / profiled));
        }
    }
    Ok(Contention { copies, ratio })
}

/// The median over every copy's timed passes.
fn median_pass_s(
    spec: &NetworkSpec,
    samples: usize,
    copies: usize,
    threads: usize,
    passes: usize,
) -> Result<f64, TrainError> {
    let barrier = Barrier::new(copies);
    let per_copy: Vec<Result<Vec<f64>, TrainError>> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..copies).map(|_| scope.spawn(|| timed_passes(spec, samples, threads, passes, &barrier))).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| Err(TrainError::Torch(tch::TchError::Torch("a copy panicked".into()))))
            })
            .collect()
    });
    let mut times = Vec::with_capacity(copies * passes);
    for copy in per_copy {
        times.extend(copy?);
    }
    Ok(crate::stats::median(&times).unwrap_or(0.0))
}

/// One copy: the network built in this thread, a warm-up and the timed passes, each after
/// every copy has reached the barrier. A copy that fails keeps meeting the barrier, so the
/// others are never left waiting for it.
fn timed_passes(
    spec: &NetworkSpec,
    samples: usize,
    threads: usize,
    passes: usize,
    barrier: &Barrier,
) -> Result<Vec<f64>, TrainError> {
    tch::set_num_threads(threads as i32);
    let store = VarStore::new(Device::Cpu);
    let model = StagedModel::build(spec, &store);
    let dims: Vec<i64> = std::iter::once(samples.max(1) as i64).chain(spec.input.sample_dims()).collect();
    let input = Tensor::ones(dims, (Kind::Float, Device::Cpu));
    let pass = || -> Result<f64, TrainError> {
        let start = Instant::now();
        let output = model.forward_t(&input, true);
        backward_with_grad(&output, &Tensor::ones_like(&output))?;
        Ok(start.elapsed().as_secs_f64())
    };
    let mut times = Vec::with_capacity(passes);
    let mut failure = None;
    for attempt in 0..=passes {
        barrier.wait();
        if failure.is_none() {
            match pass() {
                Ok(seconds) if attempt > 0 => times.push(seconds),
                Ok(_) => {}
                Err(error) => failure = Some(error),
            }
        }
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(times),
    }
}

#[cfg(test)]
mod tests {
    use stratlab_networks::{spec, InputShape};

    use super::*;

    #[test]
    fn copies_run_together_and_give_a_ratio_per_size() {
        let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
        let profile = crate::profile::profile_network(&spec, tch::Device::Cpu, &[2, 8], 0.9, 0.0).unwrap();
        let contention = measure_contention(&spec, &[2, 8], 2, 1, &profile).unwrap();
        assert_eq!(contention.copies, 2);
        let sizes: Vec<usize> = contention.ratio.iter().map(|&(samples, _)| samples).collect();
        assert_eq!(sizes, [2, 8]);
        // Two copies on this machine's cores cannot be 4 times slower or 4 times faster
        // than the stages timed alone unless the barrier or the threads are wrong.
        assert!(contention.ratio.iter().all(|&(_, ratio)| (0.25..4.0).contains(&ratio)), "{:?}", contention.ratio);
    }
}
