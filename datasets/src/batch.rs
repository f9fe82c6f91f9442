//! What every data set hands the trainer: a normalised f32 image batch and its labels, and
//! the small trait all sources (real files, image folders, synthetic twins) implement.

use tch::{Device, Tensor};

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
/// background thread, and for the samples of a batch from its pool's threads, hence
/// `Send + Sync`.
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
    ///
    /// The crate's data sets implement this as [`build_batch`](crate::build_batch), which
    /// spreads the samples over the loader's pool when called from a loader's prefetch
    /// thread. It stays the loader's one entry point so that wrappers (a fault injector that
    /// poisons whole batches, say) need only override it.
    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError>;

    /// Writes sample `index`, normalised, as C×H×W planes into `out` (exactly
    /// `info().image_bytes()` floats) and returns its label; an index ≥ `len()` is an error.
    ///
    /// It runs on the loader's pool threads, several at once, so it must not call tch ops
    /// (see the loader's notes on OpenMP) and must depend on `index` alone: that is what
    /// makes a batch identical whatever the pool size. The default goes through a one-sample
    /// [`batch`](Dataset::batch), tensors included; it exists so that wrappers which only
    /// override `batch` stay valid `Dataset`s, and every data set of this crate overrides it.
    fn sample_into(&self, index: usize, out: &mut [f32]) -> Result<i64, DataError> {
        let batch = self.batch(&[index])?;
        batch.images.f_copy_data(out, out.len())?;
        Ok(batch.labels.f_int64_value(&[0])?)
    }
}

/// Rejects indices past the end, so every `Dataset` reports them the same way.
pub(crate) fn check_indices(info: &'static DatasetInfo, indices: &[usize], len: usize) -> Result<(), DataError> {
    match indices.iter().find(|&&i| i >= len) {
        Some(&index) => Err(DataError::IndexOutOfRange { dataset: info.name, index, len }),
        None => Ok(()),
    }
}

/// The checks every `sample_into` starts with: the index is in range (an error, it may come
/// from a caller's data) and `out` has the sample's size (a bug in the caller, hence a panic).
pub(crate) fn check_sample(info: &'static DatasetInfo, index: usize, len: usize, out: &[f32]) -> Result<(), DataError> {
    assert_eq!(out.len(), info.image_bytes(), "{}: sample buffer of the wrong size", info.name);
    check_indices(info, &[index], len)
}

/// A fresh CPU tensor of `shape`, its elements written by `fill` straight into its storage,
/// and what `fill` returns. `fill` may hand the slice to the loader's pool: those threads
/// only write plain memory, while the tch call (`empty`, an allocation without kernels or
/// OpenMP) stays on this thread. Not `Tensor::from_slice` from a finished buffer: that
/// zero-fills with a parallel `torch::zeros` first, which starts an OpenMP team on this
/// thread whose spinning fought the trainer's (milliseconds for a 64-image MNIST batch on a
/// busy 2-core machine), and the extra copy of a 19 MB ImageNet batch cost ~10 ms alone.
pub(crate) fn fill_tensor<T: tch::kind::Element, R>(
    shape: &[i64],
    fill: impl FnOnce(&mut [T]) -> R,
) -> Result<(Tensor, R), DataError> {
    let tensor = Tensor::f_empty(shape, (T::KIND, Device::Cpu))?;
    let len = shape.iter().product::<i64>() as usize;
    let result = if len == 0 {
        fill(&mut [])
    } else {
        // SAFETY: `tensor` was just allocated: contiguous, on the CPU, of element type `T`,
        // with `len` elements, and no other handle to its storage exists. The slice is the
        // only access to that storage until it is dropped, before `tensor` is used again.
        fill(unsafe { std::slice::from_raw_parts_mut(tensor.data_ptr().cast::<T>(), len) })
    };
    Ok((tensor, result))
}

/// Converts u8 pixels to normalised f32, `(x/255 − mean[c]) / std[c]`, through one
/// 256-entry table per channel. Done in plain Rust on purpose: batches are built on the
/// loader's background threads while the training step runs, and tch ops called from another
/// thread start another OpenMP team that spins against the trainer's on a 2-core machine
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
