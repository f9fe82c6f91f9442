//! One named, atomic piece of a network: the unit pipelines cut between.

use crate::block::Block;
use crate::op::Op;

/// A stage: a name (the PyTorch module path, such as `layer3.1` or `features.7`, or a
/// clear name such as `stem`) and the block it computes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageSpec {
    /// Unique within its network; used in tables and partition listings.
    pub name: String,
    /// What the stage computes.
    pub block: Block,
}

impl StageSpec {
    /// A stage of ops applied one after another.
    pub fn sequential(name: impl Into<String>, ops: Vec<Op>) -> Self {
        StageSpec { name: name.into(), block: Block::Sequential(ops) }
    }

    /// A residual stage computing `post(main(x) + shortcut(x))`.
    pub fn residual(name: impl Into<String>, main: Vec<Op>, shortcut: Vec<Op>, post: Vec<Op>) -> Self {
        StageSpec { name: name.into(), block: Block::Residual { main, shortcut, post } }
    }

    /// The `avgpool` stage: average-pool to `height`×`width`, then flatten for the
    /// classifier (torchvision's `forward` does both between `features` and `classifier`).
    pub(crate) fn avgpool(height: i64, width: i64) -> Self {
        StageSpec::sequential("avgpool", vec![Op::AdaptiveAvgPool2d { height, width }, Op::Flatten])
    }
}
