//! A built stage: the tch modules of one [`StageSpec`].

use tch::nn::{self, ModuleT};
use tch::Tensor;

use crate::block::Block;
use crate::layer::Layer;
use crate::stage_spec::StageSpec;

/// One stage with its variables, runnable on its own so a pipeline worker can run just
/// its share of a network.
#[derive(Debug)]
pub struct Stage {
    name: String,
    main: Vec<Layer>,
    /// `None`: no residual addition; `Some(empty)`: identity shortcut.
    shortcut: Option<Vec<Layer>>,
    post: Vec<Layer>,
}

impl Stage {
    /// Builds the stage's modules under `root`, at the PyTorch paths its ops carry.
    pub(crate) fn new(spec: &StageSpec, root: &nn::Path) -> Stage {
        let build = |ops: &[crate::op::Op]| ops.iter().map(|op| Layer::new(op, root)).collect::<Vec<_>>();
        let (main, shortcut, post) = match &spec.block {
            Block::Sequential(ops) => (build(ops), None, Vec::new()),
            Block::Residual { main, shortcut, post } => (build(main), Some(build(shortcut)), build(post)),
        };
        Stage { name: spec.name.clone(), main, shortcut, post }
    }

    /// The stage's name, as in its [`StageSpec`].
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl ModuleT for Stage {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let main = run(&self.main, xs, train);
        let sum = match &self.shortcut {
            Some(shortcut) => main + run(shortcut, xs, train),
            None => main,
        };
        run(&self.post, &sum, train)
    }
}

/// Applies `layers` in order; no layers is the identity.
fn run(layers: &[Layer], xs: &Tensor, train: bool) -> Tensor {
    layers.iter().fold(xs.shallow_clone(), |x, layer| layer.forward_t(&x, train))
}
