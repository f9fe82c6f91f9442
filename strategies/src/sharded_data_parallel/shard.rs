//! One sharding unit: its parameters' weights in one flat buffer padded to a multiple of the
//! world size, this rank's chunk of it as the optimizer's variable, and the collectives that
//! move between the two.
//!
//! Each parameter views its slice of the flat buffer with its own sizes and strides (a
//! channels-last weight stays channels-last), and gradients are packed into a buffer of the
//! same layout, so a chunk's weights and gradients are the same elements. A parameter's
//! data is swapped with `set_data`, which leaves its identity and version counter alone, so
//! tensors autograd saved in a forward see the weights gathered again for the backward (as
//! FSDP's flat parameters do).

use std::ops::Range;

use stratlab_comm::{Completed, ProcessGroup, ReduceOp, Work};
use tch::nn::VarStore;
use tch::{Kind, Tensor};

use crate::autograd::set_grad;
use crate::timeline::{EventKind, Timeline};
use crate::TrainError;

pub(super) struct Unit {
    /// The unit's number, in network order (for event names).
    pub(super) index: usize,
    /// The network stages whose weights it holds.
    pub(super) stages: Range<usize>,
    params: Vec<Tensor>,
    /// Each parameter's sizes and strides, its slice of the flat buffer laid out alike.
    layouts: Vec<(Vec<i64>, Vec<i64>)>,
    /// Elements of this rank's chunk: the weights' count over the world size, rounded up.
    chunk_len: i64,
    rank: i64,
    world: i64,
    /// This rank's chunk of the weights: a variable of the optimizer's store, the only copy
    /// of the weights that the optimizer updates.
    pub(super) chunk: Tensor,
    /// The gathered weights the parameters view, where they are whole.
    flat: Option<Tensor>,
}

impl Unit {
    /// The unit of `params` (of network stages `stages`), their weights moved into a flat
    /// buffer and this rank's chunk of it made a variable of `chunks`.
    pub(super) fn new(
        index: usize,
        stages: Range<usize>,
        params: &[Tensor],
        group: &ProcessGroup,
        chunks: &VarStore,
    ) -> Result<Unit, TrainError> {
        let world = group.world_size() as i64;
        let numel: i64 = params.iter().map(|param| param.numel() as i64).sum();
        let (kind, device) = params.first().map_or((Kind::Float, chunks.device()), |p| (p.kind(), p.device()));
        let chunk_len = (numel + world - 1) / world;
        let flat = Tensor::zeros([world * chunk_len], (kind, device));
        let mut unit = Unit {
            index,
            stages,
            params: params.iter().map(Tensor::shallow_clone).collect(),
            layouts: params.iter().map(|param| (param.size(), param.stride())).collect(),
            chunk_len,
            rank: group.rank() as i64,
            world,
            chunk: Tensor::new(),
            flat: None,
        };
        tch::no_grad(|| {
            for (mut view, param) in unit.views(&flat).into_iter().zip(params) {
                view.copy_(param);
            }
        });
        unit.chunk = chunks.root().var_copy(&format!("unit{index}"), &unit.own_chunk(&flat));
        unit.attach(flat);
        Ok(unit)
    }

    /// Whether the weights are whole (gathered).
    pub(super) fn is_gathered(&self) -> bool {
        self.flat.is_some()
    }

    /// Whether the unit holds any weights (a pooling stage holds none, and moves nothing).
    fn is_empty(&self) -> bool {
        self.chunk_len == 0
    }

    /// Each parameter's view of `flat`, in order.
    fn views(&self, flat: &Tensor) -> Vec<Tensor> {
        let mut offset = 0;
        self.layouts
            .iter()
            .map(|(sizes, strides)| {
                let view = flat.as_strided(sizes.as_slice(), strides.as_slice(), Some(offset));
                offset += sizes.iter().product::<i64>();
                view
            })
            .collect()
    }

    /// This rank's chunk of a flat buffer.
    fn own_chunk(&self, flat: &Tensor) -> Tensor {
        flat.narrow(0, self.rank * self.chunk_len, self.chunk_len)
    }

    /// Makes `flat` the parameters' weights.
    fn attach(&mut self, flat: Tensor) {
        for (mut param, view) in self.params.iter().map(Tensor::shallow_clone).zip(self.views(&flat)) {
            param.set_data(&view);
        }
        self.flat = Some(flat);
    }

    /// Frees the gathered weights: each parameter keeps no elements until gathered again.
    pub(super) fn release(&mut self) {
        if self.is_empty() {
            return;
        }
        for mut param in self.params.iter().map(Tensor::shallow_clone) {
            param.set_data(&Tensor::empty([0], (param.kind(), param.device())));
        }
        self.flat = None;
    }

    /// Gathers every rank's chunk into fresh whole weights (ZeRO-3, before a pass).
    pub(super) fn gather(&mut self, group: &ProcessGroup, timeline: &mut Timeline) -> Result<(), TrainError> {
        if self.is_empty() {
            return Ok(());
        }
        let mut flat = Tensor::empty([self.world * self.chunk_len], (self.chunk.kind(), self.chunk.device()));
        let done = group.all_gather_into_async(&mut flat, &self.chunk.detach())?.wait()?;
        timeline.communication(EventKind::AllGather, format!("unit {} weights", self.index), &done);
        self.attach(flat);
        Ok(())
    }

    /// Gathers every rank's updated chunk into the whole weights the parameters already
    /// view (ZeRO-1 and 2, after the update).
    pub(super) fn gather_updated(&mut self, group: &ProcessGroup) -> Result<Option<Completed>, TrainError> {
        let Some(flat) = self.flat.as_mut().filter(|_| self.chunk_len > 0) else { return Ok(None) };
        Ok(Some(group.all_gather_into_async(flat, &self.chunk.detach())?.wait()?))
    }

    /// Packs the unit's gradients and starts their reduce-scatter (averaged) into this
    /// rank's chunk's gradient; frees the parameters' own gradients where `free` (ZeRO-2
    /// and 3). The packed buffer must outlive the work.
    pub(super) fn reduce_scatter_gradients(
        &mut self,
        group: &ProcessGroup,
        free: bool,
    ) -> Result<Option<(Work, Tensor)>, TrainError> {
        if self.is_empty() {
            return Ok(None);
        }
        let packed = Tensor::zeros([self.world * self.chunk_len], (self.chunk.kind(), self.chunk.device()));
        tch::no_grad(|| {
            for (mut view, param) in self.views(&packed).into_iter().zip(&self.params) {
                let grad = param.grad();
                if grad.defined() {
                    view.copy_(&grad);
                }
            }
        });
        if free {
            self.clear_gradients()?;
        }
        let mut own = Tensor::empty([self.chunk_len], (self.chunk.kind(), self.chunk.device()));
        set_grad(&self.chunk, Some(&own))?;
        let work = group.reduce_scatter_async(&mut own, &packed, ReduceOp::Average)?;
        Ok(Some((work, packed)))
    }

    /// Frees the parameters' gradients.
    pub(super) fn clear_gradients(&self) -> Result<(), TrainError> {
        self.params.iter().try_for_each(|param| set_grad(param, None))
    }
}
