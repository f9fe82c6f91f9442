//! Hooks through which a caller watches training as it happens (progress bars, streaming
//! records to a parent process) without the training loop knowing who listens.

use crate::record::{EpochRecord, EvalRecord, StepRecord};

/// Receives records as training produces them. Every method has a no-op default.
pub trait TrainObserver {
    /// Training is about to start: `steps_per_epoch` and, when known, the total steps.
    fn on_start(&mut self, _steps_per_epoch: usize, _total_steps: Option<usize>) {}
    /// An optimizer step finished.
    fn on_step(&mut self, _step: &StepRecord) {}
    /// An evaluation on the test split finished.
    fn on_eval(&mut self, _eval: &EvalRecord) {}
    /// An epoch (training and its evaluation) finished.
    fn on_epoch(&mut self, _epoch: &EpochRecord) {}
    /// Training ended; `variables` are this rank's final weights and buffers (checkpoints,
    /// and the tests that compare strategies' weights).
    fn on_trained(&mut self, _variables: &tch::nn::VarStore) {}
}

/// An observer that ignores everything.
pub struct NoObserver;

impl TrainObserver for NoObserver {}
