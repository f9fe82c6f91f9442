//! Timed events of one rank, for every multi-worker strategy: what it waited for, computed
//! and communicated in each step. The clock is CLOCK_MONOTONIC (`stratlab_comm::monotonic_ns`),
//! shared by the ranks of a machine and by c10d's completion callbacks, and the device is
//! synchronised before each clock read, so a GPU event ends when its kernels end.

use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};
use stratlab_comm::Completed;
pub use stratlab_results::EventKind;
use stratlab_strategy_spec::Straggler;
use tch::Device;

use crate::device::synchronize;

/// One timed event of this rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Optimizer step the event belongs to.
    pub step: u64,
    /// Micro-batch, for pipeline schedules.
    pub micro_batch: Option<u32>,
    /// The pipeline stage the pass ran (a rank holds several when interleaved).
    pub pipeline_stage: Option<u32>,
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
/// adds no synchronisation. A straggler's timeline also slows its compute: every forward,
/// backward and recompute it records is followed by a wait of (factor − 1) × its own time,
/// recorded as [`EventKind::StragglerWait`].
pub struct Timeline {
    device: Device,
    enabled: bool,
    step: u64,
    micro_batch: Option<u32>,
    pipeline_stage: Option<u32>,
    events: Vec<TimelineEvent>,
    pace: Option<Pace>,
}

/// How a straggler's compute is slowed: this step's factor, and the draws of the next.
struct Pace {
    straggler: Straggler,
    rank: usize,
    draws: Pcg64Mcg,
    factor: f64,
}

impl Pace {
    fn draw(&mut self) {
        let draws = &mut self.draws;
        self.factor = self.straggler.factor(self.rank, || draws.random_range(-1.0..=1.0)).unwrap_or(1.0);
    }
}

impl Timeline {
    /// A timeline for work on `device`; `enabled` is false for single-worker strategies.
    pub fn new(device: Device, enabled: bool) -> Self {
        Timeline { device, enabled, step: 0, micro_batch: None, pipeline_stage: None, events: Vec::new(), pace: None }
    }

    /// The recording timeline of rank `rank` of a multi-worker trial, slowed where
    /// `straggler` names the rank; each step's factor is drawn from `seed` and the rank.
    pub fn of_rank(device: Device, rank: usize, straggler: Option<&Straggler>, seed: u64) -> Self {
        let mut timeline = Timeline::new(device, true);
        timeline.pace = straggler.filter(|straggler| straggler.slows(rank)).map(|straggler| {
            // The rank in the seed's high bits: each slowed rank draws its own factors.
            let draws = Pcg64Mcg::seed_from_u64(seed ^ ((rank as u64) << 48));
            let mut pace = Pace { straggler: straggler.clone(), rank, draws, factor: 1.0 };
            pace.draw();
            pace
        });
        timeline
    }

    /// Whether events are recorded.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The step that following events belong to (a straggler draws its factor for it).
    pub fn set_step(&mut self, step: u64) {
        if step != self.step {
            if let Some(pace) = &mut self.pace {
                pace.draw();
            }
        }
        self.step = step;
    }

    /// The micro-batch that following events belong to (`None` outside a pipeline's
    /// per-micro-batch work).
    pub fn set_micro_batch(&mut self, micro_batch: Option<usize>) {
        self.micro_batch = micro_batch.map(|mb| mb as u32);
    }

    /// The pipeline stage that following events belong to (`None` outside a pipeline's
    /// passes).
    pub fn set_pipeline_stage(&mut self, stage: Option<usize>) {
        self.pipeline_stage = stage.map(|stage| stage as u32);
    }

    /// The clock, after synchronising the device when recording.
    pub fn now(&self) -> i64 {
        if self.enabled {
            synchronize(self.device);
        }
        stratlab_comm::monotonic_ns()
    }

    /// Records an event measured by the caller, which has just ended; a straggler then
    /// waits out its slowdown of a forward, backward or recompute.
    pub fn record(&mut self, kind: EventKind, name: impl Into<String>, start_ns: i64, end_ns: i64, bytes: Option<u64>) {
        if !self.enabled {
            return;
        }
        let wait_ns = match (&self.pace, kind) {
            (Some(pace), kind) if kind.is_pass() => ((pace.factor - 1.0) * (end_ns - start_ns).max(0) as f64) as i64,
            _ => 0,
        };
        let (step, micro_batch, pipeline_stage) = (self.step, self.micro_batch, self.pipeline_stage);
        let event =
            TimelineEvent { step, micro_batch, pipeline_stage, kind, name: name.into(), start_ns, end_ns, bytes };
        // Only a slowed pass names its wait: no copy of the name on every event.
        let waited_for = (wait_ns > 0).then(|| event.name.clone());
        self.events.push(event);
        if let Some(name) = waited_for {
            let wait_start = stratlab_comm::monotonic_ns();
            std::thread::sleep(Duration::from_nanos(wait_ns as u64));
            let wait_end = stratlab_comm::monotonic_ns();
            let kind = EventKind::StragglerWait;
            self.events.push(TimelineEvent {
                step,
                micro_batch,
                pipeline_stage,
                kind,
                name,
                start_ns: wait_start,
                end_ns: wait_end,
                bytes: None,
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
