//! One unit of a pipeline rank's work: which pass, of which stage, on which micro-batch.

use serde::Serialize;

/// What one action computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Pass {
    /// The stage's forward of a micro-batch.
    Forward,
    /// The stage's backward of a micro-batch: its input's and its weights' gradients.
    Backward,
    /// The first half of a split backward (zero-bubble's `I`): the gradient of the
    /// stage's input, which the stage before waits for.
    InputBackward,
    /// The second half (zero-bubble's `W`): the gradients of the stage's weights, which
    /// nothing waits for until the update.
    WeightBackward,
}

impl Pass {
    /// The pass's letter in PyTorch's action form (`F`, `B`, `I`, `W`).
    pub fn letter(self) -> char {
        match self {
            Pass::Forward => 'F',
            Pass::Backward => 'B',
            Pass::InputBackward => 'I',
            Pass::WeightBackward => 'W',
        }
    }

    /// Whether the pass sends the input's gradient back (a backward or its `I` half).
    pub fn sends_input_gradient(self) -> bool {
        matches!(self, Pass::Backward | Pass::InputBackward)
    }
}

/// One unit of a rank's work: a pass of one micro-batch through one pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Action {
    /// What it computes.
    pub pass: Pass,
    /// The pipeline stage (0-based over every rank's stages; the rank's own stage when it
    /// holds one).
    pub stage: usize,
    /// The micro-batch (within the step; PipeDream's global id across steps).
    pub micro_batch: usize,
}

impl Action {
    /// `stage`'s forward of `micro_batch`.
    pub fn forward(stage: usize, micro_batch: usize) -> Action {
        Action { pass: Pass::Forward, stage, micro_batch }
    }

    /// `stage`'s backward of `micro_batch`.
    pub fn backward(stage: usize, micro_batch: usize) -> Action {
        Action { pass: Pass::Backward, stage, micro_batch }
    }

    /// `stage`'s `pass` of `micro_batch`.
    pub fn new(pass: Pass, stage: usize, micro_batch: usize) -> Action {
        Action { pass, stage, micro_batch }
    }

    /// The same pass with its micro-batch shifted by `first` (a step's first global id).
    pub fn offset(self, first: usize) -> Action {
        Action { micro_batch: first + self.micro_batch, ..self }
    }
}
