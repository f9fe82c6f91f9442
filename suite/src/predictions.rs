//! Every cell of a plan predicted, not trained: each network profiled once per (data set,
//! threads) on the trial's device at the batch sizes its cells need
//! (`stratlab_strategies::profile`), then each cell's step and memory put to the
//! performance model (`stratlab_strategies::predict`). `stratlab predict` prints the rows;
//! `stratlab run` stores them with the run before its first trial.

use std::collections::BTreeMap;

use stratlab_perf_model::cluster::{Cluster, DeviceSpeed};
use stratlab_perf_model::Link;
use stratlab_results::PredictionRow;
use stratlab_strategies::predict::StepQuestion;
use stratlab_strategies::profile::{analytical_profile, NetworkProfile};
use tch::Device;

use crate::profiles::{key_of, sizes_for, ProfileCache, ProfileKey};
use crate::shapes::input_shape;
use crate::trial::TrialSpec;

/// The link multi-worker cells communicate over, and where it was measured.
pub struct MeasuredLink {
    /// Bandwidth and latency.
    pub link: Link,
    /// Where it came from, as stored in `predictions.link_source`.
    pub source: String,
}

/// The cluster the cells are predicted on: this machine, its workers sharing its cores and
/// its link measured; or a cluster file, one device per worker.
pub enum Placement<'a> {
    /// This machine, the link as measured (if at all).
    Local(Option<&'a MeasuredLink>),
    /// A cluster file's devices and links.
    Cluster(&'a Cluster),
}

/// One prediction per cell (the first repeat of each), in plan order, profiles taken from
/// `cache` (measured there when missing). `report` hears what is profiled and how long it
/// took.
pub fn predict_cells(
    trials: &[TrialSpec],
    placement: &Placement<'_>,
    cache: &mut ProfileCache,
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
    let mut analytical_profiles: BTreeMap<ProfileKey, NetworkProfile> = BTreeMap::new();
    // Workers share this machine's cores, and copy what they exchange through its kernel,
    // only when the cells run here.
    let (shared_cores, host_copy_bandwidth) = match placement {
        Placement::Local(link) => (Some(cores), link.map(|measured| measured.link.bandwidth.0)),
        Placement::Cluster(_) => (None, None),
    };
    let mut rows = Vec::new();
    for trial in trials.iter().filter(|trial| trial.repeat == 0) {
        let spec = stratlab_networks::spec(&trial.network, &input_shape(trial.dataset.info()?))?;
        let key = key_of(trial);
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
        let profile = match analytical {
            Some(cluster) => {
                if !analytical_profiles.contains_key(&key) {
                    let seconds = |flops: f64, bytes: f64| cluster.analytical_seconds(flops, bytes).unwrap_or(0.0);
                    let sizes = sizes_for(trials, &key);
                    analytical_profiles
                        .insert(key.clone(), analytical_profile(&spec, &sizes, trial.train.momentum, &seconds)?);
                }
                &analytical_profiles[&key]
            }
            None => {
                let (profile, seconds) = cache.measured(trials, trial, &spec, shared_cores, report)?;
                profile_s = seconds;
                profile
            }
        };
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
            profile,
            link: link.map(|measured| &measured.link),
            momentum: trial.train.momentum,
            prefetch: trial.train.prefetch,
            threads: trial.train.threads,
            cores,
            host_copy_bandwidth,
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
