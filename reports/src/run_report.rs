//! A run's whole report in one call: aggregates, figures, tables and `index.html`.
//!
//! This is the only place that knows which figure goes with which table and section; the
//! figure kinds, the aggregation and the page stay independent of each other.

use std::fs;
use std::path::{Path, PathBuf};

use stratlab_regressions::History;
use stratlab_results::{BatchProbeRow, DataSource, PredictionRow, RunView, Table, TrialDevice, TrialRow, UtcTime};

use crate::aggregate::{aggregate_view, RunAggregates};
use crate::figures::unique_in_order;
use crate::report_error::write_file;
use crate::tables::{matrix_for_terminal, results_matrix, straggler_table};
use crate::{prediction_errors, write_report_html, FailedTrialRow, FigureTarget, Format, ReportError, ReportPage};

mod sections;

pub(crate) use sections::{embed, file_part, html_table};

use sections::{
    accuracy_section, device_section, loss_section, pipeline_section, speedup_section, step_breakdown_section,
    straggler_section, throughput_section,
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
    if let Some(stragglers) = straggler_table(&aggregates) {
        sections.push(straggler_section(stragglers?, &mut tables));
    }
    if let Some(cells) = crate::asynchrony::server_cells(&run)? {
        sections.push(crate::asynchrony::asynchrony_section(&cells, &aggregates.labels, &figure, &mut tables)?);
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
    if let Some(section) = crate::nodes_section::nodes_section(store, html_table, &mut tables)? {
        sections.push(section);
    }
    let probes: Vec<BatchProbeRow> =
        store.load_rows().map_err(|source| ReportError::Load { table: BatchProbeRow::NAME, source })?;
    if !probes.is_empty() {
        let cells = crate::frontier_cells(&probes, &run, &aggregates.labels);
        sections.push(crate::frontier::frontier_section(&cells, &figure("memory_frontier"), html_table, &mut tables)?);
    }
    let suite_path = run_dir.join("suite.yaml");
    let suite_yaml =
        fs::read_to_string(&suite_path).map_err(|source| ReportError::Io { path: suite_path.clone(), source })?;
    let regenerates = stratlab_results::regenerated_by(&suite_yaml)
        .map_err(|error| ReportError::Suite { path: suite_path.clone(), message: error.to_string() })?;
    if let Some(regenerates) = &regenerates {
        let paper_run =
            crate::paper::PaperRun { aggregates: &aggregates, run: &run, predictions: &predictions, figure: &figure };
        sections.extend(crate::paper::paper_sections(regenerates, &paper_run, &mut tables)?);
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
    let mut shared: Vec<(i64, i64, i64)> =
        trials.iter().filter(on_cpu).filter(|t| t.workers > 1).map(|t| (t.workers, t.nodes(), t.threads)).collect();
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
    let workers: Vec<String> = shared
        .iter()
        .map(|&(w, nodes, t)| match nodes {
            1 => format!("W = {w}: {w} processes of {} each", threads(t)),
            _ => {
                let (per_node, threads) = (w / nodes, threads(t));
                let processes = if per_node == 1 { "1 process".to_owned() } else { format!("{per_node} processes") };
                format!("W = {w} on {nodes} nodes: {processes} of {threads} each on every node")
            }
        })
        .collect();
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
