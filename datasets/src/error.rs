//! The one error type of the crate: every malformed input names its file and what is wrong,
//! so a user can fix the data without reading our code.

use std::path::PathBuf;

/// Everything that can go wrong while finding, fetching, reading or batching a data set.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A data set name that is not in the registry.
    #[error("unknown data set `{name}`; valid names: {valid}")]
    UnknownDataset {
        /// The name that was asked for.
        name: String,
        /// The registered names, comma-separated.
        valid: String,
    },

    /// A selector string that is not `name` or `name:source`.
    #[error("bad data set selector `{text}`: {reason}")]
    BadSelector {
        /// The text that failed to parse.
        text: String,
        /// Why it failed.
        reason: String,
    },

    /// An operating-system error while touching a file or folder.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A file starts with gzip's magic bytes but does not decompress.
    #[error("{path}: bad gzip stream: {source}")]
    BadGzip {
        /// The compressed file.
        path: PathBuf,
        /// What flate2 reported.
        #[source]
        source: std::io::Error,
    },

    /// A file's magic number is not the one its format requires.
    #[error("{path}: wrong magic number: expected {expected} (0x{expected:08x}), found {found} (0x{found:08x})")]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The magic number the format requires.
        expected: u32,
        /// The magic number the file holds.
        found: u32,
    },

    /// A file ends before the bytes its header (or format) promises.
    #[error("{path}: truncated while reading {what}: expected {expected} bytes at offset {offset}, found {found}")]
    Truncated {
        /// The file (offsets count decompressed bytes for gzipped files).
        path: PathBuf,
        /// Which part of the format was being read.
        what: String,
        /// Byte offset where the read started.
        offset: usize,
        /// Bytes the read needed.
        expected: usize,
        /// Bytes actually left from `offset`.
        found: usize,
    },

    /// Image and label files disagree on how many samples there are.
    #[error("{images} holds {image_count} images but {labels} holds {label_count} labels")]
    CountMismatch {
        /// The image file.
        images: PathBuf,
        /// Number of images it declares.
        image_count: usize,
        /// The label file.
        labels: PathBuf,
        /// Number of labels it declares.
        label_count: usize,
    },

    /// Images whose size differs from the data set's.
    #[error("{path}: images are {found_rows}×{found_cols}, but {dataset} images are {rows}×{cols}")]
    WrongShape {
        /// The file.
        path: PathBuf,
        /// The data set it was read for.
        dataset: &'static str,
        /// Rows the data set requires.
        rows: usize,
        /// Columns the data set requires.
        cols: usize,
        /// Rows the file declares.
        found_rows: usize,
        /// Columns the file declares.
        found_cols: usize,
    },

    /// A label outside `0..classes`.
    #[error("{path}: label {label} of sample {index} is out of range: {dataset} has {classes} classes")]
    LabelOutOfRange {
        /// The file holding the label.
        path: PathBuf,
        /// The data set it was read for.
        dataset: &'static str,
        /// Index of the sample within the file.
        index: usize,
        /// The label found.
        label: usize,
        /// Number of classes of the data set.
        classes: usize,
    },

    /// An image file that cannot be opened or decoded.
    #[error("{path}: unreadable image: {source}")]
    UnreadableImage {
        /// The image file.
        path: PathBuf,
        /// What the decoder reported.
        #[source]
        source: image::ImageError,
    },

    /// An image folder whose layout cannot be a data set (no classes, too many, no images…).
    #[error("{path}: {reason}")]
    BadFolder {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The real files of a data set are absent and cannot (or may not) be fetched.
    #[error("{dataset}: real data not found (looked in {looked}); {hint}")]
    Missing {
        /// The data set.
        dataset: &'static str,
        /// Where stratlab looked, as a list of folders.
        looked: String,
        /// How to provide the files.
        hint: String,
    },

    /// Downloading or installing a data set failed.
    #[error("fetching {dataset} failed: {reason}")]
    Fetch {
        /// The data set.
        dataset: &'static str,
        /// What went wrong.
        reason: String,
    },

    /// A file's size is not the one recorded for the real data set.
    #[error("{path}: size {found} bytes, expected {expected}")]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// The recorded size.
        expected: u64,
        /// The size on disk.
        found: u64,
    },

    /// A file's SHA-256 is not the one recorded for the real data set.
    #[error("{path}: SHA-256 {found}, expected {expected}")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The recorded digest (hex).
        expected: &'static str,
        /// The digest of the file (hex).
        found: String,
    },

    /// A sample index past the end of the data set.
    #[error("sample index {index} out of range for {dataset} ({len} samples)")]
    IndexOutOfRange {
        /// The data set.
        dataset: &'static str,
        /// The index asked for.
        index: usize,
        /// The number of samples.
        len: usize,
    },

    /// Inconsistent loader or open options (e.g. rank ≥ world size).
    #[error("invalid configuration: {0}")]
    Config(String),

    /// libtorch refused a tensor operation.
    #[error("tensor operation failed: {0}")]
    Tensor(#[from] tch::TchError),
}

impl DataError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io { path: path.into(), source }
    }
}
