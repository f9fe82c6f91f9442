//! What one stage computes: a plain op sequence or a residual block.

use crate::op::{Flops, Op, ShapeError};

/// The body of a stage. Residual blocks are one variant (not a sequence with a hidden
/// skip) because a pipeline may only cut *between* blocks: the skip tensor must not
/// cross a stage boundary.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Block {
    /// Ops applied one after another.
    Sequential(Vec<Op>),
    /// `post(main(x) + shortcut(x))`.
    Residual {
        /// The block's main path.
        main: Vec<Op>,
        /// The skip path; empty means identity.
        shortcut: Vec<Op>,
        /// Ops after the addition, such as ResNet's final ReLU; may be empty.
        post: Vec<Op>,
    },
}

/// A block's output shape and cost for one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockStats {
    pub output_dims: Vec<i64>,
    pub parameters: u64,
    pub flops: Flops,
}

impl Block {
    /// Every op of the block, main path first.
    pub fn ops(&self) -> impl Iterator<Item = &Op> {
        let (main, shortcut, post): (&[Op], &[Op], &[Op]) = match self {
            Block::Sequential(ops) => (ops, &[], &[]),
            Block::Residual { main, shortcut, post } => (main, shortcut, post),
        };
        main.iter().chain(shortcut).chain(post)
    }

    /// Shape inference and statistics in one walk, so the two always agree.
    pub(crate) fn analyze(&self, input: &[i64]) -> Result<BlockStats, ShapeError> {
        let parameters = self.ops().map(Op::parameter_count).sum();
        let (output_dims, flops) = match self {
            Block::Sequential(ops) => walk(ops, input)?,
            Block::Residual { main, shortcut, post } => {
                let (main_dims, mut flops) = walk(main, input)?;
                let (skip_dims, skip_flops) = walk(shortcut, input)?;
                if main_dims != skip_dims {
                    return Err(ShapeError(format!(
                        "residual paths disagree: main {main_dims:?}, shortcut {skip_dims:?}"
                    )));
                }
                flops += skip_flops;
                // The addition: one FLOP per output element.
                flops.total += main_dims.iter().product::<i64>() as u64;
                let (dims, post_flops) = walk(post, &main_dims)?;
                flops += post_flops;
                (dims, flops)
            }
        };
        Ok(BlockStats { output_dims, parameters, flops })
    }
}

/// Runs shape inference through `ops`, summing their FLOPs.
fn walk(ops: &[Op], input: &[i64]) -> Result<(Vec<i64>, Flops), ShapeError> {
    let mut dims = input.to_vec();
    let mut flops = Flops::default();
    for op in ops {
        let next = op.output_dims(&dims)?;
        flops += op.flops(&dims, &next);
        dims = next;
    }
    Ok((dims, flops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Conv2d;

    #[test]
    fn identity_residual_adds_one_flop_per_element_and_keeps_the_shape() {
        let block = Block::Residual { main: vec![Op::ReLU], shortcut: vec![], post: vec![Op::ReLU] };
        let stats = block.analyze(&[2, 3, 3]).unwrap();
        assert_eq!(stats.output_dims, vec![2, 3, 3]);
        assert_eq!(stats.flops.total, 18 * 3);
    }

    #[test]
    fn residual_with_mismatched_paths_is_rejected() {
        let main = vec![Op::Conv2d(Conv2d::new("conv1", 2, 4, 3, 2))];
        let block = Block::Residual { main, shortcut: vec![], post: vec![] };
        assert!(block.analyze(&[2, 8, 8]).unwrap_err().0.contains("disagree"));
    }
}
