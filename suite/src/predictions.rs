//! Every cell of a plan predicted, not trained: each network profiled once per (data set,
//! threads) on the trial's device at the batch sizes its cells need
//! (`stratlab_strategies::profile`), then each cell's step and memory put to the
//! performance model (`stratlab_perf_model::predict`). `stratlab predict` prints the rows;
//! `stratlab run` stores them with the run before its first trial.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use stratlab_perf_model::cluster::{Cluster, DeviceSpeed};
use stratlab_perf_model::predict::StepQuestion;
use stratlab_perf_model::simulated_timeline::{SimulatedBlock, SimulatedWork};
use stratlab_perf_model::{CollectiveCurve, Link, MeasuredCollectives};
use stratlab_profile::NetworkProfile;
use stratlab_results::{EventKind, PredictedPassRow, PredictionRow, ProbeKind, ProbeRow, RunStore};
use stratlab_strategies::model_inputs::{loader_sample_bytes, pipeline_cuts};
use stratlab_strategies::profile::analytical_profile;
use tch::Device;

use crate::exit::InputError;
use crate::link_axis::TrialLink;
use crate::profiles::{key_of, sizes_for, ProfileCache, ProfileKey};
use crate::trial::TrialSpec;

/// The link multi-worker cells communicate over, and where it was measured.
pub struct MeasuredLink {
    /// Bandwidth and latency.
    pub link: Link,
    /// The collectives' times against size, where a probe measured them.
    pub collectives: MeasuredCollectives,
    /// Where it came from, as stored in `predictions.link_source`.
    pub source: String,
}

/// This machine's links, as probed: loopback and each emulated link a suite's trials talk
/// over, by link (`None`: loopback).
#[derive(Default)]
pub struct LocalLinks {
    by_link: BTreeMap<Option<Link>, MeasuredLink>,
    /// The network between the nodes of the run's Slurm allocation, where a probe step
    /// measured it: what cells across nodes talk over.
    between_nodes: Option<MeasuredLink>,
    /// The most hosts a probe these links were read from spanned, where more than one.
    spanned_hosts: Option<u32>,
}

impl LocalLinks {
    /// The links a probe run, or a suite run's probes, measured: one per link its rows
    /// name (rows without one are loopback's), from the pairs within one host; and, where
    /// its ranks spanned hosts (`srun -N 2 stratlab probe`), the network between nodes from
    /// the pairs and collectives across them, what cells across nodes are predicted over.
    pub fn from_probe_run(run: &Path) -> anyhow::Result<LocalLinks> {
        let rows: Vec<ProbeRow> = RunStore::open(run)?.load_rows()?;
        let across = |row: &&ProbeRow| {
            row.hosts.is_some_and(|hosts| hosts > 1) && (row.kind != ProbeKind::P2p || row.src_host != row.dst_host)
        };
        let (between, within): (Vec<ProbeRow>, Vec<ProbeRow>) = rows.iter().cloned().partition(|row| across(&row));
        let source = run.display().to_string();
        let mut links = LocalLinks::from_probes(&within, &source);
        links.between_nodes = MeasuredLink::from_probes(&between, &format!("{source} (between nodes)"));
        links.spanned_hosts = rows.iter().filter_map(|row| row.hosts).max().filter(|&hosts| hosts > 1);
        if links.by_link.is_empty() && links.between_nodes.is_none() {
            let message = format!("{}: no point-to-point rows; give a run of `stratlab probe`", run.display());
            return Err(InputError(message).into());
        }
        Ok(links)
    }

    /// This machine's links alone, as a command that knows nothing of nodes needs them: a
    /// probe of ranks on several hosts without a pair on one is refused, with the way out.
    pub fn of_one_machine(self, run: &Path) -> anyhow::Result<LocalLinks> {
        match self.spanned_hosts {
            Some(hosts) if self.by_link.is_empty() => Err(InputError(format!(
                "{}: the probe spans {hosts} hosts, with no pair within one, so its pairs and collectives are \
                 not this machine's links; give a probe of this machine alone (`stratlab probe --workers N`) or \
                 describe the nodes in a cluster file (`--cluster`)",
                run.display()
            ))
            .into()),
            _ => Ok(self),
        }
    }

    /// The links `rows` measured, each from its own rows (see [`MeasuredLink::from_probes`]).
    pub fn from_probes(rows: &[ProbeRow], source: &str) -> LocalLinks {
        let mut by_link: BTreeMap<Option<Link>, Vec<ProbeRow>> = BTreeMap::new();
        for row in rows {
            by_link.entry(row.link).or_default().push(row.clone());
        }
        let by_link = by_link
            .into_iter()
            .filter_map(|(link, rows)| {
                let label = link.map_or_else(|| TrialLink::Loopback.label(), |link| link.name());
                let measured = MeasuredLink::from_probes(&rows, &format!("{source} ({label})"))?;
                Some((link, measured))
            })
            .collect();
        LocalLinks { by_link, between_nodes: None, spanned_hosts: None }
    }

    /// Adds the measurement of the network between the allocation's nodes.
    pub fn insert_between_nodes(&mut self, measured: MeasuredLink) {
        self.between_nodes = Some(measured);
    }

    /// Adds (or replaces) the measurement of `link`.
    pub fn insert(&mut self, link: &TrialLink, measured: MeasuredLink) {
        self.by_link.insert(link.emulated().map(Link::as_stored), measured);
    }

    /// What `link` measured, if it was probed.
    pub fn of(&self, link: &TrialLink) -> Option<&MeasuredLink> {
        self.by_link.get(&link.emulated().map(Link::as_stored))
    }

    /// What `trial`'s ranks talk over, if it was probed: the network between nodes for a
    /// cell across them, else its link here.
    pub fn of_trial(&self, trial: &TrialSpec) -> Option<&MeasuredLink> {
        match trial.nodes {
            1 => self.of(&trial.link),
            _ => self.between_nodes.as_ref(),
        }
    }
}

impl MeasuredLink {
    /// The link probe rows measure: the one-way latency of the smallest point-to-point
    /// message and the bandwidth of the largest (medians over pairs), and each collective's
    /// mean time against size (its expected cost: under load its times are bimodal),
    /// measured with the ranks' cores busy where the probe did so (runs before that kind
    /// existed give their idle all-reduce, and their median); `None` without
    /// point-to-point rows.
    pub fn from_probes(rows: &[ProbeRow], source: &str) -> Option<MeasuredLink> {
        // A collective's mean time at a size, the median over its rows.
        let time_of = |kind: ProbeKind, bytes: u64| {
            let times: Vec<f64> = rows
                .iter()
                .filter(|row| row.kind == kind && row.bytes == bytes)
                .map(|row| row.mean_s.unwrap_or(row.median_s))
                .collect();
            stratlab_results::stats::median(&times)
        };
        let sizes_of = |kind: ProbeKind| -> BTreeSet<u64> {
            rows.iter().filter(|row| row.kind == kind).map(|row| row.bytes).collect()
        };
        let link = stratlab_results::point_to_point_link(rows)?;
        let curve = |preferred: ProbeKind, otherwise: ProbeKind| {
            [preferred, otherwise].into_iter().find_map(|kind| {
                let ranks = rows.iter().find(|row| row.kind == kind)?.world_size as usize;
                let points =
                    sizes_of(kind).into_iter().filter_map(|bytes| Some((bytes, time_of(kind, bytes)?))).collect();
                CollectiveCurve::new(ranks, points).ok()
            })
        };
        // Each collective in the cores' state it meets in a step: all-reduces and
        // reduce-scatters run behind the backward, with the cores computing; all-gathers
        // are waited for by every rank at once (ZeRO-3's before a unit's pass, ZeRO-1 and
        // 2's after the update), with the cores idle.
        let collectives = MeasuredCollectives {
            all_reduce: curve(ProbeKind::AllReduceLoaded, ProbeKind::AllReduce),
            all_gather: curve(ProbeKind::AllGather, ProbeKind::AllGatherLoaded),
            reduce_scatter: curve(ProbeKind::ReduceScatterLoaded, ProbeKind::ReduceScatter),
        };
        Some(MeasuredLink { link, collectives, source: source.to_owned() })
    }
}

/// The cluster the cells are predicted on: this machine, its workers sharing its cores and
/// its link measured; or a cluster file, one device per worker.
pub enum Placement<'a> {
    /// This machine, its links as measured (those that were), and the cores its workers
    /// share.
    Local {
        /// The links probed.
        links: &'a LocalLinks,
        /// The cores the workers share.
        cores: usize,
    },
    /// A cluster file's devices and links.
    Cluster(&'a Cluster),
}

impl<'a> Placement<'a> {
    /// This machine, with the cores this process may use.
    pub fn here(links: &'a LocalLinks) -> Placement<'a> {
        Placement::Local { links, cores: crate::fingerprint::cores_here() }
    }
}

/// What the model predicted of a plan's cells.
pub struct CellPredictions {
    /// One row per cell (the first repeat of each), in plan order.
    pub rows: Vec<PredictionRow>,
    /// Each pipeline cell's simulated step, block by block (the predicted timeline).
    pub passes: Vec<PredictedPassRow>,
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
) -> anyhow::Result<CellPredictions> {
    let (cores, cluster_link);
    match placement {
        Placement::Local { cores: here, .. } => {
            cores = *here;
            cluster_link = None;
        }
        Placement::Cluster(cluster) => {
            // A device per worker: nothing shares its cores.
            cores = usize::MAX / 2;
            cluster_link = Some(MeasuredLink {
                link: cluster.intra_node,
                collectives: MeasuredCollectives::default(),
                source: format!("cluster {}", cluster.name),
            });
        }
    };
    let analytical = match placement {
        Placement::Cluster(cluster) => match cluster.device.speed {
            DeviceSpeed::Analytical { .. } => Some(*cluster),
            DeviceSpeed::Profiled => None,
        },
        Placement::Local { .. } => None,
    };
    let mut analytical_profiles: BTreeMap<ProfileKey, NetworkProfile> = BTreeMap::new();
    // Workers share this machine's cores, and copy what they exchange through its kernel
    // (at loopback's speed, whatever an emulated link then lets through), only when the
    // cells run here.
    let (shared_cores, loopback_bandwidth) = match placement {
        Placement::Local { links, .. } => {
            (Some(cores), links.of(&TrialLink::Loopback).map(|measured| measured.link.bandwidth.0))
        }
        Placement::Cluster(_) => (None, None),
    };
    let (mut rows, mut passes) = (Vec::new(), Vec::new());
    for trial in trials.iter().filter(|trial| trial.repeat == 0) {
        let spec = trial.network_spec()?;
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
                    let sizes = sizes_for(trials, &key, &[]);
                    analytical_profiles.insert(
                        key.clone(),
                        analytical_profile(&spec, &sizes, trial.train.update_rule(), trial.train.precision, &seconds)?,
                    );
                }
                &analytical_profiles[&key]
            }
            None => {
                let (profile, seconds) = cache.measured(trials, trial, shared_cores, report)?;
                profile_s = seconds;
                profile
            }
        };
        let ring_link = match placement {
            Placement::Cluster(cluster) if trial.workers > 1 => Some(MeasuredLink {
                link: cluster.ring_link(trial.workers)?,
                collectives: MeasuredCollectives::default(),
                source: format!("cluster {}", cluster.name),
            }),
            _ => None,
        };
        let link = match placement {
            Placement::Local { links, .. } => links.of_trial(trial),
            Placement::Cluster(_) => ring_link.as_ref().or(cluster_link.as_ref()),
        };
        let host_copy_bandwidth = loopback_bandwidth.or(link.map(|measured| measured.link.bandwidth.0));
        let host_copy_bandwidth = host_copy_bandwidth.filter(|_| shared_cores.is_some());
        let question = StepQuestion {
            strategy: &trial.strategy,
            workers: trial.workers,
            batch: trial.train.batch_size,
            profile,
            cuts: pipeline_cuts(&trial.strategy, trial.workers, trial.train.batch_size, &spec, profile),
            sample_bytes: loader_sample_bytes(&spec),
            link: link.map(|measured| &measured.link),
            collectives: link.map(|measured| &measured.collectives),
            optimizer: trial.train.update_rule().footprint(),
            prefetch: trial.train.prefetch,
            threads: trial.train.threads,
            // Each node brings its own cores, taken to be as many as this host's.
            cores: cores.saturating_mul(trial.nodes),
            host_copy_bandwidth,
            straggler: trial.train.straggler.as_ref(),
        };
        let prediction = question.predict();
        if let Some(pipeline) = &prediction.pipeline {
            passes.extend(pipeline.timeline().iter().map(|block| predicted_pass(run_id, &trial.trial_id, block)));
        }
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
            step_unavailable: prediction.model.as_ref().err().map(ToString::to_string),
            thesis_step_s: prediction.thesis_s.as_ref().ok().copied(),
            peak_memory_bytes: prediction.memory.as_ref().ok().map(|memory| memory.total_bytes()),
            memory_unavailable: prediction.memory.as_ref().err().map(ToString::to_string),
            core_sharing: prediction.core_sharing,
            link_bandwidth_bytes_per_s: link.filter(|_| uses_link).map(|measured| measured.link.bandwidth.0),
            link_latency_s: link.filter(|_| uses_link).map(|measured| measured.link.latency.0),
            link_source: link.filter(|_| uses_link).map(|measured| measured.source.clone()),
            profile_s,
            // None on an analytical cluster: no profile was taken.
            speed_reference_s: cache.speed_reference_s(trial),
            profile_retaken: cache.retaken(trial).map(str::to_owned),
        });
    }
    Ok(CellPredictions { rows, passes })
}

/// One block of a cell's predicted step as stored, its work as the event kind the trials
/// record for the same work.
fn predicted_pass(run_id: &str, trial_id: &str, block: &SimulatedBlock) -> PredictedPassRow {
    PredictedPassRow {
        run_id: run_id.to_owned(),
        trial_id: trial_id.to_owned(),
        rank: block.rank as u32,
        kind: match block.work {
            SimulatedWork::Forward => EventKind::Forward,
            SimulatedWork::Recompute => EventKind::Recompute,
            SimulatedWork::Backward => EventKind::Backward,
            SimulatedWork::InputBackward => EventKind::BackwardInput,
            SimulatedWork::WeightBackward => EventKind::BackwardWeight,
            SimulatedWork::AllReduce => EventKind::AllReduce,
            SimulatedWork::Optimizer => EventKind::Optimizer,
        },
        pipeline_stage: block.stage.map(|stage| stage as u32),
        micro_batch: block.micro_batch.map(|micro_batch| micro_batch as u32),
        start_s: block.start_s,
        end_s: block.end_s,
    }
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
        speed_reference_s: None,
        profile_retaken: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: ProbeKind, bytes: u64, median_s: f64, mean_s: Option<f64>) -> ProbeRow {
        ProbeRow {
            run_id: "probe".into(),
            kind,
            backend: "gloo".into(),
            world_size: 2,
            src: (kind == ProbeKind::P2p).then_some(0),
            dst: (kind == ProbeKind::P2p).then_some(1),
            src_host: None,
            dst_host: None,
            hosts: None,
            bytes,
            repeats: 20,
            median_s,
            min_s: median_s / 2.0,
            max_s: median_s * 2.0,
            mean_s,
            link: None,
            algorithm_gbps: 1.0,
            bus_gbps: 1.0,
        }
    }

    #[test]
    fn a_probe_gives_the_link_and_the_loaded_all_reduce_by_its_mean() {
        let mut rows = vec![
            row(ProbeKind::P2p, 4, 50e-6, None),
            row(ProbeKind::P2p, 1 << 20, 50e-6 + 1e-3, None),
            row(ProbeKind::AllReduce, 4, 100e-6, Some(120e-6)),
            row(ProbeKind::AllReduce, 1 << 20, 2e-3, Some(2.5e-3)),
        ];
        let idle = MeasuredLink::from_probes(&rows, "idle").unwrap();
        assert!((idle.link.latency.0 - 50e-6).abs() < 1e-15);
        assert!((idle.link.bandwidth.0 - (1 << 20) as f64 / 1e-3).abs() < 1e-3);
        let curve = idle.collectives.all_reduce.unwrap();
        assert_eq!(curve.ranks(), 2);
        assert_eq!((idle.collectives.all_gather, idle.collectives.reduce_scatter), (None, None));
        assert!((curve.seconds(4.0) - 120e-6).abs() < 1e-15, "the mean, not the median");
        // Bimodal under load: the mean is the expected cost, and the loaded rows win.
        rows.push(row(ProbeKind::AllReduceLoaded, 4, 150e-6, Some(2e-3)));
        rows.push(row(ProbeKind::AllReduceLoaded, 1 << 20, 4e-3, Some(5e-3)));
        let loaded = MeasuredLink::from_probes(&rows, "loaded").unwrap().collectives.all_reduce.unwrap();
        assert!((loaded.seconds(4.0) - 2e-3).abs() < 1e-15);
        // Sharded data parallelism's collectives, each its own curve: the gather idle where
        // measured so, the scatter loaded.
        rows.push(row(ProbeKind::AllGatherLoaded, 8, 1e-3, Some(9e-3)));
        rows.push(row(ProbeKind::AllGatherLoaded, 1 << 20, 3e-3, Some(9e-3)));
        rows.push(row(ProbeKind::AllGather, 8, 1e-3, Some(1e-3)));
        rows.push(row(ProbeKind::AllGather, 1 << 20, 3e-3, Some(3e-3)));
        rows.push(row(ProbeKind::ReduceScatter, 8, 1e-3, Some(1e-3)));
        rows.push(row(ProbeKind::ReduceScatter, 1 << 20, 3e-3, Some(3e-3)));
        rows.push(row(ProbeKind::ReduceScatterLoaded, 8, 2e-3, Some(2e-3)));
        rows.push(row(ProbeKind::ReduceScatterLoaded, 1 << 20, 6e-3, Some(7e-3)));
        let sharded = MeasuredLink::from_probes(&rows, "sharded").unwrap().collectives;
        assert!((sharded.all_gather.unwrap().seconds((1 << 20) as f64) - 3e-3).abs() < 1e-15);
        assert!((sharded.reduce_scatter.unwrap().seconds((1 << 20) as f64) - 7e-3).abs() < 1e-15);
        // A run from before the mean was stored falls back to its median.
        rows.iter_mut().for_each(|row| row.mean_s = None);
        let old = MeasuredLink::from_probes(&rows, "old").unwrap().collectives.all_reduce.unwrap();
        assert!((old.seconds((1 << 20) as f64) - 4e-3).abs() < 1e-15);
        assert!(MeasuredLink::from_probes(&rows[2..], "no p2p").is_none());
    }
}
