//! The memory limit of a trial's workers (`memory_limit_mib`), enforced two ways.
//!
//! - CPU trials: on libtorch's tensor storage, by the counting allocator each worker
//!   installs (`stratlab_strategies::memory::limit_cpu_storage`). An allocation that would
//!   take a worker's tensors past the limit fails as out of memory with the bytes asked for,
//!   in use and allowed, at the same size every run, and the trial is recorded as `oom`.
//!   What the allocator does not count (Gloo's buffers, decode buffers, stacks) shows in the
//!   trial's resident-memory telemetry beside it. `RLIMIT_AS` stays only as a guard well
//!   above the limit ([`ADDRESS_SPACE_HEADROOM`]): an address-space limit counts reserved
//!   address space, which varies from run to run, so at the limit itself the same trial
//!   failed at different sizes.
//! - CUDA trials: no address-space limit, because the CUDA driver reserves far more virtual
//!   address space than memory (unified addressing maps every GPU's memory and the host's
//!   into one space) and fails to initialise under any practical `RLIMIT_AS`. The runner
//!   instead watches the resident memory of each worker's process tree (the same `/proc`
//!   reading as CPU telemetry) and kills the trial when the sum exceeds the limit, recording
//!   `oom` with the numbers. GPU memory needs no guard of ours: the CUDA caching allocator
//!   reports its own out-of-memory, which the worker records as `oom` with what it refused,
//!   and `device_memory_limit_mib` caps that allocator (`stratlab_strategies::device_memory`).

use stratlab_telemetry::{ProcSampler, Sampler};

/// How a trial's memory limit is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    /// No limit was asked for.
    None,
    /// This many bytes of tensor storage per worker, counted by its allocator, with
    /// `RLIMIT_AS` [`ADDRESS_SPACE_HEADROOM`] above it as a guard (set between fork and exec).
    TensorStorage(u64),
    /// The runner watches resident memory of all workers together against this many bytes.
    Resident(u64),
}

/// How far above a CPU worker's tensor-storage limit its address space may reach: libtorch's
/// threads, allocator arenas and libraries reserve a few GiB of address space they never
/// touch (a worker training ResNet-18 starts within 6 GiB of `RLIMIT_AS` here).
pub const ADDRESS_SPACE_HEADROOM: u64 = 8 << 30;

impl MemoryLimit {
    /// The `RLIMIT_AS` to set on each worker, if any.
    pub fn address_space_guard(self) -> Option<u64> {
        match self {
            MemoryLimit::TensorStorage(bytes) => Some(bytes.saturating_add(ADDRESS_SPACE_HEADROOM)),
            MemoryLimit::None | MemoryLimit::Resident(_) => None,
        }
    }

    /// The enforcement that suits a trial on `cuda` (or not) with `limit_bytes`.
    pub fn for_trial(limit_bytes: Option<u64>, cuda: bool) -> MemoryLimit {
        match (limit_bytes, cuda) {
            (None, _) => MemoryLimit::None,
            (Some(bytes), false) => MemoryLimit::TensorStorage(bytes),
            (Some(bytes), true) => MemoryLimit::Resident(bytes),
        }
    }
}

/// Watches the resident memory of a trial's worker trees against a limit.
pub struct ResidentGuard {
    limit_bytes: u64,
    trees: Vec<ProcSampler>,
}

impl ResidentGuard {
    /// Watches the process trees rooted at `worker_pids`.
    pub fn new(limit_bytes: u64, worker_pids: &[u32]) -> ResidentGuard {
        ResidentGuard { limit_bytes, trees: worker_pids.iter().map(|&pid| ProcSampler::new(pid)).collect() }
    }

    /// Reads the trees now; `Some(reason)` when together they hold more than the limit.
    pub fn check(&mut self) -> Option<String> {
        let resident: u64 =
            self.trees.iter_mut().flat_map(|tree| tree.sample()).map(|sample| sample.memory_used_bytes).sum();
        (resident > self.limit_bytes).then(|| {
            format!(
                "resident memory of the workers reached {} MiB, over memory_limit_mib {} (CUDA trials are \
                 guarded by resident memory, not an address-space limit)",
                resident >> 20,
                self.limit_bytes >> 20
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_trials_get_a_resident_guard_and_cpu_trials_an_address_space_limit() {
        assert_eq!(MemoryLimit::for_trial(Some(1 << 30), false), MemoryLimit::TensorStorage(1 << 30));
        assert_eq!(MemoryLimit::TensorStorage(1 << 30).address_space_guard(), Some((1 << 30) + ADDRESS_SPACE_HEADROOM));
        assert_eq!(MemoryLimit::Resident(1 << 30).address_space_guard(), None);
        assert_eq!(MemoryLimit::for_trial(Some(1 << 30), true), MemoryLimit::Resident(1 << 30));
        assert_eq!(MemoryLimit::for_trial(None, true), MemoryLimit::None);
    }

    #[test]
    fn the_guard_trips_only_past_the_limit() {
        let me = std::process::id();
        // This test process holds at least a few MiB resident and far less than 1 TiB.
        assert!(ResidentGuard::new(1 << 40, &[me]).check().is_none());
        let reason = ResidentGuard::new(1 << 20, &[me]).check().expect("over 1 MiB");
        assert!(reason.contains("memory_limit_mib 1"), "{reason}");
    }
}
