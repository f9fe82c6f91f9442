//! Every cell of a plan predicted, not trained: each network profiled once per (data set,
//! threads) on the trial's device at the batch sizes its cells need
//! (`stratlab_strategies::profile`), then each cell's step and memory put to the
//! performance model (`stratlab_strategies::predict`). `stratlab predict` prints the rows;
//! `stratlab run` stores them with the run before its first trial.

use std::collections::BTreeMap;
use std::time::Instant;

use stratlab_perf_model::cluster::{Cluster, DeviceSpeed};
use stratlab_perf_model::Link;
use stratlab_results::PredictionRow;
use stratlab_strategies::predict::{profiled_samples, StepQuestion};
use stratlab_strategies::profile::{analytical_profile, profile_network, NetworkProfile};
use tch::Device;

use crate::shapes::input_shape;
use crate::trial::TrialSpec;

/// The link multi-worker cells communicate over, and where it was measured.
pub struct MeasuredLink {
    /// Bandwidth and latency.
    pub link: Link,
    /// Where it came from, as stored in `predictions.link_source`.
    pub source: String,
}

/// Which network, data set and threads a profile was taken for.
type ProfileKey = (String, String, usize);

/// The cluster the cells are predicted on: this machine, its workers sharing its cores and
/// its link measured; or a cluster file, one device per worker.
pub enum Placement<'a> {
    /// This machine, the link as measured (if at all).
    Local(Option<&'a MeasuredLink>),
    /// A cluster file's devices and links.
    Cluster(&'a Cluster),
}

/// One prediction per cell (the first repeat of each), in plan order. `report` hears what
/// is profiled and how long it took.
pub fn predict_cells(
    trials: &[TrialSpec],
    placement: &Placement<'_>,
    run_id: &str,
    report: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<PredictionRow>> {
    let (cores, cluster_link);
    let link = match placement {
        Placement::Local(link) => {
            cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
            *link
        }
        Placement::Cluster(cluster) => {
            // A device per worker: nothing shares its cores.
            cores = usize::MAX / 2;
            cluster_link = MeasuredLink { link: cluster.intra_node, source: format!("cluster {}", cluster.name) };
            Some(&cluster_link)
        }
    };
    let analytical = match placement {
        Placement::Cluster(cluster) => match cluster.device.speed {
            DeviceSpeed::Analytical { .. } => Some(*cluster),
            DeviceSpeed::Profiled => None,
        },
        Placement::Local(_) => None,
    };
    let mut profiles: BTreeMap<ProfileKey, NetworkProfile> = BTreeMap::new();
    let mut rows = Vec::new();
    for trial in trials.iter().filter(|trial| trial.repeat == 0) {
        let spec = stratlab_networks::spec(&trial.network, &input_shape(trial.dataset.info()?))?;
        let key = (trial.network.clone(), trial.dataset.name.to_string(), trial.train.threads);
        let mut profile_s = 0.0;
        if let Placement::Cluster(cluster) = placement {
            if trial.workers > cluster.devices() {
                let why = format!("needs {} devices; {} has {}", trial.workers, cluster.name, cluster.devices());
                rows.push(unavailable(trial, run_id, &why));
                continue;
            }
        }
        if analytical.is_none() && trial.train.device.resolve().ok() != Some(Device::Cpu) {
            rows.push(unavailable(trial, run_id, "profiles are taken on the CPU only so far"));
            continue;
        }
        if !profiles.contains_key(&key) {
            let sizes = sizes_for(trials, &key);
            let started = Instant::now();
            let profile = match analytical {
                Some(cluster) => {
                    let seconds = |flops: f64, bytes: f64| cluster.analytical_seconds(flops, bytes).unwrap_or(0.0);
                    analytical_profile(&spec, &sizes, trial.train.momentum, &seconds)?
                }
                None => {
                    tch::set_num_threads(trial.train.threads as i32);
                    let profile = profile_network(&spec, Device::Cpu, &sizes, trial.train.momentum)?;
                    profile_s = started.elapsed().as_secs_f64();
                    report(&format!(
                        "profiled {} on {} at {} thread(s), batch sizes {sizes:?}: {profile_s:.1} s",
                        key.0, key.1, key.2
                    ));
                    profile
                }
            };
            profiles.insert(key.clone(), profile);
        }
        let ring_link = match placement {
            Placement::Cluster(cluster) if trial.workers > 1 => Some(MeasuredLink {
                link: cluster.ring_link(trial.workers)?,
                source: format!("cluster {}", cluster.name),
            }),
            _ => None,
        };
        let link = ring_link.as_ref().or(link);
        let question = StepQuestion {
            strategy: &trial.strategy,
            workers: trial.workers,
            batch: trial.train.batch_size,
            spec: &spec,
            profile: &profiles[&key],
            link: link.map(|measured| &measured.link),
            momentum: trial.train.momentum,
            prefetch: trial.train.prefetch,
            threads: trial.train.threads,
            cores,
        };
        let prediction = question.predict();
        let step = prediction.model.as_ref().ok();
        let uses_link = trial.workers > 1;
        rows.push(PredictionRow {
            run_id: run_id.to_owned(),
            trial_id: trial.trial_id.clone(),
            label: trial.label(),
            step_s: step.map(|step| step.step_s),
            compute_s: step.map(|step| step.compute_s),
            exposed_comm_s: step.map(|step| step.exposed_comm_s),
            bubble_s: step.map(|step| step.bubble_s),
            optimizer_s: step.map(|step| step.optimizer_s),
            step_unavailable: prediction.model.as_ref().err().cloned(),
            thesis_step_s: prediction.thesis_s.as_ref().ok().copied(),
            peak_memory_bytes: prediction.memory.as_ref().ok().map(|memory| memory.total_bytes()),
            memory_unavailable: prediction.memory.as_ref().err().cloned(),
            core_sharing: prediction.core_sharing,
            link_bandwidth_bytes_per_s: link.filter(|_| uses_link).map(|measured| measured.link.bandwidth.0),
            link_latency_s: link.filter(|_| uses_link).map(|measured| measured.link.latency.0),
            link_source: link.filter(|_| uses_link).map(|measured| measured.source.clone()),
            profile_s,
        });
    }
    Ok(rows)
}

/// A cell the model cannot predict, and why.
fn unavailable(trial: &TrialSpec, run_id: &str, why: &str) -> PredictionRow {
    PredictionRow {
        run_id: run_id.to_owned(),
        trial_id: trial.trial_id.clone(),
        label: trial.label(),
        step_s: None,
        compute_s: None,
        exposed_comm_s: None,
        bubble_s: None,
        optimizer_s: None,
        step_unavailable: Some(why.to_owned()),
        thesis_step_s: None,
        peak_memory_bytes: None,
        memory_unavailable: Some(why.to_owned()),
        core_sharing: 1.0,
        link_bandwidth_bytes_per_s: None,
        link_latency_s: None,
        link_source: None,
        profile_s: 0.0,
    }
}

/// The batch sizes the trials of one (network, data set, threads) need profiled: each
/// trial's per-worker batch, its micro-batch for pipelines, the global batch for the
/// thesis's data-parallel form.
fn sizes_for(trials: &[TrialSpec], key: &ProfileKey) -> Vec<usize> {
    let mut sizes: Vec<usize> = trials
        .iter()
        .filter(|t| (&t.network, t.dataset.name.to_string(), t.train.threads) == (&key.0, key.1.clone(), key.2))
        .flat_map(|t| profiled_samples(&t.strategy, t.workers, t.train.batch_size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}
