//! `batch_size: max`: before the trials, the runner finds each such cell's largest batch,
//! the one its workers train under their memory limit, by real steps. The model predicts
//! where to start (the batch whose predicted peak meets the limit, made before any probe);
//! each probe then trains a few steps at one batch in fresh worker processes, exactly as
//! the cell's trials will (the same strategy, workers, precision, format and limit), and a
//! probe that runs out of memory or crashes is a result, never the end of the run
//! ([`search::BatchSearch`] says what to try next). Every probe is a row of the run's
//! `batch_probes` table, written as it ends; a resumed run replays the probes it holds
//! instead of repeating them. The cell's trials then train at the largest batch that
//! trained, or are infeasible, with the smallest probe's reason, when not even one step did.

pub mod search;

use std::collections::BTreeMap;
use std::time::Instant;

use stratlab_results::{BatchProbeRow, CellKey, Fingerprint, RunStore};
use stratlab_strategies::Budget;

use crate::predictions::{predict_cells, LocalLinks, Placement};
use crate::profiles::{ProfileCache, ReusePolicy};
use crate::progress::MatrixProgress;
use crate::trial::{BatchRequest, TrialSpec};
use search::BatchSearch;

/// Optimizer steps a probe trains: one untimed, then two whose peaks count, by which time
/// the loader holds as many batches as it will in the trial.
const PROBE_STEPS: usize = 3;

/// Searches every cell of `trials` that asks for `batch_size: max` and gives its trials
/// the batch found; `say` hears each cell's answer.
pub(crate) fn resolve_largest_batches(
    trials: &mut [TrialSpec],
    store: &RunStore,
    fingerprint: &Fingerprint,
    profiles: ReusePolicy,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    // In plan order, each cell once (its first trial stands for its repeats).
    let mut cells: Vec<(CellKey, TrialSpec)> = Vec::new();
    for trial in trials.iter().filter(|trial| trial.batch_request == BatchRequest::Largest) {
        let cell = trial.cell_key();
        if !cells.iter().any(|(known, _)| *known == cell) {
            cells.push((cell, trial.clone()));
        }
    }
    if cells.is_empty() {
        return Ok(());
    }
    let stored = store.load_rows::<BatchProbeRow>()?;
    let mut cache = ProfileCache::open(store.run_dir().parent(), profiles)?;
    let mut found: BTreeMap<CellKey, (BatchRequest, usize)> = BTreeMap::new();
    for (cell, trial) in &cells {
        let held: Vec<&BatchProbeRow> = stored.iter().filter(|row| row.trial_id == trial.trial_id).collect();
        found.insert(cell.clone(), search_cell(trial, &held, store, fingerprint, &mut cache, say)?);
    }
    for trial in trials.iter_mut().filter(|trial| trial.batch_request == BatchRequest::Largest) {
        let (request, batch) = found[&trial.cell_key()].clone();
        trial.batch_request = request;
        trial.train.batch_size = batch;
    }
    Ok(())
}

/// What a batch must fit under, per worker: a CUDA worker's device cap (its memory is the
/// device's; `None`: the whole device), a CPU worker's tensor-storage limit.
fn search_limit(trial: &TrialSpec) -> Option<u64> {
    match trial.train.device.resolve() {
        Ok(tch::Device::Cuda(_)) => trial.train.device_memory_limit_bytes,
        _ => trial.memory_limit_bytes,
    }
}

/// One cell's search: what its trials train at (the request resolved, and the batch).
fn search_cell(
    trial: &TrialSpec,
    held: &[&BatchProbeRow],
    store: &RunStore,
    fingerprint: &Fingerprint,
    cache: &mut ProfileCache,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<(BatchRequest, usize)> {
    let step = trial.strategy.micro_batches();
    let per_batch = trial.strategy.global_batch(1, trial.workers).max(1);
    let info = trial.dataset.info()?;
    let most = info.train_len / per_batch;
    let limit = search_limit(trial);
    // The first guess is the one a resumed run made before its first probe, so that its
    // search replays the same batches; else the model's, made now.
    let predicted = match held.first() {
        Some(row) => row.predicted_batch_size.map(|batch| batch as usize),
        None => limit.and_then(|limit| {
            let here = LocalLinks::default();
            predicted_largest(trial, limit as f64, &Placement::here(&here), cache, say)
        }),
    };
    let first = predicted.unwrap_or(info.batch_size);
    let mut search = BatchSearch::new(first, step, most);
    let progress = MatrixProgress::new(0, 0);
    let mut probes: Vec<BatchProbeRow> = Vec::new();
    while let Some(batch) = search.next() {
        let row = match held.iter().find(|row| row.batch_size as usize == batch) {
            Some(row) => (*row).clone(),
            None => {
                let row = probe(trial, batch, probes.len(), predicted, store, fingerprint, &progress)?;
                store.write_run_rows(std::slice::from_ref(&row))?;
                row
            }
        };
        search.record(batch, row.fits);
        probes.push(row);
    }
    progress.finish();
    let tried: Vec<String> =
        probes.iter().map(|row| format!("{}{}", row.batch_size, if row.fits { "✓" } else { "✗" })).collect();
    let predicted_text = predicted.map_or("no prediction".to_owned(), |batch| format!("predicted {batch}"));
    let what = format!("largest batch of {}: ", trial.label());
    match search.largest() {
        Some(batch) => {
            say(&format!(
                "{what}{batch} per worker, global {} ({predicted_text}; probes {})",
                trial.strategy.global_batch(batch, trial.workers),
                tried.join(" ")
            ));
            Ok((BatchRequest::LargestFound, batch))
        }
        None => {
            let smallest = probes.iter().min_by_key(|row| row.batch_size);
            let reason = format!(
                "no batch trains: {step} per worker did not ({})",
                smallest.and_then(|row| row.reason.clone()).unwrap_or_else(|| "no reason recorded".into())
            );
            say(&format!("{what}{reason}"));
            Ok((BatchRequest::NoneFits(reason), step))
        }
    }
}

/// The per-worker batch whose predicted peak on `placement` meets `limit_bytes`, `None`
/// where the model has no memory for the cell. The model's peak is a line in the batch
/// only near the sizes its profile counted (a checkpointed pipeline's micro-batches of two
/// and four samples hold less per sample than larger ones): the line through two small
/// batches gives a first answer, and the line through it and its half, profiled there, the
/// answer.
pub(crate) fn predicted_largest(
    trial: &TrialSpec,
    limit_bytes: f64,
    placement: &Placement<'_>,
    cache: &mut ProfileCache,
    say: &mut dyn FnMut(&str),
) -> Option<usize> {
    let step = trial.strategy.micro_batches();
    let small = 2 * step;
    let first = peak_line(trial, [small, 2 * small], limit_bytes, placement, cache, say)?;
    let near = first / step * step;
    if near < 4 * small {
        return Some(first);
    }
    peak_line(trial, [(near / 2 / step).max(1) * step, near], limit_bytes, placement, cache, say).or(Some(first))
}

/// Where the line through the model's peaks at the two `batches` meets `limit_bytes`.
fn peak_line(
    trial: &TrialSpec,
    batches: [usize; 2],
    limit_bytes: f64,
    placement: &Placement<'_>,
    cache: &mut ProfileCache,
    say: &mut dyn FnMut(&str),
) -> Option<usize> {
    let at = |batch: usize| {
        let mut at = trial.clone();
        at.train.batch_size = batch;
        at.batch_request = BatchRequest::Given;
        at.trial_id = format!("{}__at-b{batch}", trial.trial_id);
        at
    };
    let rows = match predict_cells(&batches.map(at), placement, cache, "", say) {
        Ok(predicted) => predicted.rows,
        Err(error) => {
            say(&format!("warning: no predicted largest batch for {}: {error:#}", trial.label()));
            return None;
        }
    };
    let peaks: Vec<f64> = rows.iter().filter_map(|row| row.peak_memory_bytes).collect();
    let [at_first, at_second] = peaks[..] else { return None };
    let per_sample = (at_second - at_first) / (batches[1] - batches[0]) as f64;
    // Not growing with the batch (or not a number): the line meets no limit.
    if per_sample.is_nan() || per_sample <= 0.0 {
        return None;
    }
    let batch = batches[0] as f64 + (limit_bytes - at_first) / per_sample;
    Some(batch.max(0.0).floor() as usize)
}

/// Trains `trial` at `batch` for a few steps in fresh workers, as its trials will, and
/// says how it ended.
fn probe(
    trial: &TrialSpec,
    batch: usize,
    index: usize,
    predicted: Option<usize>,
    store: &RunStore,
    fingerprint: &Fingerprint,
    progress: &MatrixProgress,
) -> anyhow::Result<BatchProbeRow> {
    let mut probe = trial.clone();
    probe.trial_id = format!("{}__probe-b{batch}", trial.trial_id);
    probe.train.batch_size = batch;
    probe.batch_request = BatchRequest::LargestFound;
    probe.train.budget = Budget { steps: Some(PROBE_STEPS), ..Budget::default() };
    probe.train.warmup_steps = 1;
    // Evaluation runs in the trial too, so its memory counts: one evaluation batch of it.
    probe.train.eval_every_steps = None;
    probe.train.eval_samples = Some(probe.train.eval_batch_size);
    let started = Instant::now();
    progress.start_trial(&format!("probing {}", probe.label()));
    let recorded = crate::one_trial::run_trial(&probe, store.run_id(), fingerprint, progress)?;
    progress.finish_trial(recorded.trial.outcome, recorded.trial.reason.as_deref());
    let fits = recorded.trial.outcome.is_ok();
    Ok(BatchProbeRow {
        run_id: store.run_id().to_owned(),
        trial_id: trial.trial_id.clone(),
        label: trial.label(),
        network: trial.network.clone(),
        dataset: trial.dataset.name.to_string(),
        strategy: trial.strategy.kind(),
        workers: trial.workers as i64,
        strategy_label: std::iter::once(trial.strategy.name().to_owned())
            .chain(trial.strategy.labelled_parameters().into_iter().map(|(_, text)| text))
            .collect::<Vec<String>>()
            .join(" "),
        batch_step: trial.strategy.micro_batches() as i64,
        probe: index as i64,
        batch_size: batch as i64,
        global_batch: probe.global_batch() as i64,
        outcome: recorded.trial.outcome,
        fits,
        reason: recorded.trial.reason.clone(),
        peak_memory_bytes: recorded.trial.training.peak_memory_bytes,
        memory_limit_bytes: search_limit(trial),
        predicted_batch_size: predicted.map(|batch| batch as i64),
        wall_time_s: started.elapsed().as_secs_f64(),
    })
}
