//! The one clock of timelines: CLOCK_MONOTONIC in nanoseconds, read the same way by the
//! training loop and by c10d's completion callbacks, and shared by every process of a
//! machine, so the ranks' events line up without exchanging clocks. (Across machines the
//! clocks differ; a multi-node trace aligns each rank on its own start.)

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn monotonic_ns() -> i64 {
    // SAFETY: a plain read of the clock.
    unsafe { crate::ffi::stratlab_comm_monotonic_ns() }
}
