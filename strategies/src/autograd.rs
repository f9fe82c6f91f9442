//! `output.backward(grad)` for non-scalar outputs, and setting or clearing a leaf's `.grad`
//! (see `cpp/autograd.cpp`).

use std::os::raw::c_int;

use tch::Tensor;

use crate::{shim_call, TrainError};

extern "C" {
    fn stratlab_backward_with_grad(output: *mut torch_sys::C_tensor, grad: *mut torch_sys::C_tensor) -> c_int;
    fn stratlab_set_grad(tensor: *mut torch_sys::C_tensor, grad: *mut torch_sys::C_tensor) -> c_int;
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

/// Makes `grad` the gradient of `tensor` (a leaf), or clears it where `None`, freeing the
/// gradient's memory where nothing else holds it.
pub fn set_grad(tensor: &Tensor, grad: Option<&Tensor>) -> Result<(), TrainError> {
    let mut tensor = tensor.shallow_clone();
    let mut grad = grad.map(Tensor::shallow_clone);
    let grad_pointer = grad.as_mut().map_or(std::ptr::null_mut(), |grad| grad.as_mut_ptr());
    // SAFETY: `tensor` and, where given, `grad` are live at::Tensor handles for the
    // duration of the call; the shim catches every C++ exception.
    shim_call::check(unsafe { stratlab_set_grad(tensor.as_mut_ptr(), grad_pointer) })
}
