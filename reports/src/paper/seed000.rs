//! Seed 000's (the single-GPU vs data/model/GPipe study) figures 5–6 (accuracy and time
//! against batch size), 7–10 (per strategy), 11 (evaluation throughput) and 14 (validation
//! loss).

use std::collections::BTreeMap;

use stratlab_results::stats::median;
use stratlab_results::{CellKey, EvaluationRow, PaperFigure};

use super::drawn::{stem, Drawn, PaperRun};
use crate::run_report::embed;
use crate::{device_usage, paper_lines, throughput, PaperLine, PaperLines, ReportError};

/// How a line is named: the strategy with its workers (`data-parallel×2`).
fn line_label(paper_run: &PaperRun<'_>, key: &CellKey) -> String {
    format!("{}×{}", paper_run.aggregates.labels.strategy(key), key.workers)
}

/// The panel of a cell: its network and data set.
fn panel(key: &CellKey) -> String {
    format!("{} / {}", key.network, key.dataset_label())
}

/// A cell with its batch left out: the line a batch sweep draws.
fn without_batch(key: &CellKey) -> CellKey {
    CellKey { batch_size: 0, ..key.clone() }
}

/// Figs. 5 and 6: final test accuracy, and seconds per epoch, against batch size.
pub(super) fn against_batch(figure: PaperFigure, paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let aggregates = paper_run.aggregates;
    let mut batches: Vec<u32> = aggregates.throughput.iter().map(|cell| cell.key.batch_size).collect();
    batches.sort_unstable();
    batches.dedup();
    if batches.len() < 2 {
        return Ok(Drawn::Missing("the run trained one batch size; the figure needs a `batch_size` axis".into()));
    }
    let accuracy = figure == PaperFigure::Seed000AccuracyAgainstBatch;
    let mut by_line: BTreeMap<CellKey, (usize, Vec<(f64, f64)>)> = BTreeMap::new();
    for (order, cell) in aggregates.throughput.iter().enumerate() {
        let value = match accuracy {
            true => {
                let finals: Vec<f64> = aggregates
                    .accuracy
                    .iter()
                    .filter(|trial| trial.trial.key == cell.key)
                    .filter_map(|trial| trial.final_accuracy)
                    .collect();
                median(&finals).map(|accuracy| 100.0 * accuracy)
            }
            false => cell.seconds_per_epoch.stat().map(|stat| stat.median),
        };
        if let Some(value) = value {
            let line = by_line.entry(without_batch(&cell.key)).or_insert((order, Vec::new()));
            line.1.push((f64::from(cell.key.batch_size), value));
        }
    }
    let mut lines: Vec<(usize, PaperLine)> = by_line
        .into_iter()
        .map(|(key, (order, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            (order, PaperLine { panel: panel(&key), label: line_label(paper_run, &key), points })
        })
        .collect();
    lines.sort_by_key(|(order, _)| *order);
    let lines: Vec<PaperLine> = lines.into_iter().map(|(_, line)| line).collect();
    if lines.iter().all(|line| line.points.is_empty()) {
        return Ok(Drawn::Missing("no cell finished with a measured value".into()));
    }
    let (title, y_desc, caption) = match accuracy {
        true => (
            "Final test accuracy against batch size",
            "test accuracy (%)",
            "As seed 000's fig. 5 (a small CNN, accuracy after the same number of epochs at each batch size): \
             the median over repeats of each cell's test accuracy after its last epoch.",
        ),
        false => (
            "Seconds per epoch against batch size",
            "seconds per epoch",
            "As seed 000's fig. 6, which plots the total for its 5 epochs (5 × this): each cell's median seconds \
             per epoch, measured over whole epochs, else estimated from the timed steps.",
        ),
    };
    let figure_lines = PaperLines {
        title: title.to_owned(),
        note: "a line per strategy, a point per batch size (median over repeats)".to_owned(),
        x_desc: "batch size (per worker; per pipeline for pipelines)".to_owned(),
        y_desc: y_desc.to_owned(),
        y_from_zero: !accuracy,
        lines,
    };
    let paths = paper_lines(&figure_lines, &(paper_run.figure)(&stem(figure)))?;
    Ok(Drawn::figure(paths, title, caption.to_owned()))
}

/// Figs. 7–10: seconds per epoch and throughput, utilisation and memory per strategy.
pub(super) fn per_strategy(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let aggregates = paper_run.aggregates;
    if aggregates.is_empty() {
        return Ok(Drawn::Missing("the run has no finished trial".into()));
    }
    let name = stem(PaperFigure::Seed000PerStrategy);
    let mut figures = embed(
        throughput(&aggregates.throughput_bars(), &(paper_run.figure)(&format!("{name}_throughput")))?,
        "Seconds per epoch and throughput per strategy (seed 000 figs. 7 and 10)".to_owned(),
    );
    figures.extend(embed(
        device_usage(&aggregates.device_usage_bars(), &(paper_run.figure)(&format!("{name}_device")))?,
        "Mean and peak utilisation and memory per strategy (seed 000 figs. 8 and 9)".to_owned(),
    ));
    Ok(Drawn::Shown {
        figures,
        tables: Vec::new(),
        caption: "As seed 000's figs. 7–10 (ResNet on 2 GPUs): seconds per epoch and samples per second (figs. 7 and \
                  10), then mean and peak device utilisation and memory (figs. 8 and 9) per strategy: NVML's on GPU \
                  nodes, the trial's processes' CPU use and resident memory on a CPU machine."
            .to_owned(),
    })
}

/// The lowest rank's evaluations of each trial, in order (a parameter server's own first).
fn evaluations_by_trial(paper_run: &PaperRun<'_>) -> Result<BTreeMap<String, Vec<EvaluationRow>>, ReportError> {
    let rows: Vec<EvaluationRow> = paper_run
        .run
        .rows()
        .map_err(|source| ReportError::Load { table: <EvaluationRow as stratlab_results::Table>::NAME, source })?;
    let mut by_trial: BTreeMap<String, Vec<EvaluationRow>> = BTreeMap::new();
    for row in rows {
        by_trial.entry(row.trial_id.clone()).or_default().push(row);
    }
    for rows in by_trial.values_mut() {
        let first = rows.iter().map(|row| (!row.by_server, row.worker)).min();
        rows.retain(|row| Some((!row.by_server, row.worker)) == first);
        rows.sort_by_key(|row| row.record.after_step);
    }
    Ok(by_trial)
}

/// One line per cell from its first `ok` repeat's evaluations, as `point` maps them.
fn evaluation_lines(
    paper_run: &PaperRun<'_>,
    point: impl Fn(&EvaluationRow, &str) -> Option<(f64, f64)>,
) -> Result<Vec<PaperLine>, ReportError> {
    let evaluations = evaluations_by_trial(paper_run)?;
    let mut drawn: Vec<&CellKey> = Vec::new();
    let mut lines = Vec::new();
    for (trial, key) in paper_run.run.trials_with_cells().filter(|(trial, _)| trial.outcome.is_ok()) {
        if drawn.contains(&key) {
            continue;
        }
        let Some(rows) = evaluations.get(&trial.trial_id) else { continue };
        let points: Vec<(f64, f64)> = rows.iter().filter_map(|row| point(row, &trial.trial_id)).collect();
        if points.is_empty() {
            continue;
        }
        drawn.push(key);
        lines.push(PaperLine { panel: panel(key), label: line_label(paper_run, key), points });
    }
    Ok(lines)
}

/// Fig. 11: samples evaluated per second at each evaluation, against wall time.
pub(super) fn evaluation_throughput(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let lines = evaluation_lines(paper_run, |row, _| {
        let rate = row.record.samples as f64 / row.record.time_s;
        (rate.is_finite() && row.record.elapsed_s.is_finite()).then_some((row.record.elapsed_s, rate))
    })?;
    if lines.is_empty() {
        return Ok(Drawn::Missing("no trial recorded an evaluation".into()));
    }
    let figure = PaperLines {
        title: "Evaluation throughput over the run".to_owned(),
        note: "a point per evaluation of each cell's first repeat (the lowest rank's)".to_owned(),
        x_desc: "wall seconds since training started".to_owned(),
        y_desc: "samples evaluated per second".to_owned(),
        y_from_zero: true,
        lines,
    };
    let paths = paper_lines(&figure, &(paper_run.figure)(&stem(PaperFigure::Seed000EvaluationThroughput)))?;
    Ok(Drawn::figure(
        paths,
        "Evaluation throughput over the run",
        "As seed 000's fig. 11 (samples processed per step during validation): each evaluation's samples ÷ its \
         seconds, at the wall time it ended."
            .to_owned(),
    ))
}

/// Fig. 14: validation (test-split) loss per epoch.
pub(super) fn validation_loss(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let steps_per_epoch: BTreeMap<&str, f64> = paper_run
        .aggregates
        .loss
        .iter()
        .filter_map(|loss| Some((loss.trial.trial_id.as_str(), loss.steps_per_epoch?.steps().max(1) as f64)))
        .collect();
    let lines = evaluation_lines(paper_run, |row, trial_id| {
        let per_epoch = steps_per_epoch.get(trial_id)?;
        let epoch = row.record.after_step as f64 / per_epoch;
        row.record.loss.is_finite().then_some((epoch, row.record.loss))
    })?;
    if lines.is_empty() {
        return Ok(Drawn::Missing("no trial recorded an evaluation with its steps per epoch".into()));
    }
    let figure = PaperLines {
        title: "Validation loss per epoch".to_owned(),
        note: "a point per evaluation of each cell's first repeat (the lowest rank's)".to_owned(),
        x_desc: "epoch".to_owned(),
        y_desc: "test-split loss (cross-entropy)".to_owned(),
        y_from_zero: false,
        lines,
    };
    let paths = paper_lines(&figure, &(paper_run.figure)(&stem(PaperFigure::Seed000ValidationLoss)))?;
    Ok(Drawn::figure(
        paths,
        "Validation loss per epoch",
        "As seed 000's fig. 14: the mean loss on the test split at each evaluation, against the epochs trained \
         before it (steps ÷ steps per epoch)."
            .to_owned(),
    ))
}
