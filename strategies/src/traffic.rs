//! A step's communication totals, as every strategy reports them: bytes and the seconds its
//! collectives and messages took from launch to completion.

use stratlab_comm::Completed;

/// Communication totals of a step.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Traffic {
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
}

impl Traffic {
    /// Adds one completed operation.
    pub(crate) fn add(&mut self, done: &Completed) {
        self.bytes += done.bytes;
        self.seconds += (done.completed_ns - done.launched_ns).max(0) as f64 * 1e-9;
    }
}
