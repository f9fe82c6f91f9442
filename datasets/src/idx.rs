//! IDX files (MNIST, Fashion-MNIST): big-endian header — magic 2051 for images (count, rows,
//! cols) or 2049 for labels (count) — then one byte per pixel or label; raw or gzipped.

use std::path::{Path, PathBuf};

use crate::bytes::{read_maybe_gzip, ByteReader};
use crate::memory_dataset::check_labels;
use crate::{DataError, DatasetInfo, MemoryDataset, Split};

/// Magic number of an IDX image file (unsigned bytes, 3 dimensions).
pub const IDX_IMAGES_MAGIC: u32 = 2051;
/// Magic number of an IDX label file (unsigned bytes, 1 dimension).
pub const IDX_LABELS_MAGIC: u32 = 2049;

/// Standard file names (without `.gz`) of a split: (images, labels).
pub(crate) fn idx_file_names(split: Split) -> (&'static str, &'static str) {
    match split {
        Split::Train => ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        Split::Test => ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }
}

/// `dir/base` or `dir/base.gz`, whichever exists (compression is still detected by content).
pub(crate) fn find_idx_file(dir: &Path, base: &str) -> Option<PathBuf> {
    [dir.join(base), dir.join(format!("{base}.gz"))].into_iter().find(|p| p.is_file())
}

/// Reads an image/label file pair into memory, checking magic numbers, lengths, image size
/// against `info`, label range and that both files hold the same number of samples.
pub fn load_idx(images: &Path, labels: &Path, info: &'static DatasetInfo) -> Result<MemoryDataset, DataError> {
    let image_bytes = read_maybe_gzip(images)?;
    let mut img = ByteReader::new(images, &image_bytes);
    img.magic(IDX_IMAGES_MAGIC)?;
    let image_count = img.u32_be("image count")? as usize;
    let rows = img.u32_be("row count")? as usize;
    let cols = img.u32_be("column count")? as usize;
    if (rows, cols) != (info.height, info.width) || info.channels != 1 {
        return Err(DataError::WrongShape {
            path: img.path(),
            dataset: info.name,
            rows: info.height,
            cols: info.width,
            found_rows: rows,
            found_cols: cols,
        });
    }

    let label_bytes = read_maybe_gzip(labels)?;
    let mut lab = ByteReader::new(labels, &label_bytes);
    lab.magic(IDX_LABELS_MAGIC)?;
    let label_count = lab.u32_be("label count")? as usize;
    if label_count != image_count {
        return Err(DataError::CountMismatch {
            images: images.to_path_buf(),
            image_count,
            labels: labels.to_path_buf(),
            label_count,
        });
    }

    let pixel_len = image_count.saturating_mul(rows * cols);
    let pixels = img.bytes(pixel_len, &format!("pixels of {image_count} images of {rows}×{cols}"))?;
    let label_values = lab.bytes(label_count, &format!("{label_count} labels"))?;
    check_labels(labels, info, label_values, 0)?;
    MemoryDataset::new(info, pixels.to_vec(), label_values.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{info, Dataset};

    /// An IDX image file of `count` images of `rows×cols`, pixel value = image index.
    fn idx_images(count: u32, rows: u32, cols: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [IDX_IMAGES_MAGIC, count, rows, cols] {
            out.extend(v.to_be_bytes());
        }
        for i in 0..count {
            out.extend(std::iter::repeat_n(i as u8, (rows * cols) as usize));
        }
        out
    }

    /// An IDX label file holding `labels`.
    fn idx_labels(labels: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(IDX_LABELS_MAGIC.to_be_bytes());
        out.extend((labels.len() as u32).to_be_bytes());
        out.extend(labels);
        out
    }

    #[test]
    fn reads_small_files_and_normalises() {
        let dir = tempfile::tempdir().unwrap();
        let (i, l) = (dir.path().join("i"), dir.path().join("l"));
        std::fs::write(&i, idx_images(3, 28, 28)).unwrap();
        std::fs::write(&l, idx_labels(&[5, 0, 4])).unwrap();
        let mnist = info("mnist").unwrap();
        let ds = load_idx(&i, &l, mnist).unwrap();
        assert_eq!(ds.len(), 3);
        let b = ds.batch(&[2, 0]).unwrap();
        assert_eq!(b.images.size(), vec![2, 1, 28, 28]);
        assert_eq!(Vec::<i64>::try_from(&b.labels).unwrap(), vec![4, 5]);
        // Pixel value 2 of image 2, normalised with MNIST's mean and std.
        let v = b.images.double_value(&[0, 0, 5, 5]);
        let want = (2.0 / 255.0 - 0.1307) / 0.3081;
        assert!((v - want).abs() < 1e-5, "{v} vs {want}");
        assert!((b.images.double_value(&[1, 0, 0, 0]) - (-0.1307 / 0.3081)).abs() < 1e-5);
    }
}
