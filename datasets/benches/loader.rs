//! Batches per second of the loader: data loading must cost far less than a training step
//! (a small CNN on 64 MNIST images takes about 2–2.5 ms here), or it would distort every
//! trial's timing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stratlab_datasets::{
    open, DataCache, Dataset, DatasetSelector, EpochIter, Loader, LoaderConfig, OpenOptions, Split,
};

const BATCH: usize = 64;

/// Real MNIST when the cache holds it (never fetched from a benchmark), else its twin.
fn mnist() -> (Arc<dyn Dataset>, &'static str) {
    let options = OpenOptions { seed: 0, allow_fetch: false };
    let cache = DataCache::from_env();
    let real = DatasetSelector::real("mnist").expect("registered");
    match open(&real, Split::Train, &cache, &options) {
        Ok(ds) => (ds, "mnist-real"),
        Err(_) => {
            let synthetic = DatasetSelector::synthetic("mnist").expect("registered");
            (open(&synthetic, Split::Train, &cache, &options).expect("synthetic always opens"), "mnist-synthetic")
        }
    }
}

/// Steady-state batches from the background loader: one epoch iterator is kept across
/// criterion's calls and replaced by the next epoch's when it runs out.
struct Feed<'a> {
    loader: &'a Loader,
    epoch: u64,
    batches: EpochIter,
}

impl Feed<'_> {
    fn pull(&mut self, iters: u64) -> Duration {
        let start = Instant::now();
        for _ in 0..iters {
            let batch = match self.batches.next() {
                Some(batch) => batch,
                None => {
                    self.epoch += 1;
                    self.batches = self.loader.epoch(self.epoch);
                    self.batches.next().expect("a non-empty epoch")
                }
            };
            std::hint::black_box(batch.expect("batch"));
        }
        start.elapsed()
    }
}

fn bench_loaders(c: &mut Criterion) {
    let cifar = DatasetSelector::synthetic("cifar10").expect("registered");
    let cifar = open(&cifar, Split::Train, &DataCache::from_env(), &OpenOptions::default()).expect("synthetic");
    let (mnist, mnist_name) = mnist();
    let mut group = c.benchmark_group("loader_cpu_batch64");
    group.throughput(Throughput::Elements(1)); // elements = batches
    for (name, ds) in [(mnist_name, mnist), ("cifar10-synthetic", cifar)] {
        let config = LoaderConfig { prefetch: 4, ..LoaderConfig::new(BATCH) };
        let loader = Loader::new(Arc::clone(&ds), config).expect("config");
        let mut feed = Feed { loader: &loader, epoch: 0, batches: loader.epoch(0) };
        group.bench_function(format!("{name}/loader"), |b| b.iter_custom(|iters| feed.pull(iters)));
        // The same batches built inline: the cost the background thread hides.
        let indices = loader.epoch_indices(0);
        group.bench_function(format!("{name}/batch"), |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % indices.len();
                std::hint::black_box(ds.batch(&indices[k]).expect("batch"))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_loaders);
criterion_main!(benches);
