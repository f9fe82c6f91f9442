//! One run's folder: creating it, writing trials atomically, reading and exporting tables.
//! (Probe runs, which hold link measurements instead of trials, are in `probe_run.rs`.)

mod probe_run;

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::{
    CsvWriter, DataFrame, JsonFormat, JsonWriter, ParquetReader, ParquetWriter, SerReader, SerWriter,
};

use crate::atomic_file::{io_error, remove_stale_temp_files, sync_dir, write_atomically, WriteError};
use crate::table_names::TABLE_NAMES;
use crate::{
    chrome_trace, to_frame, BatchProbeRow, EpochRow, EvaluationRow, EventRow, ExportFormat, Fingerprint,
    GradientUpdateRow, PipelineStageRow, PredictedPassRow, PredictionRow, ProbeRow, RankBreakdownRow, StepRow,
    StoreError, Table, TelemetryRow, TrialNodeRow, TrialRow, TrialTables, UtcTime,
};

/// Name of the environment fingerprint in a run folder; its presence marks a run.
const FINGERPRINT_FILE: &str = "fingerprint.json";
/// Name of the copy of the suite file in a run folder.
const SUITE_FILE: &str = "suite.yaml";
/// Folder of the records of resumes from a different environment.
const RESUMES_DIR: &str = "resumes";
/// Folder of the trials' Chrome traces (`<trial_id>.json`).
const TRACES_DIR: &str = "traces";

/// Where run folders go unless told otherwise (relative to the working directory; git-ignored).
pub const DEFAULT_STORE_DIR: &str = "runs";

/// A run folder under the store folder (`runs/`), the only writer and reader of its tables.
///
/// Every file is written to a hidden temp file in its final folder, fsynced and renamed, so
/// a crash leaves either the old state or the new one, never half a Parquet file. The
/// `trials/` part of a trial is renamed last: it is the commit record of the trial.
#[derive(Debug, Clone)]
pub struct RunStore {
    /// `runs/<run_id>/`.
    run_dir: PathBuf,
    /// The folder's name: UTC start time and short suite name.
    run_id: String,
}

impl RunStore {
    /// Creates `store_dir/<UTC timestamp>-<suite name>/` with a copy of the suite file and
    /// the fingerprint. Two runs started in the same second get `-2`, `-3`, … suffixes.
    pub fn create(
        store_dir: &Path,
        suite_name: &str,
        suite_path: &Path,
        fingerprint: &Fingerprint,
    ) -> Result<RunStore, StoreError> {
        let suite = fs::read(suite_path).map_err(io_error(suite_path))?;
        let store = RunStore::claim(store_dir, &short_name(suite_name))?;
        write_atomically(&store.run_dir.join(SUITE_FILE), |file| file.write_all(&suite).map_err(Into::into))?;
        store.write_fingerprint(fingerprint)?;
        Ok(store)
    }

    /// Claims a fresh `store_dir/<UTC timestamp>-<label>[-N]/` with its table folders.
    fn claim(store_dir: &Path, label: &str) -> Result<RunStore, StoreError> {
        fs::create_dir_all(store_dir).map_err(io_error(store_dir))?;
        let base = format!("{}-{label}", UtcTime::now().compact());
        let mut attempt = 1;
        let run_dir = loop {
            let run_id = if attempt == 1 { base.clone() } else { format!("{base}-{attempt}") };
            let dir = store_dir.join(&run_id);
            // create_dir (not _all) fails if the folder exists: it claims the name atomically.
            match fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => attempt += 1,
                Err(e) => return Err(StoreError::Io { path: dir, source: e }),
            }
        };
        let store = RunStore { run_id: dir_name(&run_dir), run_dir };
        store.make_table_dirs()?;
        Ok(store)
    }

    /// Writes `fingerprint.json`, the file whose presence makes the folder a run: last, so
    /// a run that failed to start is not taken for one.
    fn write_fingerprint(&self, fingerprint: &Fingerprint) -> Result<(), StoreError> {
        let path = self.run_dir.join(FINGERPRINT_FILE);
        let json =
            serde_json::to_vec_pretty(fingerprint).map_err(|source| StoreError::Json { path: path.clone(), source })?;
        write_atomically(&path, |file| file.write_all(&json).map_err(Into::into))
    }

    /// Opens an existing run to read it. Reading writes nothing: a run is often a fixture in
    /// a source tree, or someone else's folder. A table without its folder (a run written
    /// before the table existed) reads as empty.
    pub fn open(run_dir: &Path) -> Result<RunStore, StoreError> {
        if !run_dir.join(FINGERPRINT_FILE).is_file() {
            return Err(StoreError::NotARun { path: run_dir.to_path_buf() });
        }
        Ok(RunStore { run_id: dir_name(run_dir), run_dir: run_dir.to_path_buf() })
    }

    /// Opens an existing run to add trials to it: every table folder is made, and temp files
    /// left by writers that no longer exist are deleted.
    pub fn resume(run_dir: &Path) -> Result<RunStore, StoreError> {
        let store = RunStore::open(run_dir)?;
        store.make_table_dirs()?;
        remove_stale_temp_files(&store.run_dir)?;
        for table in TABLE_NAMES {
            remove_stale_temp_files(&store.run_dir.join(table))?;
        }
        let traces = store.run_dir.join(TRACES_DIR);
        if traces.is_dir() {
            remove_stale_temp_files(&traces)?;
        }
        Ok(store)
    }

    /// The run id, e.g. `20261122T214501Z-default`.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run folder.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The fingerprint recorded when the run was created.
    pub fn fingerprint(&self) -> Result<Fingerprint, StoreError> {
        let path = self.run_dir.join(FINGERPRINT_FILE);
        let bytes = fs::read(&path).map_err(io_error(&path))?;
        serde_json::from_slice(&bytes).map_err(|source| StoreError::CorruptFingerprint { path, source })
    }

    /// Records that trials were added from an environment whose fingerprint differs from the
    /// run's (`--allow-mixed`): `resumes/<UTC time>.json` holds that fingerprint and the
    /// differing fields, so a report can tell the run is mixed and from where.
    pub fn record_mixed_resume(&self, fingerprint: &Fingerprint, differences: &[String]) -> Result<(), StoreError> {
        let dir = self.run_dir.join(RESUMES_DIR);
        fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        let path = dir.join(format!("{}.json", UtcTime::now().compact()));
        let record = serde_json::json!({
            "allow_mixed": true,
            "differences": differences,
            "fingerprint": fingerprint,
        });
        let json =
            serde_json::to_vec_pretty(&record).map_err(|source| StoreError::Json { path: path.clone(), source })?;
        write_atomically(&path, |file| file.write_all(&json).map_err(Into::into))
    }

    /// The mixed-environment resumes recorded in this run (their files), oldest first.
    pub fn mixed_resumes(&self) -> Result<Vec<PathBuf>, StoreError> {
        let dir = self.run_dir.join(RESUMES_DIR);
        if !dir.is_dir() {
            return Ok(Vec::new());
        }
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(io_error(&dir))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Records one finished trial: a part in every per-trial table, its Chrome trace when
    /// it has events, then its trial row.
    ///
    /// Rewriting a trial (a rerun) first removes its `trials/` part, so it never counts as
    /// finished while its other parts are being replaced; a rerun without events removes
    /// the earlier trace. Empty slices still write a part (with zero rows), so "all parts
    /// exist" holds for every finished trial.
    pub fn write_trial(&self, tables: TrialTables<'_>) -> Result<(), StoreError> {
        let TrialTables {
            trial,
            epochs,
            steps,
            telemetry,
            events,
            rank_breakdown,
            pipeline_stages,
            evaluations,
            gradient_updates,
            nodes,
        } = tables;
        let id = trial.trial_id.as_str();
        check_trial_id(id)?;
        check_rows(id, epochs)?;
        check_rows(id, steps)?;
        check_rows(id, telemetry)?;
        check_rows(id, events)?;
        check_rows(id, rank_breakdown)?;
        check_rows(id, pipeline_stages)?;
        check_rows(id, evaluations)?;
        check_rows(id, gradient_updates)?;
        check_rows(id, nodes)?;
        remove_if_present(&self.part_path(TrialRow::NAME, id))?;
        self.write_part(id, epochs)?;
        self.write_part(id, steps)?;
        self.write_part(id, telemetry)?;
        self.write_part(id, events)?;
        self.write_part(id, rank_breakdown)?;
        self.write_part(id, pipeline_stages)?;
        self.write_part(id, evaluations)?;
        self.write_part(id, gradient_updates)?;
        self.write_part(id, nodes)?;
        self.write_trace(id, events)?;
        self.write_part(id, std::slice::from_ref(trial))
    }

    /// Where the Chrome trace of a trial is written: `<run>/traces/<trial_id>.json` (open it
    /// in <https://ui.perfetto.dev>). It exists only for finished trials that had events.
    pub fn trace_path(&self, trial_id: &str) -> PathBuf {
        self.run_dir.join(TRACES_DIR).join(format!("{trial_id}.json"))
    }

    /// Writes (or, without events, removes) the Chrome trace of a trial.
    fn write_trace(&self, trial_id: &str, events: &[EventRow]) -> Result<(), StoreError> {
        let path = self.trace_path(trial_id);
        if events.is_empty() {
            return remove_if_present(&path);
        }
        let dir = self.run_dir.join(TRACES_DIR);
        fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        let json = serde_json::to_vec(&chrome_trace(events))
            .map_err(|source| StoreError::Json { path: path.clone(), source })?;
        write_atomically(&path, |file| file.write_all(&json).map_err(Into::into))
    }

    /// Ids of the trials whose `trials/` part exists: the ones a resumed run skips.
    pub fn finished_trial_ids(&self) -> Result<BTreeSet<String>, StoreError> {
        Ok(self.part_files(TrialRow::NAME)?.into_iter().map(|(id, _)| id).collect())
    }

    /// All rows of `table_name` over finished trials, parts in trial-id order; an empty
    /// frame with the table's schema when there are none.
    ///
    /// Parts of unfinished trials (a crash between parts) are left out, so every table
    /// describes the same set of trials; the run-level `probes` table loads every part.
    pub fn load(&self, table_name: &str) -> Result<DataFrame, StoreError> {
        match table_name {
            TrialRow::NAME => self.load_table::<TrialRow>(),
            EpochRow::NAME => self.load_table::<EpochRow>(),
            StepRow::NAME => self.load_table::<StepRow>(),
            TelemetryRow::NAME => self.load_table::<TelemetryRow>(),
            EventRow::NAME => self.load_table::<EventRow>(),
            RankBreakdownRow::NAME => self.load_table::<RankBreakdownRow>(),
            PipelineStageRow::NAME => self.load_table::<PipelineStageRow>(),
            EvaluationRow::NAME => self.load_table::<EvaluationRow>(),
            GradientUpdateRow::NAME => self.load_table::<GradientUpdateRow>(),
            TrialNodeRow::NAME => self.load_table::<TrialNodeRow>(),
            ProbeRow::NAME => self.load_table::<ProbeRow>(),
            PredictionRow::NAME => self.load_table::<PredictionRow>(),
            PredictedPassRow::NAME => self.load_table::<PredictedPassRow>(),
            BatchProbeRow::NAME => self.load_table::<BatchProbeRow>(),
            other => Err(StoreError::UnknownTable { name: other.to_owned() }),
        }
    }

    /// All rows of table `T` over finished trials (all rows of a run-level table), as typed rows.
    pub fn load_rows<T: Table>(&self) -> Result<Vec<T>, StoreError> {
        super::from_frame(&self.load_table::<T>()?)
    }

    /// Writes every table to `out_dir/<table>.<csv|json>` and returns the files written.
    pub fn export(&self, format: ExportFormat, out_dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
        fs::create_dir_all(out_dir).map_err(io_error(out_dir))?;
        let mut written = Vec::with_capacity(TABLE_NAMES.len());
        for table in TABLE_NAMES {
            let mut frame = self.load(table)?;
            let path = out_dir.join(format!("{table}.{}", format.extension()));
            let file = File::create(&path).map_err(io_error(&path))?;
            let result = match format {
                ExportFormat::Csv => CsvWriter::new(file).finish(&mut crate::table::lists_as_text(&frame, table)?),
                ExportFormat::Json => JsonWriter::new(file).with_json_format(JsonFormat::Json).finish(&mut frame),
            };
            result.map_err(|source| StoreError::Polars { path: path.clone(), source })?;
            written.push(path);
        }
        Ok(written)
    }

    /// Reads and concatenates the parts of `T` that belong to finished trials.
    fn load_table<T: Table>(&self) -> Result<DataFrame, StoreError> {
        let schema = T::schema();
        let finished = if T::NAME == TrialRow::NAME || !T::PER_TRIAL { None } else { Some(self.finished_trial_ids()?) };
        let mut frame = DataFrame::empty_with_schema(&schema);
        for (id, path) in self.part_files(T::NAME)? {
            if finished.as_ref().is_some_and(|ids| !ids.contains(&id)) {
                continue;
            }
            let part = read_part::<T>(&path)?;
            frame.vstack_mut_owned(part).map_err(|source| StoreError::Polars { path, source })?;
        }
        frame.rechunk_mut();
        Ok(frame)
    }

    /// The rows of per-trial table `T` of one finished trial, read from that trial's part
    /// alone, so a large table (`events`) need not be loaded whole for one trial. Empty when
    /// the trial is not finished or has no part of the table (a run from before it existed).
    pub fn load_trial_rows<T: Table>(&self, trial_id: &str) -> Result<Vec<T>, StoreError> {
        check_trial_id(trial_id)?;
        let path = self.part_path(T::NAME, trial_id);
        if !self.part_path(TrialRow::NAME, trial_id).is_file() || !path.is_file() {
            return Ok(Vec::new());
        }
        super::from_frame(&read_part::<T>(&path)?)
    }

    /// Writes one part of a table atomically: a trial's (named by its id) or a run-level one.
    fn write_part<T: Table>(&self, part_name: &str, rows: &[T]) -> Result<(), StoreError> {
        let mut frame = to_frame(rows)?;
        let path = self.part_path(T::NAME, part_name);
        write_atomically(&path, |file| {
            ParquetWriter::new(file).finish(&mut frame).map(drop).map_err(WriteError::Polars)
        })
    }

    /// `<run>/<table>/<part_name>.parquet`; a per-trial table's part is named by the trial id.
    fn part_path(&self, table: &str, part_name: &str) -> PathBuf {
        self.run_dir.join(table).join(format!("{part_name}.parquet"))
    }

    /// Finished parts of a table as (part name, path), sorted by name; temp files are
    /// skipped. A per-trial table's part name is its trial id. A run written before the
    /// table existed may lack its folder: that is a table without parts, not an error.
    fn part_files(&self, table: &str) -> Result<Vec<(String, PathBuf)>, StoreError> {
        let dir = self.run_dir.join(table);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::Io { path: dir, source: e }),
        };
        let mut parts = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(&dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            if let Some(id) = name.strip_suffix(".parquet") {
                parts.push((id.to_owned(), entry.path()));
            }
        }
        parts.sort();
        Ok(parts)
    }

    /// Makes sure every table folder exists.
    fn make_table_dirs(&self) -> Result<(), StoreError> {
        for table in TABLE_NAMES {
            let dir = self.run_dir.join(table);
            fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        }
        Ok(())
    }
}

/// Trial ids become file names: keep them portable and never hidden (hidden = temp).
fn check_trial_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidTrialId { id: id.to_owned() })
    }
}

/// Every row of a part must belong to the trial being written, or `load` would mix trials.
fn check_rows<T: Table>(trial_id: &str, rows: &[T]) -> Result<(), StoreError> {
    match rows.iter().find(|row| row.trial_id() != Some(trial_id)) {
        Some(row) => Err(StoreError::ForeignRow {
            table: T::NAME,
            expected: trial_id.to_owned(),
            found: row.trial_id().unwrap_or_default().to_owned(),
        }),
        None => Ok(()),
    }
}

/// Deletes `path` if it exists and syncs its folder, so the removal survives a crash.
fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(path.parent().unwrap_or(Path::new("."))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Io { path: path.to_path_buf(), source: e }),
    }
}

/// A suite name cut down to a short, path-safe slug for the run id.
fn short_name(suite_name: &str) -> String {
    let mut slug = String::new();
    for c in suite_name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug: String = slug.trim_matches('-').chars().take(32).collect();
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "suite".to_owned()
    } else {
        slug.to_owned()
    }
}

/// The last component of a path as a string (the run id of a run folder).
fn dir_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `name: dtype, …` for schema-mismatch messages.
fn describe(schema: &polars::prelude::Schema) -> String {
    schema.iter().map(|(name, dtype)| format!("{name}: {dtype}")).collect::<Vec<_>>().join(", ")
}

/// One Parquet part of table `T`, with columns added since it was written filled with
/// nulls; any other difference from `T::schema()` is an error naming the file.
pub(crate) fn read_part<T: Table>(path: &Path) -> Result<DataFrame, StoreError> {
    let schema = T::schema();
    let polars_error = |source| StoreError::Polars { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_error(path))?;
    let part = ParquetReader::new(file)
        .finish()
        .map_err(|source| StoreError::CorruptPart { path: path.to_path_buf(), source })?;
    let part = with_added_columns(part, &schema).map_err(polars_error)?;
    if part.schema().as_ref() != &schema {
        return Err(StoreError::SchemaMismatch {
            path: path.to_path_buf(),
            table: T::NAME,
            expected: describe(&schema),
            found: describe(part.schema()),
        });
    }
    Ok(part)
}

/// A part written before columns were added to its table gets them as nulls, in schema
/// order, so runs stored by older builds stay readable (and comparable). Anything else —
/// a missing column the part cannot be given, a column of another type — is left for the
/// schema check to report.
fn with_added_columns(part: DataFrame, schema: &polars::prelude::Schema) -> polars::prelude::PolarsResult<DataFrame> {
    let present = part.schema();
    if present.as_ref() == schema || present.iter_names().any(|name| !schema.contains(name)) {
        return Ok(part);
    }
    let height = part.height();
    let mut columns = Vec::with_capacity(schema.len());
    for (name, dtype) in schema.iter() {
        match part.column(name) {
            Ok(column) => columns.push(column.clone()),
            Err(_) => columns.push(polars::prelude::Column::full_null(name.clone(), height, dtype)),
        }
    }
    DataFrame::new(height, columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_names_become_short_slugs() {
        assert_eq!(short_name("default"), "default");
        assert_eq!(short_name("My Suite: CIFAR/10!"), "my-suite-cifar-10");
        assert_eq!(short_name("***"), "suite");
        assert_eq!(short_name(&"a".repeat(50)).len(), 32);
    }

    #[test]
    fn trial_ids_must_be_plain_file_names() {
        assert!(check_trial_id("t0007-resnet18-gpipe-w2").is_ok());
        assert!(check_trial_id("").is_err());
        assert!(check_trial_id(".hidden").is_err());
        assert!(check_trial_id("a/b").is_err());
    }
}
