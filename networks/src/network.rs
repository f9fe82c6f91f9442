//! A built network, or a consecutive slice of one, ready to run.

use std::ops::Range;

use tch::nn::ModuleT;
use tch::Tensor;

use crate::stage::Stage;

/// Built stages of a [`crate::NetworkSpec`], either all of them or the consecutive range a
/// pipeline worker owns; running them in order is the forward pass of that range.
#[derive(Debug)]
pub struct Network {
    name: String,
    range: Range<usize>,
    stages: Vec<Stage>,
}

impl Network {
    pub(crate) fn new(name: String, range: Range<usize>, stages: Vec<Stage>) -> Self {
        Network { name, range, stages }
    }

    /// The network's name, as given to [`crate::spec`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which stages of the full network these are (indices into `NetworkSpec::stages`).
    pub fn stage_range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// The built stages, in order.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The stage names, in order.
    pub fn stage_names(&self) -> Vec<&str> {
        self.stages.iter().map(Stage::name).collect()
    }

    /// Runs stage `i` of *this* network (0 is its first stage, whatever its range), so
    /// a schedule can interleave stages of different micro-batches.
    ///
    /// Panics if `i` is not below `self.stages().len()`, like slice indexing.
    pub fn forward_stage(&self, i: usize, xs: &Tensor, train: bool) -> Tensor {
        self.stages[i].forward_t(xs, train)
    }
}

impl ModuleT for Network {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.stages.iter().fold(xs.shallow_clone(), |x, stage| stage.forward_t(&x, train))
    }
}
