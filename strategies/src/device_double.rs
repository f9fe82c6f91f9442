//! A scripted CUDA device, for checking a CUDA trial's path on a machine without a GPU.
//!
//! Once [`install`]ed in a process (tests only: nothing in the binary installs it), a trial
//! that asks for `cuda:N` resolves to the CPU, and every step of its path that differs on
//! CUDA runs what it can here and is recorded ([`calls`]): the TF32 switches its precision
//! decides (libtorch's global context, in `libtorch_cpu`), a CUDA autocast region in the
//! precision's type around each forward (thread-local state in `libtorch_cpu`, opened beside
//! the CPU region that does the arithmetic), the pinned, non-blocking batch copy, and the
//! device synchronisation before each clock read. float16's loss scale runs as it would
//! (its unscale kernel is libtorch's fused op on either device). Its memory is a device of
//! [`SCRIPTED_DEVICE_BYTES`] whose allocator is the counting CPU allocator: a
//! `device_memory_limit_mib` cap is recorded as the fraction `setMemoryFraction` would get
//! and enforced at the same bytes, each peak reset is recorded as the allocator's
//! `resetPeakStats`, and a refused allocation is reported as the CUDA allocator's would be
//! (`crate::device_memory`).

use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::autocast::AutocastType;

/// One CUDA-specific step a trial took on the scripted device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DeviceCall {
    /// `cuda:N` resolved (to the CPU, standing in for it).
    Resolved(usize),
    /// A CUDA autocast region opened around a forward, in this type.
    Autocast(AutocastType),
    /// A batch copied to the device, from pinned memory without blocking.
    BatchCopy,
    /// The device synchronised (before a clock read, or at the end of a pass).
    Synchronize,
    /// The allocator capped at this fraction of the device's memory (`setMemoryFraction`).
    MemoryFraction(f64),
    /// The allocator's peak started again from what is allocated (`resetPeakStats`).
    ResetPeakStats,
}

/// The scripted device's memory: 16 GiB, a V100's.
pub const SCRIPTED_DEVICE_BYTES: u64 = 16 << 30;

static CALLS: OnceLock<Mutex<Vec<DeviceCall>>> = OnceLock::new();

/// Makes `cuda:N` this process's scripted device from now on.
pub fn install() {
    CALLS.get_or_init(|| Mutex::new(Vec::new()));
}

/// Whether the scripted device is installed in this process.
pub fn installed() -> bool {
    CALLS.get().is_some()
}

/// Records `call` where the scripted device is installed; does nothing elsewhere.
pub(crate) fn record(call: DeviceCall) {
    if let Some(calls) = CALLS.get() {
        calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(call);
    }
}

/// Every call recorded so far, in order.
pub fn calls() -> Vec<DeviceCall> {
    CALLS.get().map(|calls| calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()).unwrap_or_default()
}
