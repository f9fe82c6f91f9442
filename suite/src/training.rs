//! Opens a trial's data and network and hands them to its strategy: the one path from a
//! description of a training run to a [`TrainReport`], used by `stratlab train` in-process
//! and by worker processes of `stratlab run`.

use std::sync::Arc;

use std::time::Duration;
use stratlab_datasets::{DataCache, Dataset, DatasetSelector, OpenOptions, Split};

use stratlab_comm::{Backend, GroupOptions, Launch, ProcessGroup};
use stratlab_strategies::{TrainConfig, TrainContext, TrainError, TrainObserver, TrainReport};
use stratlab_strategy_spec::Strategy;

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

/// Trains `network` on `data` with `strategy`. Distributed strategies join the process
/// group described by torchrun's variables (this process is one rank of it); on CUDA,
/// rank `LOCAL_RANK` trains on `cuda:LOCAL_RANK`.
pub fn train(
    strategy: &Strategy,
    network: &str,
    dataset: &DatasetSelector,
    data: &TrainingData,
    config: &TrainConfig,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let spec = stratlab_networks::spec(network, &input_shape(dataset.info()?))?;
    if !strategy.kind().is_distributed() {
        let context = TrainContext { network: &spec, train: data.train.clone(), test: data.test.clone(), config };
        return stratlab_strategies::train(strategy, &context, None, observer);
    }
    let launch = Launch::from_env()?;
    let mut config = config.clone();
    if let stratlab_strategies::DeviceChoice::Cuda(_) = config.device {
        config.device = stratlab_strategies::DeviceChoice::Cuda(launch.local_rank);
    }
    let device = config.device.resolve().map_err(|error| TrainError::Device(error.0))?;
    let options = GroupOptions::for_launch(&launch, Backend::for_device(device), COLLECTIVE_TIMEOUT);
    let group = ProcessGroup::init(&launch, &options)?;
    let context = TrainContext { network: &spec, train: data.train.clone(), test: data.test.clone(), config: &config };
    stratlab_strategies::train(strategy, &context, Some(&group), observer)
}
