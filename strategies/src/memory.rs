//! How much memory tensors hold on a device, read from the allocator: the bytes in use
//! now and their peak since a reset, so every strategy can report a step's peak memory per
//! worker and pipeline stages their activations.
//!
//! - CPU: exact. [`count_cpu_allocations`] makes a counting allocator (`cpp/cpu_memory.cpp`)
//!   libtorch's CPU allocator; from then on every tensor storage allocated on the CPU is
//!   counted when it is made and when it is freed, and the peak is kept at every allocation,
//!   so nothing allocated and freed between two reads is missed. Storage allocated before
//!   it was installed is not counted. Before installation the CPU reports `None`.
//!   [`limit_cpu_storage`] makes the same count a limit: a trial's `memory_limit_mib`.
//! - CUDA: the caching allocator's statistics (`cpp/cuda_memory.cpp`): `allocated_bytes`
//!   current and peak, as `torch.cuda.memory_allocated` and `max_memory_allocated` report
//!   them, the peak started again by `resetPeakStats`. `None` where the process has no CUDA
//!   allocator.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use stratlab_results::EventKind;
use tch::Device;

use crate::device_double::{self, DeviceCall};

extern "C" {
    fn stratlab_cpu_memory_install() -> c_int;
    fn stratlab_cpu_memory_current() -> i64;
    fn stratlab_cpu_memory_peak() -> i64;
    fn stratlab_cpu_memory_reset_peak();
    fn stratlab_cpu_memory_set_limit(bytes: i64);
    fn stratlab_cpu_memory_set_pass(pass: *const u8, len: usize, stage: c_int);
    fn stratlab_cuda_memory_stats(device: c_int, current: *mut i64, peak: *mut i64) -> c_int;
    fn stratlab_cuda_memory_reset_peak(device: c_int) -> c_int;
}

std::thread_local! {
    /// What this thread runs, as last given to the allocator: restored when a pass ends.
    static PASS: std::cell::Cell<(Option<&'static str>, Option<usize>)> = const { std::cell::Cell::new((None, None)) };
}

/// What a thread runs while a [`PassGuard`] lives: an out-of-memory failure names it
/// ("… asked for in the backward of pipeline stage 1 with …").
#[must_use = "the pass ends when the guard is dropped"]
pub struct PassGuard {
    previous: (Option<&'static str>, Option<usize>),
}

/// Names `kind` (of pipeline stage `stage`, where the thread runs one) as what this thread
/// runs until the guard is dropped; the name before it comes back then.
pub fn in_pass(kind: EventKind, stage: Option<usize>) -> PassGuard {
    let name = pass_name(kind);
    let stage = stage.or(PASS.with(|pass| pass.get().1));
    let previous = PASS.with(|pass| pass.replace((Some(name), stage)));
    tell_allocator(Some(name), stage);
    PassGuard { previous }
}

impl Drop for PassGuard {
    fn drop(&mut self) {
        PASS.with(|pass| pass.set(self.previous));
        tell_allocator(self.previous.0, self.previous.1);
    }
}

/// How an out-of-memory message names a pass: "… asked for in the backward …".
fn pass_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::H2d => "copy of the batch to the device",
        EventKind::Optimizer => "optimizer step",
        EventKind::Eval => "evaluation",
        EventKind::DataWait => "wait for the data loader",
        other => other.into(),
    }
}

fn tell_allocator(name: Option<&'static str>, stage: Option<usize>) {
    let (pointer, len) = name.map_or((std::ptr::null(), 0), |name| (name.as_ptr(), name.len()));
    let stage = stage.map_or(-1, |stage| c_int::try_from(stage).unwrap_or(c_int::MAX));
    // SAFETY: the name is 'static, so the pointer outlives the thread that keeps it.
    unsafe { stratlab_cpu_memory_set_pass(pointer, len, stage) }
}

/// Whether the counting allocator is libtorch's CPU allocator in this process.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Makes the counting allocator libtorch's CPU allocator (once per process; later calls
/// return at once) and returns whether it counts. Call it before the tensors to be counted
/// are made: a strategy's training does so first.
pub fn count_cpu_allocations() -> bool {
    if !COUNTING.load(Ordering::Acquire) {
        // SAFETY: no arguments; the shim installs a static allocator and catches exceptions.
        let installed = unsafe { stratlab_cpu_memory_install() } == 0;
        COUNTING.store(installed, Ordering::Release);
    }
    COUNTING.load(Ordering::Acquire)
}

/// Bytes of tensor storage in use on `device` now, where the allocator can tell.
pub fn allocated_bytes(device: Device) -> Option<u64> {
    match device {
        // SAFETY: reads an atomic counter.
        Device::Cpu if COUNTING.load(Ordering::Acquire) => Some(unsafe { stratlab_cpu_memory_current() }.max(0) as u64),
        Device::Cuda(index) => cuda_stats(index).map(|(current, _)| current),
        _ => None,
    }
}

/// The most bytes of tensor storage in use at once on `device` since the last
/// [`reset_peak`], where the allocator can tell.
pub fn peak_bytes(device: Device) -> Option<u64> {
    match device {
        // SAFETY: reads an atomic counter.
        Device::Cpu if COUNTING.load(Ordering::Acquire) => Some(unsafe { stratlab_cpu_memory_peak() }.max(0) as u64),
        Device::Cuda(index) => cuda_stats(index).map(|(_, peak)| peak),
        _ => None,
    }
}

/// Limits this process's CPU tensor storage to `limit` bytes in use at once (`None`: no
/// limit): an allocation that would pass it fails as out of memory, naming the bytes asked
/// for, in use and allowed, at the same size every run. Installs the counting allocator
/// first; `false` where it cannot be installed, and then nothing is limited.
pub fn limit_cpu_storage(limit: Option<u64>) -> bool {
    if !count_cpu_allocations() {
        return false;
    }
    let bytes = limit.map_or(0, |bytes| i64::try_from(bytes).unwrap_or(i64::MAX));
    // SAFETY: stores an atomic value.
    unsafe { stratlab_cpu_memory_set_limit(bytes) };
    true
}

/// A CUDA device's index as the shim takes it.
pub(crate) fn device_index(index: usize) -> c_int {
    c_int::try_from(index).unwrap_or(c_int::MAX)
}

/// CUDA device `index`'s allocator statistics: c10's `DeviceAllocator::getDeviceStats`, the
/// aggregate `allocated_bytes` now and their peak (`cpp/cuda_memory.cpp`); `None` where this
/// process has no CUDA allocator (a CPU libtorch, or no GPU).
fn cuda_stats(index: usize) -> Option<(u64, u64)> {
    let (mut current, mut peak) = (0_i64, 0_i64);
    // SAFETY: two out-parameters the call writes; exceptions stay in the shim.
    let status = unsafe { stratlab_cuda_memory_stats(device_index(index), &mut current, &mut peak) };
    (status == 0).then(|| (current.max(0) as u64, peak.max(0) as u64))
}

/// Starts a new peak on `device` from what is in use now.
pub fn reset_peak(device: Device) {
    match device {
        Device::Cpu if COUNTING.load(Ordering::Acquire) => {
            // SAFETY: stores an atomic counter.
            unsafe { stratlab_cpu_memory_reset_peak() };
            device_double::record(DeviceCall::ResetPeakStats);
        }
        Device::Cuda(index) => {
            // SAFETY: no pointers; exceptions stay in the shim. A process without a CUDA
            // allocator has no peak to reset, so the status is not needed.
            let _ = unsafe { stratlab_cuda_memory_reset_peak(device_index(index)) };
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Kind, Tensor};

    const MIB: u64 = 1 << 20;

    /// Other tests of this process allocate and free on other threads at the same time, so a
    /// check of the process-wide count is tried again until they are done (the crate's
    /// tests take about 2 s here; 1 s of tries failed one run in three) before it counts as
    /// failed.
    fn eventually(check: impl Fn() -> Option<String>) {
        let mut last = String::new();
        for _ in 0..200 {
            match check() {
                None => return,
                Some(error) => last = error,
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("{last}");
    }

    #[test]
    fn the_counting_allocator_counts_a_known_allocation_pattern_exactly() {
        assert!(count_cpu_allocations(), "the counting allocator installs");
        assert!(count_cpu_allocations(), "and a second call keeps it");
        eventually(|| {
            let before = allocated_bytes(Device::Cpu).unwrap();
            reset_peak(Device::Cpu);
            // 64 MiB and 32 MiB held together, then 16 MiB after both are gone.
            let a = Tensor::zeros([16 * MIB as i64], (Kind::Float, Device::Cpu));
            let b = Tensor::zeros([8 * MIB as i64], (Kind::Float, Device::Cpu));
            let during = allocated_bytes(Device::Cpu).unwrap();
            drop((a, b));
            let c = Tensor::zeros([4 * MIB as i64], (Kind::Float, Device::Cpu));
            let (after, peak) = (allocated_bytes(Device::Cpu).unwrap(), peak_bytes(Device::Cpu).unwrap());
            drop(c);
            let end = allocated_bytes(Device::Cpu).unwrap();
            let exact =
                during == before + 96 * MIB && after == before + 16 * MIB && peak == before + 96 * MIB && end == before;
            (!exact)
                .then(|| format!("before {before}, with 96 MiB {during}, then 16 MiB {after}, peak {peak}, end {end}"))
        });
    }

    #[test]
    fn a_peak_freed_before_it_is_read_is_still_the_peak() {
        assert!(count_cpu_allocations());
        eventually(|| {
            reset_peak(Device::Cpu);
            let base = allocated_bytes(Device::Cpu).unwrap();
            // Made and freed inside one expression: a sampled gauge would never see it.
            let _sum = Tensor::ones([16 * MIB as i64], (Kind::Float, Device::Cpu)).sum(Kind::Float);
            let peak = peak_bytes(Device::Cpu).unwrap();
            (peak < base + 64 * MIB).then(|| format!("peak {peak} from {base}"))
        });
    }

    #[cfg(not(stratlab_cuda))]
    #[test]
    fn without_a_cuda_allocator_cuda_memory_reads_none() {
        assert_eq!(allocated_bytes(Device::Cuda(0)), None);
        assert_eq!(peak_bytes(Device::Cuda(0)), None);
        reset_peak(Device::Cuda(0));
    }
}
