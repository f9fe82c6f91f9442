//! Opens a trial's data and network and hands them to its strategy: the one path from a
//! description of a training run to a [`TrainReport`], used by `stratlab train` in-process
//! and by worker processes of `stratlab run`.

use std::sync::Arc;

use stratlab_datasets::{DataCache, Dataset, DatasetSelector, OpenOptions, Split};
use stratlab_strategies::{single, StrategyKind, TrainConfig, TrainError, TrainObserver, TrainReport};

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

/// Trains `network` on `data` with `strategy`.
pub fn train(
    strategy: StrategyKind,
    network: &str,
    dataset: &DatasetSelector,
    data: &TrainingData,
    config: &TrainConfig,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let spec = stratlab_networks::spec(network, &input_shape(dataset.info()?))?;
    match strategy {
        StrategyKind::Single => {
            let context =
                single::TrainContext { network: &spec, train: data.train.clone(), test: data.test.clone(), config };
            single::train(&context, observer)
        }
    }
}
