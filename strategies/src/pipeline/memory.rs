//! STUB — replaced by the partitioner/memory work. Contract only.

use tch::Device;

/// Bytes currently allocated by tensors on `device`, where the allocator can tell.
pub fn allocated_bytes(_device: Device) -> Option<u64> {
    None
}
