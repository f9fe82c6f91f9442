//! Each forwarding thread's CPU time, readable while it runs and after it has ended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A thread's CPU clock while it runs, and its final CPU time once it has ended (its clock
/// is gone then).
pub(super) struct ThreadCpu {
    pub(super) clock: Mutex<Option<libc::clockid_t>>,
    final_ns: AtomicU64,
}

const STILL_RUNNING: u64 = u64::MAX;

impl ThreadCpu {
    pub(super) fn new() -> Arc<ThreadCpu> {
        Arc::new(ThreadCpu { clock: Mutex::new(None), final_ns: AtomicU64::new(STILL_RUNNING) })
    }

    pub(super) fn nanoseconds(&self) -> u64 {
        let final_ns = self.final_ns.load(Ordering::Acquire);
        if final_ns != STILL_RUNNING {
            return final_ns;
        }
        let clock = *self.clock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The thread may end between the two reads; then its final time has been stored.
        clock.and_then(clock_ns).unwrap_or_else(|| match self.final_ns.load(Ordering::Acquire) {
            STILL_RUNNING => 0,
            final_ns => final_ns,
        })
    }
}

/// Stores the thread's CPU time when the thread ends, even by panicking.
pub(super) struct RecordCpuOnExit(pub(super) Arc<ThreadCpu>);

impl Drop for RecordCpuOnExit {
    fn drop(&mut self) {
        self.0.final_ns.store(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0), Ordering::Release);
    }
}

pub(super) fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec to write to.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return None;
    }
    Some(now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64)
}
