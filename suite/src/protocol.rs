//! The runner ↔ worker protocol: what a worker process reports, one JSON line per event on
//! its stdout, and how a failure is classified into a trial [`Outcome`].
//!
//! The runner, the worker and the progress display all speak it; keeping it apart from all
//! three is what lets each depend on it instead of on each other.

use serde::{Deserialize, Serialize};
use stratlab_results::Outcome;
use stratlab_strategies::record::{EpochRecord, EvalRecord};
use stratlab_strategies::TrainReport;

/// One line of a worker's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum WorkerEvent {
    /// Data and network are ready; training starts.
    Started {
        /// Optimizer steps per epoch on this worker.
        steps_per_epoch: usize,
        /// Steps the budget allows, when known.
        total_steps: Option<usize>,
    },
    /// A step finished (for progress; the full records come with `Finished`).
    Step {
        /// 0-based step.
        step: usize,
        /// Loss of the step (NaN or infinite once training diverged).
        #[serde(with = "stratlab_results::nonfinite::float")]
        loss: f64,
        /// Samples in the step.
        samples: usize,
        /// Synchronised step time.
        step_time_s: f64,
    },
    /// An evaluation finished.
    Eval(EvalRecord),
    /// An epoch finished.
    Epoch(EpochRecord),
    /// Training ended with a report (completed or diverged); boxed, it is far larger than
    /// the other events.
    Finished(Box<TrainReport>),
    /// The node a rank of a Slurm job step runs on, before it trains.
    Node(Box<stratlab_results::Fingerprint>),
    /// The speed reference a rank of a Slurm job step timed on its node before training
    /// (its share of the node's cores, beside the node's other ranks).
    SpeedReference {
        /// Seconds of the reference work (`speed_reference.rs`).
        seconds: f64,
    },
    /// What a rank of a Slurm job step sampled of its own process and devices, before its
    /// last word (a local trial's telemetry is sampled by the runner).
    Telemetry {
        /// The samples, oldest first.
        samples: Vec<stratlab_results::Sample>,
    },
    /// Training could not be carried out.
    Failed {
        /// `Oom` or `Crashed`.
        outcome: Outcome,
        /// What happened, in one line.
        reason: String,
        /// The whole error as libtorch or Rust gave it (backtrace and all), where it said
        /// more than the reason.
        #[serde(default)]
        detail: Option<String>,
    },
}

impl WorkerEvent {
    /// The event as one line of the protocol (no trailing newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("worker events serialise")
    }

    /// Parses one line a worker wrote; `None` for anything else (e.g. libtorch printing to
    /// stdout), which the runner ignores.
    pub fn from_line(line: &str) -> Option<WorkerEvent> {
        serde_json::from_str(line.trim()).ok()
    }
}

/// The text of a panic's payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic with a non-text payload".to_string())
}

/// Whether a message from libtorch or Rust's allocator reports a failed allocation.
pub fn is_out_of_memory_message(message: &str) -> bool {
    ["can't allocate memory", "out of memory", "memory allocation of", "Cannot allocate memory", "std::bad_alloc"]
        .iter()
        .any(|pattern| message.contains(pattern))
}

/// One line for a trial's `reason`: where `message` reports running out of memory, its line
/// that says so (libtorch appends a C++ backtrace of many lines to it; a panic's message
/// holds it debug-quoted, its newlines escaped), from libtorch's own words on; else the
/// message as it is.
pub fn failure_reason(message: &str) -> String {
    if !is_out_of_memory_message(message) {
        return message.to_owned();
    }
    let line = message.split('\n').flat_map(|line| line.split("\\n")).find(|line| is_out_of_memory_message(line));
    let line = line.unwrap_or(message);
    // `called `Result::unwrap()` on an `Err` value: Torch("out of memory: …`
    let line = line.find("Torch(\"").map_or(line, |at| &line[at + "Torch(\"".len()..]);
    line.trim().to_owned()
}

/// The outcome of a failure described by `message`: out of memory or a crash.
pub fn failure_outcome(message: &str) -> Outcome {
    if is_out_of_memory_message(message) {
        Outcome::Oom
    } else {
        Outcome::Crashed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_one_line_including_nan() {
        let event = WorkerEvent::Step { step: 3, loss: f64::NAN, samples: 64, step_time_s: 0.5 };
        let line = event.to_line();
        assert!(!line.contains('\n'));
        match WorkerEvent::from_line(&line) {
            Some(WorkerEvent::Step { step: 3, loss, samples: 64, .. }) => assert!(loss.is_nan()),
            other => panic!("{line} came back as {other:?}"),
        }
        assert_eq!(WorkerEvent::from_line("libtorch says hello"), None);
    }

    #[test]
    fn failures_are_classified_by_their_message() {
        assert_eq!(failure_outcome("CUDA out of memory. Tried to allocate 2 GiB"), Outcome::Oom);
        assert_eq!(failure_outcome("memory allocation of 1024 bytes failed"), Outcome::Oom);
        let libtorch = "libtorch: out of memory: stratlab memory limit: 4096 bytes asked for\nException raised from \
                        allocate at cpu_memory.cpp:51 (most recent call first):\nframe #0: c10::Error::Error";
        assert_eq!(failure_reason(libtorch), "libtorch: out of memory: stratlab memory limit: 4096 bytes asked for");
        assert_eq!(failure_reason("rank 1 exited\nwith code 3"), "rank 1 exited\nwith code 3");
        let panicked = "called `Result::unwrap()` on an `Err` value: Torch(\"out of memory: stratlab memory limit: \
                        4096 bytes asked for\\nException raised from allocate\\nframe #0\")";
        assert_eq!(failure_reason(panicked), "out of memory: stratlab memory limit: 4096 bytes asked for");
        assert_eq!(failure_outcome("index out of range"), Outcome::Crashed);
    }
}
