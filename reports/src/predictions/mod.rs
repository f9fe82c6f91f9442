//! The report's "Predicted vs measured" tables: every cell's prediction (made before any
//! trial trained) beside what its trials measured, each group's recommendation judged as
//! the thesis's tables 8.1/8.2 judge it, and the summary the best predictors report (median
//! and max |error|, MAPE, Kendall τ, top-1, regret) for stratlab's model and for the
//! thesis's closed forms side by side. Runs without a `predictions` table have no section.

mod judge;
mod machine_speed;
mod paper_views;
mod predicted_speedup;
mod published;

pub(crate) use paper_views::{recommendation_grids, signed_errors};
pub use predicted_speedup::{write_predicted_speedup, PredictedCell, StepTimes};
pub use published::{
    draw_published_scaling, published_errors, published_summary_text, published_table_text, PublishedErrors,
};

use polars::prelude::Column;
use stratlab_perf_model::recommend::SCALE_OUT_MARGIN;
use stratlab_results::stats::{mean, median};
use stratlab_results::{PredictionRow, RunView};
use stratlab_strategy_spec::StrategyKind;
use stratlab_units::Link;

use judge::{group_label, judge_cells, recommend, JudgedCell, Predictor, Recommendation};

use crate::aggregate::Labels;
use crate::tables::SummaryTable;
use crate::{HtmlTable, PredictionError, ReportError, ReportFigure, ReportSection};

const MIB: f64 = 1024.0 * 1024.0;

/// The section's three tables and its deviation bars' errors.
pub(crate) type PredictionSection = ([SummaryTable; 3], Vec<PredictionError>);

/// The section's three tables and its deviation bars' errors, or `None` when no
/// prediction meets a finished trial.
pub(crate) fn prediction_tables(
    predictions: &[PredictionRow],
    run: &RunView,
    labels: &Labels,
) -> Result<Option<PredictionSection>, ReportError> {
    let cells = judge_cells(predictions, run);
    if cells.is_empty() {
        return Ok(None);
    }
    let tables = [cell_table(&cells)?, recommendation_table(&cells)?, summary_table(&cells)?];
    Ok(Some((tables, step_errors(&cells, labels))))
}

/// The recommendation table (thesis tables 8.1/8.2) and the summary of both predictors,
/// for predictions judged against a run's trials outside a report (`stratlab predict
/// --against`), or `None` when no prediction meets a finished trial.
pub fn judged_predictions(
    predictions: &[PredictionRow],
    run: &RunView,
) -> Result<Option<[SummaryTable; 2]>, ReportError> {
    let cells = judge_cells(predictions, run);
    if cells.is_empty() {
        return Ok(None);
    }
    Ok(Some([recommendation_table(&cells)?, summary_table(&cells)?]))
}

/// Every judged cell's |step error| by each predictor that has a prediction for it.
fn step_errors(cells: &[JudgedCell], labels: &Labels) -> Vec<PredictionError> {
    cells
        .iter()
        .filter(|cell| cell.judged())
        .flat_map(|cell| {
            Predictor::BOTH.into_iter().filter_map(move |predictor| {
                Some(PredictionError {
                    series: labels.series(&cell.key).strategy(),
                    network: cell.key.network.clone(),
                    predictor: predictor.name().to_owned(),
                    abs_error_percent: 100.0 * predictor.error(cell)?.abs(),
                })
            })
        })
        .collect()
}

/// What tables call the machine's own link, where others were emulated.
const LOOPBACK: &str = "loopback";

fn percent(error: Option<f64>) -> Option<f64> {
    error.map(|error| 100.0 * error)
}

fn ms(seconds: Option<f64>) -> Option<f64> {
    seconds.map(|seconds| seconds * 1e3)
}

fn frame(name: &str, title: &str, columns: Vec<Column>) -> Result<SummaryTable, ReportError> {
    SummaryTable::from_columns(name, title, columns)
}

/// Thesis figs. 4.1/5.1/6.2 and tables 8.1/8.2 as tables: the predictions made before any
/// trial trained, judged against the trials.
pub(crate) fn prediction_section(
    prediction_tables: &[SummaryTable; 3],
    figures: Vec<ReportFigure>,
    html_table: fn(&SummaryTable) -> HtmlTable,
) -> ReportSection {
    ReportSection {
        id: "predicted-vs-measured".to_owned(),
        title: "Predicted vs measured".to_owned(),
        caption: format!(
            "Before its first trial the run profiled every network on this machine and probed the link, and \
             the performance model predicted every cell's step and its fullest worker's peak memory; the \
             thesis's closed forms (eq. 5.1, 6.1 + 6.2) predicted the cells they cover. Nothing was fitted to \
             the trials. Errors are (predicted − measured) ÷ measured, against the median over repeats of \
             each trial's 10th-percentile step; peak memory against the largest worker's measured peak. \
             Groups rank every cell of one network, data set and batch per worker by time per sample; each \
             predictor picks its predicted fastest, unless cells on fewer workers are predicted within {:.0} % \
             of it (the model's typical error: a gain inside it is not worth a device), then the fastest of \
             those. A pick counts as top-1 when it is the measured fastest or within the run-to-run \
             noise of the two: the larger of the fastest's and the pick's, each the spread of its repeats' p10 \
             (largest ÷ smallest − 1) where it has several and never less than its steps' spread within a \
             trial (median ÷ p10 − 1); \"top-1 exact\" counts only the fastest itself. Regret is the pick's measured time per sample over the fastest's, − 1. \
             Summaries leave out single, whose prediction is its own training steps. \
             Before every profile and every trial the runner timed one fixed piece of work on every core \
             (on one thread in runs before profiles were retaken); a stored profile whose reference read more \
             than the limit (15 % by default) slower than the machine did before this run was retaken, and \
             \"profile retaken\" says why; \"machine slower than at profiling\" compares the median of that over a trial and its two \
             neighbours on each side with its median over the run's profiles. It is a sign, not a correction: \
             on a steady machine it also reads about a tenth higher after a large network's trial than after a \
             small one's, so only a slowdown well past that says the host itself slowed.",
            100.0 * SCALE_OUT_MARGIN
        ),
        figures,
        tables: prediction_tables.iter().map(html_table).collect(),
    }
}

/// Per cell: predicted and measured step and peak memory, the errors, the breakdown.
fn cell_table(cells: &[JudgedCell]) -> Result<SummaryTable, ReportError> {
    let text = |f: &dyn Fn(&JudgedCell) -> String| cells.iter().map(f).collect::<Vec<String>>();
    let float = |f: &dyn Fn(&JudgedCell) -> Option<f64>| cells.iter().map(f).collect::<Vec<Option<f64>>>();
    let columns = vec![
        Column::new("network".into(), text(&|c| c.key.network.clone())),
        Column::new("dataset".into(), text(&|c| c.key.dataset.clone())),
        Column::new("strategy".into(), text(&|c| c.label.clone())),
        Column::new("W".into(), cells.iter().map(|c| i64::from(c.key.workers)).collect::<Vec<i64>>()),
        Column::new("batch/worker".into(), cells.iter().map(|c| i64::from(c.key.batch_size)).collect::<Vec<i64>>()),
        Column::new("link".into(), text(&|c| c.key.link.map_or_else(|| LOOPBACK.to_owned(), |link| link.name()))),
        Column::new("predicted step (ms)".into(), float(&|c| ms(c.prediction.step_s))),
        Column::new("thesis step (ms)".into(), float(&|c| ms(c.prediction.thesis_step_s))),
        Column::new("measured p10 (ms)".into(), float(&|c| ms(Some(c.measured_p10_s)))),
        Column::new("measured median (ms)".into(), float(&|c| ms(Some(c.measured_median_s)))),
        Column::new("run-to-run spread (%)".into(), float(&|c| percent(c.run_to_run_spread))),
        Column::new("machine slower than at profiling (%)".into(), float(&|c| percent(c.machine_slowdown))),
        Column::new("model error (%)".into(), float(&|c| percent(c.model_error()))),
        Column::new("thesis error (%)".into(), float(&|c| percent(c.thesis_error()))),
        Column::new("predicted peak (MiB)".into(), float(&|c| c.prediction.peak_memory_bytes.map(|b| b / MIB))),
        Column::new("measured peak (MiB)".into(), float(&|c| c.measured_memory_bytes.map(|b| b / MIB))),
        Column::new("memory error (%)".into(), float(&|c| percent(c.memory_error()))),
        Column::new("compute (ms)".into(), float(&|c| ms(c.prediction.compute_s))),
        Column::new("exposed comm (ms)".into(), float(&|c| ms(c.prediction.exposed_comm_s))),
        Column::new("bubble (ms)".into(), float(&|c| ms(c.prediction.bubble_s))),
        Column::new("optimizer (ms)".into(), float(&|c| ms(c.prediction.optimizer_s))),
        Column::new("core sharing (×)".into(), float(&|c| Some(c.prediction.core_sharing))),
        Column::new("why no prediction".into(), text(&|c| c.prediction.step_unavailable.clone().unwrap_or_default())),
        Column::new("profile retaken".into(), text(&|c| c.prediction.profile_retaken.clone().unwrap_or_default())),
    ];
    frame("predicted_vs_measured", "Predicted (before training) vs measured, per cell", columns)
}

/// Per group and predictor: the recommended and the measured fastest, regret and τ.
fn recommendation_table(cells: &[JudgedCell]) -> Result<SummaryTable, ReportError> {
    let rows: Vec<(Predictor, Recommendation)> = Predictor::BOTH
        .into_iter()
        .flat_map(|predictor| recommend(cells, predictor).into_iter().map(move |pick| (predictor, pick)))
        .collect();
    let columns = vec![
        Column::new("group".into(), rows.iter().map(|(_, r)| group_label(&r.group)).collect::<Vec<_>>()),
        Column::new("predictor".into(), rows.iter().map(|(p, _)| p.name().to_owned()).collect::<Vec<_>>()),
        Column::new("cells ranked".into(), rows.iter().map(|(_, r)| r.ranked as i64).collect::<Vec<_>>()),
        Column::new("recommended".into(), rows.iter().map(|(_, r)| r.recommended.clone()).collect::<Vec<_>>()),
        Column::new("measured fastest".into(), rows.iter().map(|(_, r)| r.fastest.clone()).collect::<Vec<_>>()),
        Column::new("noise (%)".into(), rows.iter().map(|(_, r)| Some(100.0 * r.noise)).collect::<Vec<_>>()),
        Column::new(
            "top-1".into(),
            rows.iter()
                .map(|(_, r)| match (r.exact, r.right) {
                    (true, _) => "yes",
                    (false, true) => "within noise",
                    (false, false) => "no",
                })
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        ),
        Column::new("regret (%)".into(), rows.iter().map(|(_, r)| Some(100.0 * r.regret)).collect::<Vec<_>>()),
        Column::new("Kendall τ".into(), rows.iter().map(|(_, r)| r.tau).collect::<Vec<_>>()),
    ];
    frame("recommendations", "Recommended vs measured fastest per group (time per sample)", columns)
}

/// Per strategy and over every multi-worker cell, for both predictors: the errors; and
/// over the groups, top-1, regret and τ.
fn summary_table(cells: &[JudgedCell]) -> Result<SummaryTable, ReportError> {
    let judged: Vec<&JudgedCell> = cells.iter().filter(|cell| cell.judged()).collect();
    // Per strategy, in the order of their names.
    let mut strategies: Vec<StrategyKind> = judged.iter().map(|cell| cell.key.kind()).collect();
    strategies.sort_by_key(|kind| kind.name());
    strategies.dedup();
    let mut scopes: Vec<(String, Vec<&JudgedCell>)> = strategies
        .iter()
        .map(|&kind| (kind.name().to_owned(), judged.iter().copied().filter(|cell| cell.key.kind() == kind).collect()))
        .collect();
    // Where some cells talked over emulated links, each link's cells and groups apart too.
    let mut links: Vec<Option<Link>> = judged.iter().map(|cell| cell.key.link).collect();
    links.sort();
    links.dedup();
    let mut link_scopes: Vec<(String, Option<Link>)> = Vec::new();
    if links.iter().any(Option::is_some) {
        for link in links {
            let name = format!("multi-worker over {}", link.map_or_else(|| LOOPBACK.to_owned(), |link| link.name()));
            let members = judged.iter().copied().filter(|cell| cell.key.link == link).collect();
            scopes.push((name.clone(), members));
            link_scopes.push((name, link));
        }
    }
    scopes.push(("all multi-worker".to_owned(), judged.clone()));
    let mut scope_names = Vec::new();
    let mut predictor_names = Vec::new();
    let mut counts = Vec::new();
    let (mut medians, mut maxima, mut mapes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut memory_medians, mut top1, mut top1_exact) = (Vec::new(), Vec::new(), Vec::new());
    let (mut regrets, mut taus) = (Vec::new(), Vec::new());
    for predictor in Predictor::BOTH {
        let every_pick = recommend(cells, predictor);
        for (scope, members) in &scopes {
            let errors: Vec<f64> = members.iter().filter_map(|cell| predictor.error(cell)).map(f64::abs).collect();
            scope_names.push(scope.clone());
            predictor_names.push(predictor.name().to_owned());
            counts.push(errors.len() as i64);
            medians.push(median(&errors).map(|e| 100.0 * e));
            maxima.push(errors.iter().copied().reduce(f64::max).map(|e| 100.0 * e));
            mapes.push(mean(&errors).map(|e| 100.0 * e));
            let memory: Vec<f64> = match predictor {
                Predictor::Model => members.iter().filter_map(|cell| cell.memory_error()).map(f64::abs).collect(),
                Predictor::Thesis => Vec::new(),
            };
            memory_medians.push(median(&memory).map(|e| 100.0 * e));
            let link = link_scopes.iter().find(|(name, _)| name == scope).map(|(_, link)| link);
            let picks: Vec<&Recommendation> = match (scope.as_str(), link) {
                ("all multi-worker", _) => every_pick.iter().collect(),
                (_, Some(link)) => every_pick.iter().filter(|pick| &pick.group.link == link).collect(),
                _ => Vec::new(),
            };
            let rate = |hit: fn(&Recommendation) -> bool| {
                mean(&picks.iter().map(|pick| f64::from(u8::from(hit(pick)))).collect::<Vec<_>>()).map(|r| 100.0 * r)
            };
            top1.push(rate(|pick| pick.right));
            top1_exact.push(rate(|pick| pick.exact));
            regrets.push(mean(&picks.iter().map(|pick| pick.regret).collect::<Vec<_>>()).map(|r| 100.0 * r));
            taus.push(mean(&picks.iter().filter_map(|pick| pick.tau).collect::<Vec<_>>()));
        }
    }
    let columns = vec![
        Column::new("cells".into(), scope_names),
        Column::new("predictor".into(), predictor_names),
        Column::new("cells judged".into(), counts),
        Column::new("median |error| (%)".into(), medians),
        Column::new("max |error| (%)".into(), maxima),
        Column::new("MAPE (%)".into(), mapes),
        Column::new("peak memory median |error| (%)".into(), memory_medians),
        Column::new("top-1 (% of groups)".into(), top1),
        Column::new("top-1 exact (% of groups)".into(), top1_exact),
        Column::new("mean regret (%)".into(), regrets),
        Column::new("mean Kendall τ".into(), taus),
    ];
    frame("prediction_summary", "How well the predictions held, per strategy and overall (single apart)", columns)
}
