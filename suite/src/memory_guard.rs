//! The memory limit of a trial's workers (`memory_limit_mib`), enforced two ways.
//!
//! - CPU trials: `RLIMIT_AS` on each worker. An allocation past the limit fails inside
//!   libtorch, the worker reports it, and the trial is recorded as `oom` with libtorch's own
//!   message. Exact and free.
//! - CUDA trials: no address-space limit, because the CUDA driver reserves far more virtual
//!   address space than memory (unified addressing maps every GPU's memory and the host's
//!   into one space) and fails to initialise under any practical `RLIMIT_AS`. The runner
//!   instead watches the resident memory of each worker's process tree (the same `/proc`
//!   reading as CPU telemetry) and kills the trial when the sum exceeds the limit, recording
//!   `oom` with the numbers. GPU memory needs no guard of ours: the CUDA caching allocator
//!   reports its own out-of-memory, which the worker records as `oom`.

use stratlab_telemetry::{ProcSampler, Sampler};

/// How a trial's memory limit is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    /// No limit was asked for.
    None,
    /// `RLIMIT_AS` of this many bytes on each worker (set between fork and exec).
    AddressSpace(u64),
    /// The runner watches resident memory of all workers together against this many bytes.
    Resident(u64),
}

impl MemoryLimit {
    /// The enforcement that suits a trial on `cuda` (or not) with `limit_bytes`.
    pub fn for_trial(limit_bytes: Option<u64>, cuda: bool) -> MemoryLimit {
        match (limit_bytes, cuda) {
            (None, _) => MemoryLimit::None,
            (Some(bytes), false) => MemoryLimit::AddressSpace(bytes),
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
        assert_eq!(MemoryLimit::for_trial(Some(1 << 30), false), MemoryLimit::AddressSpace(1 << 30));
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
