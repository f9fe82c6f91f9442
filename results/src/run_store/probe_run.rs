//! Probe runs: the machine's measured link bandwidths (p2p pairs, all-reduce), stored as a
//! run of their own so strategy results can later be read against what the links can do.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::RunStore;
use crate::{Fingerprint, ProbeRow, StoreError, Table, UtcTime};

/// The label of a probe run's folder: `<UTC timestamp>-probe`.
const PROBE_LABEL: &str = "probe";

impl RunStore {
    /// Creates `store_dir/<UTC timestamp>-probe/` (`-2`, `-3`, … within one second) with
    /// the fingerprint and no suite file: a probe run measures the machine, not a matrix.
    /// [`RunStore::open`] opens it like any run; its per-trial tables stay empty.
    pub fn create_probe(store_dir: &Path, fingerprint: &Fingerprint) -> Result<RunStore, StoreError> {
        let store = RunStore::claim(store_dir, PROBE_LABEL)?;
        store.write_fingerprint(fingerprint)?;
        Ok(store)
    }

    /// Adds `rows` to the run's `probes` table as one new part, written atomically; read
    /// them back with `load_rows::<ProbeRow>()`. Nothing is written for no rows.
    pub fn write_probes(&self, rows: &[ProbeRow]) -> Result<(), StoreError> {
        self.write_run_rows(rows)
    }

    /// Adds `rows` to the run-level table `T` (`probes`, `predictions`) as one new part,
    /// written atomically. Nothing is written for no rows.
    ///
    /// Each call gets a part of its own, named `<UTC time>-<pid>-<n>`, so parts sort in the
    /// order they were written and two writers never replace each other's part.
    pub fn write_run_rows<T: Table>(&self, rows: &[T]) -> Result<(), StoreError> {
        debug_assert!(!T::PER_TRIAL, "{} is a per-trial table", T::NAME);
        static PART_COUNTER: AtomicU64 = AtomicU64::new(0);
        if rows.is_empty() {
            return Ok(());
        }
        let part = format!(
            "{}-{}-{:06}",
            UtcTime::now().compact(),
            std::process::id(),
            PART_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        self.write_part(&part, rows)
    }
}
