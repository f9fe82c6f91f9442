//! Samples per second of the loader, per format and per pool size: data loading must cost
//! far less than a training step (a small CNN on 64 MNIST images takes about 2–2.5 ms here;
//! a ResNet step on a GPU a few ms for 32 ImageNet images), or it would starve the device
//! and distort every trial's timing. The consumer does nothing, so what is measured is how
//! fast the background thread and its pool produce batches.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, Rgb, RgbImage};
use stratlab_datasets::{
    info, open, DataCache, Dataset, DatasetSelector, EpochIter, ImageFolderDataset, Loader, LoaderConfig, OpenOptions,
    Split, SyntheticDataset,
};

/// Pool sizes compared: the loader alone, and the two cores of the reference machine.
const THREADS: [usize; 2] = [1, 2];
/// JPEGs in the image-folder benchmark, spread over four class folders.
const FOLDER_IMAGES: usize = 64;
/// Their side: like ImageNet's typical stored size, resized and cropped to 224.
const FOLDER_SIDE: u32 = 256;

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

/// Photo-like JPEGs (smooth gradients plus grain, quality 90) in `<dir>/train/<class>/`:
/// flat colours would decode unrealistically fast, pure noise unrealistically slowly.
fn jpeg_folder(dir: &Path) -> Arc<dyn Dataset> {
    let split = dir.join("train");
    let mut grain = 0x2545_f491_4f6c_dd1du64;
    for n in 0..FOLDER_IMAGES {
        let class = split.join(format!("class{}", n % 4));
        std::fs::create_dir_all(&class).expect("temp dir");
        let img = RgbImage::from_fn(FOLDER_SIDE, FOLDER_SIDE, |x, y| {
            grain ^= grain << 13;
            grain ^= grain >> 7;
            grain ^= grain << 17;
            let g = (grain & 15) as u32;
            Rgb([(x + g) as u8, (y + 3 * n as u32 + g) as u8, ((x * y) / 256 + g) as u8])
        });
        let file = std::fs::File::create(class.join(format!("{n:03}.jpg"))).expect("temp file");
        DynamicImage::ImageRgb8(img).write_with_encoder(JpegEncoder::new_with_quality(file, 90)).expect("encode");
    }
    Arc::new(ImageFolderDataset::open(&split, &split, info("imagenet").expect("registered")).expect("folder"))
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
    let synthetic = |name: &str| -> Arc<dyn Dataset> {
        Arc::new(SyntheticDataset::new(info(name).expect("registered"), Split::Train, 0))
    };
    let folder = tempfile::tempdir().expect("temp dir");
    let (mnist, mnist_name) = mnist();
    let formats: [(&str, Arc<dyn Dataset>, usize); 4] = [
        (mnist_name, mnist, 64),
        ("cifar10-synthetic", synthetic("cifar10"), 64),
        ("imagenet-synthetic", synthetic("imagenet"), 32),
        ("imagenet-jpeg-folder", jpeg_folder(folder.path()), 32),
    ];
    let mut group = c.benchmark_group("loader");
    for (name, ds, batch_size) in formats {
        // Elements are samples: criterion then reports samples/s.
        group.throughput(Throughput::Elements(batch_size as u64));
        for threads in THREADS {
            let config = LoaderConfig { prefetch: 4, threads, ..LoaderConfig::new(batch_size) };
            let loader = Loader::new(Arc::clone(&ds), config).expect("config");
            let mut feed = Feed { loader: &loader, epoch: 0, batches: loader.epoch(0) };
            let id = BenchmarkId::new(format!("{name}/batch{batch_size}"), format!("threads{threads}"));
            group.bench_function(id, |b| b.iter_custom(|iters| feed.pull(iters)));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Eight benchmarks in about a minute and a half: batches take 0.1–100 ms, and ten
    // samples over three seconds already give a few percent of spread.
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_loaders
}
criterion_main!(benches);
