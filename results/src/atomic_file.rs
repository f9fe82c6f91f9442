//! Writing files so that a crash leaves either the old file or the new one, never half of
//! one, and cleaning up after writers that died mid-write.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::StoreError;

/// Marker inside temp file names: `.<final name>.tmp-<pid>-<n>`.
const TEMP_MARKER: &str = ".tmp-";

/// What a write callback can fail with; mapped onto [`StoreError`] with the path.
pub(crate) enum WriteError {
    /// Writing or syncing failed.
    Io(std::io::Error),
    /// Polars failed to encode the frame.
    Polars(polars::prelude::PolarsError),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Writes `path` through a hidden temp file in the same folder: write, fsync, rename, fsync
/// the folder. Same folder so the rename is atomic (same filesystem); the pid in the temp
/// name lets [`crate::RunStore::open`] tell abandoned temp files from ones being written.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut File) -> Result<(), WriteError>,
) -> Result<(), StoreError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("part");
    let temp =
        dir.join(format!(".{name}{TEMP_MARKER}{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut file = File::create(&temp).map_err(io_error(&temp))?;
        write(&mut file).map_err(|e| match e {
            WriteError::Io(source) => StoreError::Io { path: temp.clone(), source },
            WriteError::Polars(source) => StoreError::Polars { path: temp.clone(), source },
        })?;
        file.sync_all().map_err(io_error(&temp))?;
        drop(file);
        fs::rename(&temp, path).map_err(io_error(path))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Writes `bytes` to `path` atomically (see [`write_atomically`]), creating its folder: the
/// one way the lab writes a file a reader may open while it is being written (run tables,
/// report pages and tables, comparisons, histories).
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    write_atomically(path, |file| Ok(file.write_all(bytes)?))
}

/// fsyncs a folder so a rename in it survives a power cut.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error(dir))
}

/// Deletes temp files in `dir` whose writing process is gone.
pub(crate) fn remove_stale_temp_files(dir: &Path) -> Result<(), StoreError> {
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with('.') {
            continue;
        }
        let Some((_, tail)) = name.rsplit_once(TEMP_MARKER) else {
            continue;
        };
        let writer = tail.split('-').next().and_then(|pid| pid.parse::<i32>().ok());
        if writer.is_some_and(process_is_alive) {
            continue;
        }
        let path = entry.path();
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::Io { path, source: e }),
        }
    }
    Ok(())
}

/// Whether a process with this pid exists (signal 0 checks without sending anything).
fn process_is_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 performs only the existence and permission checks.
    let status = unsafe { libc::kill(pid, 0) };
    status == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Maps an I/O error onto [`StoreError::Io`] for `path`.
pub(crate) fn io_error(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}
