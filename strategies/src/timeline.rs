//! Timed events of one rank, for every multi-worker strategy: what it waited for, computed
//! and communicated in each step. The clock is CLOCK_MONOTONIC (`stratlab_comm::monotonic_ns`),
//! shared by the ranks of a machine and by c10d's completion callbacks, and the device is
//! synchronised before each clock read, so a GPU event ends when its kernels end.

use serde::{Deserialize, Serialize};
use stratlab_comm::Completed;
pub use stratlab_results::EventKind;
use tch::Device;

use crate::device::synchronize;

/// One timed event of this rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Optimizer step the event belongs to.
    pub step: u64,
    /// Micro-batch, for pipeline schedules.
    pub micro_batch: Option<u32>,
    /// What happened.
    pub kind: EventKind,
    /// Which part, e.g. `stage 3` or `bucket 1`.
    pub name: String,
    /// Start on CLOCK_MONOTONIC, ns.
    pub start_ns: i64,
    /// End on CLOCK_MONOTONIC, ns.
    pub end_ns: i64,
    /// Bytes moved, for communication.
    pub bytes: Option<u64>,
}

/// Records a rank's events when enabled; a disabled timeline costs a branch per event and
/// adds no synchronisation.
pub struct Timeline {
    device: Device,
    enabled: bool,
    step: u64,
    micro_batch: Option<u32>,
    events: Vec<TimelineEvent>,
}

impl Timeline {
    /// A timeline for work on `device`; `enabled` is false for single-worker strategies.
    pub fn new(device: Device, enabled: bool) -> Self {
        Timeline { device, enabled, step: 0, micro_batch: None, events: Vec::new() }
    }

    /// Whether events are recorded.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The step that following events belong to.
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// The micro-batch that following events belong to (`None` outside a pipeline's
    /// per-micro-batch work).
    pub fn set_micro_batch(&mut self, micro_batch: Option<usize>) {
        self.micro_batch = micro_batch.map(|mb| mb as u32);
    }

    /// The clock, after synchronising the device when recording.
    pub fn now(&self) -> i64 {
        if self.enabled {
            synchronize(self.device);
        }
        stratlab_comm::monotonic_ns()
    }

    /// Records an event measured by the caller.
    pub fn record(&mut self, kind: EventKind, name: impl Into<String>, start_ns: i64, end_ns: i64, bytes: Option<u64>) {
        if self.enabled {
            self.events.push(TimelineEvent {
                step: self.step,
                micro_batch: self.micro_batch,
                kind,
                name: name.into(),
                start_ns,
                end_ns,
                bytes,
            });
        }
    }

    /// Runs `work` as one event of `kind` (and names it to the allocator: running out of
    /// memory in it says so).
    pub fn span<T>(&mut self, kind: EventKind, name: impl Into<String>, work: impl FnOnce() -> T) -> T {
        let _pass = crate::memory::in_pass(kind, None);
        if !self.enabled {
            return work();
        }
        let start = self.now();
        let result = work();
        let end = self.now();
        self.record(kind, name, start, end, None);
        result
    }

    /// Records a finished collective or transfer from its launch to its completion.
    pub fn communication(&mut self, kind: EventKind, name: impl Into<String>, done: &Completed) {
        self.record(kind, name, done.launched_ns, done.completed_ns.max(done.launched_ns), Some(done.bytes));
    }

    /// The recorded events.
    pub fn into_events(self) -> Vec<TimelineEvent> {
        self.events
    }
}
