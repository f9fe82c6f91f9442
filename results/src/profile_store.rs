//! The store's profiles, beside its runs: `<store>/profiles/<part>.parquet`, one part per
//! profile taken, read whole. Parts are written atomically like every table, so a profile
//! killed half-way leaves nothing behind, and two processes never replace each other's.

use std::fs;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use polars::prelude::ParquetWriter;

use crate::atomic_file::{io_error, write_atomically, WriteError};
use crate::run_store::read_part;
use crate::{from_frame, to_frame, ProfileRow, StoreError, Table, UtcTime};

/// A folder of a store beside its runs holding one table in parts, appended to and read
/// whole: the `profiles`, and the `auto_choices` `auto` made.
#[derive(Debug, Clone)]
pub struct PartStore<T> {
    dir: PathBuf,
    rows: PhantomData<T>,
}

/// The `profiles` folder of a store.
pub type ProfileStore = PartStore<ProfileRow>;

impl<T: Table> PartStore<T> {
    /// The table's folder in the store at `store_dir` (nothing is created until rows are added).
    pub fn new(store_dir: &Path) -> PartStore<T> {
        PartStore { dir: store_dir.join(T::NAME), rows: PhantomData }
    }

    /// The folder the parts are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every stored row, parts in the order they were written; none before the first
    /// part. A part that is not this table is an error naming it.
    pub fn load(&self) -> Result<Vec<T>, StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StoreError::Io { path: self.dir.clone(), source }),
        };
        let mut parts = Vec::new();
        for entry in entries {
            let path = entry.map_err(io_error(&self.dir))?.path();
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if !name.starts_with('.') && name.ends_with(".parquet") {
                parts.push(path);
            }
        }
        parts.sort();
        let mut rows = Vec::new();
        for path in parts {
            rows.extend(from_frame::<T>(&read_part::<T>(&path)?)?);
        }
        Ok(rows)
    }

    /// Adds rows (one profile's, one choice's) as a part of their own.
    pub fn append(&self, rows: &[T]) -> Result<(), StoreError> {
        static PART_COUNTER: AtomicU64 = AtomicU64::new(0);
        if rows.is_empty() {
            return Ok(());
        }
        fs::create_dir_all(&self.dir).map_err(io_error(&self.dir))?;
        let part = format!(
            "{}-{}-{:06}.parquet",
            UtcTime::now().compact(),
            std::process::id(),
            PART_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut frame = to_frame(rows)?;
        write_atomically(&self.dir.join(part), |file| {
            ParquetWriter::new(file).finish(&mut frame).map(drop).map_err(WriteError::Polars)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(stage: u32, samples: u64) -> ProfileRow {
        ProfileRow {
            profile_key: "small-cnn|mnist|cpu|t1".into(),
            network: "small-cnn".into(),
            dataset: "mnist".into(),
            device: "cpu".into(),
            threads: 1,
            stage,
            stage_name: format!("stage{stage}"),
            samples,
            forward_s: (samples > 4).then_some(0.001 * samples as f64),
            backward_s: (samples > 4).then_some(0.002 * samples as f64),
            kept_bytes: Some(1024.0),
            transient_bytes: None,
            output_bytes_per_sample: 4096,
            parameter_bytes: vec![1152, 128],
            optimizer_s: 0.0005,
            whole_model_copy_s: Some(0.0002),
            contention_copies: (stage == 0).then_some(2),
            contention_ratio: (stage == 0).then_some(1.25),
            training_step_s: (stage == 0).then_some(0.01 * samples as f64),
            training_step_peak_bytes: (stage == 0).then_some(2048.0 * samples as f64),
            taken_at: "2026-11-25T21:40:00Z".into(),
            profile_s: 1.5,
            speed_reference_s: None,
            input_backward_s: (samples > 4).then_some(0.0012 * samples as f64),
            weight_backward_s: (samples > 4).then_some(0.0011 * samples as f64),
        }
    }

    #[test]
    fn profiles_round_trip_with_their_lists_and_nulls_and_append_in_order() {
        let folder = std::env::temp_dir().join(format!("stratlab-profiles-{}", std::process::id()));
        let store = ProfileStore::new(&folder);
        assert_eq!(store.load().unwrap(), Vec::new(), "no folder, no profiles");
        let first = vec![row(0, 8), row(1, 8)];
        let second = vec![row(0, 16), row(0, 4)];
        store.append(&first).unwrap();
        store.append(&second).unwrap();
        assert_eq!(store.load().unwrap(), [first, second].concat());
        std::fs::write(store.dir().join("zz-not-parquet.parquet"), b"no").unwrap();
        let error = store.load().unwrap_err().to_string();
        assert!(error.contains("zz-not-parquet.parquet"), "{error}");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
