//! How much memory tensors hold on a device, read from the allocator, so pipeline runs can
//! report each stage's peak next to the `size` balance's estimate.

use tch::Device;

/// Bytes currently allocated on `device`, where the allocator can tell.
///
/// - CPU (Linux with glibc): bytes this process holds from `malloc`, glibc's `mallinfo2()`
///   `uordblks + hblkhd`. libtorch's CPU allocator takes tensor storage with
///   `posix_memalign`, and large tensors come straight from `mmap` (`hblkhd`), so tensors
///   show up here, together with everything else the process allocates. Reading it walks
///   the allocator's free lists under its locks: sample per step, not per op.
/// - CUDA: `None` for now. The number to read is c10's `CUDACachingAllocator` statistics
///   (`allocated_bytes` current and peak, as `torch.cuda.memory_allocated` reports them),
///   which tch does not expose; it would need a C++ shim like `cpp/autograd.cpp`.
/// - Any other device or C library: `None`.
pub fn allocated_bytes(device: Device) -> Option<u64> {
    match device {
        Device::Cpu => cpu_allocated_bytes(),
        _ => None,
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn cpu_allocated_bytes() -> Option<u64> {
    // SAFETY: mallinfo2 takes no arguments and only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    Some((info.uordblks + info.hblkhd) as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn cpu_allocated_bytes() -> Option<u64> {
    None
}

/// The highest [`allocated_bytes`] seen between a start and the last sample, relative to
/// the start: what one phase of a run (a stage's forward and backward) added at its worst.
///
/// A sampled peak: an allocation made and freed between two samples is missed, so sample
/// where the peak is expected (after a forward, before a backward frees activations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeakGauge {
    device: Device,
    baseline_bytes: Option<u64>,
    peak_bytes: Option<u64>,
}

impl PeakGauge {
    /// Records the bytes allocated now on `device` as the baseline (and first peak).
    pub fn start(device: Device) -> Self {
        let baseline_bytes = allocated_bytes(device);
        PeakGauge { device, baseline_bytes, peak_bytes: baseline_bytes }
    }

    /// Reads the allocated bytes, raises the peak if they are higher, and returns them
    /// (`None` where the device cannot tell).
    pub fn sample(&mut self) -> Option<u64> {
        let now = allocated_bytes(self.device)?;
        self.peak_bytes = Some(self.peak_bytes.map_or(now, |peak| peak.max(now)));
        Some(now)
    }

    /// The bytes allocated at the start.
    pub fn baseline_bytes(&self) -> Option<u64> {
        self.baseline_bytes
    }

    /// The highest sample so far, the baseline included.
    pub fn peak_bytes(&self) -> Option<u64> {
        self.peak_bytes
    }

    /// How far the peak rose above the baseline (0 if nothing was allocated).
    pub fn peak_above_baseline(&self) -> Option<u64> {
        Some(self.peak_bytes?.saturating_sub(self.baseline_bytes?))
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;
    use tch::{Kind, Tensor};

    const MIB: u64 = 1 << 20;

    /// Other tests allocate and free on other threads at the same time, so a check that
    /// reads the process-wide count gets a few tries before it counts as failed.
    fn eventually(check: impl Fn() -> Result<(), String>) {
        let mut last = String::new();
        for _ in 0..5 {
            match check() {
                Ok(()) => return,
                Err(error) => last = error,
            }
        }
        panic!("{last}");
    }

    fn tensor_of_64_mib() -> Tensor {
        Tensor::zeros([16 * MIB as i64], (Kind::Float, Device::Cpu))
    }

    #[test]
    fn a_64_mib_tensor_raises_cpu_allocated_bytes_and_dropping_it_lowers_them() {
        eventually(|| {
            let before = allocated_bytes(Device::Cpu).unwrap();
            let tensor = tensor_of_64_mib();
            let during = allocated_bytes(Device::Cpu).unwrap();
            drop(tensor);
            let after = allocated_bytes(Device::Cpu).unwrap();
            let (rise, fall) = (during as i64 - before as i64, during as i64 - after as i64);
            if rise >= 60 * MIB as i64 && fall >= 60 * MIB as i64 {
                Ok(())
            } else {
                Err(format!("before {before}, with the tensor {during}, after dropping it {after} bytes"))
            }
        });
    }

    #[test]
    fn gauge_peak_sees_a_tensor_that_is_gone_by_the_last_sample() {
        eventually(|| {
            let mut gauge = PeakGauge::start(Device::Cpu);
            let tensor = tensor_of_64_mib();
            gauge.sample();
            drop(tensor);
            let now = gauge.sample().unwrap();
            let peak = gauge.peak_above_baseline().unwrap();
            if peak >= 60 * MIB && gauge.peak_bytes().unwrap() >= now + 60 * MIB {
                Ok(())
            } else {
                Err(format!("gauge {gauge:?}, last sample {now} bytes"))
            }
        });
    }

    #[test]
    fn cuda_is_not_wired_and_the_gauge_says_so() {
        assert_eq!(allocated_bytes(Device::Cuda(0)), None);
        assert_eq!(PeakGauge::start(Device::Cuda(0)).peak_above_baseline(), None);
    }
}
