//! Autocast regions, PyTorch AMP's `torch.autocast`, through the C++ shim
//! (`cpp/autocast.cpp`): tch's own `autocast` only switches CUDA's, and libtorch keeps the
//! state per thread and per device type, so every thread that runs a forward (each worker,
//! each pipeline stage's thread) opens its own region around it.
//!
//! Inside a region, the ops autocast lists (convolutions, matrix products) compute in the
//! region's lower-precision type from float32 weights and inputs; the rest keep float32.
//! The backward runs each op in the type its forward ran in, outside the region, and the
//! optimizer updates the float32 weights. Closing the outermost region drops the
//! lower-precision copies of the weights the forward made: the optimizer step that follows
//! changes the weights, and a copy kept past it would be stale.

use std::ffi::c_int;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};
use tch::Device;

use crate::TrainError;

extern "C" {
    fn stratlab_autocast_enter(device: c_int, dtype: c_int) -> c_int;
    fn stratlab_autocast_exit(device: c_int, was_enabled: c_int) -> c_int;
    fn stratlab_autocast_enabled(device: c_int) -> c_int;
}

/// The lower-precision type a region computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutocastType {
    /// bfloat16: float32's exponent range with 8 bits of mantissa; needs no loss scaling.
    Bfloat16,
    /// float16 (IEEE half): 11 bits of mantissa but a narrow range; gradients need loss
    /// scaling.
    Float16,
}

impl AutocastType {
    fn code(self) -> c_int {
        match self {
            AutocastType::Bfloat16 => 0,
            AutocastType::Float16 => 1,
        }
    }
}

/// The shim's code for a device's type: autocast state is per device type, not per device.
fn device_code(device: Device) -> c_int {
    match device {
        Device::Cuda(_) => 1,
        _ => 0,
    }
}

/// An open region on this thread; dropping it closes it and restores what was in force
/// before. Not `Send`: the state it changed belongs to the thread that opened it.
#[derive(Debug)]
pub struct AutocastRegion {
    device: c_int,
    was_enabled: c_int,
    _this_thread: PhantomData<*const ()>,
}

impl AutocastRegion {
    /// Opens a region computing in `dtype` for tensors on `device`'s type.
    pub fn enter(device: Device, dtype: AutocastType) -> Result<AutocastRegion, TrainError> {
        let device = device_code(device);
        // SAFETY: plain values in and out; the shim catches every C++ exception.
        let was_enabled = unsafe { stratlab_autocast_enter(device, dtype.code()) };
        if was_enabled < 0 {
            return Err(TrainError::Device(format!("libtorch refused an autocast region in {dtype:?}")));
        }
        Ok(AutocastRegion { device, was_enabled, _this_thread: PhantomData })
    }
}

impl Drop for AutocastRegion {
    fn drop(&mut self) {
        // SAFETY: as in `enter`. A refusal here leaves autocast on for this thread, which
        // `autocast_enabled` shows; there is nothing better to do in a destructor.
        unsafe { stratlab_autocast_exit(self.device, self.was_enabled) };
    }
}

/// Whether autocast is on for `device`'s type on this thread.
pub fn autocast_enabled(device: Device) -> bool {
    // SAFETY: as in `AutocastRegion::enter`.
    unsafe { stratlab_autocast_enabled(device_code(device)) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cuda_region_switches_cuda_autocast_on_this_thread_without_a_gpu_and_restores_it() {
        // The state is libtorch's thread-local flag per device type, in libtorch_cpu: a CUDA
        // trial's regions open and close the same way on a machine with no GPU, which is
        // how this build checks the CUDA path.
        let cuda = Device::Cuda(0);
        assert!(!autocast_enabled(cuda) && !autocast_enabled(Device::Cpu));
        {
            let _outer = AutocastRegion::enter(cuda, AutocastType::Float16).unwrap();
            assert!(autocast_enabled(cuda), "CUDA's flag is on");
            assert!(!autocast_enabled(Device::Cpu), "the CPU's is its own");
            {
                let _inner = AutocastRegion::enter(cuda, AutocastType::Bfloat16).unwrap();
                assert!(autocast_enabled(cuda));
            }
            assert!(autocast_enabled(cuda), "closing a nested region keeps the outer one open");
            assert!(!std::thread::scope(|scope| scope.spawn(|| autocast_enabled(cuda)).join().unwrap()));
        }
        assert!(!autocast_enabled(cuda), "the outermost region restored what was in force");
    }
}
