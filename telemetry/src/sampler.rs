//! The one interface the recorder needs from a telemetry source.

use stratlab_results::Sample;

use super::GpuBoard;

/// A source of device readings; `Send` so the recorder can own it on its own thread.
pub trait Sampler: Send {
    /// Short name of the source (`nvml`, `proc`), for logs and the fingerprint.
    fn name(&self) -> &str;
    /// Reads every device once. Returns an empty vector when nothing could be read this
    /// tick (a device that vanished, a process tree that exited): sampling never fails a trial.
    fn sample(&mut self) -> Vec<Sample>;
    /// The GPU boards read, with names and identities, for the trial's row; empty for
    /// samplers that read no GPU. Ask before handing the sampler to the recorder.
    fn boards(&self) -> &[GpuBoard] {
        &[]
    }
}
