//! Channels-last tensors through the C++ shim (`cpp/memory_format.cpp`): tch has no call
//! that sets a memory format. A trial in [`MemoryFormat::ChannelsLast`] lays out its
//! four-dimensional weights once, when the network is built, and every input batch; the
//! convolutions carry the layout through the activations and the gradients.

use std::ffi::c_int;

use stratlab_strategy_spec::MemoryFormat;
use tch::Tensor;

use crate::TrainError;

extern "C" {
    fn stratlab_to_memory_format(tensor: *mut torch_sys::C_tensor, format: c_int) -> *mut torch_sys::C_tensor;
    fn stratlab_is_memory_format(tensor: *mut torch_sys::C_tensor, format: c_int) -> c_int;
}

fn code(format: MemoryFormat) -> c_int {
    match format {
        MemoryFormat::Contiguous => 0,
        MemoryFormat::ChannelsLast => 1,
    }
}

/// `tensor` laid out in `format`: itself where it already is, else a copy.
pub fn to_memory_format(tensor: &Tensor, format: MemoryFormat) -> Result<Tensor, TrainError> {
    let mut handle = tensor.shallow_clone();
    // SAFETY: a live at::Tensor handle in; the shim catches every C++ exception and returns
    // a handle allocated with `new`, which tch's `Tensor` owns and frees.
    let laid_out = unsafe { stratlab_to_memory_format(handle.as_mut_ptr(), code(format)) };
    if laid_out.is_null() {
        return Err(TrainError::Device(format!(
            "libtorch refused to lay out a {:?} tensor as {format}",
            tensor.size()
        )));
    }
    // SAFETY: non-null, freshly allocated by the shim, owned by no one else.
    Ok(unsafe { Tensor::from_ptr(laid_out) })
}

/// Whether `tensor` is laid out in `format`.
pub fn is_memory_format(tensor: &Tensor, format: MemoryFormat) -> bool {
    let mut handle = tensor.shallow_clone();
    // SAFETY: as in `to_memory_format`.
    unsafe { stratlab_is_memory_format(handle.as_mut_ptr(), code(format)) == 1 }
}
