//! The registry: one static description per data set (thesis tables 3.2 and 3.3), so that
//! every crate agrees on shapes, sizes, batch sizes and accuracy targets.

use crate::{DataError, Split};

/// Static facts about one data set: shape, size, per-worker batch sizes, default accuracy
/// target and normalisation constants.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetInfo {
    /// Registry name, as written in suites (`mnist`, `cifar10`, …).
    pub name: &'static str,
    /// Number of classes; labels lie in `0..classes`.
    pub classes: usize,
    /// Colour channels of one image (1 grey, 3 RGB).
    pub channels: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Image width in pixels.
    pub width: usize,
    /// Training samples of the real data set (and of its synthetic twin).
    pub train_len: usize,
    /// Test samples of the real data set (and of its synthetic twin).
    pub test_len: usize,
    /// Per-worker batch for single and data-parallel training (the thesis's table 3.3).
    pub batch_size: usize,
    /// Per-pipeline batch for GPipe (the thesis's table 3.3).
    pub gpipe_batch: usize,
    /// Micro-batches the GPipe batch is split into (the thesis's table 3.3).
    pub gpipe_micro_batches: usize,
    /// Default test accuracy that ends time-to-accuracy; callers may override it.
    pub target_accuracy: f64,
    /// Per-channel mean of pixel values in `[0, 1]`, subtracted when batching.
    pub mean: &'static [f32],
    /// Per-channel standard deviation of pixel values in `[0, 1]`, divided by when batching.
    pub std: &'static [f32],
    /// True when no real files exist (highres): only `name:synthetic` can be opened.
    pub synthetic_only: bool,
}

impl DatasetInfo {
    /// Number of samples in `split`.
    pub fn len(&self, split: Split) -> usize {
        match split {
            Split::Train => self.train_len,
            Split::Test => self.test_len,
        }
    }

    /// Bytes of one image at one byte per channel and pixel.
    pub fn image_bytes(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// Shape of one sample, `[C, H, W]`, as tch wants it.
    pub fn sample_shape(&self) -> [i64; 3] {
        [self.channels as i64, self.height as i64, self.width as i64]
    }
}

const IMAGENET_MEAN: &[f32] = &[0.485, 0.456, 0.406];
const IMAGENET_STD: &[f32] = &[0.229, 0.224, 0.225];

static REGISTRY: [DatasetInfo; 6] = [
    DatasetInfo {
        name: "mnist",
        classes: 10,
        channels: 1,
        height: 28,
        width: 28,
        train_len: 60_000,
        test_len: 10_000,
        batch_size: 128,
        gpipe_batch: 3072,
        gpipe_micro_batches: 24,
        target_accuracy: 0.98,
        mean: &[0.1307],
        std: &[0.3081],
        synthetic_only: false,
    },
    // The thesis has no Fashion-MNIST row in table 3.3; it is MNIST's drop-in twin.
    DatasetInfo {
        name: "fashion-mnist",
        classes: 10,
        channels: 1,
        height: 28,
        width: 28,
        train_len: 60_000,
        test_len: 10_000,
        batch_size: 128,
        gpipe_batch: 3072,
        gpipe_micro_batches: 24,
        target_accuracy: 0.85,
        mean: &[0.2860],
        std: &[0.3530],
        synthetic_only: false,
    },
    DatasetInfo {
        name: "cifar10",
        classes: 10,
        channels: 3,
        height: 32,
        width: 32,
        train_len: 50_000,
        test_len: 10_000,
        batch_size: 64,
        gpipe_batch: 2048,
        gpipe_micro_batches: 32,
        target_accuracy: 0.80,
        mean: &[0.4914, 0.4822, 0.4465],
        std: &[0.2470, 0.2435, 0.2616],
        synthetic_only: false,
    },
    // Same shapes as CIFAR-10, so it takes CIFAR-10's batch sizes.
    DatasetInfo {
        name: "cifar100",
        classes: 100,
        channels: 3,
        height: 32,
        width: 32,
        train_len: 50_000,
        test_len: 10_000,
        batch_size: 64,
        gpipe_batch: 2048,
        gpipe_micro_batches: 32,
        target_accuracy: 0.50,
        mean: &[0.5071, 0.4865, 0.4409],
        std: &[0.2673, 0.2564, 0.2762],
        synthetic_only: false,
    },
    DatasetInfo {
        name: "imagenet",
        classes: 1000,
        channels: 3,
        height: 224,
        width: 224,
        train_len: 1_281_167,
        test_len: 50_000,
        batch_size: 32,
        gpipe_batch: 384,
        gpipe_micro_batches: 12,
        target_accuracy: 0.70,
        mean: IMAGENET_MEAN,
        std: IMAGENET_STD,
        synthetic_only: false,
    },
    // The thesis gives no test split; 10,000 keeps evaluation at a sixth of an epoch.
    DatasetInfo {
        name: "highres",
        classes: 1000,
        channels: 3,
        height: 512,
        width: 512,
        train_len: 60_000,
        test_len: 10_000,
        batch_size: 32,
        gpipe_batch: 48,
        gpipe_micro_batches: 12,
        target_accuracy: 0.50,
        mean: IMAGENET_MEAN,
        std: IMAGENET_STD,
        synthetic_only: true,
    },
];

static NAMES: [&str; 6] = ["mnist", "fashion-mnist", "cifar10", "cifar100", "imagenet", "highres"];

/// Names of all registered data sets, in registry order.
pub fn dataset_names() -> &'static [&'static str] {
    &NAMES
}

/// Looks a data set up by name; an unknown name is an error listing the valid ones.
pub fn info(name: &str) -> Result<&'static DatasetInfo, DataError> {
    REGISTRY
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| DataError::UnknownDataset { name: name.to_string(), valid: NAMES.join(", ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_table_agree() {
        assert_eq!(dataset_names().len(), REGISTRY.len());
        for (name, entry) in dataset_names().iter().zip(REGISTRY.iter()) {
            assert_eq!(*name, entry.name);
            assert_eq!(entry.mean.len(), entry.channels);
            assert_eq!(entry.std.len(), entry.channels);
            assert_eq!(entry.gpipe_batch % entry.gpipe_micro_batches, 0, "{name}");
        }
    }

    #[test]
    fn spec_batch_sizes_and_targets() {
        let mnist = info("mnist").unwrap();
        assert_eq!((mnist.batch_size, mnist.gpipe_batch, mnist.gpipe_micro_batches), (128, 3072, 24));
        assert_eq!(mnist.target_accuracy, 0.98);
        let highres = info("highres").unwrap();
        assert_eq!((highres.train_len, highres.test_len, highres.height), (60_000, 10_000, 512));
        assert_eq!(info("imagenet").unwrap().train_len, 1_281_167);
        assert_eq!(info("cifar100").unwrap().classes, 100);
    }

    #[test]
    fn unknown_name_lists_valid_names() {
        let err = info("svhn").unwrap_err();
        assert!(matches!(err, DataError::UnknownDataset { .. }));
        let msg = err.to_string();
        assert!(msg.contains("svhn") && msg.contains("mnist, fashion-mnist, cifar10"), "{msg}");
    }
}
