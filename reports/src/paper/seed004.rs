//! Seed 004's tables 2 and 3 in their shape: a row per device count, a column pair (loss,
//! time) per pipeline implementation × balance × micro-batch count.

use polars::prelude::Column;
use stratlab_results::stats::median;
use stratlab_results::{CellKey, PaperFigure};
use stratlab_strategy_spec::StrategyKind;

use super::drawn::{Drawn, PaperRun};
use crate::tables::SummaryTable;
use crate::ReportError;

/// The micro-batch counts a table holds: table 2 runs 16; table 3 runs 8 and 1 (one
/// micro-batch is pure model parallelism, which `model-parallel` also is).
fn in_table(figure: PaperFigure, key: &CellKey) -> bool {
    let kind = key.strategy.kind();
    if !kind.is_pipeline() {
        return false;
    }
    let m = key.strategy.micro_batches();
    match figure {
        PaperFigure::Seed004Table2 => m == 16 && kind != StrategyKind::ModelParallel,
        _ => m == 8 || m <= 1 || kind == StrategyKind::ModelParallel,
    }
}

/// A table's column pair: implementation, balance and micro-batches.
fn column_of(key: &CellKey) -> String {
    let m = match key.strategy.kind() {
        StrategyKind::ModelParallel => 1,
        _ => key.strategy.micro_batches(),
    };
    format!("{} · {} · m {m}", key.strategy.kind(), key.strategy.balance())
}

pub(super) fn table(figure: PaperFigure, paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let aggregates = paper_run.aggregates;
    let cells: Vec<_> = aggregates.throughput.iter().filter(|cell| in_table(figure, &cell.key)).collect();
    if cells.is_empty() {
        return Ok(Drawn::Missing(match figure {
            PaperFigure::Seed004Table2 => "the run has no pipeline cell at 16 micro-batches".into(),
            _ => "the run has no pipeline cell at 8 micro-batches or at 1".into(),
        }));
    }
    let mut workers: Vec<u32> = cells.iter().map(|cell| cell.key.workers).collect();
    workers.sort_unstable();
    workers.dedup();
    let mut names: Vec<String> = Vec::new();
    for cell in &cells {
        let name = column_of(&cell.key);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let final_loss = |key: &CellKey| {
        let losses: Vec<f64> = aggregates
            .loss
            .iter()
            .filter(|loss| &loss.trial.key == key && loss.trial.failure.is_none())
            .filter_map(|loss| loss.last_loss)
            .collect();
        median(&losses)
    };
    let mut columns = vec![Column::new("devices".into(), workers.iter().map(|&w| i64::from(w)).collect::<Vec<_>>())];
    for name in &names {
        let find = |w: u32| cells.iter().find(|cell| cell.key.workers == w && &column_of(&cell.key) == name);
        let loss: Vec<Option<f64>> = workers.iter().map(|&w| find(w).and_then(|cell| final_loss(&cell.key))).collect();
        let time: Vec<String> = workers
            .iter()
            .map(|&w| match find(w) {
                Some(cell) => match (cell.seconds_per_epoch.stat(), cell.seconds_per_epoch.gap_label()) {
                    (Some(stat), _) => format!("{:.1}", stat.median),
                    (None, gap) => gap.unwrap_or_else(|| "–".to_owned()),
                },
                None => "–".to_owned(),
            })
            .collect();
        columns.push(Column::new(format!("{name} · loss").into(), loss));
        columns.push(Column::new(format!("{name} · s/epoch").into(), time));
    }
    let (name, title, paper) = match figure {
        PaperFigure::Seed004Table2 => (
            "seed004_table_2",
            "Seed 004 table 2: loss and seconds per epoch at 16 micro-batches, per device count × implementation × balance",
            "its table 2 (VGG-19 on CIFAR-100, batch 128, 16 micro-batches, 2–8 A100s; torchgpipe 2424 s on 2 GPUs \
             and 1691 s on 4 by size, DeepSpeed 1306 s on 8 by parameters, each 25 epochs)",
        ),
        _ => (
            "seed004_table_3",
            "Seed 004 table 3: loss and seconds per epoch at 8 micro-batches and at 1 (model parallelism)",
            "its table 3 (8 micro-batches and 1; torchgpipe by size 383 s at m 1 against 1356 s at m 8 on 2 GPUs)",
        ),
    };
    let table = SummaryTable::from_columns(name, title, columns)?;
    Ok(Drawn::Shown {
        figures: Vec::new(),
        tables: vec![table],
        caption: format!(
            "In seed 004's shape, {paper}: a row per device count, per implementation × balance × micro-batches \
             the final training loss (median over repeats) and median seconds per epoch. The paper gives each \
             library's total seconds for 25 epochs (25 × an epoch here); torchgpipe and FairScale are GPipe's \
             schedule (`gpipe`), DeepSpeed's pipeline is 1F1B's (`1f1b`)."
        ),
    })
}
