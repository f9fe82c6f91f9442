//! The parameter server's modes side by side: per cell, the time per update (hardware
//! efficiency), the updates to the accuracy target (statistical efficiency), their
//! product, the time to target, and the staleness the gradients arrived with; and the
//! figure of accuracy against time and against updates. A run shows this section when any
//! parameter-server cell answers each worker on its own (`mode: async`, `bounded`, or
//! backup workers); its synchronous cells stand beside them.

use stratlab_results::{CellKey, EvaluationRow, GradientUpdateRow, Outcome, RunView, Table, TrialRow};
use stratlab_strategy_spec::{Consistency, ServerSettings, StrategyKind};

use crate::aggregate::Labels;
use crate::figures::asynchrony::{AsynchronyFigure, ModeCurve, StragglerRow, UpdatePoint};
use crate::html::ReportSection;
use crate::tables::SummaryTable;
use crate::{ReportError, Stat};

/// What one parameter-server trial did, from its rows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerTrial {
    pub(crate) trial_id: String,
    pub(crate) ok: bool,
    /// The trial's median step: a server update ([`stratlab_results::TrainingSummary`]).
    pub(crate) seconds_per_update: Option<f64>,
    /// Gradients each training rank pushed (a synchronous round's: its steps).
    pub(crate) gradients_per_worker: Vec<u64>,
    /// The staleness of every gradient applied (0 for a synchronous round's).
    pub(crate) staleness: Vec<u64>,
    /// Gradients dropped (a backup worker's late ones).
    pub(crate) dropped: u64,
    /// Updates applied by the first evaluation at or above the target.
    pub(crate) updates_to_target: Option<f64>,
    /// Gradients one update applies: a round's N (N − b with backups), else 1.
    pub(crate) gradients_per_update: f64,
    /// `trials.time_to_accuracy_s`.
    pub(crate) time_to_target_s: Option<f64>,
    /// The trial's evaluations, with the updates applied by each.
    pub(crate) points: Vec<UpdatePoint>,
}

/// A parameter-server cell and its repeats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerCell {
    pub(crate) key: CellKey,
    pub(crate) target_accuracy: f64,
    pub(crate) trials: Vec<ServerTrial>,
}

/// Whether a cell's server answers each worker on its own.
fn per_worker(key: &CellKey) -> bool {
    key.strategy.server_settings().consistency != (Consistency::Sync { backup_workers: 0 })
}

/// Every parameter-server cell of `run`, in the run's order, where any answers each worker
/// on its own; `None` otherwise.
pub(crate) fn server_cells(run: &RunView) -> Result<Option<Vec<ServerCell>>, ReportError> {
    let is_server = |key: &CellKey| key.strategy.kind() == StrategyKind::ParameterServer;
    if !run.cells().iter().any(|key| is_server(key) && per_worker(key)) {
        return Ok(None);
    }
    let gradients: Vec<GradientUpdateRow> =
        run.rows().map_err(|source| ReportError::Load { table: GradientUpdateRow::NAME, source })?;
    let evaluations: Vec<EvaluationRow> =
        run.rows().map_err(|source| ReportError::Load { table: EvaluationRow::NAME, source })?;
    let mut cells: Vec<ServerCell> = Vec::new();
    for (trial, key) in run.trials_with_cells().filter(|(_, key)| is_server(key)) {
        let mine = |row: &&GradientUpdateRow| row.trial_id == trial.trial_id;
        let pushed: Vec<&GradientUpdateRow> = gradients.iter().filter(mine).collect();
        let evaluated: Vec<&EvaluationRow> = evaluations.iter().filter(|row| row.trial_id == trial.trial_id).collect();
        let record = server_trial(trial, key.strategy.server_settings(), &pushed, &evaluated);
        match cells.iter_mut().find(|cell| cell.key == *key) {
            Some(cell) => cell.trials.push(record),
            None => cells.push(ServerCell {
                key: key.clone(),
                target_accuracy: trial.target_accuracy,
                trials: vec![record],
            }),
        }
    }
    Ok(Some(cells))
}

/// One trial's numbers. A synchronous server records no gradients: each of its steps is an
/// update of every worker's gradient, none stale.
fn server_trial(
    trial: &TrialRow,
    settings: ServerSettings,
    pushed: &[&GradientUpdateRow],
    evaluated: &[&EvaluationRow],
) -> ServerTrial {
    let training = settings.placement.training_ranks(trial.workers as usize);
    let steps = trial.steps_completed.max(0) as u64;
    let (gradients_per_worker, staleness, dropped) = if pushed.is_empty() {
        (vec![steps; training], vec![0; steps as usize * training], 0)
    } else {
        let mut ranks: Vec<u32> = pushed.iter().map(|row| row.record.worker).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let per_worker = ranks.iter().map(|&rank| pushed.iter().filter(|row| row.record.worker == rank).count() as u64);
        let applied: Vec<u64> = pushed.iter().filter(|row| row.record.applied).map(|row| row.staleness).collect();
        let dropped = pushed.len() as u64 - applied.len() as u64;
        (per_worker.collect(), applied, dropped)
    };
    // The server's own evaluations where it made them (it counts updates), else the
    // lowest rank's, whose updates are the gradients applied by then (a synchronous
    // round's: its steps).
    let by_server = evaluated.iter().any(|row| row.by_server);
    let lead = evaluated.iter().filter(|row| row.by_server == by_server).map(|row| row.worker).min();
    let mut points: Vec<UpdatePoint> = evaluated
        .iter()
        .filter(|row| row.by_server == by_server && Some(row.worker) == lead)
        .filter(|row| (0.0..=1.0).contains(&row.record.accuracy) && row.record.elapsed_s.is_finite())
        .map(|row| {
            let updates = match (by_server, pushed.is_empty()) {
                (true, _) | (false, true) => row.record.after_step as f64,
                (false, false) => pushed
                    .iter()
                    .filter(|pushed| pushed.record.applied && pushed.record.time_s <= row.record.elapsed_s)
                    .count() as f64,
            };
            UpdatePoint { wall_s: row.record.elapsed_s.max(0.0), updates, test_accuracy: row.record.accuracy }
        })
        .collect();
    points.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let updates_to_target =
        points.iter().find(|point| point.test_accuracy >= trial.target_accuracy).map(|point| point.updates);
    let gradients_per_update = match settings.consistency {
        Consistency::PerGradient { .. } => 1.0,
        Consistency::Sync { backup_workers } => training.saturating_sub(backup_workers).max(1) as f64,
    };
    ServerTrial {
        trial_id: trial.trial_id.clone(),
        gradients_per_update,
        ok: trial.outcome == Outcome::Ok,
        seconds_per_update: trial.training.step_time_median_s,
        gradients_per_worker,
        staleness,
        dropped,
        updates_to_target,
        time_to_target_s: trial.training.time_to_accuracy_s,
        points,
    }
}

/// The median and range over a cell's `ok` repeats of `of`, where any has it.
fn over_repeats(cell: &ServerCell, of: impl Fn(&ServerTrial) -> Option<f64>) -> Option<Stat> {
    let values: Vec<f64> = cell.trials.iter().filter(|trial| trial.ok).filter_map(of).collect();
    Stat::from_samples(&values)
}

/// The table of every cell: time per update, staleness, updates and time to target.
pub(crate) fn asynchrony_table(cells: &[ServerCell], labels: &Labels) -> Result<SummaryTable, ReportError> {
    let stat = |of: &dyn Fn(&ServerTrial) -> Option<f64>| -> Vec<Option<Stat>> {
        cells.iter().map(|cell| over_repeats(cell, of)).collect()
    };
    let per_update = stat(&|trial| trial.seconds_per_update.map(|s| s * 1e3));
    let to_target = stat(&|trial| trial.updates_to_target);
    let gradients_to_target = stat(&|trial| trial.updates_to_target.map(|u| u * trial.gradients_per_update));
    let product = stat(&|trial| trial.updates_to_target.zip(trial.seconds_per_update).map(|(u, s)| u * s));
    let time = stat(&|trial| trial.time_to_target_s);
    let gradients = stat(&|trial| {
        let counts = &trial.gradients_per_worker;
        (!counts.is_empty()).then(|| counts.iter().sum::<u64>() as f64 / counts.len() as f64)
    });
    // Every applied gradient's staleness over a cell's ok repeats, pooled once per cell.
    let pooled: Vec<Vec<f64>> = cells
        .iter()
        .map(|cell| {
            let ok = cell.trials.iter().filter(|trial| trial.ok);
            ok.flat_map(|trial| trial.staleness.iter().map(|&s| s as f64)).collect()
        })
        .collect();
    let staleness_of = |q: f64| pooled.iter().map(|values| stratlab_results::stats::quantile(values, q)).collect();
    let mean_staleness = pooled.iter().map(|values| stratlab_results::stats::mean(values)).collect();
    let dropped =
        cells.iter().map(|cell| Some(cell.trials.iter().filter(|t| t.ok).map(|t| t.dropped as i64).sum())).collect();
    let notes = cells
        .iter()
        .map(|cell| {
            let ok = cell.trials.iter().filter(|t| t.ok).count();
            let reached = cell.trials.iter().filter(|t| t.ok && t.updates_to_target.is_some()).count();
            (reached < ok).then(|| format!("target not reached in {} of {ok} repeats", ok - reached))
        })
        .collect();
    let median = |stats: &[Option<Stat>]| stats.iter().map(|s| s.map(|s| s.median)).collect::<Vec<_>>();
    let range = |stats: &[Option<Stat>]| {
        stats
            .iter()
            .map(|s| {
                s.filter(|s| s.n > 1).map(|s| {
                    format!("{}–{}", crate::tables::three_significant(s.min), crate::tables::three_significant(s.max))
                })
            })
            .collect::<Vec<_>>()
    };
    crate::tables::Columns::default()
        .keys(labels, cells.iter().map(|cell| &cell.key))
        .float("time per update (ms, median)", median(&per_update))
        .maybe_text("time per update (ms, range)", range(&per_update))
        .float("gradients per worker (median)", median(&gradients))
        .float("staleness (mean)", mean_staleness)
        .float("staleness (p99)", staleness_of(0.99))
        .float("staleness (max)", staleness_of(1.0))
        .int("gradients dropped", dropped)
        .float("updates to target (median)", median(&to_target))
        .maybe_text("updates to target (range)", range(&to_target))
        .float("gradients to target (median)", median(&gradients_to_target))
        .float("updates × time per update (s, median)", median(&product))
        .float("time to target (s, median)", median(&time))
        .maybe_text("time to target (s, range)", range(&time))
        .int("repeats", cells.iter().map(|cell| Some(cell.trials.len() as i64)).collect())
        .maybe_text("note", notes)
        .finish("asynchrony", "Parameter-server modes: time per update, updates and time to the accuracy target")
}

/// `no straggler` or `straggler rank 1 ×2`: a cell's row of the figure.
fn straggler_caption(key: &CellKey) -> String {
    match &key.straggler {
        Some(straggler) => format!("straggler {straggler}"),
        None => "no straggler".into(),
    }
}

/// One figure per network and data set: a row per straggler setting, a colour per mode.
pub(crate) fn asynchrony_figures(cells: &[ServerCell], labels: &Labels) -> Vec<AsynchronyFigure> {
    let mut figures: Vec<AsynchronyFigure> = Vec::new();
    for cell in cells {
        let key = &cell.key;
        let figure = match figures.iter().position(|f| f.network == key.network && f.dataset == key.dataset_label()) {
            Some(index) => &mut figures[index],
            None => {
                figures.push(AsynchronyFigure {
                    network: key.network.clone(),
                    dataset: key.dataset_label(),
                    target_accuracy: cell.target_accuracy,
                    modes: Vec::new(),
                    rows: Vec::new(),
                });
                figures.last_mut().expect("just pushed")
            }
        };
        let unslowed = key.without_straggler();
        let mode_label = labels.strategy(&unslowed);
        let mode = match figure.modes.iter().position(|known| *known == mode_label) {
            Some(index) => index,
            None => {
                figure.modes.push(mode_label);
                figure.modes.len() - 1
            }
        };
        let caption = straggler_caption(key);
        let row = match figure.rows.iter().position(|row| row.caption == caption) {
            Some(index) => index,
            None => {
                figure.rows.push(StragglerRow { caption, curves: Vec::new() });
                figure.rows.len() - 1
            }
        };
        for trial in cell.trials.iter().filter(|trial| trial.ok && !trial.points.is_empty()) {
            figure.rows[row].curves.push(ModeCurve { mode, points: trial.points.clone() });
        }
    }
    for figure in &mut figures {
        // No straggler first, then the slowed settings as the run ordered them.
        figure.rows.sort_by_key(|row| row.caption != "no straggler");
    }
    figures
}

/// The page section: the figures, then the table.
pub(crate) fn asynchrony_section(
    cells: &[ServerCell],
    labels: &Labels,
    figure: &dyn Fn(&str) -> crate::FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let mut figures = Vec::new();
    for drawn in asynchrony_figures(cells, labels).iter().filter(|f| f.rows.iter().any(|row| !row.curves.is_empty())) {
        let stem = format!(
            "asynchrony_{}_{}",
            crate::run_report::file_part(&drawn.network),
            crate::run_report::file_part(&drawn.dataset)
        );
        let alt = format!(
            "Accuracy against wall time and updates per parameter-server mode: {} on {}",
            drawn.network, drawn.dataset
        );
        figures.extend(
            crate::figures::asynchrony::asynchrony(drawn, &figure(&stem))?
                .into_iter()
                .map(|path| crate::html::ReportFigure::new(path, alt.clone())),
        );
    }
    let table = asynchrony_table(cells, labels)?;
    let section = ReportSection {
        id: "asynchrony".into(),
        title: "Parameter-server modes".into(),
        caption: "Per cell, medians over its repeats. Time per update is the trial's step: a synchronous \
                  round, or in the asynchronous modes the time between the server's updates (1 / Σ 1/t over \
                  the workers; with backup workers the round the first N − b gradients end). Staleness is the \
                  updates the server applied between a worker's pull and its gradient's arrival. Updates to \
                  target count to the first evaluation at or above the target (a dedicated server evaluates \
                  the weights it serves every eval.every_steps updates); updates × time per update is the \
                  time to target without evaluations and loader stalls. Statistical efficiency (updates to \
                  target) is measured here and not predicted; the model predicts the time per update. Gradients \
                  to target set a round of N gradients beside N per-gradient updates at lr ÷ N."
            .into(),
        figures,
        tables: vec![crate::run_report::html_table(&table)],
    };
    tables.push(table);
    Ok(section)
}
