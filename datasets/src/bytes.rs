//! Reading raw files safely: load (gunzipping when the magic bytes say so) and walk the bytes
//! with a cursor whose every read is bounds-checked, so IDX and CIFAR parsing share one
//! place where truncation becomes a typed error instead of a panic.

use std::io::Read;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use crate::DataError;

/// gzip's first two bytes (RFC 1952); we detect compression by content, not by file name.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads a whole file, transparently decompressing it if it is gzipped.
pub(crate) fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    if !raw.starts_with(&GZIP_MAGIC) {
        return Ok(raw);
    }
    let mut out = Vec::with_capacity(raw.len() * 4);
    GzDecoder::new(raw.as_slice())
        .read_to_end(&mut out)
        .map_err(|source| DataError::BadGzip { path: path.to_path_buf(), source })?;
    Ok(out)
}

/// A bounds-checked cursor over a file's bytes; errors name the file and the field.
pub(crate) struct ByteReader<'a> {
    path: &'a Path,
    data: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    /// Starts at offset 0 of `data`, which was read from `path`.
    pub(crate) fn new(path: &'a Path, data: &'a [u8]) -> Self {
        ByteReader { path, data, pos: 0 }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next `n` bytes, or a `Truncated` error saying what was being read.
    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], DataError> {
        if n > self.remaining() {
            return Err(DataError::Truncated {
                path: self.path.to_path_buf(),
                what: what.to_string(),
                offset: self.pos,
                expected: n,
                found: self.remaining(),
            });
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next big-endian u32.
    pub(crate) fn u32_be(&mut self, what: &str) -> Result<u32, DataError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next big-endian u32, which must equal `expected` (a format's magic number).
    pub(crate) fn magic(&mut self, expected: u32) -> Result<(), DataError> {
        let found = self.u32_be("magic number")?;
        if found != expected {
            return Err(DataError::BadMagic { path: self.path.to_path_buf(), expected, found });
        }
        Ok(())
    }

    /// The file this reader reads, for error messages.
    pub(crate) fn path(&self) -> PathBuf {
        self.path.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_reports_truncation_with_offset() {
        let data = [0, 0, 8, 3, 7, 9];
        let path = Path::new("x.idx");
        let mut r = ByteReader::new(path, &data);
        assert_eq!(r.u32_be("magic").unwrap(), 2051);
        assert_eq!(r.bytes(1, "a").unwrap(), &[7]);
        match r.bytes(4, "pixels").unwrap_err() {
            DataError::Truncated { offset, expected, found, what, .. } => {
                assert_eq!((offset, expected, found, what.as_str()), (5, 4, 1, "pixels"))
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn magic_mismatch_reports_both_values() {
        let data = 2049u32.to_be_bytes();
        let err = ByteReader::new(Path::new("f"), &data).magic(2051).unwrap_err();
        assert!(matches!(err, DataError::BadMagic { expected: 2051, found: 2049, .. }));
    }
}
