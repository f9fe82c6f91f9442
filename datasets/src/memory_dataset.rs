//! Small real data sets (MNIST, Fashion-MNIST, CIFAR) held whole in memory as bytes:
//! 47 MB for MNIST, 150 MB for CIFAR, a quarter of f32's size; a batch gathers its samples
//! and converts only them to f32.

use crate::batch::{check_sample, Normaliser};
use crate::{build_batch, Batch, DataError, Dataset, DatasetInfo, Source};

/// A whole split in memory: u8 images (C×H×W each, back to back) and u8 labels.
///
/// Plain byte vectors rather than u8 tensors: `tch::Tensor` is not `Sync`, and gathering
/// rows in Rust keeps libtorch's thread pool out of the loader thread (see `Normaliser`).
#[derive(Debug)]
pub struct MemoryDataset {
    info: &'static DatasetInfo,
    pixels: Vec<u8>,
    labels: Vec<u8>,
    normaliser: Normaliser,
}

impl MemoryDataset {
    /// Wraps decoded pixels (`labels.len()` images of C×H×W bytes) and labels already
    /// checked against `info`.
    pub(crate) fn new(info: &'static DatasetInfo, pixels: Vec<u8>, labels: Vec<u8>) -> Result<Self, DataError> {
        if pixels.len() != labels.len() * info.image_bytes() {
            return Err(DataError::Config(format!(
                "{}: {} pixel bytes for {} labels of {} bytes each",
                info.name,
                pixels.len(),
                labels.len(),
                info.image_bytes()
            )));
        }
        Ok(MemoryDataset { info, pixels, labels, normaliser: Normaliser::new(info) })
    }
}

impl Dataset for MemoryDataset {
    fn info(&self) -> &'static DatasetInfo {
        self.info
    }

    fn source(&self) -> Source {
        Source::Real
    }

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError> {
        build_batch(self, indices)
    }

    fn sample_into(&self, index: usize, out: &mut [f32]) -> Result<i64, DataError> {
        check_sample(self.info, index, self.labels.len(), out)?;
        let size = self.info.image_bytes();
        self.normaliser.image(&self.pixels[index * size..(index + 1) * size], out);
        Ok(i64::from(self.labels[index]))
    }
}

/// Rejects labels ≥ `classes`; `first_index` numbers samples within the file for the message.
pub(crate) fn check_labels(
    path: &std::path::Path,
    info: &'static DatasetInfo,
    labels: &[u8],
    first_index: usize,
) -> Result<(), DataError> {
    match labels.iter().position(|&l| l as usize >= info.classes) {
        Some(pos) => Err(DataError::LabelOutOfRange {
            path: path.to_path_buf(),
            dataset: info.name,
            index: first_index + pos,
            label: labels[pos] as usize,
            classes: info.classes,
        }),
        None => Ok(()),
    }
}
