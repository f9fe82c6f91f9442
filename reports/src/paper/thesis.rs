//! The thesis's (seed 003) figures 3.1, 3.2, 4.1, 5.1 and 6.2 and tables 6.1, 8.1 and 8.2.

use polars::prelude::Column;
use stratlab_results::PaperFigure;
use stratlab_strategy_spec::StrategyKind;

use super::drawn::{stem, Drawn, PaperRun};
use crate::predictions::{recommendation_grids, signed_errors};
use crate::tables::SummaryTable;
use crate::{speedup_bars, speedup_scaling_noted, ReportError};

/// Fig. 3.1: speedup over one device at the run's largest worker count.
pub(super) fn speedup_panels(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let sets = paper_run.aggregates.speedup_bars_by_workers();
    let Some(bars) = sets.last().filter(|bars| bars.iter().any(|bar| bar.workers > 1)) else {
        return Ok(Drawn::Missing("the run has no cell on more than one worker".into()));
    };
    let workers = bars[0].workers;
    let own_batch = paper_run
        .aggregates
        .throughput
        .iter()
        .filter(|cell| cell.key.workers == workers)
        .filter_map(|cell| cell.speedup.baseline_note().filter(|_| cell.speedup.speedup().is_some()))
        .count();
    let paths = speedup_bars(bars, &(paper_run.figure)(&stem(PaperFigure::ThesisSpeedupPanels)))?;
    Ok(Drawn::figure(
        paths,
        "Speedup over single, a panel per strategy, bars per network grouped by data set",
        format!(
            "As the thesis's fig. 3.1 at W = {workers} (the thesis: 4 GPUs): each strategy's wall throughput over \
             single's on the same network and data set. A failed cell is a stub with its reason (OOM where it ran \
             out of memory). {own_batch} pipeline cells trained at their own batch (the thesis's table 3.3) and are \
             compared by throughput against single at single's batch; the speedup table says which."
        ),
    ))
}

/// Fig. 3.2: speedup against devices, per node count where the run spans nodes.
pub(super) fn scaling(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let aggregates = paper_run.aggregates;
    let mut workers: Vec<u32> = aggregates.throughput.iter().map(|cell| cell.key.workers).collect();
    workers.sort_unstable();
    workers.dedup();
    if workers.len() < 2 {
        return Ok(Drawn::Missing("the run has cells at one worker count only; scaling needs two".into()));
    }
    let mut nodes: Vec<u32> = aggregates.throughput.iter().map(|cell| cell.key.nodes).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let spread = match nodes.as_slice() {
        [1] => "all on one node, so the worker counts stand in for the thesis's 4, 8 and 16 GPUs on 1, 2 and 4 \
                nodes"
            .to_owned(),
        counts => format!(
            "across {} nodes (labels say \"on N nodes\")",
            counts.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let note = format!("speedup over single against devices, {spread}");
    let points = aggregates.scaling_points();
    let paths = speedup_scaling_noted(&points, Some(&note), &(paper_run.figure)(&stem(PaperFigure::ThesisScaling)))?;
    Ok(Drawn::figure(
        paths,
        "Speedup against the number of devices, a line per strategy",
        format!(
            "As the thesis's fig. 3.2 (ImageNet, 4/8/16 GPUs): speedup over single at {} workers, {spread}.",
            workers.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
    ))
}

/// Figs. 4.1, 5.1 and 6.2: a strategy's signed step error per network × data set.
pub(super) fn signed_error(figure: PaperFigure, paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let (strategy, thesis) = match figure {
        PaperFigure::ThesisSequentialError => (StrategyKind::Single, "at most 15 % off"),
        PaperFigure::ThesisDataParallelError => (StrategyKind::DataParallel, "within 15 % for 4 of 6 networks"),
        _ => (StrategyKind::Gpipe, "20 to 76 % off"),
    };
    let errors = signed_errors(paper_run.predictions, paper_run.run, strategy);
    if errors.is_empty() {
        return Ok(Drawn::Missing(format!(
            "no {strategy} cell was both predicted before training and measured (runs with `--no-predict` predict none)"
        )));
    }
    let title = figure.title().to_owned();
    let paths = crate::signed_errors(&errors, &title, &(paper_run.figure)(&stem(figure)))?;
    let single = match strategy {
        StrategyKind::Single => {
            " Single's model prediction is the profile of its own steps, as the thesis's sequential predictor \
             timed a few batches and extrapolated."
        }
        _ => "",
    };
    Ok(Drawn::figure(
        paths,
        &title,
        format!(
            "Each predictor's (predicted − measured) ÷ measured step for {strategy}, per network and data set (the \
             median where a network and data set have several cells), predicted before any trial trained. The \
             thesis found its predictor {thesis}.{single}"
        ),
    ))
}

/// Table 6.1: every GPipe configuration (micro-batch size × count) the run trained, with
/// eq. 6.1's factor and each network's seconds per epoch.
pub(super) fn gpipe_configurations(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let cells: Vec<_> =
        paper_run.aggregates.throughput.iter().filter(|cell| cell.key.strategy.kind() == StrategyKind::Gpipe).collect();
    // A configuration is its batch, micro-batch count and workers.
    let configuration_of =
        |key: &stratlab_results::CellKey| (key.batch_size, key.strategy.micro_batches(), key.workers);
    let mut configurations: Vec<(u32, usize, u32)> = Vec::new();
    for cell in &cells {
        let configuration = configuration_of(&cell.key);
        if !configurations.contains(&configuration) {
            configurations.push(configuration);
        }
    }
    if configurations.is_empty() {
        return Ok(Drawn::Missing("the run has no gpipe cell".into()));
    }
    let cases: Vec<(String, String)> = {
        let mut cases: Vec<(String, String)> = Vec::new();
        for cell in &cells {
            let case = (cell.key.network.clone(), cell.key.dataset_label());
            if !cases.contains(&case) {
                cases.push(case);
            }
        }
        cases
    };
    let mut rows = vec![
        "micro-batch size".to_owned(),
        "micro-batches m".to_owned(),
        "batch b".to_owned(),
        "stages p".to_owned(),
        "eq. 6.1: (m + p − 1) ÷ (p·m)".to_owned(),
    ];
    rows.extend(cases.iter().map(|(network, dataset)| format!("{network} / {dataset}: s/epoch")));
    let mut columns = vec![Column::new("configuration".into(), rows)];
    for (i, &(batch, m, workers)) in configurations.iter().enumerate() {
        let p = cells
            .iter()
            .find(|cell| configuration_of(&cell.key) == (batch, m, workers))
            .and_then(|cell| cell.key.strategy.pipeline_shape(workers as usize).ok())
            .map_or(workers as usize, |(stages, _)| stages);
        let factor = (m + p - 1) as f64 / (p * m) as f64;
        let mut values = vec![
            format!("{}", batch as usize / m.max(1)),
            m.to_string(),
            batch.to_string(),
            p.to_string(),
            format!("{factor:.2}"),
        ];
        for (network, dataset) in &cases {
            let epoch = cells
                .iter()
                .find(|cell| {
                    &cell.key.network == network
                        && &cell.key.dataset_label() == dataset
                        && configuration_of(&cell.key) == (batch, m, workers)
                })
                .map(|cell| match (cell.seconds_per_epoch.stat(), cell.seconds_per_epoch.gap_label()) {
                    (Some(stat), _) => format!("{:.1}", stat.median),
                    (None, gap) => gap.unwrap_or_else(|| "–".to_owned()),
                });
            values.push(epoch.unwrap_or_else(|| "–".to_owned()));
        }
        let name = format!("config {}", char::from(b'A' + (i % 26) as u8));
        columns.push(Column::new(name.into(), values));
    }
    let table = SummaryTable::from_columns(
        "thesis_table_6_1",
        "Thesis table 6.1: GPipe configurations, eq. 6.1's factor and seconds per epoch",
        columns,
    )?;
    Ok(Drawn::Shown {
        figures: Vec::new(),
        tables: vec![table],
        caption: "As the thesis's table 6.1 (ImageNet, 4 GPUs; its configs A–E: 24×12 = 288, 32×12 = 384, 32×20 = \
                  640, 12×28 = 336, 16×30 = 480; ResNet-18 1206.34, 1030.49 and 936.27 s/epoch for A–C): each gpipe \
                  configuration the run trained, in the suite's order, with the factor by which eq. 6.1 scales the \
                  sequential time and each network's median seconds per epoch (measured over whole epochs, else \
                  estimated from the timed steps)."
            .to_owned(),
    })
}

/// Tables 8.1 and 8.2 for both predictors.
pub(super) fn recommendations(figure: PaperFigure, paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let Some([grids, scores]) = recommendation_grids(paper_run.predictions, paper_run.run)? else {
        return Ok(Drawn::Missing(
            "no network and data set has two multi-device cells that were both predicted before training and measured"
                .into(),
        ));
    };
    let (tables, caption) = match figure {
        PaperFigure::ThesisRecommendations => (
            grids,
            "As the thesis's table 8.1: per network and data set, the cell each predictor predicted fastest per \
             sample among the multi-device cells the run measured there (whatever their batch, so GPipe at its own \
             batch meets the others; single is no candidate, as the thesis ranked distribution models on 4 GPUs), the measured fastest, and how much longer the recommended one took per sample; \"within \
             noise\" where that is inside the two cells' run-to-run noise. The thesis compared Horovod with GPipe \
             only and picked right in 66 % of its benchmarks.",
        ),
        _ => (
            scores,
            "As the thesis's table 8.2: T where a predictor's pick was the measured fastest or within the noise of \
             it, F otherwise, with the share per data set, per network and overall (the thesis: 66 % overall; 50 % \
             MNIST, 16 % CIFAR-10, 100 % ImageNet and Highres).",
        ),
    };
    Ok(Drawn::Shown { figures: Vec::new(), tables, caption: caption.to_owned() })
}
