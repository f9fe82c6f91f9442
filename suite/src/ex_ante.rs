//! The ex-ante half of every run: before its first trial, `stratlab run` measures the link
//! its multi-worker trials will use (a short `stratlab probe` over loopback, stored in the
//! run's `probes` table), profiles each network, and stores the performance model's
//! prediction of every cell in `predictions`. The report sets them beside what the trials
//! then measure; nothing of the model is fitted to those trials.
//!
//! A prediction that fails is a warning, never the run's failure: the trials are the
//! product, the prediction a check on the model.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use stratlab_results::{PredictionRow, ProbeRow, RunStore};

use crate::predictions::{predict_cells, MeasuredLink, Placement};
use crate::profiles::ProfileCache;
use crate::trial::TrialSpec;

/// Message sizes of the run's probe: a small one for the latency, large ones for the
/// bandwidth (the size of a small network's gradients, and of a large one's bucket), and
/// sizes between for the all-reduce curve the model interpolates.
const PROBE_SIZES: &str = "4,65536,1048576,4194304,16777216";

/// Predicts every cell of `trials` into `store`, unless it already holds predictions (a
/// resumed run keeps the ones made before its first trial).
pub fn predict_run(trials: &[TrialSpec], store: &RunStore, say: &mut dyn FnMut(&str)) {
    match store.load_rows::<PredictionRow>() {
        Ok(rows) if !rows.is_empty() => return,
        _ => {}
    }
    let started = Instant::now();
    if let Err(error) = predict_into(trials, store, say) {
        say(&format!("warning: no predictions for this run: {error:#}"));
        return;
    }
    say(&format!("predicted every cell before training in {:.1} s", started.elapsed().as_secs_f64()));
}

fn predict_into(trials: &[TrialSpec], store: &RunStore, say: &mut dyn FnMut(&str)) -> anyhow::Result<()> {
    let link = match trials.iter().any(|trial| trial.workers > 1) {
        true => match probe_loopback(store) {
            Ok(link) => link,
            Err(error) => {
                say(&format!("warning: the link probe failed, multi-worker cells go unpredicted: {error:#}"));
                None
            }
        },
        false => None,
    };
    // The store's profiles sit beside its runs.
    let mut cache = ProfileCache::open(store.run_dir().parent(), false)?;
    let rows = predict_cells(trials, &Placement::Local(link.as_ref()), &mut cache, store.run_id(), say)?;
    store.write_run_rows(&rows)?;
    Ok(())
}

/// Runs `stratlab probe` with two local ranks into a scratch folder of the run, moves its
/// rows into the run's `probes` table, and returns the link they measure.
fn probe_loopback(store: &RunStore) -> anyhow::Result<Option<MeasuredLink>> {
    let scratch = store.run_dir().join(".probe");
    let result = probe_into(store, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn probe_into(store: &RunStore, scratch: &Path) -> anyhow::Result<Option<MeasuredLink>> {
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    let output = Command::new(exe)
        // 20 repeats: an all-reduce with the cores busy either finds a core at once or waits
        // for the scheduler's tick, and its median needs the repeats to settle.
        .args(["probe", "--workers", "2", "--repeats", "20", "--warmup", "3", "--sizes", PROBE_SIZES])
        .arg("--time-limit")
        .arg("120")
        .arg("--store")
        .arg(scratch)
        .stdin(Stdio::null())
        .output()
        .context("starting `stratlab probe`")?;
    if !output.status.success() {
        anyhow::bail!(
            "`stratlab probe` ended with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let probe_run = std::fs::read_dir(scratch)
        .with_context(|| format!("reading {}", scratch.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.is_dir())
        .with_context(|| format!("`stratlab probe` left no run in {}", scratch.display()))?;
    let mut rows: Vec<ProbeRow> = RunStore::open(&probe_run)?.load_rows()?;
    for row in &mut rows {
        row.run_id = store.run_id().to_owned();
    }
    store.write_probes(&rows)?;
    Ok(MeasuredLink::from_probes(&rows, "probe before the run's trials"))
}
