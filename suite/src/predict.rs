//! `stratlab predict`: every trial of a suite predicted, not trained. Each network is
//! profiled on this device at the trial's threads and the batch sizes its trials need
//! (`stratlab_strategies::profile`), the links come from a probe run, and the performance
//! model times the step (`stratlab_strategies::predict`): pipelines by simulating their
//! schedules, data parallelism with its bucket plan. With `--against RUN` each prediction
//! is set beside what that run measured, with the error; nothing is fitted to it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_perf_model::Link;
use stratlab_results::{ProbeRow, RunStore, TrialRow};
use stratlab_strategies::predict::{profiled_samples, StepPrediction, StepQuestion};
use stratlab_strategies::profile::{profile_network, NetworkProfile};
use tch::Device;

use crate::exit::InputError;
use crate::plan::plan;
use crate::shapes::input_shape;
use crate::suite_file::SuiteFile;
use crate::trial::TrialSpec;

/// One trial's prediction.
struct Prediction {
    /// The trial (its first repeat).
    trial_id: String,
    label: String,
    /// Workers of the trial.
    workers: usize,
    /// The model's and the thesis's seconds per step, or why there are none.
    step: StepPrediction,
}

/// Runs `stratlab predict`.
pub fn predict(suite_path: &Path, probe: Option<&Path>, against: Option<&Path>) -> anyhow::Result<ExitCode> {
    let (suite, _) = SuiteFile::load(suite_path)?;
    let trials = plan(&suite, suite_path)?;
    let link = probe.map(link_from_probe).transpose()?;
    let mut profiles: BTreeMap<(String, String, usize), NetworkProfile> = BTreeMap::new();
    let mut predictions = Vec::with_capacity(trials.len());
    for trial in trials.iter().filter(|trial| trial.repeat == 0) {
        let spec = stratlab_networks::spec(&trial.network, &input_shape(trial.dataset.info()?))?;
        let key = (trial.network.clone(), trial.dataset.name.to_string(), trial.train.threads);
        if !profiles.contains_key(&key) {
            let sizes = sizes_for(&trials, &key);
            eprintln!("profiling {} on {} at {} thread(s), batch sizes {sizes:?} …", key.0, key.1, key.2);
            let started = Instant::now();
            tch::set_num_threads(trial.train.threads as i32);
            let profile = profile_network(&spec, Device::Cpu, &sizes, trial.train.momentum)?;
            eprintln!("  {:.1} s", started.elapsed().as_secs_f64());
            profiles.insert(key.clone(), profile);
        }
        let question = StepQuestion {
            strategy: &trial.strategy,
            workers: trial.workers,
            batch: trial.train.batch_size,
            spec: &spec,
            profile: &profiles[&key],
            link: link.as_ref(),
        };
        predictions.push(Prediction {
            trial_id: trial.trial_id.clone(),
            label: trial.label(),
            workers: trial.workers,
            step: question.predict(),
        });
    }
    let measured = against.map(measured_steps).transpose()?;
    println!("{}", table(&predictions, measured.as_ref()));
    Ok(ExitCode::SUCCESS)
}

/// The batch sizes the trials of one (network, data set, threads) need profiled: each
/// trial's per-worker batch, its micro-batch for pipelines, the global batch for the
/// thesis's data-parallel form.
fn sizes_for(trials: &[TrialSpec], key: &(String, String, usize)) -> Vec<usize> {
    let mut sizes: Vec<usize> = trials
        .iter()
        .filter(|t| {
            (t.network.as_str(), t.dataset.name.to_string(), t.train.threads) == (key.0.as_str(), key.1.clone(), key.2)
        })
        .flat_map(|t| profiled_samples(&t.strategy, t.workers, t.train.batch_size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// A link from a probe run: the one-way latency of its smallest point-to-point message and
/// the bandwidth of its largest (medians over pairs).
fn link_from_probe(run: &Path) -> anyhow::Result<Link> {
    let rows: Vec<ProbeRow> = RunStore::open(run)?.load_rows()?;
    let p2p: Vec<&ProbeRow> = rows.iter().filter(|row| row.kind == "p2p").collect();
    let (Some(smallest), Some(largest)) =
        (p2p.iter().map(|row| row.bytes).min(), p2p.iter().map(|row| row.bytes).max())
    else {
        return Err(
            InputError(format!("{}: no point-to-point rows; give a run of `stratlab probe`", run.display())).into()
        );
    };
    let median_of = |bytes: u64| {
        let times: Vec<f64> = p2p.iter().filter(|row| row.bytes == bytes).map(|row| row.median_s).collect();
        stratlab_results::stats::median(&times).unwrap_or(0.0)
    };
    let latency_s = median_of(smallest);
    let bandwidth = largest as f64 / (median_of(largest) - latency_s).max(1e-9);
    Ok(Link::new(bandwidth, latency_s))
}

/// The measured step time (10th percentile and median) of each trial's first repeat, by
/// trial id: the trials `predict` answers for.
fn measured_steps(run: &Path) -> anyhow::Result<BTreeMap<String, (f64, f64)>> {
    let rows: Vec<TrialRow> = RunStore::open(run)?.load_rows()?;
    Ok(rows
        .into_iter()
        .filter(|row| row.outcome == "ok" && row.repeat == 0)
        .filter_map(|row| Some((row.trial_id, (row.training.step_time_p10_s?, row.training.step_time_median_s?))))
        .collect())
}

/// The predictions as a table, beside the measured steps when given, and a summary of the
/// errors of the model and of the thesis's forms over the multi-worker trials.
fn table(predictions: &[Prediction], measured: Option<&BTreeMap<String, (f64, f64)>>) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["trial", "model", "thesis"];
    if measured.is_some() {
        header.extend(["measured p10", "model error", "thesis error", "measured median"]);
    }
    table.set_header(header.clone());
    let ms = |seconds: f64| format!("{:.1} ms", seconds * 1e3);
    let shown = |predicted: &Result<f64, String>| match predicted {
        Ok(seconds) => ms(*seconds),
        Err(why) => format!("— ({why})"),
    };
    let relative = |predicted: &Result<f64, String>, measured: f64| {
        predicted.as_ref().ok().map(|predicted| (predicted - measured) / measured)
    };
    let percent = |error: Option<f64>| error.map_or("—".to_string(), |error| format!("{:+.0} %", 100.0 * error));
    let (mut model_errors, mut thesis_errors) = (Vec::new(), Vec::new());
    for prediction in predictions {
        let step = &prediction.step;
        let mut row = vec![prediction.label.clone(), shown(&step.model_s), shown(&step.thesis_s)];
        if let Some(measured) = measured {
            match measured.get(&prediction.trial_id) {
                Some(&(p10, median)) => {
                    let (model, thesis) = (relative(&step.model_s, p10), relative(&step.thesis_s, p10));
                    if prediction.workers > 1 {
                        model_errors.extend(model.map(f64::abs));
                        thesis_errors.extend(thesis.map(f64::abs));
                    }
                    row.extend([ms(p10), percent(model), percent(thesis), ms(median)]);
                }
                None => row.extend(["not in the run".to_string(), "—".into(), "—".into(), "—".into()]),
            }
        }
        table.add_row(row);
    }
    for column in 1..header.len() {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut text = table.to_string();
    if measured.is_some() {
        let summary = |errors: &[f64]| match stratlab_results::stats::median(errors) {
            Some(median) => format!("median |error| {:.0} % over {} trials", 100.0 * median, errors.len()),
            None => "no trial".to_string(),
        };
        text.push_str(&format!(
            "\nmulti-worker trials, against the measured p10 step: model {}; thesis's forms {}",
            summary(&model_errors),
            summary(&thesis_errors)
        ));
    }
    text
}
