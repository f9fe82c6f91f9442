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
use stratlab_strategies::predict::{predict_step, stage_samples};
use stratlab_strategies::profile::{profile_network, NetworkProfile};
use tch::Device;

use crate::exit::InputError;
use crate::plan::plan;
use crate::shapes::input_shape;
use crate::suite_file::SuiteFile;
use crate::trial::TrialSpec;

/// One trial's prediction.
struct Prediction {
    trial_id: String,
    label: String,
    /// Seconds per step, or why there is none.
    step_s: Result<f64, String>,
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
        let step_s =
            predict_step(&trial.strategy, trial.workers, trial.train.batch_size, &spec, &profiles[&key], link.as_ref());
        predictions.push(Prediction { trial_id: trial.trial_id.clone(), label: trial.label(), step_s });
    }
    let measured = against.map(measured_steps).transpose()?;
    println!("{}", table(&predictions, measured.as_ref()));
    Ok(ExitCode::SUCCESS)
}

/// The batch sizes the trials of one (network, data set, threads) run a stage at: each
/// trial's per-worker batch, and its micro-batch for pipelines.
fn sizes_for(trials: &[TrialSpec], key: &(String, String, usize)) -> Vec<usize> {
    let mut sizes: Vec<usize> = trials
        .iter()
        .filter(|t| {
            (t.network.as_str(), t.dataset.name.to_string(), t.train.threads) == (key.0.as_str(), key.1.clone(), key.2)
        })
        .map(|t| stage_samples(&t.strategy, t.train.batch_size))
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

/// Each trial's measured step time (10th percentile and median), by trial id without the
/// repeat.
fn measured_steps(run: &Path) -> anyhow::Result<BTreeMap<String, (f64, f64)>> {
    let rows: Vec<TrialRow> = RunStore::open(run)?.load_rows()?;
    Ok(rows
        .into_iter()
        .filter(|row| row.outcome == "ok")
        .filter_map(|row| {
            let cell = row.trial_id.rsplit_once("__r").map_or(row.trial_id.clone(), |(cell, _)| cell.to_string());
            Some((cell, (row.training.step_time_p10_s?, row.training.step_time_median_s?)))
        })
        .collect())
}

fn table(predictions: &[Prediction], measured: Option<&BTreeMap<String, (f64, f64)>>) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["trial", "predicted step"];
    if measured.is_some() {
        header.extend(["measured p10", "error vs p10", "measured median", "error vs median"]);
    }
    table.set_header(header.clone());
    let ms = |seconds: f64| format!("{:.1} ms", seconds * 1e3);
    let error = |predicted: f64, measured: f64| format!("{:+.0} %", 100.0 * (predicted - measured) / measured);
    for prediction in predictions {
        let mut row = vec![prediction.label.clone()];
        match &prediction.step_s {
            Ok(seconds) => row.push(ms(*seconds)),
            Err(why) => row.push(format!("— ({why})")),
        }
        if let Some(measured) = measured {
            let cell = prediction.trial_id.rsplit_once("__r").map_or(prediction.trial_id.as_str(), |(cell, _)| cell);
            match (measured.get(cell), &prediction.step_s) {
                (Some(&(p10, median)), Ok(predicted)) => {
                    row.extend([ms(p10), error(*predicted, p10), ms(median), error(*predicted, median)])
                }
                (Some(&(p10, median)), Err(_)) => row.extend([ms(p10), "—".into(), ms(median), "—".into()]),
                (None, _) => row.extend(["not in the run".to_string(), "—".into(), "—".into(), "—".into()]),
            }
        }
        table.add_row(row);
    }
    for column in 1..header.len() {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}
