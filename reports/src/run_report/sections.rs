//! The report's sections, one per figure kind: each draws its figures, builds its table and
//! says in its caption how to read them.

use std::path::PathBuf;

use stratlab_results::{EventRow, RunStore, Table};

use crate::aggregate::{split_backward_stages, RunAggregates};
use crate::figures::step_breakdown::fitting_height_px;
use crate::tables::{
    device_usage_table, loss_table, pipeline_stages_table, speedup_table, split_backward_table, step_breakdown_table,
    throughput_table, time_to_accuracy_table, SummaryTable,
};
use crate::{
    device_usage, loss_curves, pipeline_bubble, pipeline_timeline, pipeline_timelines, speedup_bars, speedup_scaling,
    step_breakdown, throughput, time_to_accuracy, FigureTarget, HtmlTable, ReportError, ReportFigure, ReportSection,
};

/// Thesis figs. 3.1 and 3.2: speedup bars per W, and speedup against W.
pub(super) fn speedup_section(
    aggregates: &RunAggregates,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let mut figures = Vec::new();
    for bars in aggregates.speedup_bars_by_workers() {
        let Some(workers) = bars.first().map(|bar| bar.workers) else { continue };
        figures.extend(embed(
            speedup_bars(&bars, &figure(&format!("speedup_w{workers}")))?,
            format!(
                "Speedup over single at W = {workers}: a panel per strategy, bars per network, grouped by data set"
            ),
        ));
    }
    figures.extend(embed(
        speedup_scaling(&aggregates.scaling_points(), &figure("speedup_scaling"))?,
        "Speedup against the number of workers, a line per strategy, with the ideal line".to_owned(),
    ));
    Ok(section(
        "speedup",
        "Speedup and scaling",
        "Speedup is a cell's median wall throughput (samples/s, loader wait included) divided by \
         that of `single` with the same network, data set and batch per worker; whiskers span \
         min ÷ baseline max to max ÷ baseline min over repeats. Efficiency is speedup ÷ W. The \
         dashed line is ideal scaling.",
        figures,
        speedup_table(aggregates)?,
        tables,
    ))
}

/// Figs. 7 and 10 of the single-GPU vs data/model/GPipe study: throughput and seconds per
/// epoch per strategy.
pub(super) fn throughput_section(
    aggregates: &RunAggregates,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let figures = embed(
        throughput(&aggregates.throughput_bars(), &figure("throughput"))?,
        "Training throughput (samples/s) and seconds per epoch per strategy and network".to_owned(),
    );
    Ok(section(
        "throughput",
        "Throughput and epoch time",
        "Samples/s over all workers for the timed steps (after warm-up), loader wait and \
         host-to-device copies included; seconds per epoch is measured over complete epochs \
         or, where the budget ended mid-epoch, estimated from the timed steps (marked in the table).",
        figures,
        throughput_table(aggregates)?,
        tables,
    ))
}

/// Figs. 13–17 of the single-GPU vs data/model/GPipe study: test accuracy against wall time
/// with the target marked.
pub(super) fn accuracy_section(
    aggregates: &RunAggregates,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let mut figures = Vec::new();
    for chart in aggregates.time_to_accuracy() {
        let stem = format!("time_to_accuracy_{}_{}", file_part(&chart.network), file_part(&chart.dataset));
        let alt = format!("Test accuracy against wall time, {} on {}", chart.network, chart.dataset);
        figures.extend(embed(time_to_accuracy(&chart, &figure(&stem))?, alt));
    }
    Ok(section(
        "time-to-accuracy",
        "Time to accuracy",
        "Test accuracy after each evaluation against wall seconds since training started; the \
         horizontal line is the data set's target. A trial that stopped early ends in ×.",
        figures,
        time_to_accuracy_table(aggregates)?,
        tables,
    ))
}

/// Training loss against epochs.
pub(super) fn loss_section(
    aggregates: &RunAggregates,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let mut figures = Vec::new();
    for chart in aggregates.loss_curves() {
        let stem = format!("loss_{}_{}", file_part(&chart.network), file_part(&chart.dataset));
        let alt = format!("Training loss against epochs, {} on {}", chart.network, chart.dataset);
        figures.extend(embed(loss_curves(&chart, &figure(&stem))?, alt));
    }
    Ok(section(
        "loss",
        "Training loss",
        "Cross-entropy of each recorded training step (read back every `metrics_every_steps` \
         steps) against position in epochs; a non-finite loss ends a curve as diverged.",
        figures,
        loss_table(aggregates)?,
        tables,
    ))
}

/// Figs. 8, 9, 17, 18 of the single-GPU vs data/model/GPipe study: utilisation and memory per
/// strategy.
pub(super) fn device_section(
    aggregates: &RunAggregates,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let figures = embed(
        device_usage(&aggregates.device_usage_bars(), &figure("device_usage"))?,
        "Mean and peak device utilisation and memory per strategy and network".to_owned(),
    );
    Ok(section(
        "device-usage",
        "Device utilisation and memory",
        "GPU utilisation and memory from NVML on GPU nodes; on a CPU machine, the trial's \
         processes' CPU use (100 % = all cores) and resident memory from /proc.",
        figures,
        device_usage_table(aggregates)?,
        tables,
    ))
}

/// Holistic Trace Analysis' temporal and overlap breakdowns: where each rank's step went.
pub(super) fn step_breakdown_section(
    aggregates: &RunAggregates,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let bars = aggregates.step_breakdown_bars();
    let target = figure("step_breakdown");
    let width_px = target.width_px;
    let target = target.with_size(width_px, fitting_height_px(&bars));
    let figures = embed(
        step_breakdown(&bars, &target)?,
        "Step time per rank in ms: compute, exposed communication and idle stacked, overlapped \
         communication hatched inside compute"
            .to_owned(),
    );
    Ok(section(
        "step-breakdown",
        "Step-time breakdown",
        "Per trial and rank, the mean step after warm-up from the trial's events (as Holistic \
         Trace Analysis splits it): compute, communication while nothing is computed (exposed: \
         it lengthens the step), and idle time (loader waits, gaps) add up to the step; \
         communication running beside compute is hidden (hatched). The shares are exposed \
         communication ÷ step, all communication ÷ step, and overlapped ÷ all communication.",
        figures,
        step_breakdown_table(aggregates)?,
        tables,
    ))
}

/// Thesis figs. 2.5, 6.1 and 7.2 and the GPipe paper's bubble curve: each pipeline trial's
/// stages, one timed step of each as a timeline, and the bubble against m where a run has
/// several micro-batch counts.
pub(super) fn pipeline_section(
    aggregates: &RunAggregates,
    store: &RunStore,
    figure: &dyn Fn(&str) -> FigureTarget,
    tables: &mut Vec<SummaryTable>,
) -> Result<ReportSection, ReportError> {
    let mut figures = Vec::new();
    for chart in aggregates.pipeline_bubbles() {
        let stem =
            format!("pipeline_bubble_{}_{}_p{}", file_part(&chart.network), file_part(&chart.dataset), chart.stages);
        let alt = format!(
            "Pipeline bubble against micro-batches, {} on {} with {} stages: theoretical line, measured markers",
            chart.network, chart.dataset, chart.stages
        );
        figures.extend(embed(pipeline_bubble(&chart, &figure(&stem))?, alt));
    }
    let mut events_of = std::collections::BTreeMap::new();
    for pipeline in &aggregates.pipelines {
        let trial_id = &pipeline.trial.trial_id;
        let events: Vec<EventRow> =
            store.load_trial_rows(trial_id).map_err(|source| ReportError::Load { table: EventRow::NAME, source })?;
        let events = &*events_of.entry(trial_id.clone()).or_insert(events);
        let strategy = aggregates.labels.strategy(&pipeline.trial.key);
        let Some(mut measured) = pipeline.timeline(events, &strategy) else { continue };
        let target = figure(&format!("pipeline_timeline_{}", file_part(trial_id)));
        let Some(mut predicted) = pipeline.predicted_timeline(&strategy) else {
            let alt = format!("Pipeline timeline, ranks against time: {}", measured.title);
            figures.extend(embed(pipeline_timeline(&measured, &target)?, alt));
            continue;
        };
        // Thesis fig. 7.1 above 7.2: the model's step above the measured one, each panel
        // headed by its bubble, the figure by the measured step's title.
        let bubble = |share: Option<f64>| {
            share.map_or_else(|| "not timed".to_owned(), |share| format!("{:.0} %", share * 100.0))
        };
        predicted.title = format!("predicted before training · bubble {}", bubble(pipeline.bubble_predicted()));
        let title = std::mem::replace(
            &mut measured.title,
            format!("measured · bubble {} (mean over the timed steps)", bubble(pipeline.bubble_measured())),
        );
        let alt = format!("Pipeline timeline, predicted above measured, ranks against time: {title}");
        let (width_px, height_px) = (target.width_px, target.height_px);
        let target = target.with_size(width_px, height_px + height_px / 2);
        figures.extend(embed(pipeline_timelines(&title, &[&predicted, &measured], &target)?, alt));
    }
    let mut section = section(
        "pipelines",
        "Pipelines",
        "Per pipeline trial and stage, over the steps after warm-up: the layers the partitioner \
         gave the stage, its imbalance (slowest ÷ mean stage − 1) as the partitioner predicted \
         and as measured from forward, backward and recompute time (a hybrid stage's replicas \
         averaged), and the bubble: the share of the step, from the pipeline's first pass to \
         its last, in which the stage computed nothing, as measured, as the model predicted it \
         before training (the same rule on its simulated step) and as (p − 1)/(v·m + p − 1). \
         Timelines show the first step after warm-up, a row per rank: F forward, R recompute \
         (cross-hatched), B backward, and zero-bubble's split backward as I (the input's \
         gradient) and W (the weights'), numbered by micro-batch; above it, where the run \
         predicted the cell, the model's simulated step on the same time scale. Zero-bubble's \
         theoretical bubble is ZB-H1's at equal pass times, (p − 1)/(3m + p − 1); its second \
         table sets each stage's I and W beside the whole backward of the same layers.",
        figures,
        pipeline_stages_table(aggregates)?,
        tables,
    );
    let split = split_backward_stages(&aggregates.pipelines, &events_of);
    if !split.is_empty() {
        let table = split_backward_table(&aggregates.labels, &split)?;
        section.tables.push(html_table(&table));
        tables.push(table);
    }
    Ok(section)
}

/// Slow workers: each straggler cell's step against the same cell without (a table; the
/// pipeline timelines show where a slowed rank waited).
pub(super) fn straggler_section(table: SummaryTable, tables: &mut Vec<SummaryTable>) -> ReportSection {
    section(
        "stragglers",
        "Stragglers",
        "A straggler's named ranks wait (slowdown − 1) × each forward's and backward's own time after it. \
         Step time × without is the same cell's step samples/s without a straggler ÷ with one (range: \
         its extremes over the repeats); the share is (that − 1) ÷ (slowdown − 1): 1 where every step \
         waits for the slowed rank's whole compute, less where communication or other stages hide it.",
        Vec::new(),
        table,
        tables,
    )
}

/// The page section of one figure kind; its table joins the report's tables.
fn section(
    id: &str,
    title: &str,
    caption: &str,
    figures: Vec<ReportFigure>,
    table: SummaryTable,
    tables: &mut Vec<SummaryTable>,
) -> ReportSection {
    let section = ReportSection {
        id: id.to_owned(),
        title: title.to_owned(),
        caption: caption.to_owned(),
        figures,
        tables: vec![html_table(&table)],
    };
    tables.push(table);
    section
}

/// The written files of one figure as page figures with the same alternative text.
pub(crate) fn embed(paths: Vec<PathBuf>, alt: String) -> Vec<ReportFigure> {
    paths.into_iter().map(|path| ReportFigure::new(path, alt.clone())).collect()
}

pub(crate) fn html_table(table: &SummaryTable) -> HtmlTable {
    let (header, rows, numeric_columns) = table.cells();
    HtmlTable { title: table.title.clone(), header, rows, numeric_columns, whole: false }
}

/// Network and data set names as file-name parts (`cifar10:synthetic` → `cifar10-synthetic`).
pub(crate) fn file_part(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}
