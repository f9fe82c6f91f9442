//! A network built stage by stage, so the gradients of each stage are known apart:
//! data-parallel launches a stage's buckets when its backward ends, and the profiler times
//! and sizes each stage.

use std::ops::Range;

use stratlab_networks::Network;
use tch::nn::{self, ModuleT};
use tch::Tensor;

/// The network built stage by stage into one VarStore, remembering which trainable
/// variables each stage owns (creation order: the same initial values as a whole build).
pub(crate) struct StagedModel {
    pub(crate) stages: Vec<Network>,
    pub(crate) param_ranges: Vec<Range<usize>>,
}

impl StagedModel {
    pub(crate) fn build(spec: &stratlab_networks::NetworkSpec, store: &nn::VarStore) -> StagedModel {
        let root = store.root();
        let mut stages = Vec::new();
        let mut param_ranges = Vec::new();
        for index in 0..spec.stages.len() {
            let before = store.trainable_variables().len();
            stages.push(spec.build_range(index..index + 1, &root));
            param_ranges.push(before..store.trainable_variables().len());
        }
        StagedModel { stages, param_ranges }
    }
}

impl std::fmt::Debug for StagedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedModel").field("stages", &self.stages.len()).finish()
    }
}

impl ModuleT for StagedModel {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.stages.iter().fold(xs.shallow_clone(), |x, stage| stage.forward_t(&x, train))
    }
}
