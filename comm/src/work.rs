use tch::Tensor;

use crate::ffi::{self, RawWork};
use crate::CommError;

/// An operation in flight. Waiting returns when it has completed on this rank, with the
/// times it was launched and completed (CLOCK_MONOTONIC ns), which timelines record.
pub struct Work {
    raw: *mut RawWork,
    operation: &'static str,
    bytes: u64,
    launched_ns: i64,
    rank: usize,
    world_size: usize,
    /// Tensor to divide by the value once complete (an average over Gloo).
    divide: Option<(Tensor, f64)>,
}

// SAFETY: c10d work objects are waited on from any thread; freed only in Drop.
unsafe impl Send for Work {}

/// What a completed operation did, for timelines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completed {
    /// `all_reduce`, `send`, …
    pub operation: &'static str,
    /// Bytes the operation covered (this rank's tensor).
    pub bytes: u64,
    /// When it was issued.
    pub launched_ns: i64,
    /// When the backend finished it (its future's callback), or when `wait` returned for
    /// work without a future (Gloo's send and receive).
    pub completed_ns: i64,
}

impl Work {
    pub(crate) fn new(
        raw: *mut RawWork,
        operation: &'static str,
        bytes: u64,
        launched_ns: i64,
        rank: usize,
        world_size: usize,
    ) -> Work {
        Work { raw, operation, bytes, launched_ns, rank, world_size, divide: None }
    }

    pub(crate) fn dividing(mut self, divide: Option<(Tensor, f64)>) -> Work {
        self.divide = divide;
        self
    }

    /// Bytes this operation covers.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether it has completed (without blocking).
    pub fn is_completed(&self) -> bool {
        // SAFETY: live handle.
        unsafe { ffi::stratlab_work_is_completed(self.raw) == 1 }
    }

    /// Blocks until the operation completes, up to the group's timeout. A peer that died
    /// or never answered is an error here.
    pub fn wait(self) -> Result<Completed, CommError> {
        // SAFETY: live handle; 0 = the group's own timeout.
        let status = unsafe { ffi::stratlab_work_wait(self.raw, 0) };
        if status != 0 {
            return Err(CommError::Operation {
                operation: self.operation,
                rank: self.rank,
                world_size: self.world_size,
                message: ffi::last_error(),
            });
        }
        // SAFETY: live handle; set by the callback or by the wait above.
        let completed_ns = unsafe { ffi::stratlab_work_completed_ns(self.raw) };
        if let Some((tensor, divisor)) = &self.divide {
            let mut tensor = tensor.shallow_clone();
            let _ = tch::no_grad(|| tensor.g_div_scalar_(*divisor));
        }
        Ok(Completed { operation: self.operation, bytes: self.bytes, launched_ns: self.launched_ns, completed_ns })
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // SAFETY: created by the shim, freed once. c10d keeps running work it still owns.
        unsafe { ffi::stratlab_work_free(self.raw) }
    }
}
