//! A device's caching allocator as a trial needs it (`cpp/cuda_memory.cpp`): its statistics,
//! a cap on it (`device_memory_limit_mib`, so a large GPU stands in for a smaller one), and
//! what it was asked for when it ran out, for a one-line out-of-memory reason.
//!
//! - The statistics are read by [`crate::memory`], for every device alike.
//! - The cap is `CUDACachingAllocator::setMemoryFraction`: the limit over the device's total
//!   memory. It and the out-of-memory observer need `libc10_cuda`, which only the CUDA
//!   libtorch has; a build against the CPU libtorch refuses the cap with a clear error.
//! - On the scripted device ([`crate::device_double`]) the cap is the counting CPU
//!   allocator's limit at the same bytes, the device's total is
//!   [`device_double::SCRIPTED_DEVICE_BYTES`], and a refusal is the counting allocator's.
//! - Both allocators keep their last refusal in one record (`cpp/refusal.h`).

use std::ffi::{c_char, c_int, CStr};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use stratlab_units::ByteSize;
use tch::Device;

use crate::device_double::{self, DeviceCall};
use crate::shim_call::check;
use crate::{memory, TrainError};

extern "C" {
    fn stratlab_cuda_memory_info(device: c_int, free: *mut i64, total: *mut i64) -> c_int;
    fn stratlab_cuda_allocator_built() -> c_int;
    fn stratlab_cuda_watch_refusals();
    fn stratlab_cuda_set_memory_fraction(device: c_int, fraction: f64) -> c_int;
    fn stratlab_last_refusal(
        allocator: c_int,
        device: *mut i64,
        asked: *mut i64,
        in_use: *mut i64,
        allowed: *mut i64,
        pass: *mut c_char,
        pass_capacity: usize,
        stage: *mut c_int,
    ) -> c_int;
}

/// `cpp/refusal.h`'s `RefusingAllocator`: which allocator's last refusal to read.
const REFUSING_COUNTING_CPU: c_int = 0;
const REFUSING_CUDA: c_int = 1;

const MIB: u64 = 1 << 20;

/// Whether this build can cap the CUDA allocator (it was built against the CUDA libtorch).
pub fn cuda_cap_built() -> bool {
    // SAFETY: no arguments.
    unsafe { stratlab_cuda_allocator_built() == 1 }
}

/// A cap on one device's allocator: `device_memory_limit_mib` of the device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceCap {
    /// The device, as results name it (`cuda:0`).
    pub device: DeviceLabel,
    /// Bytes the allocator may hold at once.
    pub limit_bytes: u64,
    /// The device's memory.
    pub total_bytes: u64,
}

/// A CUDA device's index, named as results name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceLabel(pub usize);

impl std::fmt::Display for DeviceLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuda:{}", self.0)
    }
}

impl DeviceCap {
    /// The cap of `limit_bytes` on a device of `total_bytes`; an error naming the field
    /// where the limit is zero or more than the device has (a cap cannot add memory).
    pub fn new(device: DeviceLabel, limit_bytes: u64, total_bytes: u64) -> Result<DeviceCap, TrainError> {
        if limit_bytes == 0 || limit_bytes > total_bytes {
            return Err(TrainError::InvalidConfig {
                field: "device_memory_limit_mib",
                reason: format!(
                    "{} MiB asked for; {device} has {} MiB, and the limit must lie between 1 MiB and that",
                    limit_bytes / MIB,
                    total_bytes / MIB
                ),
            });
        }
        Ok(DeviceCap { device, limit_bytes, total_bytes })
    }

    /// The share of the device's memory the allocator may hold (`setMemoryFraction`'s
    /// argument).
    pub fn fraction(&self) -> f64 {
        self.limit_bytes as f64 / self.total_bytes as f64
    }
}

/// The cap this process set, for the out-of-memory reason.
static CAP: OnceLock<DeviceCap> = OnceLock::new();

/// Caps `device`'s allocator at `limit_bytes` (a trial's `device_memory_limit_mib`) before
/// anything is allocated on it, and watches what the allocator refuses from then on.
/// `Ok(None)` where no limit is asked for or the device is the CPU (whose worker is limited
/// by `memory_limit_mib`; a warning says so); an error where the limit is more than the
/// device has or the build cannot cap a CUDA allocator.
pub fn cap_device(device: Device, limit_bytes: Option<u64>) -> Result<Option<DeviceCap>, TrainError> {
    if let Device::Cuda(_) = device {
        // SAFETY: no arguments; exceptions stay in the shim.
        unsafe { stratlab_cuda_watch_refusals() };
    }
    let Some(limit_bytes) = limit_bytes else {
        return Ok(None);
    };
    let cap = match device {
        Device::Cuda(index) => {
            let (mut free, mut total) = (0_i64, 0_i64);
            // SAFETY: two out-parameters the call writes; exceptions stay in the shim.
            check(unsafe { stratlab_cuda_memory_info(memory::device_index(index), &mut free, &mut total) })?;
            let cap = DeviceCap::new(DeviceLabel(index), limit_bytes, total.max(0) as u64)?;
            // SAFETY: no pointers; exceptions stay in the shim.
            check(unsafe { stratlab_cuda_set_memory_fraction(memory::device_index(index), cap.fraction()) })?;
            cap
        }
        Device::Cpu if device_double::installed() => {
            let cap = DeviceCap::new(DeviceLabel(0), limit_bytes, device_double::SCRIPTED_DEVICE_BYTES)?;
            device_double::record(DeviceCall::MemoryFraction(cap.fraction()));
            // What the caching allocator enforces: that fraction of the device's total.
            memory::limit_cpu_storage(Some(cap.limit_bytes));
            cap
        }
        _ => {
            eprintln!(
                "warning: device_memory_limit_mib applies to CUDA devices; this worker trains on the CPU, where \
                 memory_limit_mib limits tensor storage"
            );
            return Ok(None);
        }
    };
    let _ = CAP.set(cap);
    Ok(Some(cap))
}

/// An allocation a device's allocator refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The device.
    pub device: DeviceLabel,
    /// Bytes asked for (as the allocator rounds them).
    pub asked_bytes: u64,
    /// Bytes allocated when it was asked.
    pub in_use_bytes: u64,
    /// Bytes the allocator allowed: the cap, or the device's memory where none was set.
    pub allowed_bytes: u64,
    /// What the refused thread ran ("backward"), where the training code named it.
    pub pass: Option<String>,
    /// The pipeline stage the refused thread ran, if any.
    pub stage: Option<usize>,
    /// The cap this process set, if any.
    pub cap: Option<DeviceCap>,
}

impl Refusal {
    /// One line a person can read: what was asked for, where, and the limit with where it
    /// came from.
    pub fn reason(&self) -> String {
        let size = |bytes: u64| ByteSize(bytes).approximate();
        let mut line = format!("out of memory on {}: {} asked for", self.device, size(self.asked_bytes));
        if let Some(pass) = &self.pass {
            line += &format!(" in the {pass}");
            if let Some(stage) = self.stage {
                line += &format!(" of pipeline stage {stage}");
            }
        }
        line += &format!(" with {} allocated, over ", size(self.in_use_bytes));
        line += &match self.cap {
            Some(cap) => format!(
                "the allocator's cap of {} (device_memory_limit_mib {} of the device's {})",
                size(self.allowed_bytes),
                cap.limit_bytes / MIB,
                size(cap.total_bytes)
            ),
            None => format!("the device's {}", size(self.allowed_bytes)),
        };
        line
    }
}

/// The last allocation the allocator of `device` refused in this process (the scripted
/// device's: the counting allocator's), with the cap set; `None` where none was refused.
pub fn last_refusal(device: Device) -> Option<Refusal> {
    let allocator = match device {
        Device::Cuda(_) => REFUSING_CUDA,
        Device::Cpu if device_double::installed() => REFUSING_COUNTING_CPU,
        _ => return None,
    };
    let mut pass = [0 as c_char; 64];
    let mut stage: c_int = -1;
    let (mut index, mut asked, mut in_use, mut allowed) = (0_i64, 0_i64, 0_i64, 0_i64);
    // SAFETY: out-parameters the call writes, `pass` with its capacity.
    let found = unsafe {
        stratlab_last_refusal(
            allocator,
            &mut index,
            &mut asked,
            &mut in_use,
            &mut allowed,
            pass.as_mut_ptr(),
            pass.len(),
            &mut stage,
        )
    };
    if found != 1 {
        return None;
    }
    // SAFETY: the shim NUL-terminates within the buffer.
    let pass = unsafe { CStr::from_ptr(pass.as_ptr()) }.to_string_lossy().into_owned();
    Some(Refusal {
        device: DeviceLabel(index.max(0) as usize),
        asked_bytes: asked.max(0) as u64,
        in_use_bytes: in_use.max(0) as u64,
        allowed_bytes: allowed.max(0) as u64,
        pass: (!pass.is_empty()).then_some(pass),
        stage: usize::try_from(stage).ok(),
        cap: CAP.get().copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_is_its_share_of_the_device_and_cannot_add_memory() {
        let cap = DeviceCap::new(DeviceLabel(0), 4 << 30, 16 << 30).unwrap();
        assert_eq!(cap.fraction(), 0.25);
        let error = DeviceCap::new(DeviceLabel(1), 96 << 30, 80 << 30).unwrap_err().to_string();
        assert!(error.contains("device_memory_limit_mib") && error.contains("98304 MiB asked for"), "{error}");
        assert!(error.contains("cuda:1 has 81920 MiB"), "{error}");
        assert!(DeviceCap::new(DeviceLabel(0), 0, 1 << 30).is_err());
    }

    #[test]
    fn a_refusal_reads_as_one_line_with_its_pass_and_the_cap() {
        let cap = DeviceCap::new(DeviceLabel(0), 4 << 30, 80 << 30).unwrap();
        let refusal = Refusal {
            device: DeviceLabel(0),
            asked_bytes: 512 << 20,
            in_use_bytes: 3900 << 20,
            allowed_bytes: 4 << 30,
            pass: Some("backward".into()),
            stage: Some(1),
            cap: Some(cap),
        };
        assert_eq!(
            refusal.reason(),
            "out of memory on cuda:0: 512 MiB asked for in the backward of pipeline stage 1 with 3.8 GiB \
             allocated, over the allocator's cap of 4 GiB (device_memory_limit_mib 4096 of the device's 80 GiB)"
        );
        let uncapped = Refusal { pass: None, stage: None, cap: None, allowed_bytes: 80 << 30, ..refusal };
        assert_eq!(
            uncapped.reason(),
            "out of memory on cuda:0: 512 MiB asked for with 3.8 GiB allocated, over the device's 80 GiB"
        );
    }

    #[test]
    fn the_build_says_whether_it_can_cap_a_cuda_allocator() {
        assert_eq!(cuda_cap_built(), cfg!(stratlab_cuda));
    }

    #[cfg(not(stratlab_cuda))]
    #[test]
    fn the_cpu_build_refuses_a_cuda_cap_with_a_clear_error_and_reads_no_cuda_statistics() {
        assert_eq!(memory::allocated_bytes(Device::Cuda(0)), None);
        let error = cap_device(Device::Cuda(0), Some(1 << 30)).unwrap_err().to_string();
        assert!(!error.is_empty());
        // SAFETY: no pointers.
        let refused = unsafe { stratlab_cuda_set_memory_fraction(0, 0.5) };
        assert_eq!(refused, 1);
        assert!(check(refused).unwrap_err().to_string().contains("STRATLAB_LIBTORCH_VARIANT=cuda"));
    }
}
