//! A network as data: its stages for one input, from which everything else derives.

use std::ops::Range;

use tch::nn;

use crate::analysis::{Analysis, StageAnalysis};
use crate::input_shape::InputShape;
use crate::layout::Layout;
use crate::network::Network;
use crate::network_error::NetworkError;
use crate::op::Op;
use crate::stage::Stage;
use crate::stage_spec::StageSpec;

/// A network described as an ordered list of named stages for one input shape.
///
/// Strategies cut it between any two stages; [`NetworkSpec::analyze`] and
/// [`NetworkSpec::build`] read the same stage list, so statistics describe exactly the
/// modules that run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NetworkSpec {
    /// Name as given to [`crate::spec`], e.g. `resnet50`.
    pub name: String,
    /// The input the stages are sized for.
    pub input: InputShape,
    /// Which architecture of the family the input gets.
    pub layout: Layout,
    /// The stages, input to output.
    pub stages: Vec<StageSpec>,
}

impl NetworkSpec {
    /// Trainable parameters, as PyTorch's `sum(p.numel() for p in model.parameters())`.
    pub fn parameter_count(&self) -> u64 {
        self.ops().map(Op::parameter_count).sum()
    }

    /// Whether any stage normalises over the batch; such networks train differently when
    /// a batch is split into micro-batches, which equivalence tests must know.
    pub fn has_batch_norm(&self) -> bool {
        self.ops().any(|op| matches!(op, Op::BatchNorm2d { .. }))
    }

    /// The stage names, in order.
    pub fn stage_names(&self) -> Vec<&str> {
        self.stages.iter().map(|s| s.name.as_str()).collect()
    }

    /// Output shape, parameters, FLOPs and activation size of every stage for a batch of
    /// `batch` samples, by shape inference alone (nothing is allocated or run).
    pub fn analyze(&self, batch: i64) -> Result<Analysis, NetworkError> {
        if batch < 1 {
            return Err(NetworkError::InvalidBatch { network: self.name.clone(), batch });
        }
        let scale = batch as u64;
        let mut dims = self.input.sample_dims();
        let mut rows = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            let stats = stage.block.analyze(&dims).map_err(|reason| NetworkError::UnsupportedInput {
                network: self.name.clone(),
                input: self.input,
                reason: format!("stage `{}`: {reason}", stage.name),
            })?;
            let elements = stats.output_dims.iter().product::<i64>() as u64;
            rows.push(StageAnalysis {
                name: stage.name.clone(),
                output_shape: std::iter::once(batch).chain(stats.output_dims.iter().copied()).collect(),
                parameters: stats.parameters,
                forward_flops: stats.flops.total * scale,
                conv_linear_flops: stats.flops.conv_linear * scale,
                activation_bytes: elements * scale * std::mem::size_of::<f32>() as u64,
                ops: stats.ops.iter().map(|work| work.for_batch(scale)).collect(),
            });
            dims = stats.output_dims;
        }
        Ok(Analysis::new(self.name.clone(), self.input, self.layout, batch, rows))
    }

    /// Builds every stage under `path`; variable names are the PyTorch parameter names
    /// (`layer1.0.conv1.weight`, …) below `path`.
    pub fn build(&self, path: &nn::Path) -> Network {
        self.build_range(0..self.stages.len(), path)
    }

    /// Builds only `range` of the stages under `path`, with the same variable names the
    /// full network has, so a pipeline worker can hold just its stages (in its own
    /// VarStore, on its own device) and still load weights by name.
    ///
    /// Panics if `range` is not within `0..self.stages.len()`, like slice indexing.
    pub fn build_range(&self, range: Range<usize>, path: &nn::Path) -> Network {
        let stages = self.stages[range.clone()].iter().map(|spec| Stage::new(spec, path)).collect();
        Network::new(self.name.clone(), range, stages)
    }

    fn ops(&self) -> impl Iterator<Item = &Op> {
        self.stages.iter().flat_map(|stage| stage.block.ops())
    }
}
