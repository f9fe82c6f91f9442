//! `output.backward(grad)` for non-scalar outputs (see `cpp/autograd.cpp`).

use std::os::raw::c_int;

use tch::Tensor;

use crate::{shim_call, TrainError};

extern "C" {
    fn stratlab_backward_with_grad(output: *mut torch_sys::C_tensor, grad: *mut torch_sys::C_tensor) -> c_int;
}

/// Back-propagates `grad` (the gradient of the loss with respect to `output`) through
/// `output`'s graph, accumulating into the leaves' `.grad` as `loss.backward()` does.
pub fn backward_with_grad(output: &Tensor, grad: &Tensor) -> Result<(), TrainError> {
    let mut output = output.shallow_clone();
    let mut grad = grad.shallow_clone();
    // SAFETY: both pointers are live at::Tensor handles for the duration of the call; the
    // shim catches every C++ exception.
    shim_call::check(unsafe { stratlab_backward_with_grad(output.as_mut_ptr(), grad.as_mut_ptr()) })
}
