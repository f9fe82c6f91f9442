//! A run's whole report in one call: aggregates, figures, tables and `index.html`.
//!
//! This is the only place that knows which figure goes with which table and section; the
//! figure kinds, the aggregation and the page stay independent of each other.

use std::fs;
use std::path::{Path, PathBuf};

use stratlab_regressions::History;
use stratlab_results::{
    BatchProbeRow, DataSource, EventRow, PredictionRow, RunStore, RunView, Table, TrialDevice, TrialRow, UtcTime,
};

use crate::aggregate::{aggregate_view, RunAggregates};
use crate::figures::step_breakdown::fitting_height_px;
use crate::figures::unique_in_order;
use crate::report_error::write_file;
use crate::tables::{
    device_usage_table, loss_table, matrix_for_terminal, pipeline_stages_table, results_matrix, speedup_table,
    step_breakdown_table, throughput_table, time_to_accuracy_table, SummaryTable,
};
use crate::{
    device_usage, loss_curves, pipeline_bubble, pipeline_timeline, prediction_errors, speedup_bars, speedup_scaling,
    step_breakdown, throughput, time_to_accuracy, write_report_html, FailedTrialRow, FigureTarget, Format, HtmlTable,
    ReportError, ReportFigure, ReportPage, ReportSection,
};

/// What was written for a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// `<out>/index.html`: the self-contained page.
    pub index_html: PathBuf,
    /// Every figure file, under `<out>/figures/`.
    pub figures: Vec<PathBuf>,
    /// Every table file (`.csv` and `.md`), under `<out>/tables/`.
    pub tables: Vec<PathBuf>,
    /// The results matrix for a terminal.
    pub terminal_matrix: String,
    /// Things a reader should know that did not stop the report (e.g. an empty run).
    pub warnings: Vec<String>,
}

/// Writes the report of the run in `run_dir` into `out_dir`: figures in `format` under
/// `figures/`, each summary table as CSV and Markdown under `tables/`, and `index.html`.
/// Works on finished, partly failed and interrupted runs (it shows what the run holds).
/// With `history` (the run's suite over time), the page gains a History section.
pub fn write_run_report(
    run_dir: &Path,
    out_dir: &Path,
    format: Format,
    history: Option<&History>,
) -> Result<RunReport, ReportError> {
    let run = RunView::open(run_dir).map_err(ReportError::Store)?;
    let store = run.store();
    let aggregates = aggregate_view(&run)?;
    let trials = run.trials();
    let figures_dir = out_dir.join("figures");
    let tables_dir = out_dir.join("tables");
    for dir in [&figures_dir, &tables_dir] {
        fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.clone(), source })?;
    }

    let mut warnings = Vec::new();
    if trials.is_empty() {
        warnings.push(format!("{} holds no finished trial yet: the report is empty", run_dir.display()));
    }
    let figure = |stem: &str| FigureTarget::new(&figures_dir, stem).with_formats(&[format]);
    let mut sections = Vec::new();
    let mut tables = vec![results_matrix(&aggregates)?];
    if !aggregates.is_empty() {
        sections.push(speedup_section(&aggregates, &figure, &mut tables)?);
        sections.push(throughput_section(&aggregates, &figure, &mut tables)?);
        sections.push(accuracy_section(&aggregates, &figure, &mut tables)?);
        sections.push(loss_section(&aggregates, &figure, &mut tables)?);
        sections.push(device_section(&aggregates, &figure, &mut tables)?);
    }
    if !aggregates.step_breakdown.is_empty() {
        sections.push(step_breakdown_section(&aggregates, &figure, &mut tables)?);
    }
    if !aggregates.pipelines.is_empty() {
        sections.push(pipeline_section(&aggregates, store, &figure, &mut tables)?);
    }
    let predictions: Vec<PredictionRow> =
        store.load_rows().map_err(|source| ReportError::Load { table: PredictionRow::NAME, source })?;
    if let Some((prediction_tables, errors)) =
        crate::predictions::prediction_tables(&predictions, &run, &aggregates.labels)?
    {
        let figures = match errors.is_empty() {
            true => Vec::new(),
            false => embed(
                prediction_errors(&errors, &figure("prediction_errors"))?,
                "Predicted vs measured step: |error| per network, a panel per strategy, a bar per predictor".into(),
            ),
        };
        let section = crate::predictions::prediction_section(&prediction_tables, figures, html_table);
        tables.extend(prediction_tables);
        sections.push(section);
    }
    let probes: Vec<BatchProbeRow> =
        store.load_rows().map_err(|source| ReportError::Load { table: BatchProbeRow::NAME, source })?;
    if !probes.is_empty() {
        let cells = crate::frontier_cells(&probes, &run, &aggregates.labels);
        sections.push(crate::frontier::frontier_section(&cells, &figure("memory_frontier"), html_table, &mut tables)?);
    }
    if let Some(history) = history {
        sections.push(crate::history_section::history_section(history, &figures_dir, format)?);
    }

    let mut table_files = Vec::new();
    for table in &tables {
        table_files.push(table.write_csv(&tables_dir)?);
        let markdown = tables_dir.join(format!("{}.md", table.name));
        let text = format!("# {}\n\n{}", table.title, table.to_markdown());
        write_file(&markdown, text.as_bytes())?;
        table_files.push(markdown);
    }

    let fingerprint = store.fingerprint().map_err(ReportError::Store)?;
    let suite_path = run_dir.join("suite.yaml");
    let suite_yaml =
        fs::read_to_string(&suite_path).map_err(|source| ReportError::Io { path: suite_path.clone(), source })?;
    let page = ReportPage {
        title: format!("stratlab run {}", store.run_id()),
        run_id: store.run_id().to_owned(),
        generated_at: UtcTime::now().rfc3339(),
        headline: (!aggregates.is_empty()).then(|| html_table(&tables[0])),
        notes: notes(&aggregates, &run)?,
        sections,
        failures: failed_trials(&run, &aggregates),
        fingerprint: key_values(&serde_json::to_value(&fingerprint).unwrap_or_default()),
        suite_yaml,
    };
    let index_html = write_report_html(&page, out_dir)?;
    let figures = page.sections.iter().flat_map(|s| s.figures.iter().map(|f| f.path.clone())).collect();
    Ok(RunReport {
        index_html,
        figures,
        tables: table_files,
        terminal_matrix: matrix_for_terminal(&aggregates),
        warnings,
    })
}

/// Thesis figs. 3.1 and 3.2: speedup bars per W, and speedup against W.
fn speedup_section(
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
fn throughput_section(
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
fn accuracy_section(
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
fn loss_section(
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
fn device_section(
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
fn step_breakdown_section(
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
fn pipeline_section(
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
    for pipeline in &aggregates.pipelines {
        let trial_id = &pipeline.trial.trial_id;
        let events: Vec<EventRow> =
            store.load_trial_rows(trial_id).map_err(|source| ReportError::Load { table: EventRow::NAME, source })?;
        let strategy = aggregates.labels.strategy(&pipeline.trial.key);
        let Some(timeline) = pipeline.timeline(&events, &strategy) else { continue };
        let alt = format!("Pipeline timeline, ranks against time: {}", timeline.title);
        figures.extend(embed(
            pipeline_timeline(&timeline, &figure(&format!("pipeline_timeline_{}", file_part(trial_id))))?,
            alt,
        ));
    }
    Ok(section(
        "pipelines",
        "Pipelines",
        "Per pipeline trial and stage, over the steps after warm-up: the layers the partitioner \
         gave the stage, its imbalance (slowest ÷ mean stage − 1) as the partitioner predicted \
         and as measured from forward, backward and recompute time (a hybrid stage's replicas \
         averaged), and the bubble: the share of the step, from the pipeline's first pass to \
         its last, in which the stage computed nothing, next to (p − 1)/(m + p − 1). Timelines \
         show the first step after warm-up, a row per rank: F forward, R recompute \
         (cross-hatched), B backward, numbered by micro-batch.",
        figures,
        pipeline_stages_table(aggregates)?,
        tables,
    ))
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
fn embed(paths: Vec<PathBuf>, alt: String) -> Vec<ReportFigure> {
    paths.into_iter().map(|path| ReportFigure::new(path, alt.clone())).collect()
}

fn html_table(table: &SummaryTable) -> HtmlTable {
    let (header, rows, numeric_columns) = table.cells();
    HtmlTable { title: table.title.clone(), header, rows, numeric_columns }
}

/// Network and data set names as file-name parts (`cifar10:synthetic` → `cifar10-synthetic`).
fn file_part(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}

/// Every trial that did not end `ok`, with its reason.
fn failed_trials(run: &RunView, aggregates: &RunAggregates) -> Vec<FailedTrialRow> {
    run.trials_with_cells()
        .filter(|(trial, _)| !trial.outcome.is_ok())
        .map(|(trial, key)| FailedTrialRow {
            trial_id: trial.trial_id.clone(),
            network: trial.network.clone(),
            dataset: key.dataset_label(),
            strategy: aggregates.labels.strategy(key),
            workers: key.workers,
            outcome: trial.outcome,
            reason: trial.reason.clone().unwrap_or_else(|| "no reason recorded".to_owned()),
        })
        .collect()
}

/// Caveats shown above the figures: single repeats, estimated epochs, mixed environments.
fn notes(aggregates: &RunAggregates, run: &RunView) -> Result<Vec<String>, ReportError> {
    let (trials, store) = (run.trials(), run.store());
    let mut notes = Vec::new();
    let single_runs = aggregates
        .throughput
        .iter()
        .filter(|cell| cell.wall_samples_per_s.stat().is_some_and(|stat| stat.n == 1))
        .count();
    if single_runs > 0 {
        notes.push(format!(
            "{single_runs} of {} cells rest on a single run: their numbers are one sample, with no \
             spread (set `repeats:` in the suite for medians and ranges).",
            aggregates.throughput.len()
        ));
    }
    if aggregates.throughput.iter().any(|cell| cell.epoch_time_estimated) {
        notes.push(
            "Some seconds-per-epoch values are estimates: the trial's budget ended before a full \
             epoch, so the epoch time is steps per epoch × the mean timed step."
                .to_owned(),
        );
    }
    let synthetic =
        unique_in_order(trials.iter().filter(|t| t.data_source == DataSource::Synthetic).map(|t| t.dataset.as_str()));
    if !synthetic.is_empty() {
        notes.push(format!(
            "Synthetic data (same shape as the real set, learnable but not the real images): {}. \
             Speed is comparable to real data; accuracy is not, so they are labelled `<set>:synthetic`.",
            synthetic.join(", ")
        ));
    }
    let mixed = store.mixed_resumes().map_err(ReportError::Store)?;
    if !mixed.is_empty() {
        notes.push(format!(
            "This run was resumed {} time(s) on a different environment (--allow-mixed): see `resumes/` \
             in the run folder; its numbers mix machines or versions.",
            mixed.len()
        ));
    }
    notes.extend(cpu_sharing_note(trials));
    if aggregates.pipelines.is_empty() {
        notes.push(
            "Pipeline timelines and bubble shares appear once the run holds multi-worker strategies \
             that record events."
                .to_owned(),
        );
    }
    Ok(notes)
}

/// How to read a speedup where the workers are CPU processes: they share the cores that
/// `single` has to itself, so a speedup there measures a strategy's overhead, not scaling.
fn cpu_sharing_note(trials: &[TrialRow]) -> Option<String> {
    let on_cpu = |t: &&TrialRow| t.device == TrialDevice::Cpu;
    let mut single: Vec<i64> = trials.iter().filter(on_cpu).filter(|t| t.workers == 1).map(|t| t.threads).collect();
    let mut shared: Vec<(i64, i64)> =
        trials.iter().filter(on_cpu).filter(|t| t.workers > 1).map(|t| (t.workers, t.threads)).collect();
    if shared.is_empty() {
        return None;
    }
    single.sort_unstable();
    single.dedup();
    shared.sort_unstable();
    shared.dedup();
    let threads = |n: i64| if n == 1 { "1 thread".to_owned() } else { format!("{n} threads") };
    let single_part = match single.as_slice() {
        [] => "a single-device worker has all the cores to itself".to_owned(),
        [n] => format!("`single` trains in one process with {}", threads(*n)),
        many => format!(
            "`single` trains in one process with {}",
            many.iter().map(|n| threads(*n)).collect::<Vec<_>>().join(" or ")
        ),
    };
    let workers: Vec<String> =
        shared.iter().map(|(w, t)| format!("W = {w}: {w} processes of {} each", threads(*t))).collect();
    Some(format!(
        "Reading a speedup on the CPU: {single_part}, while a W-worker cell splits the same cores \
         between its workers ({}). So W workers do not bring W times the compute here: a speedup \
         near 1 means the strategy costs little over `single`, and below 1 is its overhead \
         (communication, pipeline bubbles, processes sharing cores). Where each worker has a GPU \
         of its own, speedup measures scaling.",
        workers.join("; ")
    ))
}

/// A JSON object flattened to `key = value` rows (nested keys joined with `.`; null as "—").
fn key_values(value: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let key = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                    walk(&key, value, out);
                }
            }
            serde_json::Value::Array(items) => {
                let text: Vec<String> =
                    items.iter().map(|item| item.to_string().trim_matches('"').to_owned()).collect();
                out.push((prefix.to_owned(), if text.is_empty() { "—".to_owned() } else { text.join(", ") }));
            }
            serde_json::Value::Null => out.push((prefix.to_owned(), "—".to_owned())),
            serde_json::Value::String(text) => out.push((prefix.to_owned(), text.clone())),
            other => out.push((prefix.to_owned(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}
