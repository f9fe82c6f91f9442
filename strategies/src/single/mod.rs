//! `single`: one worker trains the whole network on its device. The baseline every speedup
//! divides by, and the loop the other strategies reuse for their per-worker bookkeeping.

mod trainer;

pub use trainer::{train, TrainContext};
