//! Dynamic loss scaling, PyTorch AMP's `GradScaler`, for float16 training.
//!
//! float16's smallest normal number is 6.1e-5 and its largest 65504, so small activation
//! gradients flush to zero in a float16 backward. The loss is multiplied by a scale (2¹⁶ to
//! start) before the backward, which lifts the gradients into range; before the optimizer
//! step they are divided by it again (`unscale`) in one fused pass that also notes any
//! infinity or NaN. A step whose gradients overflowed is skipped and the scale halved; after
//! `growth_interval` clean steps in a row it doubles. bfloat16 has float32's range and needs
//! none of this.
//!
//! Every rank must make the same choice, or replicas' weights part: data parallelism
//! unscales the all-reduced gradients, which every rank holds alike; a pipeline's stages
//! hold different weights, so they agree through a one-element all-reduce (max) of the
//! verdict; a parameter server decides alone and sends its verdict with the weights.

use std::os::raw::c_int;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::{shim_call, Precision, TrainError};

extern "C" {
    fn stratlab_unscale_gradients(
        grads: *mut *mut torch_sys::C_tensor,
        count: c_int,
        found_inf: *mut torch_sys::C_tensor,
        inv_scale: *mut torch_sys::C_tensor,
    ) -> c_int;
}

/// How the loss scale starts and moves: `torch.amp.GradScaler`'s arguments, with its
/// defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossScaleSettings {
    /// The scale of the first step (`init_scale`).
    pub initial: f64,
    /// What the scale is multiplied by after `growth_interval` clean steps in a row.
    pub growth_factor: f64,
    /// What the scale is multiplied by after a step whose gradients overflowed.
    pub backoff_factor: f64,
    /// Clean steps in a row before the scale grows.
    pub growth_interval: usize,
}

impl Default for LossScaleSettings {
    fn default() -> Self {
        LossScaleSettings { initial: 65536.0, growth_factor: 2.0, backoff_factor: 0.5, growth_interval: 2000 }
    }
}

impl LossScaleSettings {
    /// Why these settings cannot scale a loss, naming the field, if they cannot.
    pub fn validate(&self) -> Result<(), TrainError> {
        let invalid = |field, reason: &str| Err(TrainError::InvalidConfig { field, reason: reason.to_string() });
        if !(self.initial.is_finite() && self.initial > 0.0) {
            return invalid("loss_scale.initial", "must be a finite positive number");
        }
        if !(self.growth_factor.is_finite() && self.growth_factor > 1.0) {
            return invalid("loss_scale.growth_factor", "must be a finite number above 1");
        }
        if !(self.backoff_factor > 0.0 && self.backoff_factor < 1.0) {
            return invalid("loss_scale.backoff_factor", "must lie strictly between 0 and 1");
        }
        if self.growth_interval == 0 {
            return invalid("loss_scale.growth_interval", "must be at least 1");
        }
        Ok(())
    }
}

/// What scaling did in one step: the scale its backward ran with, and whether its update
/// was skipped because a gradient overflowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaledStep {
    /// The scale the step's loss was multiplied by.
    pub loss_scale: f64,
    /// The gradients held an infinity or NaN, so the optimizer did not step.
    pub skipped: bool,
}

/// One rank's dynamic loss scale.
#[derive(Debug, Clone)]
pub struct LossScaler {
    settings: LossScaleSettings,
    scale: f64,
    clean_steps: usize,
}

impl LossScaler {
    /// The scaler a trial in `precision` needs: float16's, and none for the rest (float32
    /// and float64 do not lower the backward; bfloat16 keeps float32's exponent range).
    pub fn for_precision(precision: Precision, settings: LossScaleSettings) -> Option<LossScaler> {
        precision.needs_loss_scale().then(|| LossScaler::new(settings))
    }

    /// A scaler starting at `settings.initial`.
    pub fn new(settings: LossScaleSettings) -> LossScaler {
        LossScaler { settings, scale: settings.initial, clean_steps: 0 }
    }

    /// The scale the next backward runs with.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// `loss` multiplied by the scale: what the backward starts from.
    pub fn scaled(&self, loss: &Tensor) -> Tensor {
        loss * self.scale
    }

    /// Divides each of `params`' gradients by the scale, in place, in one fused pass;
    /// returns a one-element float32 tensor on their device, 1 where any element is an
    /// infinity or NaN, else 0 (not read back: a pipeline all-reduces it first).
    pub fn unscale(&self, params: &[Tensor]) -> Result<Tensor, TrainError> {
        let mut grads: Vec<Tensor> = params.iter().map(Tensor::grad).filter(Tensor::defined).collect();
        let device = grads.first().map_or(tch::Device::Cpu, Tensor::device);
        let mut found_inf = Tensor::zeros([1], (Kind::Float, device));
        if grads.is_empty() {
            return Ok(found_inf);
        }
        let mut inv_scale = Tensor::from_slice(&[(1.0 / self.scale) as f32]).to_device(device);
        let mut pointers: Vec<*mut torch_sys::C_tensor> = grads.iter_mut().map(|grad| grad.as_mut_ptr()).collect();
        // SAFETY: every pointer is a live at::Tensor handle owned by `grads`, `found_inf`
        // or `inv_scale` for the duration of the call; the shim catches every C++ exception.
        let status = unsafe {
            stratlab_unscale_gradients(
                pointers.as_mut_ptr(),
                pointers.len() as c_int,
                found_inf.as_mut_ptr(),
                inv_scale.as_mut_ptr(),
            )
        };
        shim_call::check(status)?;
        Ok(found_inf)
    }

    /// Records the step's verdict and moves the scale as `GradScaler.update` does; returns
    /// what the step ran with.
    pub fn update(&mut self, overflowed: bool) -> ScaledStep {
        let step = ScaledStep { loss_scale: self.scale, skipped: overflowed };
        if overflowed {
            self.scale *= self.settings.backoff_factor;
            self.clean_steps = 0;
        } else {
            self.clean_steps += 1;
            if self.clean_steps == self.settings.growth_interval {
                let grown = self.scale * self.settings.growth_factor;
                // GradScaler keeps the scale where growing it would overflow float32.
                if grown.is_finite() && grown <= f32::MAX as f64 {
                    self.scale = grown;
                }
                self.clean_steps = 0;
            }
        }
        step
    }

    /// The whole end of a scaled step on one rank: unscales `params`' gradients, turns this
    /// rank's verdict into every rank's with `agree` (the identity where ranks hold the same
    /// gradients), runs `optimizer_step` unless a gradient overflowed, and moves the scale.
    pub fn unscale_and_step(
        &mut self,
        params: &[Tensor],
        agree: impl FnOnce(Tensor) -> Result<Tensor, TrainError>,
        optimizer_step: impl FnOnce(),
    ) -> Result<ScaledStep, TrainError> {
        let found_inf = agree(self.unscale(params)?)?;
        let overflowed = found_inf.double_value(&[0]) != 0.0;
        if !overflowed {
            optimizer_step();
        }
        Ok(self.update(overflowed))
    }
}

/// The loss (or the scaled loss, where `scaler` is on) back-propagated: what every
/// strategy's backward from a loss is.
pub fn backward(scaler: Option<&LossScaler>, loss: &Tensor) -> Result<(), TrainError> {
    match scaler {
        Some(scaler) => Ok(scaler.scaled(loss).f_backward()?),
        None => Ok(loss.f_backward()?),
    }
}

/// The optimizer step at the end of a step: through [`LossScaler::unscale_and_step`] where
/// `scaler` is on (what it did is returned), else `optimizer_step` alone.
pub fn step(
    scaler: Option<&mut LossScaler>,
    params: &[Tensor],
    agree: impl FnOnce(Tensor) -> Result<Tensor, TrainError>,
    optimizer_step: impl FnOnce(),
) -> Result<Option<ScaledStep>, TrainError> {
    match scaler {
        Some(scaler) => scaler.unscale_and_step(params, agree, optimizer_step).map(Some),
        None => {
            optimizer_step();
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use tch::Device;

    use super::*;

    fn param_with_grad(grad: &[f32]) -> Tensor {
        let param = Tensor::zeros([grad.len() as i64], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let weights = Tensor::from_slice(grad);
        (&param * &weights).sum(Kind::Float).backward();
        param
    }

    #[test]
    fn unscale_divides_every_gradient_and_flags_only_non_finite_ones() {
        let scaler = LossScaler::new(LossScaleSettings { initial: 4.0, ..LossScaleSettings::default() });
        let params = [param_with_grad(&[4.0, -8.0]), param_with_grad(&[2.0])];
        let found = scaler.unscale(&params).unwrap();
        assert_eq!(found.double_value(&[0]), 0.0);
        assert_eq!(Vec::<f32>::try_from(params[0].grad()).unwrap(), [1.0, -2.0]);
        assert_eq!(Vec::<f32>::try_from(params[1].grad()).unwrap(), [0.5]);
        for bad in [f32::INFINITY, f32::NAN] {
            let params = [param_with_grad(&[1.0]), param_with_grad(&[bad, 1.0])];
            assert_eq!(scaler.unscale(&params).unwrap().double_value(&[0]), 1.0, "{bad}");
        }
    }

    #[test]
    fn the_scale_halves_on_overflow_and_doubles_after_the_growth_interval() {
        let settings = LossScaleSettings { initial: 1024.0, growth_interval: 3, ..LossScaleSettings::default() };
        let mut scaler = LossScaler::new(settings);
        let trace: Vec<(f64, bool)> = [false, true, false, false, false, false]
            .into_iter()
            .map(|overflowed| {
                let step = scaler.update(overflowed);
                (step.loss_scale, step.skipped)
            })
            .collect();
        // The overflow resets the count of clean steps: three more before the scale grows.
        assert_eq!(
            trace,
            [(1024.0, false), (1024.0, true), (512.0, false), (512.0, false), (512.0, false), (1024.0, false)]
        );
        assert_eq!(scaler.scale(), 1024.0);
    }

    #[test]
    fn an_overflowed_step_leaves_the_weights_and_a_clean_one_moves_them() {
        let mut scaler = LossScaler::new(LossScaleSettings { initial: 2.0, ..LossScaleSettings::default() });
        let params = [param_with_grad(&[f32::INFINITY])];
        let mut stepped = false;
        let step = scaler.unscale_and_step(&params, Ok, || stepped = true).unwrap();
        assert_eq!((step.skipped, stepped, scaler.scale()), (true, false, 1.0));
        let params = [param_with_grad(&[3.0])];
        let step = scaler.unscale_and_step(&params, Ok, || stepped = true).unwrap();
        assert_eq!((step.skipped, stepped, step.loss_scale), (false, true, 1.0));
        // Another rank's overflow, through `agree`, skips this rank's clean step too.
        let mut stepped = false;
        let step =
            scaler.unscale_and_step(&params, |_| Ok(Tensor::ones([1], (Kind::Float, Device::Cpu))), || stepped = true);
        assert!(step.unwrap().skipped && !stepped);
    }

    #[test]
    fn settings_out_of_range_name_their_field() {
        let bad = [
            LossScaleSettings { initial: 0.0, ..LossScaleSettings::default() },
            LossScaleSettings { growth_factor: 1.0, ..LossScaleSettings::default() },
            LossScaleSettings { backoff_factor: 1.0, ..LossScaleSettings::default() },
            LossScaleSettings { growth_interval: 0, ..LossScaleSettings::default() },
        ];
        let fields: Vec<String> = bad.iter().map(|s| s.validate().unwrap_err().to_string()).collect();
        for (message, field) in fields.iter().zip(["initial", "growth_factor", "backoff_factor", "growth_interval"]) {
            assert!(message.contains(&format!("loss_scale.{field}")), "{message}");
        }
        assert!(LossScaleSettings::default().validate().is_ok());
    }
}
