//! Every network stage's backward split in two (zero-bubble's `I` and `W`, see
//! [`crate::split_backward`]), timed as [`crate::profile::profile_network`] times the whole
//! one: one stage at a time, on the trial's samples, after an untimed warm-up, the faster
//! of the timed passes. The model simulates zero-bubble with these halves, so what
//! splitting costs (`I + W` over the whole backward) is in its predictions.

use std::time::Instant;

use stratlab_networks::NetworkSpec;
use stratlab_profile::{value_at, NetworkProfile};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Tensor};

use crate::autograd::set_grad;
use crate::device::synchronize;
use crate::precision::{Compute, PrecisionOps};
use crate::profile::{faster_pass, inputs_at, PROFILE_REPEATS};
use crate::split_backward::backward_input;
use crate::staged_model::StagedModel;
use crate::TrainError;

/// Adds every stage's `I` and `W` seconds at each of `sizes` to `profile` (taken of the same
/// `spec`, `compute` and `samples`). The first network stage's input needs no gradient, so
/// its `I` is nothing and its `W` its whole backward, as a first pipeline stage runs it.
pub fn time_split_backward(
    profile: &mut NetworkProfile,
    spec: &NetworkSpec,
    device: Device,
    sizes: &[usize],
    compute: Compute,
    samples: &Tensor,
) -> Result<(), TrainError> {
    let Compute { precision, memory_format } = compute;
    let mut vs = VarStore::new(device);
    let model = StagedModel::build(spec, &vs);
    precision.apply_to(&mut vs, memory_format)?;
    let variables = vs.trainable_variables();
    let clear = || variables.iter().try_for_each(|variable| set_grad(variable, None));
    for &size in sizes {
        let mut input = precision.input(&inputs_at(samples, size), device, memory_format)?;
        for (i, stage) in model.stages.iter().enumerate() {
            let timed = &mut profile.stages[i];
            let forward = |x: &Tensor| precision.autocast(device, || stage.forward_t(x, true));
            if i == 0 {
                let whole = value_at(&timed.backward_s, size).unwrap_or(0.0);
                timed.input_backward_s.push((size, 0.0));
                timed.weight_backward_s.push((size, whole));
                input = forward(&input)?.detach();
                continue;
            }
            let x = input.detach().set_requires_grad(true);
            let warm_up = forward(&x)?;
            let grad = Tensor::ones_like(&warm_up);
            let (_, weights) = backward_input(&warm_up, &grad, &x)?;
            weights.compute()?;
            let (mut inputs, mut weights_s) = (Vec::new(), Vec::new());
            for _ in 0..PROFILE_REPEATS {
                clear()?;
                let output = forward(&x)?;
                synchronize(device);
                let start = Instant::now();
                let (_, weights) = backward_input(&output, &grad, &x)?;
                synchronize(device);
                let input_done = Instant::now();
                weights.compute()?;
                synchronize(device);
                inputs.push((input_done - start).as_secs_f64());
                weights_s.push(input_done.elapsed().as_secs_f64());
            }
            let (input_s, weight_s) = faster_pass(&inputs, &weights_s);
            timed.input_backward_s.push((size, input_s));
            timed.weight_backward_s.push((size, weight_s));
            input = warm_up.detach();
        }
    }
    clear()
}
