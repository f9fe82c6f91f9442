//! A backward split in two passes, zero-bubble's `I` and `W` (see `cpp/split_backward.cpp`):
//! [`backward_input`] computes the stage input's gradient alone and keeps the gradients
//! where the weights' paths leave the input's; [`WeightGradients::compute`] later turns
//! those into the weights' gradients, accumulated into `.grad` as a whole backward does.

use std::os::raw::c_int;
use std::ptr::NonNull;

use tch::Tensor;

use crate::{shim_call, TrainError};

/// The shim's opaque state between the two halves.
#[repr(C)]
struct SplitState {
    _private: [u8; 0],
}

extern "C" {
    fn stratlab_backward_input(
        output: *mut torch_sys::C_tensor,
        grad: *mut torch_sys::C_tensor,
        input: *mut torch_sys::C_tensor,
        input_grad: *mut *mut torch_sys::C_tensor,
        split: *mut *mut SplitState,
    ) -> c_int;
    fn stratlab_backward_weight(split: *mut SplitState) -> c_int;
    fn stratlab_split_backward_free(split: *mut SplitState);
}

/// The weights' half of a split backward, waiting to run; it holds the micro-batch's graph
/// until it has run or is dropped.
pub struct WeightGradients(NonNull<SplitState>);

impl WeightGradients {
    /// Computes the weights' gradients (zero-bubble's `W`), accumulating into `.grad`.
    pub fn compute(self) -> Result<(), TrainError> {
        // SAFETY: the state is live until `self` drops, after this call.
        shim_call::check(unsafe { stratlab_backward_weight(self.0.as_ptr()) })
    }
}

impl Drop for WeightGradients {
    fn drop(&mut self) {
        // SAFETY: the state came from `stratlab_backward_input` and is freed once, here.
        unsafe { stratlab_split_backward_free(self.0.as_ptr()) }
    }
}

/// The input's half (zero-bubble's `I`): back-propagates `grad`, the gradient of the loss
/// with respect to `output`, to `input` (a leaf that requires its gradient) only. Returns
/// the input's gradient and the weights' half; no `.grad` changes until that runs.
pub fn backward_input(output: &Tensor, grad: &Tensor, input: &Tensor) -> Result<(Tensor, WeightGradients), TrainError> {
    let (mut output, mut grad, mut input) = (output.shallow_clone(), grad.shallow_clone(), input.shallow_clone());
    let mut input_grad = std::ptr::null_mut();
    let mut split = std::ptr::null_mut();
    // SAFETY: the three tensors are live at::Tensor handles for the call; on success the
    // shim hands over a new at::Tensor and a state, each owned by what wraps it below; the
    // shim catches every C++ exception.
    shim_call::check(unsafe {
        stratlab_backward_input(output.as_mut_ptr(), grad.as_mut_ptr(), input.as_mut_ptr(), &mut input_grad, &mut split)
    })?;
    // SAFETY: both pointers were just set by a successful call.
    let input_grad = unsafe { Tensor::from_ptr(input_grad) };
    let split = NonNull::new(split).expect("a successful input pass returns its state");
    Ok((input_grad, WeightGradients(split)))
}

#[cfg(test)]
mod tests {
    use tch::nn::{self, ModuleT, OptimizerConfig};
    use tch::{Device, Kind};

    use super::*;

    /// A stage of three linear layers with ReLUs and a batch norm between, from a leaf
    /// input, back-propagated whole and split: the same input gradient and the same weight
    /// gradients, and `I` leaves every weight's gradient untouched.
    #[test]
    fn split_halves_give_the_whole_backward_s_gradients() {
        tch::manual_seed(7);
        let vs = nn::VarStore::new(Device::Cpu);
        let root = vs.root();
        let stage = nn::seq_t()
            .add(nn::linear(&root / "a", 6, 8, Default::default()))
            .add_fn(|x| x.relu())
            .add(nn::batch_norm1d(&root / "bn", 8, Default::default()))
            .add(nn::linear(&root / "b", 8, 8, Default::default()))
            .add_fn(|x| x.tanh())
            .add(nn::linear(&root / "c", 8, 3, Default::default()));
        let mut optimizer = nn::Sgd::default().build(&vs, 0.1).unwrap();
        let x = Tensor::randn([5, 6], (Kind::Float, Device::Cpu));
        let grad = Tensor::randn([5, 3], (Kind::Float, Device::Cpu));
        let gradients =
            |vs: &nn::VarStore| -> Vec<Tensor> { vs.trainable_variables().iter().map(|v| v.grad().copy()).collect() };

        optimizer.zero_grad();
        let input = x.copy().set_requires_grad(true);
        let output = stage.forward_t(&input, true);
        crate::autograd::backward_with_grad(&output, &grad).unwrap();
        let (whole_input, whole_weights) = (input.grad().copy(), gradients(&vs));

        optimizer.zero_grad();
        let input = x.copy().set_requires_grad(true);
        let output = stage.forward_t(&input, true);
        let (split_input, weights) = backward_input(&output, &grad, &input).unwrap();
        assert!(!input.grad().defined(), "I computes the input's gradient without accumulating it");
        assert!(vs.trainable_variables().iter().all(|v| !v.grad().defined()), "I leaves the weights alone");
        weights.compute().unwrap();
        let split_weights = gradients(&vs);

        assert!(split_input.allclose(&whole_input, 1e-6, 1e-6, false));
        assert_eq!(split_weights.len(), 8, "three linears' weights and biases, the batch norm's two");
        for (split, whole) in split_weights.iter().zip(&whole_weights) {
            assert!(split.defined() && split.allclose(whole, 1e-6, 1e-6, false), "{split:?} against {whole:?}");
        }
    }

    #[test]
    fn a_stage_whose_input_needs_no_gradient_is_refused_with_a_message() {
        let w = Tensor::ones([2, 2], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let x = Tensor::ones([1, 2], (Kind::Float, Device::Cpu));
        let output = x.matmul(&w);
        let error = backward_input(&output, &output.ones_like(), &x).err().expect("refused").to_string();
        assert!(error.contains("does not require a gradient"), "{error}");
    }
}
