//! The batch loader: a seeded per-epoch permutation shared by all ranks, sharded so that
//! workers see disjoint samples, with batches prepared on a background thread so data
//! loading overlaps the training step instead of adding to it. That thread hands the samples
//! of each batch to the loader's pool (`threads` workers), so JPEG decoding and synthetic
//! generation keep up with a fast device; batches still come out in order, identical for
//! every pool size.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver};
use rayon::ThreadPool;

use crate::pool::{build_pool, enter};
use crate::rng::SplitMix64;
use crate::{Batch, DataError, Dataset};

/// How a [`Loader`] cuts each epoch into batches for one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderConfig {
    /// Samples per batch (per worker).
    pub batch_size: usize,
    /// Permute samples each epoch (training) or keep file order (evaluation).
    pub shuffle: bool,
    /// Seed of the permutation; with the epoch number it fixes the order on every rank.
    pub seed: u64,
    /// Drop the last, smaller batch of each rank instead of yielding it.
    pub drop_last: bool,
    /// This worker's index in `0..world_size`.
    pub rank: usize,
    /// Number of workers sharing the data set.
    pub world_size: usize,
    /// Batches prepared ahead of the consumer (the channel's capacity).
    pub prefetch: usize,
    /// Threads that decode or generate the samples of each batch, at least 1 (then the
    /// background thread does it alone). A trial gives it its share of the cores.
    pub threads: usize,
}

impl LoaderConfig {
    /// A single-worker, shuffling configuration with seed 0, two batches of prefetch and
    /// one loader thread.
    pub fn new(batch_size: usize) -> Self {
        LoaderConfig {
            batch_size,
            shuffle: true,
            seed: 0,
            drop_last: false,
            rank: 0,
            world_size: 1,
            prefetch: 2,
            threads: 1,
        }
    }
}

/// Yields the batches of one rank, epoch by epoch.
pub struct Loader {
    dataset: Arc<dyn Dataset>,
    config: LoaderConfig,
    /// Started once and shared by every epoch's background thread; `None` for one thread.
    pool: Option<Arc<ThreadPool>>,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("dataset", &self.dataset.info().name)
            .field("len", &self.dataset.len())
            .field("config", &self.config)
            .finish()
    }
}

impl Loader {
    /// Checks the configuration (batch size ≥ 1, threads ≥ 1, world size ≥ 1, rank < world
    /// size) and starts the pool of `threads` workers.
    pub fn new(dataset: Arc<dyn Dataset>, config: LoaderConfig) -> Result<Self, DataError> {
        if config.batch_size == 0 {
            return Err(DataError::Config("batch_size must be at least 1".into()));
        }
        if config.threads == 0 {
            return Err(DataError::Config("threads must be at least 1".into()));
        }
        if config.world_size == 0 || config.rank >= config.world_size {
            return Err(DataError::Config(format!(
                "rank {} is not in 0..world_size ({})",
                config.rank, config.world_size
            )));
        }
        let pool = build_pool(config.rank, config.threads)?;
        Ok(Loader { dataset, config, pool })
    }

    /// The configuration this loader was built with.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// The data set batches come from.
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }

    /// Samples each rank sees per epoch: `len / world_size`. The remainder (fewer than
    /// `world_size` samples, a different few each shuffled epoch) is skipped so that every
    /// rank runs the same number of steps and collectives never wait on a missing peer.
    pub fn samples_per_rank(&self) -> usize {
        self.dataset.len() / self.config.world_size
    }

    /// Batches each rank gets per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        let n = self.samples_per_rank();
        if self.config.drop_last {
            n / self.config.batch_size
        } else {
            n.div_ceil(self.config.batch_size)
        }
    }

    /// The sample indices of this rank's batches in `epoch`, without loading anything.
    pub fn epoch_indices(&self, epoch: u64) -> Vec<Vec<usize>> {
        let c = &self.config;
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if c.shuffle {
            // Independent of the rank: every worker computes the same permutation.
            SplitMix64::derived(&[c.seed, epoch, 0x0073_6875_6666_6c65]).shuffle(&mut order);
        }
        let mine: Vec<usize> =
            order.into_iter().skip(c.rank).step_by(c.world_size).take(self.samples_per_rank()).collect();
        mine.chunks(c.batch_size).take(self.batches_per_epoch()).map(<[usize]>::to_vec).collect()
    }

    /// This rank's batches of `epoch`, built on a background thread at most `prefetch`
    /// batches ahead, each batch's samples spread over the loader's pool. Iteration stops
    /// after the first error. Dropping the iterator stops the thread after the batch it is
    /// building.
    pub fn epoch(&self, epoch: u64) -> EpochIter {
        let batches = self.epoch_indices(epoch);
        let remaining = batches.len();
        let (sender, receiver) = bounded(self.config.prefetch);
        let stop = Arc::new(AtomicBool::new(false));
        let dataset = Arc::clone(&self.dataset);
        let thread_stop = Arc::clone(&stop);
        let pool = self.pool.clone();
        let spawned = std::thread::Builder::new().name(format!("loader-{}", self.config.rank)).spawn(move || {
            // `Dataset::batch` finds the pool here; the tensors are still made on this thread.
            enter(pool);
            for indices in batches {
                if thread_stop.load(Ordering::Relaxed) {
                    break;
                }
                let batch = dataset.batch(&indices);
                let failed = batch.is_err();
                // A send error means the iterator was dropped: nobody wants more batches.
                if sender.send(batch).is_err() || failed {
                    break;
                }
            }
        });
        match spawned {
            Ok(worker) => EpochIter { receiver: Some(receiver), stop, worker: Some(worker), remaining, failed: None },
            Err(e) => EpochIter {
                receiver: None,
                stop,
                worker: None,
                remaining: 1,
                failed: Some(DataError::io("<loader thread>", e)),
            },
        }
    }
}

/// Iterator over one epoch's batches; owns the background thread that builds them.
pub struct EpochIter {
    receiver: Option<Receiver<Result<Batch, DataError>>>,
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
    remaining: usize,
    /// Set when the thread could not be started; yielded once.
    failed: Option<DataError>,
}

impl Iterator for EpochIter {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            self.remaining = 0;
            return Some(Err(e));
        }
        let item = self.receiver.as_ref()?.recv().ok();
        match &item {
            Some(Ok(_)) => self.remaining = self.remaining.saturating_sub(1),
            Some(Err(_)) | None => self.remaining = 0,
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

impl Drop for EpochIter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver first wakes a thread blocked on a full channel.
        self.receiver.take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{info, Split, SyntheticDataset};
    use std::collections::HashSet;

    fn loader(len: usize, batch_size: usize, rank: usize, world_size: usize, drop_last: bool) -> Loader {
        let ds = Arc::new(SyntheticDataset::with_len(info("mnist").unwrap(), Split::Train, 0, len));
        let config = LoaderConfig { batch_size, rank, world_size, drop_last, seed: 11, ..LoaderConfig::new(1) };
        Loader::new(ds, config).unwrap()
    }

    #[test]
    fn shards_are_disjoint_equal_and_cover_all_but_the_remainder() {
        for (len, world) in [(100, 4), (103, 4), (10, 3)] {
            let mut seen = HashSet::new();
            let mut counts = Vec::new();
            for rank in 0..world {
                let l = loader(len, 8, rank, world, false);
                let indices: Vec<usize> = l.epoch_indices(2).concat();
                counts.push((l.epoch_indices(2).len(), indices.len()));
                for i in indices {
                    assert!(seen.insert(i), "sample {i} on two ranks");
                }
            }
            assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
            assert_eq!(seen.len(), len - len % world);
        }
    }

    #[test]
    fn order_is_fixed_by_seed_and_epoch() {
        let a = loader(50, 7, 0, 1, false);
        let b = loader(50, 7, 0, 1, false);
        assert_eq!(a.epoch_indices(3), b.epoch_indices(3));
        assert_ne!(a.epoch_indices(3), a.epoch_indices(4));
        let mut sorted = a.epoch_indices(3).concat();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        let unshuffled =
            Loader::new(Arc::clone(a.dataset()), LoaderConfig { shuffle: false, ..a.config().clone() }).unwrap();
        assert_eq!(unshuffled.epoch_indices(0)[0], vec![0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn drop_last_arithmetic() {
        // 103 samples on 2 ranks → 51 each; batch 10 → 5 full batches + 1 of 1.
        let keep = loader(103, 10, 1, 2, false);
        assert_eq!((keep.samples_per_rank(), keep.batches_per_epoch()), (51, 6));
        assert_eq!(keep.epoch_indices(0).last().unwrap().len(), 1);
        let drop = loader(103, 10, 1, 2, true);
        assert_eq!(drop.batches_per_epoch(), 5);
        assert!(drop.epoch_indices(0).iter().all(|b| b.len() == 10));
        assert_eq!(loader(100, 10, 0, 1, true).batches_per_epoch(), 10);
        assert_eq!(loader(3, 10, 0, 4, false).batches_per_epoch(), 0);
    }

    #[test]
    fn background_batches_match_direct_batches() {
        let l = loader(40, 16, 0, 1, false);
        let batches: Vec<Batch> = l.epoch(1).collect::<Result<_, _>>().unwrap();
        assert_eq!(batches.len(), 3);
        for (b, idx) in batches.iter().zip(l.epoch_indices(1)) {
            let direct = l.dataset().batch(&idx).unwrap();
            assert!(b.images.equal(&direct.images) && b.labels.equal(&direct.labels));
        }
        assert_eq!(batches[2].len(), 8);
    }

    #[test]
    fn dropping_the_iterator_stops_the_thread_promptly() {
        let l = loader(60_000, 64, 0, 1, false);
        let start = std::time::Instant::now();
        let mut it = l.epoch(0);
        assert!(it.next().unwrap().is_ok());
        drop(it);
        // 937 batches would take far longer than this if the thread kept going.
        assert!(start.elapsed() < std::time::Duration::from_secs(2), "{:?}", start.elapsed());
    }

    #[test]
    fn bad_configs_are_rejected() {
        let ds: Arc<dyn Dataset> = Arc::new(SyntheticDataset::with_len(info("mnist").unwrap(), Split::Train, 0, 4));
        let bad_rank = LoaderConfig { rank: 2, world_size: 2, ..LoaderConfig::new(2) };
        assert!(matches!(Loader::new(Arc::clone(&ds), bad_rank), Err(DataError::Config(_))));
        assert!(matches!(Loader::new(Arc::clone(&ds), LoaderConfig::new(0)), Err(DataError::Config(_))));
        let no_threads = LoaderConfig { threads: 0, ..LoaderConfig::new(2) };
        let err = Loader::new(ds, no_threads).unwrap_err();
        assert!(matches!(&err, DataError::Config(m) if m.contains("threads")), "{err}");
    }
}
