//! Every malformed input becomes a typed error naming the offending file and what is wrong.
//! Files are crafted small in temporary folders and read through the public `open`.

use std::io::Write;
use std::path::{Path, PathBuf};

use stratlab_datasets::{
    info, open, DataCache, DataError, Dataset, DatasetSelector, OpenOptions, Split, IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC,
};

const NO_FETCH: OpenOptions = OpenOptions { seed: 0, allow_fetch: false };

fn idx_images(count: u32, rows: u32, cols: u32, pixels: usize) -> Vec<u8> {
    let mut out: Vec<u8> = [IDX_IMAGES_MAGIC, count, rows, cols].iter().flat_map(|v| v.to_be_bytes()).collect();
    out.extend(std::iter::repeat_n(7u8, pixels));
    out
}

fn idx_labels(labels: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = [IDX_LABELS_MAGIC, labels.len() as u32].iter().flat_map(|v| v.to_be_bytes()).collect();
    out.extend(labels);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// A cache whose `mnist` folder holds the given train image and label files.
fn mnist_cache(images: &[u8], labels: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("mnist");
    std::fs::create_dir(&dir).unwrap();
    let (i, l) = (dir.join("train-images-idx3-ubyte"), dir.join("train-labels-idx1-ubyte"));
    std::fs::write(&i, images).unwrap();
    std::fs::write(&l, labels).unwrap();
    // The test split must exist too for the folder to count as present.
    std::fs::write(dir.join("t10k-images-idx3-ubyte"), idx_images(1, 28, 28, 784)).unwrap();
    std::fs::write(dir.join("t10k-labels-idx1-ubyte"), idx_labels(&[7])).unwrap();
    (root, i, l)
}

fn open_mnist_train(root: &Path) -> Result<std::sync::Arc<dyn Dataset>, DataError> {
    open(&"mnist".parse().unwrap(), Split::Train, &DataCache::new(root), &NO_FETCH)
}

fn assert_names(err: &DataError, path: &Path) {
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "message does not name {}: {msg}", path.display());
}

#[test]
fn well_formed_crafted_idx_files_open() {
    let (root, _, _) = mnist_cache(&idx_images(3, 28, 28, 3 * 784), &idx_labels(&[1, 2, 3]));
    let ds = open_mnist_train(root.path()).unwrap();
    assert_eq!(ds.len(), 3);
    let test = open(&"mnist".parse().unwrap(), Split::Test, &DataCache::new(root.path()), &NO_FETCH).unwrap();
    assert_eq!(Vec::<i64>::try_from(&test.batch(&[0]).unwrap().labels).unwrap(), vec![7]);
}

#[test]
fn truncated_idx_reports_expected_found_and_offset() {
    let (root, images, _) = mnist_cache(&idx_images(3, 28, 28, 2 * 784 + 100), &idx_labels(&[1, 2, 3]));
    let err = open_mnist_train(root.path()).unwrap_err();
    match &err {
        DataError::Truncated { offset, expected, found, .. } => {
            assert_eq!((*offset, *expected, *found), (16, 3 * 784, 2 * 784 + 100))
        }
        other => panic!("wrong error: {other}"),
    }
    assert_names(&err, &images);
}

#[test]
fn truncated_idx_header_is_an_error_too() {
    let (root, images, _) = mnist_cache(&IDX_IMAGES_MAGIC.to_be_bytes()[..].repeat(2), &idx_labels(&[1]));
    let err = open_mnist_train(root.path()).unwrap_err();
    assert!(matches!(err, DataError::Truncated { offset: 8, expected: 4, found: 0, .. }), "{err}");
    assert_names(&err, &images);
}

#[test]
fn wrong_magic_reports_expected_and_found() {
    // A label file where the image file should be.
    let (root, images, _) = mnist_cache(&idx_labels(&[1, 2]), &idx_labels(&[1, 2]));
    let err = open_mnist_train(root.path()).unwrap_err();
    assert!(matches!(err, DataError::BadMagic { expected: 2051, found: 2049, .. }), "{err}");
    assert_names(&err, &images);
    assert!(err.to_string().contains("expected 2051") && err.to_string().contains("found 2049"));
}

#[test]
fn label_image_count_mismatch_names_both_files() {
    let (root, images, labels) = mnist_cache(&idx_images(3, 28, 28, 3 * 784), &idx_labels(&[1, 2]));
    let err = open_mnist_train(root.path()).unwrap_err();
    assert!(matches!(err, DataError::CountMismatch { image_count: 3, label_count: 2, .. }), "{err}");
    assert_names(&err, &images);
    assert_names(&err, &labels);
}

#[test]
fn wrong_image_size_is_rejected() {
    let (root, images, _) = mnist_cache(&idx_images(1, 32, 32, 1024), &idx_labels(&[1]));
    let err = open_mnist_train(root.path()).unwrap_err();
    assert!(matches!(err, DataError::WrongShape { rows: 28, cols: 28, found_rows: 32, found_cols: 32, .. }), "{err}");
    assert_names(&err, &images);
}

#[test]
fn label_out_of_range_names_sample_and_file() {
    let (root, _, labels) = mnist_cache(&idx_images(3, 28, 28, 3 * 784), &idx_labels(&[1, 10, 3]));
    let err = open_mnist_train(root.path()).unwrap_err();
    assert!(matches!(err, DataError::LabelOutOfRange { index: 1, label: 10, classes: 10, .. }), "{err}");
    assert_names(&err, &labels);
}

#[test]
fn gzipped_idx_is_detected_by_content_not_name() {
    let (root, _, _) = mnist_cache(&gzip(&idx_images(2, 28, 28, 2 * 784)), &idx_labels(&[4, 2]));
    let ds = open_mnist_train(root.path()).unwrap();
    assert_eq!(Vec::<i64>::try_from(&ds.batch(&[0, 1]).unwrap().labels).unwrap(), vec![4, 2]);
}

#[test]
fn bad_gzip_is_a_typed_error() {
    let mut broken = gzip(&idx_images(2, 28, 28, 2 * 784));
    broken.truncate(broken.len() / 2);
    let (root, images, _) = mnist_cache(&broken, &idx_labels(&[4, 2]));
    let err = open_mnist_train(root.path()).unwrap_err();
    assert!(matches!(err, DataError::BadGzip { .. }), "{err}");
    assert_names(&err, &images);
}

#[test]
fn truncated_cifar_record_reports_record_and_offset() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cifar10");
    std::fs::create_dir(&dir).unwrap();
    let record = 1 + 3072;
    let mut test = vec![0u8; 2 * record];
    test[record] = 9;
    test.truncate(2 * record - 10);
    let path = dir.join("test_batch.bin");
    std::fs::write(&path, &test).unwrap();
    let err = open(&"cifar10".parse().unwrap(), Split::Test, &DataCache::new(root.path()), &NO_FETCH).unwrap_err();
    match &err {
        DataError::Truncated { offset, expected, found, what, .. } => {
            assert_eq!((*offset, *expected, *found), (record + 1, 3072, 3062));
            assert!(what.contains("record 1"), "{what}");
        }
        other => panic!("wrong error: {other}"),
    }
    assert_names(&err, &path);
}

#[test]
fn cifar_label_out_of_range_is_rejected() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cifar10");
    std::fs::create_dir(&dir).unwrap();
    let mut data = vec![0u8; 3073];
    data[0] = 10;
    std::fs::write(dir.join("test_batch.bin"), &data).unwrap();
    let err = open(&"cifar10".parse().unwrap(), Split::Test, &DataCache::new(root.path()), &NO_FETCH).unwrap_err();
    assert!(matches!(err, DataError::LabelOutOfRange { label: 10, index: 0, .. }), "{err}");
    assert_names(&err, &dir.join("test_batch.bin"));
}

#[test]
fn unreadable_image_names_the_file() {
    let root = tempfile::tempdir().unwrap();
    let class = root.path().join("imagenet/train/n001");
    std::fs::create_dir_all(&class).unwrap();
    let good = class.join("a.png");
    image::RgbImage::from_pixel(40, 30, image::Rgb([255, 0, 0])).save(&good).unwrap();
    let bad = class.join("b.jpg");
    std::fs::write(&bad, b"not a jpeg at all").unwrap();
    let ds = open(&"imagenet".parse().unwrap(), Split::Train, &DataCache::new(root.path()), &NO_FETCH).unwrap();
    assert_eq!(ds.len(), 2);
    assert!(ds.batch(&[0]).is_ok());
    let err = ds.batch(&[0, 1]).unwrap_err();
    assert!(matches!(err, DataError::UnreadableImage { .. }), "{err}");
    assert_names(&err, &bad);
}

#[test]
fn image_folder_labels_follow_sorted_class_names_and_images_are_cropped() {
    let root = tempfile::tempdir().unwrap();
    for (class, colour) in [("zebra", [0, 0, 255]), ("apple", [255, 0, 0])] {
        for split in ["train", "val"] {
            let dir = root.path().join("imagenet").join(split).join(class);
            std::fs::create_dir_all(&dir).unwrap();
            // A wide image: the shorter side is resized, then the centre is cropped.
            image::RgbImage::from_pixel(300, 100, image::Rgb(colour)).save(dir.join("x.png")).unwrap();
        }
    }
    let cache = DataCache::new(root.path());
    let ds = open(&"imagenet".parse().unwrap(), Split::Test, &cache, &NO_FETCH).unwrap();
    let b = ds.batch(&[0, 1]).unwrap();
    assert_eq!(b.images.size(), vec![2, 3, 224, 224]);
    assert_eq!(Vec::<i64>::try_from(&b.labels).unwrap(), vec![0, 1]); // apple, zebra
    let i = info("imagenet").unwrap();
    let red_of_apple = b.images.double_value(&[0, 0, 100, 100]);
    assert!((red_of_apple - (1.0 - i.mean[0] as f64) / i.std[0] as f64).abs() < 1e-4, "{red_of_apple}");
}

#[test]
fn unknown_data_set_name_lists_valid_ones() {
    let err = "imagenet21k".parse::<DatasetSelector>().unwrap_err();
    assert!(matches!(err, DataError::UnknownDataset { .. }));
    let msg = err.to_string();
    assert!(msg.contains("imagenet21k") && msg.contains("cifar100") && msg.contains("highres"), "{msg}");
}

#[test]
fn missing_real_files_without_fetch_name_the_folder_and_the_way_out() {
    let root = tempfile::tempdir().unwrap();
    let cache = DataCache::new(root.path());
    for name in ["mnist", "cifar10", "cifar100", "imagenet", "highres"] {
        let err = open(&name.parse().unwrap(), Split::Train, &cache, &NO_FETCH).unwrap_err();
        assert!(matches!(err, DataError::Missing { .. }), "{name}: {err}");
        assert_names(&err, &cache.dir(name));
        assert!(err.to_string().contains(&format!("{name}:synthetic")), "{err}");
    }
    let err = open(&"cifar10".parse().unwrap(), Split::Train, &cache, &NO_FETCH).unwrap_err();
    assert!(err.to_string().contains("data_batch_1.bin") && err.to_string().contains("test_batch.bin"));
}
