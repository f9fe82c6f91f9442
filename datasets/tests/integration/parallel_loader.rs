//! The loader's pool changes how fast batches come, never which: for every pool size the
//! batches of a seed are bit-identical and in order, and a bad image still ends the epoch
//! with the error naming it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, Rgb, RgbImage};
use stratlab_datasets::{
    build_batch, info, Batch, DataError, Dataset, DatasetInfo, ImageFolderDataset, Loader, LoaderConfig, Source, Split,
    SyntheticDataset,
};

const POOL_SIZES: [usize; 3] = [1, 2, 3];

/// Image bits and labels of a batch: `equal` on f32 would accept 0.0 == -0.0.
fn bits(batch: &Batch) -> (Vec<u32>, Vec<i64>) {
    let images = Vec::<f32>::try_from(batch.images.flatten(0, -1)).unwrap();
    (images.iter().map(|x| x.to_bits()).collect(), Vec::<i64>::try_from(&batch.labels).unwrap())
}

fn loader(dataset: Arc<dyn Dataset>, batch_size: usize, shuffle: bool, threads: usize) -> Loader {
    let config = LoaderConfig { shuffle, seed: 17, threads, ..LoaderConfig::new(batch_size) };
    Loader::new(dataset, config).unwrap()
}

/// Every batch of `epochs`, as bits, through a loader with `threads` workers.
fn all_batches(dataset: &Arc<dyn Dataset>, batch_size: usize, threads: usize) -> Vec<(Vec<u32>, Vec<i64>)> {
    let l = loader(Arc::clone(dataset), batch_size, true, threads);
    (0..2).flat_map(|epoch| l.epoch(epoch).map(|b| bits(&b.unwrap())).collect::<Vec<_>>()).collect()
}

/// The batches of two epochs are bit-identical for every pool size and equal, batch by batch,
/// to the batches of `epoch_indices` built directly (in order, on the test thread).
fn assert_pool_size_invariant(dataset: Arc<dyn Dataset>, batch_size: usize) {
    let reference = loader(Arc::clone(&dataset), batch_size, true, 1);
    let direct: Vec<_> = (0..2)
        .flat_map(|epoch| reference.epoch_indices(epoch))
        .map(|indices| bits(&dataset.batch(&indices).unwrap()))
        .collect();
    assert!(direct.len() >= 4);
    for threads in POOL_SIZES {
        assert!(all_batches(&dataset, batch_size, threads) == direct, "{threads} threads differ");
    }
}

#[test]
fn synthetic_cifar10_batches_are_identical_for_every_pool_size() {
    let ds: Arc<dyn Dataset> = Arc::new(SyntheticDataset::with_len(info("cifar10").unwrap(), Split::Train, 3, 100));
    assert_pool_size_invariant(Arc::clone(&ds), 16);
    // In order: the labels are those of the shuffled indices, batch by batch.
    let l = loader(Arc::clone(&ds), 16, true, 3);
    let synthetic = SyntheticDataset::with_len(info("cifar10").unwrap(), Split::Train, 3, 100);
    for (batch, indices) in l.epoch(4).zip(l.epoch_indices(4)) {
        let labels = Vec::<i64>::try_from(&batch.unwrap().labels).unwrap();
        assert_eq!(labels, indices.iter().map(|&i| synthetic.label(i) as i64).collect::<Vec<_>>());
    }
}

/// `<root>/train/<class>/<n>.{jpg,png}`: JPEGs and PNGs of several sizes and contents, so a
/// sample mixed up with another or decoded differently would show.
fn write_image_folder(root: &Path, per_class: usize) -> PathBuf {
    let split = root.join("train");
    for (c, class) in ["cat", "dog", "emu"].iter().enumerate() {
        let dir = split.join(class);
        std::fs::create_dir_all(&dir).unwrap();
        for n in 0..per_class {
            let (w, h) = (24 + 8 * n as u32, 40 - 4 * c as u32);
            let img =
                RgbImage::from_fn(w, h, |x, y| Rgb([(x * 9) as u8, (y * 5 + 40 * c as u32) as u8, (n * 50) as u8]));
            if n % 2 == 0 {
                let file = std::fs::File::create(dir.join(format!("{n}.jpg"))).unwrap();
                DynamicImage::ImageRgb8(img).write_with_encoder(JpegEncoder::new_with_quality(file, 90)).unwrap();
            } else {
                img.save(dir.join(format!("{n}.png"))).unwrap();
            }
        }
    }
    split
}

fn image_folder(split: &Path) -> Arc<dyn Dataset> {
    Arc::new(ImageFolderDataset::open(split, split, info("imagenet").unwrap()).unwrap())
}

#[test]
fn image_folder_batches_are_identical_for_every_pool_size() {
    let root = tempfile::tempdir().unwrap();
    let ds = image_folder(&write_image_folder(root.path(), 5));
    assert_eq!(ds.len(), 15);
    assert_pool_size_invariant(Arc::clone(&ds), 4);
    // Unshuffled, labels follow the sorted class folders.
    let labels: Vec<i64> =
        loader(ds, 4, false, 2).epoch(0).flat_map(|b| Vec::<i64>::try_from(&b.unwrap().labels).unwrap()).collect();
    assert_eq!(labels, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]);
}

#[test]
fn unreadable_image_ends_the_epoch_with_its_path_for_every_pool_size() {
    let root = tempfile::tempdir().unwrap();
    let split = write_image_folder(root.path(), 3);
    // Sorted order: cat/0 cat/1 cat/2 dog/0 dog/1 dog/2 …; with batches of 4, the second
    // batch (dog/1 … emu/1) holds two corrupt files, and the first in batch order must win.
    let first_bad = split.join("dog/2.jpg");
    std::fs::write(&first_bad, b"not a jpeg at all").unwrap();
    std::fs::write(split.join("emu/1.png"), b"\x89PNG but truncated").unwrap();
    let ds = image_folder(&split);
    for threads in POOL_SIZES {
        let mut batches = loader(Arc::clone(&ds), 4, false, threads).epoch(0);
        assert!(batches.next().unwrap().is_ok(), "{threads} threads");
        match batches.next().unwrap() {
            Err(DataError::UnreadableImage { path, .. }) => assert_eq!(path, first_bad, "{threads} threads"),
            other => panic!("{threads} threads: expected UnreadableImage, got {other:?}"),
        }
        assert!(batches.next().is_none(), "{threads} threads: iteration must stop after an error");
    }
}

#[test]
fn zero_threads_is_rejected_naming_the_field() {
    let ds: Arc<dyn Dataset> = Arc::new(SyntheticDataset::with_len(info("mnist").unwrap(), Split::Train, 0, 8));
    let err = Loader::new(ds, LoaderConfig { threads: 0, ..LoaderConfig::new(4) }).unwrap_err();
    assert!(matches!(&err, DataError::Config(m) if m.contains("threads")), "{err}");
}

/// Records which threads generate samples; otherwise a synthetic MNIST.
struct Spy {
    inner: SyntheticDataset,
    threads: Mutex<Vec<String>>,
}

impl Dataset for Spy {
    fn info(&self) -> &'static DatasetInfo {
        self.inner.info()
    }
    fn source(&self) -> Source {
        self.inner.source()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError> {
        build_batch(self, indices)
    }
    fn sample_into(&self, index: usize, out: &mut [f32]) -> Result<i64, DataError> {
        let name = std::thread::current().name().unwrap_or("<unnamed>").to_owned();
        self.threads.lock().unwrap().push(name);
        self.inner.sample_into(index, out)
    }
}

#[test]
fn samples_are_made_on_the_named_pool_threads() {
    for (threads, rank, prefix) in [(1, 0, "loader-0"), (2, 1, "loader-1-"), (3, 0, "loader-0-")] {
        let spy = Arc::new(Spy {
            inner: SyntheticDataset::with_len(info("mnist").unwrap(), Split::Train, 0, 256),
            threads: Mutex::new(Vec::new()),
        });
        let config = LoaderConfig { threads, rank, world_size: 2, ..LoaderConfig::new(32) };
        let l = Loader::new(Arc::clone(&spy) as Arc<dyn Dataset>, config).unwrap();
        assert_eq!(l.epoch(0).map(Result::unwrap).count(), 4);
        let seen = spy.threads.lock().unwrap();
        assert_eq!(seen.len(), 128);
        assert!(seen.iter().all(|n| n.starts_with(prefix) && (threads > 1 || n == prefix)), "{threads}: {seen:?}");
    }
}

/// Overrides `batch` only, like a fault injector: loaders must still call it, and the
/// default `sample_into` must still give the inner data set's samples.
struct Negated(Arc<dyn Dataset>);

impl Dataset for Negated {
    fn info(&self) -> &'static DatasetInfo {
        self.0.info()
    }
    fn source(&self) -> Source {
        self.0.source()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError> {
        let batch = self.0.batch(indices)?;
        Ok(Batch { images: -batch.images, labels: batch.labels })
    }
}

#[test]
fn wrappers_that_override_batch_only_keep_working() {
    let inner: Arc<dyn Dataset> = Arc::new(SyntheticDataset::with_len(info("mnist").unwrap(), Split::Test, 2, 40));
    let wrapped: Arc<dyn Dataset> = Arc::new(Negated(Arc::clone(&inner)));
    let l = loader(Arc::clone(&wrapped), 8, true, 2);
    for (batch, indices) in l.epoch(0).zip(l.epoch_indices(0)) {
        let expected = inner.batch(&indices).unwrap();
        assert!(batch.unwrap().images.equal(&-expected.images));
    }
    let mut sample = vec![0f32; 784];
    assert_eq!(wrapped.sample_into(9, &mut sample).unwrap(), inner.batch(&[9]).unwrap().labels.int64_value(&[0]));
    let expected = Vec::<f32>::try_from(-inner.batch(&[9]).unwrap().images.flatten(0, -1)).unwrap();
    assert_eq!(sample, expected);
}
