//! What planning and checking both read from a suite: the batch sizes of a data set's
//! cells, and an error naming the suite file's field.

use std::path::Path;

use stratlab_datasets::DatasetSelector;

use crate::suite_error::SuiteError;
use crate::suite_file::{BatchSize, BatchSizes, SuiteFile};

pub(super) fn field_error(path: &Path, field: &str, message: impl Into<String>) -> SuiteError {
    SuiteError::Field { path: path.to_path_buf(), field: field.to_string(), message: message.into() }
}

/// The per-worker batch sizes of `dataset`'s cells, in the order the suite lists them.
pub(super) fn batches_for(suite: &SuiteFile, dataset: &DatasetSelector) -> Vec<BatchSize> {
    let info = dataset.info().expect("validated while parsing");
    let default = vec![BatchSize::Samples(info.batch_size)];
    match &suite.batch_size {
        Some(BatchSizes::All(sizes)) => sizes.clone(),
        Some(BatchSizes::PerDataset(sizes)) => sizes.get(info.name).cloned().unwrap_or(default),
        None => default,
    }
}

/// The sizes given as numbers (`max` is searched for, and checked once found).
pub(super) fn given_sizes(sizes: &[BatchSize]) -> impl Iterator<Item = usize> + '_ {
    sizes.iter().filter_map(|size| match size {
        BatchSize::Samples(batch) => Some(*batch),
        BatchSize::Largest => None,
    })
}
