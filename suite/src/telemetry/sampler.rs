//! The one interface the recorder needs from a telemetry source.

use super::Sample;

/// A source of device readings; `Send` so the recorder can own it on its own thread.
pub trait Sampler: Send {
    /// Short name of the source (`nvml`, `proc`), for logs and the fingerprint.
    fn name(&self) -> &str;
    /// Reads every device once. Returns an empty vector when nothing could be read this
    /// tick (a device that vanished, a process tree that exited): sampling never fails a trial.
    fn sample(&mut self) -> Vec<Sample>;
}
