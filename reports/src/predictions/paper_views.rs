//! The predictions judged in the thesis's own shapes: figs. 4.1/5.1/6.2 (a strategy's
//! signed error per network × data set, per predictor) and tables 8.1/8.2 (a grid of
//! network × data set: recommended, measured fastest, their difference; right or wrong,
//! with the share per data set and overall).

use std::collections::BTreeMap;

use polars::prelude::Column;
use stratlab_results::stats::median;
use stratlab_results::{PredictionRow, RunView};
use stratlab_strategy_spec::StrategyKind;

use super::judge::{group_of, judge_cells, recommend_in, JudgedCell, Predictor, Recommendation};
use crate::figures::unique_in_order;
use crate::tables::SummaryTable;
use crate::{ReportError, SignedError};

/// The judged cells of `strategy`, each predictor's signed error per network and data set
/// (the median where several cells share them: batches, parameters, links).
pub(crate) fn signed_errors(predictions: &[PredictionRow], run: &RunView, strategy: StrategyKind) -> Vec<SignedError> {
    let cells = judge_cells(predictions, run);
    let mut grouped: BTreeMap<(usize, String, String), Vec<f64>> = BTreeMap::new();
    let order = unique_in_order(cells.iter().map(|cell| cell.key.network.as_str()));
    for cell in cells.iter().filter(|cell| cell.key.strategy.kind() == strategy) {
        for (p, predictor) in Predictor::BOTH.into_iter().enumerate() {
            if let Some(error) = predictor.error(cell) {
                let key = (p, cell.key.network.clone(), cell.key.dataset_label());
                grouped.entry(key).or_default().push(100.0 * error);
            }
        }
    }
    let mut errors: Vec<SignedError> = grouped
        .into_iter()
        .filter_map(|((p, network, dataset), values)| {
            Some(SignedError {
                predictor: Predictor::BOTH[p].name().to_owned(),
                network,
                dataset,
                error_percent: median(&values)?,
            })
        })
        .collect();
    errors.sort_by_key(|error| order.iter().position(|network| network == &error.network));
    errors
}

/// A group of the thesis's table 8.1: a network and data set's cells, whatever their batch.
fn across_batches(key: &stratlab_results::CellKey) -> stratlab_results::CellKey {
    stratlab_results::CellKey { batch_size: 0, ..group_of(key) }
}

/// What a grid row stands for besides the network: the group's threads, numerics, link,
/// nodes and straggler where they are not the defaults.
fn row_label(group: &stratlab_results::CellKey) -> String {
    let threads = group.swept_threads.map(|threads| format!(" · {threads} threads")).unwrap_or_default();
    let link = group.link.map(|link| format!(" · {}", link.name())).unwrap_or_default();
    format!(
        "{}{threads}{}{link}{}{}",
        group.network,
        group.compute_label(),
        group.nodes_label(),
        group.straggler_label()
    )
}

/// How a grid names a cell: `gpipe(m=12)×4 b384`.
fn cell_name(key: &stratlab_results::CellKey) -> String {
    format!("{}×{} b{}", key.strategy.report_label(|_| true), key.workers, key.batch_size)
}

/// Thesis tables 8.1 and 8.2 for each predictor: a grid of network × data set whose cells
/// say the recommended and the measured fastest cell and, where they differ, how much
/// longer the recommended one takes per sample; and the same grid as T/F with the share of
/// right picks per data set and overall. `None` when no group has two cells to rank.
pub(crate) fn recommendation_grids(
    predictions: &[PredictionRow],
    run: &RunView,
) -> Result<Option<[Vec<SummaryTable>; 2]>, ReportError> {
    // The thesis ranked its distribution models on 4 GPUs: one device training alone is no
    // candidate (on a CPU whose workers share its cores it would win every group).
    let cells: Vec<JudgedCell> =
        judge_cells(predictions, run).into_iter().filter(|cell| cell.key.workers > 1).collect();
    let mut grids = Vec::new();
    let mut scores = Vec::new();
    for predictor in Predictor::BOTH {
        let picks = recommend_in(&cells, predictor, across_batches);
        if picks.is_empty() {
            continue;
        }
        let slug = predictor.name().replace(' ', "_");
        grids.push(grid(
            &picks,
            &format!("thesis_table_8_1_{slug}"),
            &format!("Thesis table 8.1 by the {}: recommended / measured fastest / difference", predictor.name()),
            |pick| match pick.exact {
                true => format!("{} (fastest)", cell_name(&pick.keys.0)),
                false => format!(
                    "{} / {} / {:+.1} %{}",
                    cell_name(&pick.keys.0),
                    cell_name(&pick.keys.1),
                    100.0 * pick.regret,
                    if pick.right { " (within noise)" } else { "" }
                ),
            },
            false,
        )?);
        scores.push(grid(
            &picks,
            &format!("thesis_table_8_2_{slug}"),
            &format!("Thesis table 8.2 by the {}: right (T) or wrong (F), per data set and overall", predictor.name()),
            |pick| if pick.right { "T" } else { "F" }.to_owned(),
            true,
        )?);
    }
    Ok((!grids.is_empty()).then_some([grids, scores]))
}

/// A grid of `picks`, a row per network (and other group fields), a column per data set,
/// each cell as `text` says; with `score`, a last row with each data set's share of right
/// picks and a last column with the row's, the corner the overall share.
fn grid(
    picks: &[Recommendation],
    name: &str,
    title: &str,
    text: impl Fn(&Recommendation) -> String,
    score: bool,
) -> Result<SummaryTable, ReportError> {
    let row_labels: Vec<String> = picks.iter().map(|pick| row_label(&pick.group)).collect();
    let dataset_labels: Vec<String> = picks.iter().map(|pick| pick.group.dataset_label()).collect();
    let rows = unique_in_order(row_labels.iter().map(String::as_str));
    let datasets = unique_in_order(dataset_labels.iter().map(String::as_str));
    let find = |row: &str, dataset: &str| {
        picks.iter().find(|pick| row_label(&pick.group) == row && pick.group.dataset_label() == dataset)
    };
    let share = |picked: Vec<&Recommendation>| match picked.is_empty() {
        true => String::new(),
        false => {
            let right = picked.iter().filter(|pick| pick.right).count();
            format!("{:.0} % ({right}/{})", 100.0 * right as f64 / picked.len() as f64, picked.len())
        }
    };
    let mut first: Vec<String> = rows.clone();
    if score {
        first.push("right per data set".to_owned());
    }
    let mut columns = vec![Column::new("network".into(), first)];
    for dataset in &datasets {
        let mut values: Vec<String> =
            rows.iter().map(|row| find(row, dataset).map(&text).unwrap_or_else(|| "–".to_owned())).collect();
        if score {
            values.push(share(picks.iter().filter(|pick| &pick.group.dataset_label() == dataset).collect()));
        }
        columns.push(Column::new(dataset.as_str().into(), values));
    }
    if score {
        let mut values: Vec<String> = rows
            .iter()
            .map(|row| share(picks.iter().filter(|pick| &row_label(&pick.group) == row).collect()))
            .collect();
        values.push(share(picks.iter().collect()));
        columns.push(Column::new("right per network".into(), values));
    }
    SummaryTable::from_columns(name, title, columns)
}
