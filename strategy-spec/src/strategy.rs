//! [`Strategy`]: one way of training with the parameters it takes, and every rule about
//! them (which applies where, ranges, defaults, feasibility, how a cell is named).

use serde::{Deserialize, Serialize};

mod declared;
pub(crate) mod names;
mod shape;

pub use declared::Parameters;
pub(crate) use declared::PARAMETERS;

use crate::{
    Balance, Checkpoint, LearningRate, Placement, Schedule, ServerMode, ServerPlacement, ServerSettings, ShardUnit,
    StageReplicas, StrategyKind, SweepError, ZeroStage,
};

/// Horovod's default fusion threshold: gradients are all-reduced in buckets of up to 64 MiB.
pub const DEFAULT_FUSION_THRESHOLD_MIB: u64 = 64;

/// A strategy and the parameters it was given. A parameter left out (`None`) takes its
/// default when training and is left out of the trial's id and the stored row, so a cell
/// that names its default (`micro_batches: 1`) stays a different cell from one that does not.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Strategy {
    /// One worker; the baseline every speedup divides by.
    Single,
    /// Replicas on every worker, gradients all-reduced in fused buckets.
    DataParallel {
        /// Bucket size in MiB (default [`DEFAULT_FUSION_THRESHOLD_MIB`]).
        #[serde(default)]
        fusion_threshold_mib: Option<u64>,
    },
    /// Workers push gradients to a server, which updates and returns the weights.
    ParameterServer {
        /// Where the server runs (default colocated on rank 0).
        #[serde(default)]
        server: Option<ServerPlacement>,
        /// When the server applies a gradient (default `sync`, which is never stored: a
        /// `sync` cell keeps the id it had before modes existed).
        #[serde(default)]
        mode: Option<ServerMode>,
        /// `bounded`'s k: no worker runs more than k updates ahead of the slowest.
        #[serde(default)]
        staleness: Option<usize>,
        /// `sync`'s gradients per round the server does not wait for (default 0).
        #[serde(default)]
        backup_workers: Option<usize>,
        /// Each per-gradient update's learning rate (default the suite's ÷ the training ranks).
        #[serde(default)]
        lr_per_update: Option<LearningRate>,
    },
    /// Consecutive stages, one per worker, the whole batch at a time.
    ModelParallel {
        /// How network stages are split (default uniform).
        #[serde(default)]
        balance: Option<Balance>,
        /// Activation checkpointing (default never).
        #[serde(default)]
        checkpoint: Option<Checkpoint>,
    },
    /// Fill and drain over micro-batches, one update per batch.
    Gpipe {
        /// Micro-batches per batch (default 1).
        #[serde(default)]
        micro_batches: Option<usize>,
        /// How network stages are split (default uniform).
        #[serde(default)]
        balance: Option<Balance>,
        /// Activation checkpointing (default never).
        #[serde(default)]
        checkpoint: Option<Checkpoint>,
    },
    /// PipeDream-flush: one forward, one backward, one update per batch.
    #[serde(rename = "1f1b")]
    OneFOneB {
        /// Micro-batches per batch (default 1).
        #[serde(default)]
        micro_batches: Option<usize>,
        /// How network stages are split (default uniform).
        #[serde(default)]
        balance: Option<Balance>,
        /// Activation checkpointing (default never).
        #[serde(default)]
        checkpoint: Option<Checkpoint>,
        /// Workers per stage (default one each): PipeDream's replicated stages.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage_replicas: Option<StageReplicas>,
    },
    /// Asynchronous 1F1B with weight stashing (it recomputes every stashed micro-batch
    /// already, so it takes no checkpoint mode).
    #[serde(rename = "pipedream")]
    PipeDream {
        /// Micro-batches per optimizer step (default 1).
        #[serde(default)]
        micro_batches: Option<usize>,
        /// How network stages are split (default uniform).
        #[serde(default)]
        balance: Option<Balance>,
        /// Workers per stage (default one each): a replicated stage's workers all-reduce
        /// each round's gradients and update together.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage_replicas: Option<StageReplicas>,
    },
    /// Interleaved 1F1B: every worker holds `virtual_stages` stages of the network.
    #[serde(rename = "interleaved-1f1b")]
    Interleaved1F1B {
        /// Stages per worker (v, at least 2).
        virtual_stages: usize,
        /// Micro-batches per batch (default 1).
        #[serde(default)]
        micro_batches: Option<usize>,
        /// How network stages are split over the v × workers pipeline stages (default
        /// uniform).
        #[serde(default)]
        balance: Option<Balance>,
        /// Activation checkpointing (default never).
        #[serde(default)]
        checkpoint: Option<Checkpoint>,
    },
    /// Zero-bubble: split backwards, the weights' halves filling the bubble.
    #[serde(rename = "zero-bubble")]
    ZeroBubble {
        /// How stages sit on the workers (default loop: ZB1P).
        #[serde(default)]
        placement: Option<Placement>,
        /// Stages per worker (default 1 in the loop placement, ZB-H1; the V holds 2).
        #[serde(default)]
        virtual_stages: Option<usize>,
        /// Micro-batches per batch (default 1).
        #[serde(default)]
        micro_batches: Option<usize>,
        /// How network stages are split over the pipeline stages (default uniform).
        #[serde(default)]
        balance: Option<Balance>,
    },
    /// Data-parallel replicas of a 1F1B pipeline of `pipeline_stages` stages.
    Hybrid {
        /// Stages per pipeline (pp); the replicas are workers ÷ pp.
        pipeline_stages: usize,
        /// Micro-batches per batch (default 1).
        #[serde(default)]
        micro_batches: Option<usize>,
        /// How network stages are split (default uniform).
        #[serde(default)]
        balance: Option<Balance>,
        /// Activation checkpointing (default never).
        #[serde(default)]
        checkpoint: Option<Checkpoint>,
    },
    /// ZeRO: data parallelism with the optimizer state, gradients or weights sharded.
    ShardedDataParallel {
        /// What is sharded (default 3, FSDP's `FULL_SHARD`).
        #[serde(default)]
        stage: Option<ZeroStage>,
        /// At stage 3, the weights gathered at once (default each network stage).
        #[serde(default)]
        shard_unit: Option<ShardUnit>,
    },
}

impl Strategy {
    /// `kind` with `parameters`, or the first rule they break: a parameter the strategy
    /// does not take (it would be silently ignored), a value out of range, one it needs.
    pub fn new(kind: StrategyKind, parameters: Parameters) -> Result<Strategy, SweepError> {
        for declared in &PARAMETERS {
            if (declared.given)(&parameters).is_some() && !declared.kinds.contains(&kind) {
                let names: Vec<&str> = declared.kinds.iter().map(|kind| kind.name()).collect();
                let message = format!("does not apply to strategy {kind}; it applies to {}", names.join(", "));
                return Err(SweepError { field: declared.key, message });
            }
        }
        let Parameters {
            micro_batches,
            balance,
            checkpoint,
            fusion_threshold_mib,
            server,
            pipeline_stages,
            stage,
            shard_unit,
            mode,
            staleness,
            backup_workers,
            lr_per_update,
            virtual_stages,
            stage_replicas,
            placement,
        } = parameters;
        // `sync` is the default and is never stored, so a sync cell keeps its old id.
        let mode = mode.filter(|&mode| mode != ServerMode::Sync);
        let error = |field, message: &str| Err(SweepError { field, message: message.to_owned() });
        if micro_batches == Some(0) {
            return error("micro_batches", crate::parameters::MICRO_BATCHES_AT_LEAST_ONE);
        }
        if fusion_threshold_mib == Some(0) {
            return error("fusion_threshold_mib", "must be at least 1 (MiB)");
        }
        if shard_unit.is_some() && stage.is_some_and(|stage| !stage.shards_weights()) {
            return error("shard_unit", "gathers sharded weights: it applies to stage 3 only");
        }
        if staleness.is_some() && mode != Some(ServerMode::Bounded) {
            return error("staleness", "bounds mode bounded only: give mode: bounded, or leave staleness out");
        }
        if mode == Some(ServerMode::Bounded) && staleness.is_none() {
            return error("staleness", "mode bounded needs staleness: k, the updates a worker may run ahead");
        }
        if lr_per_update.is_some() && mode.is_none() {
            return error(
                "lr_per_update",
                "applies to modes async and bounded (a sync round averages at the suite's lr)",
            );
        }
        if let Some(Err(message)) = lr_per_update.map(LearningRate::check) {
            return Err(SweepError { field: "lr_per_update", message });
        }
        if backup_workers.is_some() && mode.is_some() {
            return error("backup_workers", "applies to mode sync only (asynchronous modes wait for no round)");
        }
        if let Some(Balance::Explicit(counts)) = &balance {
            if counts.is_empty() || counts.contains(&0) {
                return error("balance", "an explicit balance lists one positive stage count per worker");
            }
        }
        Ok(match kind {
            StrategyKind::Single => Strategy::Single,
            StrategyKind::DataParallel => Strategy::DataParallel { fusion_threshold_mib },
            StrategyKind::ParameterServer => {
                Strategy::ParameterServer { server, mode, staleness, backup_workers, lr_per_update }
            }
            StrategyKind::ModelParallel => Strategy::ModelParallel { balance, checkpoint },
            StrategyKind::Gpipe => Strategy::Gpipe { micro_batches, balance, checkpoint },
            StrategyKind::OneFOneB => Strategy::OneFOneB { micro_batches, balance, checkpoint, stage_replicas },
            StrategyKind::PipeDream => Strategy::PipeDream { micro_batches, balance, stage_replicas },
            StrategyKind::ShardedDataParallel => Strategy::ShardedDataParallel { stage, shard_unit },
            StrategyKind::Interleaved1F1B => match virtual_stages {
                None => {
                    return error("virtual_stages", "interleaved-1f1b needs virtual_stages: v, the stages per worker")
                }
                Some(0 | 1) => {
                    return error("virtual_stages", "must be at least 2 (one stage per worker is 1f1b)");
                }
                Some(virtual_stages) => {
                    Strategy::Interleaved1F1B { virtual_stages, micro_batches, balance, checkpoint }
                }
            },
            StrategyKind::ZeroBubble => match (placement.unwrap_or_default(), virtual_stages) {
                (_, Some(0)) => return error("virtual_stages", "must be at least 1"),
                (Placement::V, Some(v)) if v != 2 => {
                    return error("virtual_stages", "the v placement holds exactly 2 stages per worker (ZB-V)")
                }
                _ => Strategy::ZeroBubble { placement, virtual_stages, micro_batches, balance },
            },
            StrategyKind::Hybrid => match pipeline_stages {
                None => return error("pipeline_stages", "hybrid needs pipeline_stages (pp); workers = dp × pp"),
                Some(0) => return error("pipeline_stages", "must be at least 1"),
                Some(pipeline_stages) => Strategy::Hybrid { pipeline_stages, micro_batches, balance, checkpoint },
            },
        })
    }

    /// The parameters as given (the inverse of [`Strategy::new`]).
    pub fn parameters(&self) -> Parameters {
        let mut parameters = Parameters::default();
        match self {
            Strategy::Single => {}
            Strategy::DataParallel { fusion_threshold_mib } => parameters.fusion_threshold_mib = *fusion_threshold_mib,
            Strategy::ParameterServer { server, mode, staleness, backup_workers, lr_per_update } => {
                parameters = Parameters {
                    server: *server,
                    mode: *mode,
                    staleness: *staleness,
                    backup_workers: *backup_workers,
                    lr_per_update: *lr_per_update,
                    ..parameters
                }
            }
            Strategy::ModelParallel { balance, checkpoint } => {
                (parameters.balance, parameters.checkpoint) = (balance.clone(), *checkpoint)
            }
            Strategy::Gpipe { micro_batches, balance, checkpoint } => {
                (parameters.micro_batches, parameters.balance, parameters.checkpoint) =
                    (*micro_batches, balance.clone(), *checkpoint)
            }
            Strategy::OneFOneB { micro_batches, balance, checkpoint, stage_replicas } => {
                parameters = Parameters {
                    micro_batches: *micro_batches,
                    balance: balance.clone(),
                    checkpoint: *checkpoint,
                    stage_replicas: stage_replicas.clone(),
                    ..parameters
                }
            }
            Strategy::PipeDream { micro_batches, balance, stage_replicas } => {
                parameters = Parameters {
                    micro_batches: *micro_batches,
                    balance: balance.clone(),
                    stage_replicas: stage_replicas.clone(),
                    ..parameters
                }
            }
            Strategy::ShardedDataParallel { stage, shard_unit } => {
                (parameters.stage, parameters.shard_unit) = (*stage, *shard_unit)
            }
            Strategy::Interleaved1F1B { virtual_stages, micro_batches, balance, checkpoint } => {
                parameters = Parameters {
                    micro_batches: *micro_batches,
                    balance: balance.clone(),
                    checkpoint: *checkpoint,
                    virtual_stages: Some(*virtual_stages),
                    ..parameters
                }
            }
            Strategy::ZeroBubble { placement, virtual_stages, micro_batches, balance } => {
                parameters = Parameters {
                    micro_batches: *micro_batches,
                    balance: balance.clone(),
                    virtual_stages: *virtual_stages,
                    placement: *placement,
                    ..parameters
                }
            }
            Strategy::Hybrid { pipeline_stages, micro_batches, balance, checkpoint } => {
                parameters = Parameters {
                    micro_batches: *micro_batches,
                    balance: balance.clone(),
                    checkpoint: *checkpoint,
                    pipeline_stages: Some(*pipeline_stages),
                    ..parameters
                }
            }
        }
        parameters
    }

    /// Which strategy, without parameters.
    pub fn kind(&self) -> StrategyKind {
        match self {
            Strategy::Single => StrategyKind::Single,
            Strategy::DataParallel { .. } => StrategyKind::DataParallel,
            Strategy::ParameterServer { .. } => StrategyKind::ParameterServer,
            Strategy::ModelParallel { .. } => StrategyKind::ModelParallel,
            Strategy::Gpipe { .. } => StrategyKind::Gpipe,
            Strategy::OneFOneB { .. } => StrategyKind::OneFOneB,
            Strategy::PipeDream { .. } => StrategyKind::PipeDream,
            Strategy::Interleaved1F1B { .. } => StrategyKind::Interleaved1F1B,
            Strategy::ZeroBubble { .. } => StrategyKind::ZeroBubble,
            Strategy::Hybrid { .. } => StrategyKind::Hybrid,
            Strategy::ShardedDataParallel { .. } => StrategyKind::ShardedDataParallel,
        }
    }

    /// The name in suite files and results (`gpipe`).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Bytes per all-reduce bucket of data-parallel (its default when not given).
    pub fn fusion_threshold_bytes(&self) -> u64 {
        let mib = match self {
            Strategy::DataParallel { fusion_threshold_mib } => *fusion_threshold_mib,
            _ => None,
        };
        mib.unwrap_or(DEFAULT_FUSION_THRESHOLD_MIB) << 20
    }

    /// Where the parameter server runs (colocated when not given).
    pub fn server_placement(&self) -> ServerPlacement {
        self.parameters().server.unwrap_or_default()
    }

    /// How the parameter server runs and applies gradients, defaults resolved (`sync`,
    /// colocated, no backup workers for any other strategy).
    pub fn server_settings(&self) -> ServerSettings {
        let Parameters { server, mode, staleness, backup_workers, lr_per_update, .. } = self.parameters();
        ServerSettings::new(server, mode, staleness, backup_workers, lr_per_update)
    }

    /// The ZeRO stage of sharded data parallelism (3 when not given), `None` for other
    /// strategies.
    pub fn zero_stage(&self) -> Option<ZeroStage> {
        match self {
            Strategy::ShardedDataParallel { stage, .. } => Some(stage.unwrap_or_default()),
            _ => None,
        }
    }

    /// What ZeRO stage 3 gathers at once (each network stage when not given).
    pub fn shard_unit(&self) -> ShardUnit {
        self.parameters().shard_unit.unwrap_or_default()
    }

    /// The pipeline schedule, for the strategies that cut the network into stages.
    pub fn schedule(&self) -> Option<Schedule> {
        match self {
            Strategy::Interleaved1F1B { virtual_stages, .. } => {
                Some(Schedule::Interleaved { virtual_stages: *virtual_stages })
            }
            Strategy::ZeroBubble { placement, virtual_stages, .. } => {
                let placement = placement.unwrap_or_default();
                let default_stages = if placement == Placement::V { 2 } else { 1 };
                Some(Schedule::ZeroBubble { placement, virtual_stages: virtual_stages.unwrap_or(default_stages) })
            }
            _ => Schedule::of(self.kind()),
        }
    }

    /// The workers of each stage, where a stage runs on several (1F1B's replicated stages).
    pub fn stage_replicas(&self) -> Option<&StageReplicas> {
        match self {
            Strategy::OneFOneB { stage_replicas, .. } | Strategy::PipeDream { stage_replicas, .. } => {
                stage_replicas.as_ref()
            }
            _ => None,
        }
    }

    /// Micro-batches each batch is split into (1 when not given; model-parallel always 1).
    pub fn micro_batches(&self) -> usize {
        let requested = self.parameters().micro_batches.unwrap_or(1);
        self.schedule().map_or(1, |schedule| schedule.micro_batches(requested))
    }

    /// How the pipeline's stages are split (uniform when not given).
    pub fn balance(&self) -> Balance {
        self.parameters().balance.unwrap_or(Balance::Uniform)
    }

    /// Activation checkpointing (never when not given).
    pub fn checkpoint(&self) -> Checkpoint {
        self.parameters().checkpoint.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
