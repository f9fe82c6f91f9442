//! One typed view of a run folder, the way every reader reads a run: its fingerprint, its
//! finished trials in matrix order, each with its [`CellKey`], the cells in the order the
//! suite first lists them, and its other tables as typed rows. Reports and `compare` read
//! a run through it, so a run is read one way and a cell means one thing; polars does the
//! group-bys on what it reads.

use std::collections::HashMap;
use std::path::Path;

use crate::{CellKey, Fingerprint, PipelineStageRow, RunStore, StoreError, Table, TrialRow};

/// A run's finished trials and their cells; other tables load on demand.
#[derive(Debug, Clone)]
pub struct RunView {
    store: RunStore,
    fingerprint: Fingerprint,
    trials: Vec<TrialRow>,
    /// Each trial's cell, an index into `cells`.
    cell_of: Vec<usize>,
    cells: Vec<CellKey>,
}

impl RunView {
    /// Reads the run in `run_dir`: its fingerprint and finished trials.
    ///
    /// Hybrid trials of runs stored before the `pipeline_stages` column existed take their
    /// stage count from the run's `pipeline_stages` table, which those runs already wrote.
    pub fn open(run_dir: &Path) -> Result<RunView, StoreError> {
        RunView::of(RunStore::open(run_dir)?)
    }

    /// The view of an opened store.
    pub fn of(store: RunStore) -> Result<RunView, StoreError> {
        let fingerprint = store.fingerprint()?;
        let mut trials: Vec<TrialRow> = store.load_rows()?;
        trials.sort_by_key(|trial| (trial.index, trial.repeat));
        if trials.iter().any(lacks_stage_count) {
            let stages: Vec<PipelineStageRow> = store.load_rows()?;
            let count_of: HashMap<&str, u32> =
                stages.iter().map(|row| (row.trial_id.as_str(), row.info.stages)).collect();
            for trial in trials.iter_mut().filter(|trial| lacks_stage_count(trial)) {
                trial.parameters.pipeline_stages =
                    count_of.get(trial.trial_id.as_str()).map(|&stages| i64::from(stages));
            }
        }
        let mut cells: Vec<CellKey> = Vec::new();
        let mut index_of: HashMap<CellKey, usize> = HashMap::new();
        let mut cell_of = Vec::with_capacity(trials.len());
        for trial in &trials {
            let key =
                CellKey::of(trial).map_err(|source| StoreError::Cell { run: store.run_dir().to_path_buf(), source })?;
            let index = *index_of.entry(key.clone()).or_insert_with(|| {
                cells.push(key);
                cells.len() - 1
            });
            cell_of.push(index);
        }
        Ok(RunView { store, fingerprint, trials, cell_of, cells })
    }

    /// The run id (its folder's name).
    pub fn run_id(&self) -> &str {
        self.store.run_id()
    }

    /// The store the view reads.
    pub fn store(&self) -> &RunStore {
        &self.store
    }

    /// The environment the run was measured in.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The finished trials, in matrix order (index, then repeat).
    pub fn trials(&self) -> &[TrialRow] {
        &self.trials
    }

    /// The cells, in the order the matrix first lists them.
    pub fn cells(&self) -> &[CellKey] {
        &self.cells
    }

    /// The cell of the `i`-th trial of [`RunView::trials`].
    pub fn cell_of(&self, i: usize) -> &CellKey {
        &self.cells[self.cell_of[i]]
    }

    /// Index into [`RunView::cells`] of the `i`-th trial's cell.
    pub fn cell_index(&self, i: usize) -> usize {
        self.cell_of[i]
    }

    /// Each trial with its cell, in matrix order.
    pub fn trials_with_cells(&self) -> impl Iterator<Item = (&TrialRow, &CellKey)> {
        self.trials.iter().zip(&self.cell_of).map(|(trial, &cell)| (trial, &self.cells[cell]))
    }

    /// Every row of table `T` over the finished trials (every row of a run-level table).
    pub fn rows<T: Table>(&self) -> Result<Vec<T>, StoreError> {
        self.store.load_rows()
    }

    /// The rows of per-trial table `T` of one trial, read from its part alone.
    pub fn trial_rows<T: Table>(&self, trial_id: &str) -> Result<Vec<T>, StoreError> {
        self.store.load_trial_rows(trial_id)
    }
}

/// A hybrid trial stored before its stage count had a column.
fn lacks_stage_count(trial: &TrialRow) -> bool {
    trial.strategy == stratlab_strategy_spec::StrategyKind::Hybrid && trial.parameters.pipeline_stages.is_none()
}
