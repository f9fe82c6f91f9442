//! `stratlab predict`: every trial of a suite predicted, not trained. Each network is
//! profiled on this device at the trial's threads and the batch sizes its trials need
//! (`stratlab_strategies::profile`), the links come from a probe run, and the performance
//! model times the step (`stratlab_perf_model::predict`): pipelines by simulating their
//! schedules, data parallelism with its bucket plan. With `--against RUN` each prediction
//! is set beside what that run measured, with the error; nothing is fitted to it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_perf_model::Cluster;
use stratlab_reports::{judged_predictions, write_predicted_speedup, PredictedCell, StepTimes};
use stratlab_results::{PredictionRow, RunView, TrialRow};

use crate::auto_compute::ChoiceStore;
use crate::exit::InputError;
use crate::plan::plan;
use crate::predictions::{predict_cells, LocalLinks, Placement};
use crate::profiles::{key_of, ProfileCache};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
use crate::suite_file::SuiteFile;
use crate::trial::TrialSpec;

/// What `stratlab predict` reads beside the suite, and where it draws.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// A probe run giving this machine's link.
    pub probe: Option<&'a Path>,
    /// A cluster file, or `local`.
    pub cluster: Option<&'a Path>,
    /// A run of the same suite to set the predictions beside.
    pub against: Option<&'a Path>,
    /// Where to draw the predicted speedup figure.
    pub figure: Option<&'a Path>,
}

/// Runs `stratlab predict`: on this machine (`--cluster local` or none), or on the devices
/// and links of a cluster file.
pub fn predict(
    suite_path: &Path,
    sources: &Sources<'_>,
    cache: &mut ProfileCache,
    choices: &mut ChoiceStore,
) -> anyhow::Result<ExitCode> {
    let Sources { probe, cluster, against, figure } = *sources;
    let (suite, _) = SuiteFile::load(suite_path)?;
    let mut trials = plan(&suite, suite_path)?;
    let links = probe.map(LocalLinks::from_probe_run).transpose()?.unwrap_or_default();
    let cluster = match cluster {
        Some(path) if path != Path::new("local") => {
            Some(Cluster::load(path).map_err(|error| InputError(error.to_string()))?)
        }
        _ => None,
    };
    if cluster.is_none() {
        crate::auto_compute::resolve_auto(&mut trials, suite.numerics, choices, &mut |line| eprintln!("{line}"))?;
    } else if trials.iter().any(TrialSpec::awaits_resolution) {
        // `auto` is measured on the device that trains; a cluster's cannot be.
        eprintln!("warning: `auto` precision or memory format is predicted as fp32 on contiguous tensors on a cluster");
    }
    let placement = match &cluster {
        Some(cluster) => Placement::Cluster(cluster),
        None => Placement::here(&links),
    };
    let started = Instant::now();
    let rows = predict_cells(&trials, &placement, cache, "", &mut |line| eprintln!("{line}"))?.rows;
    eprintln!("{} cells predicted in {:.1} s", rows.len(), started.elapsed().as_secs_f64());
    let measured_run = against.map(RunView::open).transpose()?;
    let measured = measured_run.as_ref().map(|run| measured_steps(run.trials()));
    let workers: BTreeMap<&str, usize> = trials.iter().map(|trial| (trial.trial_id.as_str(), trial.workers)).collect();
    println!("{}", table(&rows, &workers, measured.as_ref(), cluster.as_ref()));
    // The report's judgement of the same predictions: each group's pick, top-1 and regret.
    if let Some(judged) = measured_run.map(|run| judged_predictions(&rows, &run)).transpose()?.flatten() {
        for table in judged {
            println!("{}", table.to_markdown());
        }
    }
    if let Some(dir) = figure {
        let measured_p10: Option<StepTimes> =
            measured.as_ref().map(|steps| steps.iter().map(|(id, &(p10, _, _))| (id.clone(), p10)).collect());
        let cells: Vec<PredictedCell> = trials
            .iter()
            .filter(|trial| trial.repeat == 0)
            .map(|trial| PredictedCell { trial_id: trial.trial_id.clone(), key: trial.cell_key() })
            .collect();
        let Some(files) = write_predicted_speedup(&cells, &rows, measured_p10.as_ref(), dir)? else {
            anyhow::bail!(
                "no cell has both a prediction and a `single` cell of the same network, data set and batch to divide by"
            );
        };
        for file in files {
            println!("predicted speedup: {}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `stratlab profile`: every profile the suite's cells need on this machine, reused
/// or measured, into the store.
pub fn profile(suite_path: &Path, cache: &mut ProfileCache) -> anyhow::Result<ExitCode> {
    let (suite, _) = SuiteFile::load(suite_path)?;
    let trials = plan(&suite, suite_path)?;
    let cores = crate::fingerprint::cores_here();
    let started = Instant::now();
    let mut profiled = std::collections::BTreeSet::new();
    for trial in trials.iter().filter(|trial| trial.repeat == 0) {
        if trial.train.device.resolve().ok() != Some(tch::Device::Cpu) || !profiled.insert(key_of(trial)) {
            continue;
        }
        cache.measured(&trials, trial, Some(cores), &mut |line| println!("{line}"))?;
    }
    println!("{} profiles ready in {:.1} s", profiled.len(), started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// The measured step time (10th percentile and median) and peak memory of each trial's
/// first repeat, by trial id: the trials `predict` answers for.
fn measured_steps(rows: &[TrialRow]) -> MeasuredSteps {
    rows.iter()
        .filter(|row| row.outcome.is_ok() && row.repeat == 0)
        .filter_map(|row| {
            let memory = row.training.peak_memory_bytes;
            Some((row.trial_id.clone(), (row.training.step_time_p10_s?, row.training.step_time_median_s?, memory)))
        })
        .collect()
}

/// The predictions as a table, beside the measured steps when given, and a summary of the
/// errors of the model and of the thesis's forms over the multi-worker cells.
fn table(
    rows: &[PredictionRow],
    workers: &BTreeMap<&str, usize>,
    measured: Option<&MeasuredSteps>,
    cluster: Option<&Cluster>,
) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["trial", "model", "thesis", "memory"];
    if cluster.is_some() {
        header.push("fits");
    }
    if measured.is_some() {
        header.extend([
            "measured p10",
            "model error",
            "thesis error",
            "measured median",
            "measured memory",
            "memory error",
        ]);
    }
    table.set_header(header.clone());
    let ms = |seconds: f64| format!("{:.1} ms", seconds * 1e3);
    let mib = |bytes: f64| format!("{:.1} MiB", bytes / 1048576.0);
    let shown = |value: Option<f64>, why: &Option<String>, unit: &dyn Fn(f64) -> String| match (value, why) {
        (Some(value), _) => unit(value),
        (None, Some(why)) => format!("— ({why})"),
        (None, None) => "—".to_string(),
    };
    let relative = |predicted: Option<f64>, measured: f64| predicted.map(|predicted| (predicted - measured) / measured);
    let percent = |error: Option<f64>| error.map_or("—".to_string(), |error| format!("{:+.0} %", 100.0 * error));
    let (mut model_errors, mut thesis_errors, mut memory_errors) = (Vec::new(), Vec::new(), Vec::new());
    for row in rows {
        let mut cells = vec![
            row.label.clone(),
            shown(row.step_s, &row.step_unavailable, &ms),
            shown(row.thesis_step_s, &Some("no closed form".into()), &ms),
            shown(row.peak_memory_bytes, &row.memory_unavailable, &mib),
        ];
        if let Some(cluster) = cluster {
            let device = cluster.device.memory_bytes as f64;
            cells.push(match row.peak_memory_bytes {
                Some(bytes) if bytes <= device => "yes".to_string(),
                Some(bytes) => format!("no: {:.1} GiB on {:.1} GiB", bytes / GIB, device / GIB),
                None => "—".to_string(),
            });
        }
        if let Some(measured) = measured {
            match measured.get(&row.trial_id) {
                Some(&(p10, median, memory)) => {
                    let (model, thesis) = (relative(row.step_s, p10), relative(row.thesis_step_s, p10));
                    let memory_error = memory.and_then(|memory| relative(row.peak_memory_bytes, memory as f64));
                    if workers.get(row.trial_id.as_str()).is_some_and(|&workers| workers > 1) {
                        model_errors.extend(model.map(f64::abs));
                        thesis_errors.extend(thesis.map(f64::abs));
                        memory_errors.extend(memory_error.map(f64::abs));
                    }
                    cells.extend([
                        ms(p10),
                        percent(model),
                        percent(thesis),
                        ms(median),
                        memory.map_or("—".into(), |bytes| mib(bytes as f64)),
                        percent(memory_error),
                    ]);
                }
                None => cells.extend([
                    "not in the run".to_string(),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                ]),
            }
        }
        table.add_row(cells);
    }
    for column in 1..header.len() {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut text = table.to_string();
    if let Some(cluster) = cluster {
        let speed = match cluster.device.speed.is_validated() {
            true => "its speed profiled on this machine".to_string(),
            false => "its speed a datasheet roofline: unvalidated predictions".to_string(),
        };
        text.push_str(&format!(
            "\non {}: {} node(s) × {} {}, {}",
            cluster.name, cluster.nodes, cluster.devices_per_node, cluster.device.name, speed
        ));
    }
    if measured.is_some() {
        let summary = |errors: &[f64]| match stratlab_results::stats::median(errors) {
            Some(median) => format!("median |error| {:.0} % over {} cells", 100.0 * median, errors.len()),
            None => "no cell".to_string(),
        };
        text.push_str(&format!(
            "\nmulti-worker cells, against the measured p10 step: model {}; thesis's forms {}; peak memory {}",
            summary(&model_errors),
            summary(&thesis_errors),
            summary(&memory_errors)
        ));
    }
    text
}

/// Per trial id: its measured step (10th percentile and median, seconds) and peak memory.
type MeasuredSteps = BTreeMap<String, (f64, f64, Option<u64>)>;
