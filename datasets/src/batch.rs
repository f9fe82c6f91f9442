//! What every data set hands the trainer: a normalised f32 image batch and its labels, and
//! the small trait all sources (real files, image folders, synthetic twins) implement.

use tch::Tensor;

use crate::{DataError, DatasetInfo, Source};

/// One batch, on the CPU: strategies move it to their device themselves.
#[derive(Debug)]
pub struct Batch {
    /// f32 `N×C×H×W`, normalised with the data set's per-channel mean and std.
    pub images: Tensor,
    /// i64 `N`, class indices in `0..classes`.
    pub labels: Tensor,
}

impl Batch {
    /// Number of samples in the batch.
    pub fn len(&self) -> usize {
        self.labels.size().first().copied().unwrap_or(0) as usize
    }

    /// True for a batch without samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A random-access data set: the loader asks it for batches by sample index from a
/// background thread, hence `Send + Sync`.
pub trait Dataset: Send + Sync {
    /// The registry entry (shape, classes, normalisation).
    fn info(&self) -> &'static DatasetInfo;
    /// Real files or synthetic twin.
    fn source(&self) -> Source;
    /// Number of samples in this split.
    fn len(&self) -> usize;
    /// True when the split has no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The samples at `indices`, in that order; an index ≥ `len()` is an error.
    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError>;
}

/// Rejects indices past the end, so every `Dataset` reports them the same way.
pub(crate) fn check_indices(info: &'static DatasetInfo, indices: &[usize], len: usize) -> Result<(), DataError> {
    match indices.iter().find(|&&i| i >= len) {
        Some(&index) => Err(DataError::IndexOutOfRange { dataset: info.name, index, len }),
        None => Ok(()),
    }
}

/// Converts u8 pixels to normalised f32, `(x/255 − mean[c]) / std[c]`, through one
/// 256-entry table per channel. Done in plain Rust on purpose: batches are built on the
/// loader's background thread while the training step runs, and tch ops called from a second
/// thread start a second OpenMP team that spins against the trainer's on a 2-core machine
/// (measured: 80 % of a synthetic CIFAR batch's time went to libgomp spinning).
#[derive(Clone)]
pub(crate) struct Normaliser {
    info: &'static DatasetInfo,
    tables: Vec<[f32; 256]>,
}

impl std::fmt::Debug for Normaliser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Normaliser({}: mean {:?}, std {:?})", self.info.name, self.info.mean, self.info.std)
    }
}

impl Normaliser {
    /// The tables of `info`'s channels.
    pub(crate) fn new(info: &'static DatasetInfo) -> Self {
        let tables = info
            .mean
            .iter()
            .zip(info.std)
            .map(|(&mean, &std)| std::array::from_fn(|v| (v as f32 / 255.0 - mean) / std))
            .collect();
        Normaliser { info, tables }
    }

    /// Normalises one image given as C planes of H×W bytes into `out` (same length).
    pub(crate) fn image(&self, pixels: &[u8], out: &mut [f32]) {
        let plane = self.info.height * self.info.width;
        for ((table, src), dst) in self.tables.iter().zip(pixels.chunks_exact(plane)).zip(out.chunks_exact_mut(plane)) {
            for (d, &p) in dst.iter_mut().zip(src) {
                *d = table[p as usize];
            }
        }
    }

    /// The table of channel `c`, for generators that produce one pixel at a time.
    pub(crate) fn table(&self, c: usize) -> &[f32; 256] {
        &self.tables[c]
    }

    /// Wraps normalised images (`labels.len()` of them, C×H×W each) and labels as a batch.
    pub(crate) fn batch(&self, images: &[f32], labels: &[i64]) -> Result<Batch, DataError> {
        let [c, h, w] = self.info.sample_shape();
        Ok(Batch {
            images: Tensor::from_slice(images).f_view([labels.len() as i64, c, h, w])?,
            labels: Tensor::from_slice(labels),
        })
    }
}

/// Lets `Arc<dyn Dataset>` appear in `Debug` output and in `Result::unwrap_err`.
impl std::fmt::Debug for dyn Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("name", &self.info().name)
            .field("source", &self.source())
            .field("len", &self.len())
            .finish()
    }
}
