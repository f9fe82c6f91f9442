//! How a stage worker is put together: where it sits, what it trains and the order it works
//! in, each grouped, and the worker made from them before its first step.

use std::collections::BTreeMap;

use stratlab_comm::ProcessGroup;
use stratlab_strategy_spec::{Checkpoint, Schedule, StageReplicas, Strategy};
use tch::{nn, Device, Tensor};

use super::{Chunk, StageWorker};
use crate::loss_scale::LossScaler;
use crate::pipeline::layout::Layout;
use crate::pipeline::links::Sends;
use crate::pipeline::partition::StagePlan;
use crate::{PrecisionOps, TrainConfig, TrainError};

/// Where a stage worker sits: the trial's group, its stage's replicas (hybrid's, or a
/// replicated stage's workers), its stage and replica, and the workers of every stage
/// where stages are replicated.
pub(in crate::pipeline) struct StagePlace<'a> {
    pub(in crate::pipeline) world: &'a ProcessGroup,
    pub(in crate::pipeline) replica_group: Option<ProcessGroup>,
    pub(in crate::pipeline) layout: Layout,
    pub(in crate::pipeline) stage_replicas: Option<StageReplicas>,
}

/// The order a stage works in: its strategy's schedule over that many micro-batches, each
/// checkpointed or not.
pub(in crate::pipeline) struct StageOrder {
    schedule: Schedule,
    micro_batches: usize,
    checkpoint: Checkpoint,
}

impl StageOrder {
    /// `strategy`'s order, or an error where it does not pipeline.
    pub(in crate::pipeline) fn of(strategy: &Strategy) -> Result<StageOrder, TrainError> {
        let schedule = strategy.schedule().ok_or_else(|| TrainError::InvalidConfig {
            field: "strategy",
            reason: format!("{} is not a pipeline", strategy.name()),
        })?;
        Ok(StageOrder { schedule, micro_batches: strategy.micro_batches(), checkpoint: strategy.checkpoint() })
    }
}

/// What a stage worker trains: the plan that cut the network, per-sample output shapes of
/// every network stage, and this rank's stages of it (one, unless interleaved) with their
/// weights, optimizer and loss scale.
pub(in crate::pipeline) struct StageModel {
    pub(in crate::pipeline) plan: StagePlan,
    pub(in crate::pipeline) stage_output_dims: Vec<Vec<i64>>,
    pub(in crate::pipeline) chunks: Vec<Chunk>,
    pub(in crate::pipeline) params: Vec<Tensor>,
    pub(in crate::pipeline) optimizer: nn::Optimizer,
    pub(in crate::pipeline) loss_scaler: Option<LossScaler>,
}

impl<'a> StageWorker<'a> {
    /// A stage worker that has run no step yet, running `order` in `config`'s precision on
    /// `device`.
    pub(in crate::pipeline) fn new(
        place: StagePlace<'a>,
        model: StageModel,
        order: StageOrder,
        config: &TrainConfig,
        device: Device,
    ) -> StageWorker<'a> {
        let StagePlace { world, replica_group, layout, stage_replicas } = place;
        let StageModel { plan, stage_output_dims, chunks, params, optimizer, loss_scaler } = model;
        let StageOrder { schedule, micro_batches, checkpoint } = order;
        StageWorker {
            world,
            replica_group,
            layout,
            stage_replicas,
            schedule,
            micro_batches,
            checkpoint,
            stage_output_dims,
            plan,
            chunks,
            optimizer,
            loss_scaler,
            params,
            device,
            precision: config.precision,
            kind: config.precision.message_kind(),
            steps_done: 0,
            warmup_steps: config.warmup_steps,
            peak_activation_bytes: None,
            in_flight: BTreeMap::new(),
            sends: Sends::default(),
        }
    }
}
