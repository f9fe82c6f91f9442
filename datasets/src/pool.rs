//! The loader's worker pool and the one batch builder all data sets share. The samples of a
//! batch are written into disjoint slots of the batch tensor's storage, each from its index
//! alone, so the batch is bit-identical whatever the pool size; the tensor itself is only
//! allocated and wrapped by the thread that asked for the batch, never by pool threads.

use std::cell::RefCell;
use std::sync::Arc;

use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::batch::{check_indices, fill_tensor};
use crate::{Batch, DataError, Dataset};

thread_local! {
    /// The pool of the loader whose prefetch thread this is; `None` on every other thread.
    /// A thread-local rather than an argument so that [`Dataset::batch`] keeps its signature:
    /// wrappers that override it (fault injection) still sit between loader and data set.
    static CURRENT: RefCell<Option<Arc<ThreadPool>>> = const { RefCell::new(None) };
}

/// The pool of a loader with `threads` workers, named `loader-<rank>-<i>` so that profiles
/// and `top -H` tell them apart. One thread needs no pool: the prefetch thread builds the
/// batch itself, as before pools existed.
pub(crate) fn build_pool(rank: usize, threads: usize) -> Result<Option<Arc<ThreadPool>>, DataError> {
    if threads <= 1 {
        return Ok(None);
    }
    ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("loader-{rank}-{i}"))
        .build()
        .map(|pool| Some(Arc::new(pool)))
        .map_err(|e| DataError::Config(format!("threads: cannot start {threads} loader threads: {e}")))
}

/// Makes `pool` the one [`build_batch`] uses on this thread (the loader's prefetch thread).
pub(crate) fn enter(pool: Option<Arc<ThreadPool>>) {
    CURRENT.with(|current| *current.borrow_mut() = pool);
}

/// Builds the batch of `indices` from [`Dataset::sample_into`]: on the loader's pool when
/// called from a loader's prefetch thread, one sample after another on any other thread.
///
/// Samples keep their order and are computed from their index alone, so the batch does not
/// depend on the pool size. When samples fail (a corrupt JPEG), the error returned is that of
/// the first failing sample in batch order, again whatever the pool size.
pub fn build_batch<D: Dataset + ?Sized>(dataset: &D, indices: &[usize]) -> Result<Batch, DataError> {
    let info = dataset.info();
    check_indices(info, indices, dataset.len())?;
    let size = info.image_bytes();
    let [c, h, w] = info.sample_shape();
    let sample = |(out, &index): (&mut [f32], &usize)| dataset.sample_into(index, out);
    let pool = CURRENT.with(|current| current.borrow().clone());
    let (images, labels) = fill_tensor(&[indices.len() as i64, c, h, w], |buffer: &mut [f32]| match pool {
        Some(pool) => {
            // Collected whole, errors included: rayon's own `Result` collection returns an
            // arbitrary error when several samples fail, and a failed batch ends the epoch, so
            // the samples computed after a failure are not worth an early exit.
            let results: Vec<Result<i64, DataError>> =
                pool.install(|| buffer.par_chunks_mut(size).zip(indices).map(sample).collect());
            results.into_iter().collect::<Result<Vec<i64>, _>>()
        }
        None => buffer.chunks_exact_mut(size).zip(indices).map(sample).collect(),
    })?;
    let labels = labels?;
    let (labels, ()) = fill_tensor(&[labels.len() as i64], |out: &mut [i64]| out.copy_from_slice(&labels))?;
    Ok(Batch { images, labels })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{info, Split, SyntheticDataset};

    fn bits(batch: &Batch) -> (Vec<u32>, Vec<i64>) {
        let images = Vec::<f32>::try_from(batch.images.flatten(0, -1)).unwrap();
        (images.iter().map(|x| x.to_bits()).collect(), Vec::<i64>::try_from(&batch.labels).unwrap())
    }

    #[test]
    fn pool_and_inline_batches_are_bit_identical() {
        let ds = SyntheticDataset::with_len(info("cifar10").unwrap(), Split::Train, 5, 50);
        let indices = [7, 3, 49, 0, 3, 21, 8];
        let inline = bits(&build_batch(&ds, &indices).unwrap());
        for threads in [2, 3] {
            let pool = build_pool(0, threads).unwrap();
            assert!(pool.is_some());
            enter(pool);
            let pooled = bits(&build_batch(&ds, &indices).unwrap());
            enter(None);
            assert!(pooled == inline, "{threads} threads");
        }
    }

    #[test]
    fn a_single_thread_needs_no_pool() {
        assert!(build_pool(0, 1).unwrap().is_none());
    }

    #[test]
    fn out_of_range_indices_are_rejected_before_any_work() {
        let ds = SyntheticDataset::with_len(info("mnist").unwrap(), Split::Test, 0, 4);
        assert!(matches!(build_batch(&ds, &[1, 4]), Err(DataError::IndexOutOfRange { index: 4, len: 4, .. })));
        let mut out = vec![0f32; 784];
        assert!(matches!(ds.sample_into(9, &mut out), Err(DataError::IndexOutOfRange { index: 9, .. })));
    }
}
