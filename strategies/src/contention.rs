//! How much a machine's workers slow each other's compute: copies of the whole network's
//! forward and backward running at once, each on a worker's libtorch threads and started
//! together every pass, timed against the profile's own seconds for that pass (its stages'
//! passes summed), which the model multiplies. Each copy has cores of its own; what it loses
//! is the caches and memory bandwidth they share, and what a stage timed alone keeps in cache
//! that a whole network does not (VGG-11 on MNIST at 2 samples: its stages summed 35 ms, two
//! copies together 57 ms a pass).
//!
//! Timing the copies against a whole-network pass alone, as this did before, gave a ratio
//! that left out the second effect and cost as many passes again: VGG-11 at 2 samples,
//! 36 ms alone; MobileNetV2 on MNIST at 16 samples, 323 ms alone against its stages' 242.
//!
//! The copies run where the caller puts them ([`measure_contention`]'s `together`): the
//! runner puts each in a process of its own, computing on its main thread, as a trial
//! worker does. Copies in threads of one process measured more and varied more: MobileNetV2
//! on MNIST at 64 samples ×1.21 to ×1.85 (median 1.46, 7 profiles), ×0.99 to ×1.31 (median
//! 1.215, 6) with glibc told never to map memory for a block, and in processes ×1.24 to
//! ×1.39 (median 1.33, 4, interleaved with 4 in threads at median 1.45), its 2-worker
//! trials about ×1.2. Most likely the threads' own malloc arenas, which cannot keep what
//! the tuning of every stratlab process (`heap.rs`) keeps on the main thread: their large
//! buffers were mapped afresh every pass, and each unmapping of a shared address space
//! stalls the other copy's core.

use std::time::Instant;

use stratlab_networks::NetworkSpec;
use stratlab_profile::Contention;
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Tensor};

use crate::autograd::backward_with_grad;
use crate::profile::inputs_at;
use crate::staged_model::StagedModel;
use crate::TrainError;
use stratlab_profile::NetworkProfile;

/// Timed passes per copy after the untimed warm-up, at least and at most: small passes
/// repeat until about [`ENOUGH_S`] of them, the least a stable median of a millisecond
/// pass needs. Long passes take two each, four among the copies: a third cost ResNet-18 on
/// CIFAR 2.7 of its 12 s of contention (12.1 and 12.3 s with three, 9.7 and 9.4 s with
/// two), while its ratios moved between runs by as much either way (at 2 samples 1.06 and
/// 1.04 with three, 1.11 and 1.12 with two).
const MIN_PASSES: usize = 2;
const MAX_PASSES: usize = 40;
const ENOUGH_S: f64 = 0.5;

/// The slowdown of a network's passes on the CPU with `copies` copies computing at once, at
/// each of `sizes` samples, against `profile`'s stages at those sizes. `together(samples,
/// passes)` runs untimed warm-up passes and `passes` timed passes of every copy at
/// `samples` samples, each pass started in all copies at once, and returns every copy's
/// timed passes.
pub fn measure_contention<E: From<TrainError>>(
    sizes: &[usize],
    copies: usize,
    profile: &NetworkProfile,
    together: &mut dyn FnMut(usize, usize) -> Result<Vec<f64>, E>,
) -> Result<Contention, E> {
    let mut ratio = Vec::with_capacity(sizes.len());
    for &samples in sizes {
        let profiled = profile.stage_sum_s(samples).ok_or_else(|| {
            TrainError::Torch(tch::TchError::Torch(format!(
                "contention at {samples} samples needs the profile's stages at that size"
            )))
        })?;
        let passes = ((ENOUGH_S / profiled.max(1e-6)).ceil() as usize).clamp(MIN_PASSES, MAX_PASSES);
        let times = together(samples, passes)?;
        let median = crate::stats::median(&times).unwrap_or(0.0);
        if profiled > 0.0 {
            ratio.push((samples, median / profiled));
        }
    }
    Ok(Contention { copies, ratio })
}

/// One copy: the network's whole forward and backward, on this process's libtorch threads,
/// at the size last asked for. Weights are drawn from libtorch's generator.
pub struct ContentionCopy {
    _store: VarStore,
    model: StagedModel,
    input: Option<Tensor>,
}

impl ContentionCopy {
    /// A copy of `spec`'s network on the CPU, ready to run its passes.
    pub fn new(spec: &NetworkSpec) -> ContentionCopy {
        let store = VarStore::new(Device::Cpu);
        let model = StagedModel::build(spec, &store);
        ContentionCopy { _store: store, model, input: None }
    }

    /// Passes from now on take `size` of `samples` (float32 `N×C×H×W`,
    /// [`inputs_at`]), the samples the profile's stages were timed on.
    pub fn resize(&mut self, samples: &Tensor, size: usize) {
        self.input = Some(inputs_at(samples, size));
    }

    /// One forward and backward at the last size asked for; its seconds.
    pub fn pass(&self) -> Result<f64, TrainError> {
        let input = self.input.as_ref().ok_or_else(|| TrainError::InvalidConfig {
            field: "contention copy",
            reason: "a pass before any size was given".into(),
        })?;
        let start = Instant::now();
        let output = self.model.forward_t(input, true);
        backward_with_grad(&output, &Tensor::ones_like(&output))?;
        Ok(start.elapsed().as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use stratlab_networks::{spec, InputShape};

    use crate::optimizer::UpdateRule;

    use super::*;

    #[test]
    fn the_ratio_is_the_median_pass_together_over_the_stages_summed() {
        let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
        let profile = crate::profile::profile_network(
            &spec,
            tch::Device::Cpu,
            &[2, 8],
            UpdateRule::momentum_sgd(),
            Default::default(),
            &crate::profile::noise_samples(&spec, 8),
        )
        .unwrap();
        let mut asked = Vec::new();
        // Copies that take 1.5 and 2.5 times the stages (median 2 of the four passes).
        let mut together = |samples: usize, passes: usize| -> Result<Vec<f64>, TrainError> {
            asked.push((samples, passes));
            let alone = profile.stage_sum_s(samples).unwrap();
            Ok([1.5, 1.5, 2.5, 2.5].iter().map(|factor| factor * alone).collect())
        };
        let contention = measure_contention(&[2, 8], 2, &profile, &mut together).unwrap();
        assert_eq!(contention.copies, 2);
        for (&(samples, ratio), expected) in contention.ratio.iter().zip([2, 8]) {
            assert_eq!(samples, expected);
            assert!((ratio - 2.0).abs() < 1e-9, "{:?}", contention.ratio);
        }
        // Short passes repeat up to about half a second, never fewer than two.
        assert!(asked.iter().all(|&(_, passes)| (MIN_PASSES..=MAX_PASSES).contains(&passes)), "{asked:?}");
        assert_eq!(asked.iter().map(|&(samples, _)| samples).collect::<Vec<_>>(), [2, 8]);
    }

    #[test]
    fn a_size_the_profile_lacks_is_an_error_naming_it() {
        let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
        let profile = crate::profile::profile_network(
            &spec,
            tch::Device::Cpu,
            &[2],
            UpdateRule::momentum_sgd(),
            Default::default(),
            &crate::profile::noise_samples(&spec, 8),
        )
        .unwrap();
        let mut together = |_: usize, _: usize| -> Result<Vec<f64>, TrainError> { Ok(vec![1.0]) };
        let error = measure_contention(&[16], 2, &profile, &mut together).unwrap_err().to_string();
        assert!(error.contains("16 samples"), "{error}");
    }

    #[test]
    fn a_copy_passes_at_the_size_it_was_given() {
        let spec = spec("small-cnn", &InputShape::MNIST).unwrap();
        let mut copy = ContentionCopy::new(&spec);
        assert!(copy.pass().is_err(), "no size yet");
        // Fewer samples than the size: they repeat.
        copy.resize(&crate::profile::noise_samples(&spec, 3), 4);
        assert_eq!(copy.input.as_ref().unwrap().size()[0], 4);
        assert!(copy.pass().unwrap() > 0.0);
    }
}
