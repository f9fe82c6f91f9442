//! Every strategy parameter, declared once: the values a strategy may be given
//! ([`Parameters`]) and the table [`crate::Strategy::new`], the ids, the labels and the
//! reports read.

use crate::{
    Balance, Checkpoint, LearningRate, Placement, ServerMode, ServerPlacement, ShardUnit, StageReplicas, StrategyKind,
    ZeroStage,
};

/// Every parameter a strategy may take, each optional: what a suite entry, an `include`
/// cell or a stored row gives, before [`Strategy::new`] checks which apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parameters {
    /// Micro-batches per batch.
    pub micro_batches: Option<usize>,
    /// Pipeline balance.
    pub balance: Option<Balance>,
    /// Checkpoint mode.
    pub checkpoint: Option<Checkpoint>,
    /// Data-parallel fusion threshold, MiB.
    pub fusion_threshold_mib: Option<u64>,
    /// Parameter-server placement.
    pub server: Option<ServerPlacement>,
    /// Hybrid's stages per pipeline.
    pub pipeline_stages: Option<usize>,
    /// Sharded data parallelism's ZeRO stage.
    pub stage: Option<ZeroStage>,
    /// Sharded data parallelism's gathering unit at stage 3.
    pub shard_unit: Option<ShardUnit>,
    /// Parameter-server mode.
    pub mode: Option<ServerMode>,
    /// Parameter-server staleness bound (`bounded`).
    pub staleness: Option<usize>,
    /// Parameter-server backup workers (`sync`).
    pub backup_workers: Option<usize>,
    /// Parameter-server learning rate per update (`async`, `bounded`).
    pub lr_per_update: Option<LearningRate>,
    /// Interleaved 1F1B's and zero-bubble's pipeline stages per worker.
    pub virtual_stages: Option<usize>,
    /// 1F1B's and PipeDream's workers per stage (PipeDream's replicated stages).
    pub stage_replicas: Option<StageReplicas>,
    /// Zero-bubble's placement of stages on workers.
    pub placement: Option<Placement>,
}

/// One strategy parameter, declared once: its key (the YAML key, the field of
/// [`Parameters`], the name errors and labels use), the strategies that take it, and how a
/// trial id and a label spell a value given. The table's order is the trial ids' order.
pub(crate) struct Declared {
    pub(crate) key: &'static str,
    pub(crate) kinds: &'static [StrategyKind],
    /// Its place in a label: `hybrid ×4 pp2 m4`, though ids say `__m4__pp2`.
    pub(crate) label_rank: u8,
    /// A pipeline's shape or schedule: reports name it only where a run varied it.
    pub(crate) shapes_pipeline: bool,
    /// The value given, as suites write it (`4`, `[2,3]`, `dedicated`), or `None`.
    pub(crate) given: fn(&Parameters) -> Option<String>,
    /// That value's fragment of a trial id (a file name and resume key: no brackets or
    /// commas) and its words in a label: `("__m4", "m4")`.
    pub(crate) spell: fn(&str) -> (String, String),
}

fn text(value: &Option<impl std::fmt::Display>) -> Option<String> {
    value.as_ref().map(ToString::to_string)
}

/// Every parameter a strategy may take.
pub(crate) const PARAMETERS: [Declared; 15] = [
    Declared {
        key: "stage",
        kinds: &[StrategyKind::ShardedDataParallel],
        label_rank: 0,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.stage),
        spell: |stage| (format!("__zero{stage}"), format!("ZeRO-{stage}")),
    },
    Declared {
        key: "shard_unit",
        kinds: &[StrategyKind::ShardedDataParallel],
        label_rank: 1,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.shard_unit),
        spell: |unit| (format!("__unit-{unit}"), format!("gathers each {unit}")),
    },
    Declared {
        key: "micro_batches",
        kinds: &[
            StrategyKind::Gpipe,
            StrategyKind::OneFOneB,
            StrategyKind::PipeDream,
            StrategyKind::Interleaved1F1B,
            StrategyKind::ZeroBubble,
            StrategyKind::Hybrid,
        ],
        label_rank: 3,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.micro_batches),
        spell: |m| (format!("__m{m}"), format!("m{m}")),
    },
    Declared {
        key: "fusion_threshold_mib",
        kinds: &[StrategyKind::DataParallel],
        label_rank: 6,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.fusion_threshold_mib),
        spell: |mib| (format!("__fusion{mib}mib"), format!("fusion {mib} MiB")),
    },
    Declared {
        key: "server",
        kinds: &[StrategyKind::ParameterServer],
        label_rank: 7,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.server),
        spell: |server| (format!("__server-{server}"), format!("{server} server")),
    },
    Declared {
        key: "pipeline_stages",
        kinds: &[StrategyKind::Hybrid],
        label_rank: 2,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.pipeline_stages),
        spell: |pp| (format!("__pp{pp}"), format!("pp{pp}")),
    },
    Declared {
        key: "balance",
        kinds: StrategyKind::PIPELINES,
        label_rank: 4,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.balance),
        spell: |balance| {
            (format!("__bal-{}", balance.replace(['[', ']'], "").replace(',', "-")), format!("bal {balance}"))
        },
    },
    Declared {
        key: "checkpoint",
        kinds: &[
            StrategyKind::ModelParallel,
            StrategyKind::Gpipe,
            StrategyKind::OneFOneB,
            StrategyKind::Interleaved1F1B,
            StrategyKind::Hybrid,
        ],
        label_rank: 5,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.checkpoint),
        spell: |mode| (format!("__ckpt-{mode}"), format!("ckpt {mode}")),
    },
    Declared {
        key: "mode",
        kinds: &[StrategyKind::ParameterServer],
        label_rank: 8,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.mode),
        spell: |mode| (format!("__{mode}"), mode.to_owned()),
    },
    Declared {
        key: "staleness",
        kinds: &[StrategyKind::ParameterServer],
        label_rank: 9,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.staleness),
        spell: |k| (format!("__k{k}"), format!("k={k}")),
    },
    Declared {
        key: "backup_workers",
        kinds: &[StrategyKind::ParameterServer],
        label_rank: 10,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.backup_workers),
        spell: |b| (format!("__backup{b}"), format!("{b} backup")),
    },
    Declared {
        key: "lr_per_update",
        kinds: &[StrategyKind::ParameterServer],
        label_rank: 11,
        shapes_pipeline: false,
        given: |parameters| text(&parameters.lr_per_update),
        spell: |lr| (format!("__lru{lr}"), format!("lr {lr}/update")),
    },
    Declared {
        key: "virtual_stages",
        kinds: &[StrategyKind::Interleaved1F1B, StrategyKind::ZeroBubble],
        label_rank: 12,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.virtual_stages),
        spell: |v| (format!("__v{v}"), format!("v{v}")),
    },
    Declared {
        key: "stage_replicas",
        kinds: &[StrategyKind::OneFOneB, StrategyKind::PipeDream],
        label_rank: 13,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.stage_replicas),
        spell: |layout| (format!("__rep{layout}"), format!("stages {layout}")),
    },
    Declared {
        key: "placement",
        kinds: &[StrategyKind::ZeroBubble],
        label_rank: 14,
        shapes_pipeline: true,
        given: |parameters| text(&parameters.placement),
        spell: |placement| (format!("__place-{placement}"), format!("{placement} placement")),
    },
];
