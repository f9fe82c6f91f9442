//! A network's profile on a device: every stage's forward and backward seconds at a few
//! sample counts, timed one stage at a time on samples of the data the trials train on, with
//! what the stage holds (parameters) and sends on (its output). The `time` balance and the
//! performance model read the same measurement.
//!
//! The samples matter because some kernels' speed depends on the values: max pooling
//! branches on every comparison, so on a constant input (ones, as the stages were timed
//! before) it ran three times as fast as on an image (VGG-11's first pool at 32 CIFAR-10
//! samples, one thread: 2.7 against 8.0 ms in PyTorch 2.13), and the stages summed came out
//! below the same network's passes in a trial.

use std::time::Instant;

use stratlab_datasets::SplitMix64;
use stratlab_networks::NetworkSpec;
use stratlab_profile::{NetworkProfile, StageProfile};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Tensor};

use crate::autograd::backward_with_grad;
use crate::device::synchronize;
use crate::memory;
use crate::optimizer::UpdateRule;
use crate::precision::{Compute, PrecisionOps};
use crate::staged_model::StagedModel;
use crate::TrainError;

/// Timed passes per stage and size after one untimed warm-up; the cost is the faster one's
/// ([`faster_pass`]): interference only adds time, and a mean would take in whole any pass
/// the scheduler interrupted. More passes (up to five, their median) made profiles no more
/// repeatable and cost a third more of the stage timing (`perf-model/VALIDATION.md`).
pub const PROFILE_REPEATS: usize = 2;
/// Timed optimizer steps and gradient copies after an untimed one: milliseconds each, in every
/// cell's step, so they keep five.
const UPDATE_REPEATS: usize = 5;

/// Times every stage of `spec` on `device` at each of `sizes` samples (each ≥ 1) in
/// `compute`'s precision and memory format, and an optimizer step of `update`, with the
/// threads libtorch has now. `samples` are the network's inputs as the data loader gives
/// them (float32 `N×C×H×W` on the CPU, N ≥ 1; [`inputs_at`] takes each size from them).
/// Weights are drawn from libtorch's generator: profile before seeding what a trial trains.
pub fn profile_network(
    spec: &NetworkSpec,
    device: Device,
    sizes: &[usize],
    update: UpdateRule,
    compute: Compute,
    samples: &Tensor,
) -> Result<NetworkProfile, TrainError> {
    memory::count_cpu_allocations();
    let Compute { precision, memory_format } = compute;
    let mut vs = VarStore::new(device);
    let model = StagedModel::build(spec, &vs);
    precision.apply_to(&mut vs, memory_format)?;
    // What crosses between pipeline stages: activations in the type the forward computes in.
    let message_bytes = precision.message_kind().elt_size_in_bytes() as u64;
    let mut optimizer = update.build(&vs, 1e-3)?;
    let variables = vs.trainable_variables();
    let analysis = spec.analyze(1)?;
    let mut stages: Vec<StageProfile> = spec
        .stages
        .iter()
        .zip(&analysis.stages)
        .map(|(stage, row)| StageProfile {
            name: stage.name.clone(),
            forward_s: Vec::with_capacity(sizes.len()),
            backward_s: Vec::with_capacity(sizes.len()),
            parameter_bytes: Vec::new(),
            output_bytes_per_sample: row.output_shape[1..].iter().product::<i64>() as u64 * message_bytes,
            kept_bytes: Vec::with_capacity(sizes.len()),
            transient_bytes: Vec::with_capacity(sizes.len()),
            input_backward_s: Vec::new(),
            weight_backward_s: Vec::new(),
        })
        .collect();
    for (profile, range) in stages.iter_mut().zip(&model.param_ranges) {
        profile.parameter_bytes = variables[range.clone()].iter().map(stratlab_comm::byte_size).collect();
    }
    for &size in sizes {
        let mut input = precision.input(&inputs_at(samples, size), device, memory_format)?;
        for (i, profile) in stages.iter_mut().enumerate() {
            // Later stages receive activations and must send their gradient back.
            let x = input.detach().set_requires_grad(i > 0);
            let warm_up = precision.autocast(device, || model.stages[i].forward_t(&x, true))?;
            let grad = Tensor::ones_like(&warm_up);
            backward_with_grad(&warm_up, &grad)?;
            // Every timed pass starts without gradients, as a training step does after
            // `zero_grad` (libtorch sets them to none): its backward allocates them, which
            // costs time (fresh pages) but is memory the model counts with the weights, so
            // it is taken out of the transient bytes. The first timed pass is also counted
            // (reading the counters costs nothing measurable).
            let stage_parameter_bytes: u64 = profile.parameter_bytes.iter().sum();
            let (mut forward, mut backward) = (Vec::new(), Vec::new());
            for pass in 0..PROFILE_REPEATS {
                let counted = pass == 0;
                optimizer.zero_grad();
                let before = memory::allocated_bytes(device).filter(|_| counted);
                memory::reset_peak(device);
                synchronize(device);
                let start = Instant::now();
                let output = precision.autocast(device, || model.stages[i].forward_t(&x, true))?;
                synchronize(device);
                let forwarded = Instant::now();
                let kept = memory::allocated_bytes(device);
                let forward_peak = memory::peak_bytes(device);
                memory::reset_peak(device);
                backward_with_grad(&output, &grad)?;
                synchronize(device);
                forward.push((forwarded - start).as_secs_f64());
                backward.push(forwarded.elapsed().as_secs_f64());
                if let (Some(before), Some(kept), Some(forward_peak), Some(backward_peak)) =
                    (before, kept, forward_peak, memory::peak_bytes(device))
                {
                    let backward_peak = backward_peak.saturating_sub(stage_parameter_bytes);
                    let transient = forward_peak.max(backward_peak).saturating_sub(kept);
                    profile.kept_bytes.push((size, kept.saturating_sub(before) as f64));
                    profile.transient_bytes.push((size, transient as f64));
                }
            }
            let (forward_s, backward_s) = faster_pass(&forward, &backward);
            profile.forward_s.push((size, forward_s));
            profile.backward_s.push((size, backward_s));
            input = warm_up.detach();
        }
    }
    // `zero_grad` left only the last stage its gradients: one whole pass gives every
    // parameter its gradient again, as a training step's backward does before its update.
    let input = precision.input(&inputs_at(samples, sizes.first().copied().unwrap_or(1)), device, memory_format)?;
    let output = precision.autocast(device, || model.forward_t(&input, true))?;
    backward_with_grad(&output, &Tensor::ones_like(&output))?;
    let mut steps = Vec::with_capacity(UPDATE_REPEATS);
    optimizer.step();
    for _ in 0..UPDATE_REPEATS {
        synchronize(device);
        let start = Instant::now();
        optimizer.step();
        synchronize(device);
        steps.push(start.elapsed().as_secs_f64());
    }
    // The gradients packed into a flat buffer allocated once and unpacked back, as a
    // parameter server's round does: the first of each is untimed.
    let flat = crate::flat::buffer_for(&variables, 0, device);
    let mut copies = Vec::with_capacity(2 * UPDATE_REPEATS);
    for attempt in 0..=UPDATE_REPEATS {
        for packing in [true, false] {
            synchronize(device);
            let start = Instant::now();
            let grads = variables.iter().map(Tensor::grad);
            if packing {
                crate::flat::pack(grads, &flat);
            } else {
                crate::flat::unpack(&flat, grads);
            }
            synchronize(device);
            if attempt > 0 {
                copies.push(start.elapsed().as_secs_f64());
            }
        }
    }
    Ok(NetworkProfile {
        stages,
        optimizer_s: crate::stats::median(&steps).unwrap_or(0.0),
        whole_model_copy_s: crate::stats::median(&copies).unwrap_or(0.0),
        contention: None,
        training_step_s: Vec::new(),
        training_step_peak_bytes: Vec::new(),
    })
}

/// `size` (≥ 1) of `samples` along the batch dimension: the first `size`, or all of them
/// repeated where there are fewer.
pub fn inputs_at(samples: &Tensor, size: usize) -> Tensor {
    let have = samples.size().first().copied().unwrap_or(1).max(1);
    let size = size.max(1) as i64;
    let mut repeats = vec![1i64; samples.dim()];
    repeats[0] = (size + have - 1) / have;
    let repeated = if repeats[0] > 1 { samples.repeat(repeats.as_slice()) } else { samples.shallow_clone() };
    repeated.narrow(0, 0, size).contiguous()
}

/// `count` samples of `spec`'s input that stand in for data where there is none (a `time`
/// balance cut in a process without the trial's data, tests): independent values uniform
/// in ±√3, the mean and variance of a normalised pixel, from a fixed seed and without
/// libtorch's generator, whose next draws are a trial's weights.
pub fn noise_samples(spec: &NetworkSpec, count: usize) -> Tensor {
    let dims: Vec<i64> = std::iter::once(count.max(1) as i64).chain(spec.input.sample_dims()).collect();
    let values = dims.iter().product::<i64>() as usize;
    let mut generator = SplitMix64::new(0x7072_6f66_696c_6573);
    let half_width = 3f32.sqrt();
    let noise: Vec<f32> = (0..values).map(|_| (2.0 * generator.unit() - 1.0) * half_width).collect();
    Tensor::from_slice(&noise).reshape(dims.as_slice())
}

/// The forward and backward seconds of the faster of the timed passes (forward and backward
/// together): a pass the VM's scheduler interrupted comes out slower, never faster, so the
/// faster one is the pass as it runs undisturbed, which the trials' 10th percentile keeps too.
pub(crate) fn faster_pass(forward: &[f64], backward: &[f64]) -> (f64, f64) {
    forward
        .iter()
        .zip(backward)
        .map(|(&forward, &backward)| (forward, backward))
        .min_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)))
        .unwrap_or((0.0, 0.0))
}

/// A profile of `spec` on a device known only by its datasheet, training in `precision`:
/// every op's passes on the roofline `seconds(flops, bytes moved)`, summed per stage (the
/// backward taken as twice the forward's FLOPs and traffic, the textbook rule a measured
/// profile replaces), activations moved in the forward's type (2 bytes under bf16 or fp16
/// autocast) and weights in their own, what a forward keeps taken as the stage's input and
/// output, and the update as a pass over weights, gradients and the optimizer's state. Predictions
/// resting on it are unvalidated.
pub fn analytical_profile(
    spec: &NetworkSpec,
    sizes: &[usize],
    update: UpdateRule,
    precision: stratlab_strategy_spec::Precision,
    seconds: &dyn Fn(f64, f64) -> f64,
) -> Result<NetworkProfile, TrainError> {
    let activation = precision.message_kind().elt_size_in_bytes() as f64;
    let weight = precision.kind().elt_size_in_bytes() as f64;
    let per_sample = spec.analyze(1)?;
    // The analysis counts float32 bytes; the activations here are `activation` bytes each.
    let activation_bytes = |float32_bytes: u64| float32_bytes as f64 / 4.0 * activation;
    let input_bytes = spec.input.sample_dims().iter().product::<i64>() as f64 * activation;
    let mut stages: Vec<StageProfile> = per_sample
        .stages
        .iter()
        .map(|stage| StageProfile {
            name: stage.name.clone(),
            forward_s: Vec::new(),
            backward_s: Vec::new(),
            parameter_bytes: vec![(stage.parameters as f64 * weight) as u64],
            output_bytes_per_sample: activation_bytes(stage.activation_bytes) as u64,
            kept_bytes: Vec::new(),
            transient_bytes: Vec::new(),
            input_backward_s: Vec::new(),
            weight_backward_s: Vec::new(),
        })
        .collect();
    for &samples in sizes {
        let analysis = spec.analyze(samples.max(1) as i64)?;
        let mut input = input_bytes * samples as f64;
        for (profile, stage) in stages.iter_mut().zip(&analysis.stages) {
            let output = activation_bytes(stage.activation_bytes);
            // A roofline per op: a stage's convolutions are bound by arithmetic, its batch
            // norms and activations by memory, and a sum over the stage would hide the latter.
            let (forward_s, backward_s) = stage.ops.iter().fold((0.0, 0.0), |(forward, backward), op| {
                let bytes = activation * op.elements_moved as f64 + weight * op.parameters as f64;
                let flops = op.flops as f64;
                (forward + seconds(flops, bytes), backward + seconds(2.0 * flops, 2.0 * bytes))
            });
            profile.forward_s.push((samples, forward_s));
            profile.backward_s.push((samples, backward_s));
            profile.kept_bytes.push((samples, input + output));
            profile.transient_bytes.push((samples, output));
            input = output;
        }
    }
    let weights = per_sample.total_parameters as f64 * weight;
    // The update reads the weights and gradients and writes the weights, and reads and
    // writes each state tensor (a momentum buffer, Adam's two moments).
    let states = update.state_tensors_per_weight() as f64;
    Ok(NetworkProfile {
        stages,
        optimizer_s: seconds(2.0 * (1.0 + states) * per_sample.total_parameters as f64, (3.0 + 2.0 * states) * weights),
        // Read the gradients, write the buffer.
        whole_model_copy_s: seconds(0.0, 2.0 * weights),
        contention: None,
        training_step_s: Vec::new(),
        training_step_peak_bytes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use stratlab_networks::{spec, InputShape};
    use tch::{Kind, Tensor};

    use super::{faster_pass, inputs_at, noise_samples};
    use crate::optimizer::UpdateRule;

    #[test]
    fn a_size_takes_the_first_samples_and_repeats_them_where_there_are_fewer() {
        let samples = Tensor::arange(3, (Kind::Float, tch::Device::Cpu)).reshape([3, 1, 1, 1]);
        let first = |size| Vec::<f32>::try_from(inputs_at(&samples, size).flatten(0, -1)).unwrap();
        assert_eq!(first(2), [0.0, 1.0]);
        assert_eq!(first(3), [0.0, 1.0, 2.0]);
        assert_eq!(first(7), [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0]);
        assert_eq!(inputs_at(&samples, 0).size(), [1, 1, 1, 1], "a pass takes at least one sample");
    }

    #[test]
    fn noise_is_shaped_like_the_samples_normalised_and_the_same_every_time() {
        let spec = spec("small-cnn", &InputShape::CIFAR10).unwrap();
        let noise = noise_samples(&spec, 64);
        assert_eq!(noise.size(), [64, 3, 32, 32]);
        let mean = noise.mean(Kind::Double).double_value(&[]);
        let variance = noise.var(false).double_value(&[]);
        assert!(mean.abs() < 0.02 && (variance - 1.0).abs() < 0.02, "mean {mean}, variance {variance}");
        assert!(noise.equal(&noise_samples(&spec, 64)), "a fixed seed");
        // Not libtorch's generator: drawing noise leaves a trial's next weights as they were.
        tch::manual_seed(7);
        let before = Tensor::randn([4], (Kind::Float, tch::Device::Cpu));
        tch::manual_seed(7);
        let _ = noise_samples(&spec, 2);
        assert!(before.equal(&Tensor::randn([4], (Kind::Float, tch::Device::Cpu))));
    }

    #[test]
    fn the_faster_pass_is_taken_whole_not_each_half_at_its_fastest() {
        // The second pass's forward was interrupted; the first's backward was slower than
        // the second's, but the first is the faster pass.
        assert_eq!(faster_pass(&[0.010, 0.030], &[0.021, 0.020]), (0.010, 0.021));
        assert_eq!(faster_pass(&[0.5], &[1.0]), (0.5, 1.0));
        assert_eq!(faster_pass(&[], &[]), (0.0, 0.0));
    }

    #[test]
    fn a_roofline_profile_moves_bf16_activations_in_two_bytes_and_keeps_float32_weights() {
        use stratlab_strategy_spec::Precision;
        let spec = stratlab_networks::spec("resnet18", &stratlab_networks::InputShape::CIFAR10).unwrap();
        // A device that only moves bytes: every op is bound by memory.
        let memory_bound = |_flops: f64, bytes: f64| bytes / 1e9;
        let profile = |precision| {
            super::analytical_profile(&spec, &[8], UpdateRule::momentum_sgd(), precision, &memory_bound).unwrap()
        };
        let (float32, bfloat16) = (profile(Precision::Float32), profile(Precision::Bfloat16));
        for (f, b) in float32.stages.iter().zip(&bfloat16.stages) {
            assert_eq!(b.output_bytes_per_sample * 2, f.output_bytes_per_sample, "{}", f.name);
            assert_eq!(b.parameter_bytes, f.parameter_bytes, "autocast keeps float32 weights");
            // Activations halve, weights do not: between half and all of float32's time.
            let (f_s, b_s) = (f.forward_s[0].1, b.forward_s[0].1);
            assert!(b_s >= 0.5 * f_s && b_s < f_s, "{}: {b_s} against {f_s}", f.name);
        }
        assert_eq!(bfloat16.optimizer_s, float32.optimizer_s);
    }
}
