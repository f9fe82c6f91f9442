//! Opens a trial's data and network and hands them to its strategy: the one path from a
//! description of a training run to a [`TrainReport`], used by `stratlab train` in-process
//! and by worker processes of `stratlab run`.

use std::sync::Arc;

use stratlab_datasets::{DataCache, Dataset, DatasetSelector, OpenOptions, Split};
use std::time::Duration;

use stratlab_comm::{Backend, GroupOptions, Launch, ProcessGroup};
use stratlab_strategies::data_parallel::DEFAULT_FUSION_THRESHOLD_BYTES;
use stratlab_strategies::parameter_server::ServerPlacement;
use stratlab_strategies::pipeline::{self, Balance, Checkpoint, PipelineOptions};
use stratlab_strategies::{
    data_parallel, parameter_server, single, StrategyKind, TrainConfig, TrainContext, TrainError, TrainObserver,
    TrainReport,
};

use crate::shapes::input_shape;

/// The data a run trains and evaluates on.
pub struct TrainingData {
    /// Training split.
    pub train: Arc<dyn Dataset>,
    /// Test split.
    pub test: Arc<dyn Dataset>,
}

/// Opens both splits of `dataset`, fetching real files into the cache when allowed.
pub fn open_data(dataset: &DatasetSelector, seed: u64, allow_fetch: bool) -> Result<TrainingData, TrainError> {
    let cache = DataCache::from_env();
    let options = OpenOptions { seed, allow_fetch };
    Ok(TrainingData {
        train: stratlab_datasets::open(dataset, Split::Train, &cache, &options)?,
        test: stratlab_datasets::open(dataset, Split::Test, &cache, &options)?,
    })
}

/// How long a rank waits for its peers (rendezvous, each collective) before failing: long
/// enough for a peer's evaluation pass, short enough that a dead peer ends the trial well
/// before its timeout.
pub const COLLECTIVE_TIMEOUT: Duration = Duration::from_secs(120);

/// What a trial trains: the strategy and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyChoice {
    /// The strategy.
    pub kind: StrategyKind,
    /// Data parallel: the fusion threshold (Horovod's 64 MiB when `None`).
    pub fusion_threshold_bytes: Option<u64>,
    /// Parameter server: where the server runs (colocated when `None`).
    pub server: Option<ServerPlacement>,
    /// Pipelines: schedule, micro-batches, balance, checkpointing, pp.
    pub pipeline: Option<PipelineOptions>,
}

impl StrategyChoice {
    /// A strategy with its default parameters.
    pub fn plain(kind: StrategyKind) -> StrategyChoice {
        StrategyChoice { kind, fusion_threshold_bytes: None, server: None, pipeline: None }
    }
}

/// Trains `network` on `data` with `strategy`. Distributed strategies join the process
/// group described by torchrun's variables (this process is one rank of it); on CUDA,
/// rank `LOCAL_RANK` trains on `cuda:LOCAL_RANK`.
pub fn train(
    strategy: StrategyChoice,
    network: &str,
    dataset: &DatasetSelector,
    data: &TrainingData,
    config: &TrainConfig,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let spec = stratlab_networks::spec(network, &input_shape(dataset.info()?))?;
    if !strategy.kind.is_distributed() {
        let context = TrainContext { network: &spec, train: data.train.clone(), test: data.test.clone(), config };
        return single::train(&context, observer);
    }
    let launch = Launch::from_env()?;
    let mut config = config.clone();
    if let stratlab_strategies::DeviceChoice::Cuda(_) = config.device {
        config.device = stratlab_strategies::DeviceChoice::Cuda(launch.local_rank);
    }
    let device = config.device.resolve().map_err(TrainError::Device)?;
    let options = GroupOptions::for_launch(&launch, Backend::for_device(device), COLLECTIVE_TIMEOUT);
    let group = ProcessGroup::init(&launch, &options)?;
    let context = TrainContext { network: &spec, train: data.train.clone(), test: data.test.clone(), config: &config };
    match strategy.kind {
        StrategyKind::Single => unreachable!("handled above"),
        StrategyKind::DataParallel => data_parallel::train(
            &context,
            &group,
            strategy.fusion_threshold_bytes.unwrap_or(DEFAULT_FUSION_THRESHOLD_BYTES),
            observer,
        ),
        StrategyKind::ParameterServer => {
            parameter_server::train(&context, &group, strategy.server.unwrap_or_default(), observer)
        }
        kind => {
            let defaults = PipelineOptions {
                kind,
                micro_batches: 1,
                balance: Balance::Uniform,
                checkpoint: Checkpoint::Never,
                stages: None,
            };
            pipeline::train(&context, &group, strategy.pipeline.as_ref().unwrap_or(&defaults), observer)
        }
    }
}
