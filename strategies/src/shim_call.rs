//! The Rust side of the shim's error channel (`cpp/shim_call.h`): a fallible shim call
//! returns 0, or 1 with its C++ exception's message kept on the calling thread.

use std::os::raw::{c_char, c_int};

use crate::TrainError;

extern "C" {
    fn stratlab_shim_last_error() -> *const c_char;
}

/// `Ok` for a shim call's status 0; otherwise the error it kept, as a libtorch error.
pub(crate) fn check(status: c_int) -> Result<(), TrainError> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: a thread-local NUL-terminated buffer, set by the failing call on this thread
    // and alive until the next failing call here.
    let message = unsafe { std::ffi::CStr::from_ptr(stratlab_shim_last_error()) };
    Err(TrainError::Torch(tch::TchError::Torch(message.to_string_lossy().into_owned())))
}
