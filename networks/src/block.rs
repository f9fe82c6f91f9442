//! What one stage computes: a plain op sequence or a residual block.

use crate::op::{Flops, Op, OpWork, ShapeError};

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
    /// Every op in execution order, the residual addition among them.
    pub ops: Vec<OpWork>,
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
        let mut work = Vec::new();
        let (output_dims, flops) = match self {
            Block::Sequential(ops) => walk(ops, input, &mut work)?,
            Block::Residual { main, shortcut, post } => {
                let (main_dims, mut flops) = walk(main, input, &mut work)?;
                let (skip_dims, skip_flops) = walk(shortcut, input, &mut work)?;
                if main_dims != skip_dims {
                    return Err(ShapeError(format!(
                        "residual paths disagree: main {main_dims:?}, shortcut {skip_dims:?}"
                    )));
                }
                flops += skip_flops;
                // The addition: one FLOP per output element, two inputs read, one written.
                let added = main_dims.iter().product::<i64>() as u64;
                flops.total += added;
                work.push(OpWork { flops: added, elements_moved: 3 * added, parameters: 0 });
                let (dims, post_flops) = walk(post, &main_dims, &mut work)?;
                flops += post_flops;
                (dims, flops)
            }
        };
        Ok(BlockStats { output_dims, parameters, flops, ops: work })
    }
}

/// Runs shape inference through `ops`, summing their FLOPs and recording each op's work.
fn walk(ops: &[Op], input: &[i64], work: &mut Vec<OpWork>) -> Result<(Vec<i64>, Flops), ShapeError> {
    let mut dims = input.to_vec();
    let mut flops = Flops::default();
    let elements = |dims: &[i64]| dims.iter().product::<i64>() as u64;
    for op in ops {
        let next = op.output_dims(&dims)?;
        let op_flops = op.flops(&dims, &next);
        flops += op_flops;
        // Flatten is a view: it moves nothing.
        if !matches!(op, Op::Flatten) {
            work.push(OpWork {
                flops: op_flops.total,
                elements_moved: elements(&dims) + elements(&next),
                parameters: op.parameter_count(),
            });
        }
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
        // ReLU, the addition (two read, one written), ReLU: each op's traffic in order,
        // and the FLOPs of the ops are the block's.
        let moved: Vec<u64> = stats.ops.iter().map(|work| work.elements_moved).collect();
        assert_eq!(moved, [36, 54, 36]);
        assert_eq!(stats.ops.iter().map(|work| work.flops).sum::<u64>(), stats.flops.total);
    }

    #[test]
    fn op_work_reads_the_weights_once_whatever_the_batch() {
        let conv = Op::Conv2d(Conv2d::new("conv1", 2, 4, 3, 1));
        let stats = Block::Sequential(vec![conv, Op::Flatten]).analyze(&[2, 8, 8]).unwrap();
        // Flatten is a view and moves nothing.
        assert_eq!(stats.ops.len(), 1);
        let work = stats.ops[0];
        assert_eq!(work.parameters, stats.parameters);
        assert_eq!(work.elements_moved, 2 * 64 + 4 * 64);
        let batch = work.for_batch(8);
        assert_eq!(
            (batch.flops, batch.elements_moved, batch.parameters),
            (8 * work.flops, 8 * work.elements_moved, work.parameters)
        );
    }

    #[test]
    fn residual_with_mismatched_paths_is_rejected() {
        let main = vec![Op::Conv2d(Conv2d::new("conv1", 2, 4, 3, 2))];
        let block = Block::Residual { main, shortcut: vec![], post: vec![] };
        assert!(block.analyze(&[2, 8, 8]).unwrap_err().0.contains("disagree"));
    }
}
