//! CIFAR binary batches: fixed-size records of label byte(s) then 3072 pixel bytes (R, G and
//! B planes of 32×32, already the C×H×W layout tch wants). CIFAR-100 records carry a coarse
//! and a fine label byte; we train on the fine (100-class) label.

use std::path::{Path, PathBuf};

use crate::bytes::{read_maybe_gzip, ByteReader};
use crate::memory_dataset::check_labels;
use crate::{DataError, DatasetInfo, MemoryDataset, Split};

/// The binary batch files of a split, in reading order.
pub(crate) fn cifar_file_names(info: &DatasetInfo, split: Split) -> Vec<String> {
    match (info.name, split) {
        ("cifar100", Split::Train) => vec!["train.bin".into()],
        ("cifar100", Split::Test) => vec!["test.bin".into()],
        (_, Split::Train) => (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
        (_, Split::Test) => vec!["test_batch.bin".into()],
    }
}

/// Folders (under the data set's cache folder) that may hold the batches: the folder itself,
/// or the folder the official tarball unpacks to.
pub(crate) fn cifar_dirs(dir: &Path) -> Vec<PathBuf> {
    vec![dir.to_path_buf(), dir.join("cifar-10-batches-bin"), dir.join("cifar-100-binary")]
}

/// Reads CIFAR-10 (1 label byte) or CIFAR-100 (coarse + fine label bytes) batch files and
/// concatenates them in order.
pub fn load_cifar(files: &[PathBuf], info: &'static DatasetInfo) -> Result<MemoryDataset, DataError> {
    let label_bytes = if info.classes > 10 { 2 } else { 1 };
    let image_bytes = info.image_bytes();
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for path in files {
        let data = read_maybe_gzip(path)?;
        let mut r = ByteReader::new(path, &data);
        let first = labels.len();
        let mut record = 0usize;
        // At least one record per file: an empty batch file is as wrong as a cut one.
        loop {
            let label = r.bytes(label_bytes, &format!("label of record {record}"))?;
            labels.push(label[label_bytes - 1]);
            pixels.extend_from_slice(r.bytes(image_bytes, &format!("pixels of record {record}"))?);
            record += 1;
            if r.remaining() == 0 {
                break;
            }
        }
        check_labels(path, info, &labels[first..], 0)?;
    }
    MemoryDataset::new(info, pixels, labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{info, Dataset};

    /// `n` CIFAR records with labels `i % 10`, all pixels of record i equal to i, and the
    /// red plane of each image at 200 so channel order can be checked.
    fn cifar_records(n: usize, label_bytes: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            out.extend(std::iter::repeat_n((i % 10) as u8, label_bytes));
            out.extend(std::iter::repeat_n(200u8, 1024));
            out.extend(std::iter::repeat_n(i as u8, 2048));
        }
        out
    }

    #[test]
    fn reads_planes_in_rgb_order_and_fine_labels() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("train.bin");
        let mut data = cifar_records(3, 2);
        data[3075] = 42; // the fine label of record 1 (coarse at 3074)
        std::fs::write(&f, data).unwrap();
        let ds = load_cifar(&[f], info("cifar100").unwrap()).unwrap();
        assert_eq!(ds.len(), 3);
        let b = ds.batch(&[1, 2]).unwrap();
        assert_eq!(b.images.size(), vec![2, 3, 32, 32]);
        assert_eq!(Vec::<i64>::try_from(&b.labels).unwrap(), vec![42, 2]);
        let red = b.images.double_value(&[0, 0, 3, 3]);
        assert!((red - (200.0 / 255.0 - 0.5071) / 0.2673).abs() < 1e-5);
        let green = b.images.double_value(&[1, 1, 3, 3]);
        assert!((green - (2.0 / 255.0 - 0.4865) / 0.2564).abs() < 1e-5);
    }
}
