//! The ex-ante half of every run: before its first trial, `stratlab run` measures the links
//! its multi-worker trials will use (a short `stratlab probe` over loopback and over each
//! emulated link, stored in the run's `probes` table), profiles each network, and stores the performance model's
//! prediction of every cell in `predictions` (and each pipeline cell's simulated step in
//! `predicted_passes`). The report sets them beside what the trials
//! then measure; nothing of the model is fitted to those trials.
//!
//! A prediction that fails is a warning, never the run's failure: the trials are the
//! product, the prediction a check on the model.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use stratlab_profile::stage_seconds;
use stratlab_results::{PredictionRow, ProbeRow, RunStore};
use stratlab_strategy_spec::{Balance, StrategyKind};
use tch::Device;

use crate::link_axis::TrialLink;
use crate::predictions::{predict_cells, LocalLinks, MeasuredLink, Placement};
use crate::profiles::{ProfileCache, ReusePolicy};
use crate::trial::TrialSpec;

/// Message sizes of the run's probe: a small one for the latency, large ones for the
/// bandwidth (the size of a small network's gradients, and of a large one's bucket), and
/// sizes between for the all-reduce curve the model interpolates.
const PROBE_SIZES: &str = "4,65536,1048576,4194304,16777216";

/// One more size where sharded cells are probed: their units are whole layers (VGG's
/// classifier layers are 16 to 392 MiB), and on loopback Gloo's all-gather and
/// reduce-scatter slow past 16 MiB (64 MiB took 2.4 times the 16 MiB line's extrapolation
/// in one probe), so the line beyond is drawn from a larger size.
const SHARDED_PROBE_SIZE: &str = "67108864";

/// Predicts every cell of `trials` into `store`, unless it already holds predictions (a
/// resumed run keeps the ones made before its first trial).
pub fn predict_run(trials: &[TrialSpec], store: &RunStore, profiles: ReusePolicy, say: &mut dyn FnMut(&str)) {
    match store.load_rows::<PredictionRow>() {
        Ok(rows) if !rows.is_empty() => return,
        _ => {}
    }
    let started = Instant::now();
    if let Err(error) = predict_into(trials, store, profiles, say) {
        say(&format!("warning: no predictions for this run: {error:#}"));
        return;
    }
    say(&format!("predicted every cell before training in {:.1} s", started.elapsed().as_secs_f64()));
}

fn predict_into(
    trials: &[TrialSpec],
    store: &RunStore,
    profiles: ReusePolicy,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    let mut links = LocalLinks::default();
    if trials.iter().any(|trial| trial.workers > 1) {
        // Loopback always: the workers' kernel copies go at its speed whatever link they
        // talk over; then every emulated link the trials use, each probed over itself.
        let mut probed: Vec<TrialLink> = vec![TrialLink::Loopback];
        for trial in trials.iter().filter(|trial| trial.workers > 1) {
            if !probed.contains(&trial.link) {
                probed.push(trial.link);
            }
        }
        // Sharded cells' all-gathers and reduce-scatters are timed only where a trial runs
        // them: they would lengthen every other run's probe.
        let gather_scatter = trials.iter().any(|trial| trial.strategy.kind() == StrategyKind::ShardedDataParallel);
        for link in probed {
            match probe_link(store, &link, gather_scatter) {
                Ok(Some(measured)) => links.insert(&link, measured),
                Ok(None) => {}
                Err(error) => say(&format!(
                    "warning: the probe of {link} failed, its multi-worker cells go unpredicted: {error:#}"
                )),
            }
        }
    }
    if trials.iter().any(|trial| trial.nodes > 1) {
        match crate::slurm_step::Allocation::from_env().filter(|allocation| allocation.nodes > 1) {
            None => say("warning: cells across nodes go unpredicted: no allocation of several nodes to probe"),
            Some(_) => match probe_between_nodes(store, trials) {
                Ok(Some(measured)) => links.insert_between_nodes(measured),
                Ok(None) => {}
                Err(error) => say(&format!(
                    "warning: the probe between nodes failed, cells across nodes go unpredicted: {error:#}"
                )),
            },
        }
    }
    // The store's profiles sit beside its runs.
    let mut cache = ProfileCache::open(store.run_dir().parent(), profiles)?;
    let predicted = predict_cells(trials, &Placement::here(&links), &mut cache, store.run_id(), say)?;
    // The timeline first: a run holding predictions is a predicted run (a resumed run
    // predicts nothing again), so they must not be there without it.
    store.write_run_rows(&predicted.passes)?;
    store.write_run_rows(&predicted.rows)?;
    Ok(())
}

/// Gives every pipeline trial balanced by `time` on this machine's CPU the stage seconds
/// its cut is made from: the run's profile of its network at its micro-batch, the one its
/// prediction cut (stored by [`predict_run`], or before a resumed run's first trial). A
/// trial whose profile the store lacks (its prediction failed) times its stages itself.
/// Timing them again in every trial cost seconds each and, on near-ties, cut elsewhere
/// than the prediction: 59 of 120 pipeline trials in one validation run.
pub fn cut_on_run_profiles(trials: &mut [TrialSpec], store: &RunStore, say: &mut dyn FnMut(&str)) {
    let time_balanced = |trial: &TrialSpec| {
        trial.strategy.schedule().is_some()
            && trial.strategy.balance() == Balance::Time
            && trial.train.device.resolve().ok() == Some(Device::Cpu)
    };
    if !trials.iter().any(time_balanced) {
        return;
    }
    // The latest stored profile: the one the predictions just took, retook or reused.
    let mut cache = match ProfileCache::open(store.run_dir().parent(), ReusePolicy::default()) {
        Ok(cache) => cache,
        Err(error) => return say(&format!("warning: pipeline trials time their own stages: {error:#}")),
    };
    let cores = crate::fingerprint::cores_here();
    let cuts: Vec<Option<Vec<f64>>> = trials
        .iter()
        .map(|trial| {
            if !time_balanced(trial) {
                return None;
            }
            let profile = cache.stored(trials, trial, Some(cores))?;
            Some(stage_seconds(profile, trial.strategy.stage_samples(trial.train.batch_size)))
        })
        .collect();
    let missing = trials.iter().zip(&cuts).filter(|(trial, cut)| time_balanced(trial) && cut.is_none()).count();
    if missing > 0 {
        say(&format!("{missing} pipeline trial(s) balanced by time have no stored profile and time their own stages"));
    }
    for (trial, cut) in trials.iter_mut().zip(cuts) {
        trial.train.stage_seconds = cut;
    }
}

/// Seconds the largest message of an emulated link's probe may take: sizes above are left
/// out (a 16 MiB transfer takes 1.3 s at 100 Mbit/s), but never the first three, since the
/// bandwidth needs a message well past tbf's burst (64 KiB at least), which lets a smaller
/// one through at once.
const LARGEST_TRANSFER_S: f64 = 0.2;

/// Runs `stratlab probe` with two local ranks over `link` into a scratch folder of the run,
/// moves its rows into the run's `probes` table, and returns the link they measure; with
/// `gather_scatter` it times all-gather and reduce-scatter too.
fn probe_link(store: &RunStore, link: &TrialLink, gather_scatter: bool) -> anyhow::Result<Option<MeasuredLink>> {
    let scratch = store.run_dir().join(".probe");
    let result = probe_into(store, &scratch, link, gather_scatter);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Probes the network between the allocation's nodes as a job step of one rank on each of
/// two nodes (the ring of a cell across nodes crosses between them at its slowest hop), its
/// rows stored in the run's `probes` naming both hosts; what the cells across nodes are
/// predicted over. Rank 0 stores the probe where the run is, which must be a file system
/// both nodes share (as the binary's).
fn probe_between_nodes(store: &RunStore, trials: &[TrialSpec]) -> anyhow::Result<Option<MeasuredLink>> {
    let scratch = store.run_dir().join(".probe-nodes");
    let gather_scatter =
        trials.iter().any(|trial| trial.nodes > 1 && trial.strategy.kind() == StrategyKind::ShardedDataParallel);
    let result = (|| {
        let exe = std::env::current_exe().context("locating the stratlab executable")?;
        let name = crate::slurm_step::step_name(store.run_id(), "probe-between-nodes");
        let sizes = match gather_scatter {
            true => format!("{PROBE_SIZES},{SHARDED_PROBE_SIZE}"),
            false => PROBE_SIZES.to_owned(),
        };
        let mut arguments = vec!["probe", "--repeats", "20", "--warmup", "3", "--sizes", &sizes];
        arguments.extend(["--all-reduce", if gather_scatter { "idle,loaded" } else { "loaded" }]);
        if gather_scatter {
            arguments.push("--gather-scatter");
        }
        // Each rank loads its node's cores with as many threads as a trial's worker there
        // computes on (libtorch's default would take every core of the node).
        let threads = trials.iter().filter(|trial| trial.nodes > 1).map(|trial| trial.train.threads).max();
        let threads = threads.unwrap_or(1).to_string();
        arguments.extend(["--threads", &threads]);
        let scratch_text = scratch.to_str().context("the run folder's path is not UTF-8")?;
        arguments.extend(["--time-limit", "120", "--store", scratch_text]);
        let mut command = crate::slurm_step::srun(&name, 2, 2, &exe, &arguments);
        stored_probe(store, &scratch, &mut command, "probe between nodes before the run's trials")
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn probe_into(
    store: &RunStore,
    scratch: &Path,
    link: &TrialLink,
    gather_scatter: bool,
) -> anyhow::Result<Option<MeasuredLink>> {
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    // Inside a Slurm allocation loopback is a compute node's, where the trials run: a
    // one-task job step (its ranks its own children there). An emulated link is built on
    // this machine, as its trials are.
    let mut command = match link.emulated() {
        None => crate::slurm_step::on_a_compute_node(&crate::slurm_step::step_name(store.run_id(), "probe"), &exe).0,
        Some(_) => Command::new(exe),
    };
    // 20 repeats on loopback: an all-reduce with the cores busy either finds a core at once
    // or waits for the scheduler's tick, and its mean needs the repeats to settle. An
    // emulated link's tbf paces every transfer alike (the validation suite's shaped cells
    // spread 1.4-5.5 % in the median against loopback's 3.2 %): 5 do, which keeps a slow
    // link's probe short (its 1 MiB takes 0.84 s at 10 Mbit/s).
    match link.emulated() {
        None => {
            let sizes = match gather_scatter {
                true => format!("{PROBE_SIZES},{SHARDED_PROBE_SIZE}"),
                false => PROBE_SIZES.to_owned(),
            };
            command.args(["probe", "--workers", "2", "--repeats", "20", "--warmup", "3", "--sizes", &sizes])
        }
        Some(emulated) => {
            let sizes: Vec<&str> = PROBE_SIZES
                .split(',')
                .enumerate()
                .filter(|&(index, size)| {
                    let bytes: f64 = size.parse().unwrap_or(0.0);
                    index < 3 || bytes / emulated.bandwidth.0 <= LARGEST_TRANSFER_S
                })
                .map(|(_, size)| size)
                .collect();
            command.args(["probe", "--workers", "2", "--repeats", "5", "--warmup", "2", "--sizes", &sizes.join(",")]);
            command.args(["--link", &link.probe_argument().unwrap_or_default()])
        }
    };
    // The model reads the all-reduce timed with the cores busy, as the trials' buckets
    // find them; the idle one took a sixth of each probe (1.3 of 8.8 s at 1 Gbit/s). A
    // sharded cell's all-gathers are waited for with the cores idle, so its probe times
    // both states.
    let loads = if gather_scatter { "idle,loaded" } else { "loaded" };
    if gather_scatter {
        command.arg("--gather-scatter");
    }
    command.args(["--all-reduce", loads]).arg("--time-limit").arg("120").arg("--store").arg(scratch);
    stored_probe(store, scratch, &mut command, &format!("probe of {link} before the run's trials"))
}

/// Runs the probe `command` (which stores its run in `scratch`), copies its rows into the
/// run's `probes`, and reads the link they measured, named `source`.
fn stored_probe(
    store: &RunStore,
    scratch: &Path,
    command: &mut Command,
    source: &str,
) -> anyhow::Result<Option<MeasuredLink>> {
    let output = command.stdin(Stdio::null()).output().context("starting `stratlab probe`")?;
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
    Ok(MeasuredLink::from_probes(&rows, source))
}
