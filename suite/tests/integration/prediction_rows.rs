//! The prediction rows of shipped suites on shipped cluster files, and of a small suite on
//! this machine's path from held profiles and a fixed probe, held as snapshots
//! (`snapshots/integration__prediction_rows__*.snap`), one JSON line per row with every
//! float as serde writes it (the shortest text that reads back to the same bits). A
//! cluster's devices have datasheet speeds, so no profile is measured and the rows follow
//! from the plan and the model alone: a change that moves any prediction by one bit, or
//! a refactor of how trials reach the model, shows here.

use std::path::Path;

use stratlab::plan::plan;
use stratlab::predictions::{predict_cells, LocalLinks, Placement};
use stratlab::profiles::{ProfileCache, ReusePolicy};
use stratlab::suite_file::SuiteFile;
use stratlab_perf_model::cluster::Cluster;
use stratlab_results::{ProbeKind, ProbeRow};
use stratlab_strategies::profile::analytical_profile;

fn rows_of(suite: &str, cluster: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let suite_path = root.join("suite").join(suite);
    let (suite_file, _) = SuiteFile::load(&suite_path).unwrap();
    let trials = plan(&suite_file, &suite_path).unwrap();
    let cluster = Cluster::load(&root.join("examples/clusters").join(cluster)).unwrap();
    let mut cache = ProfileCache::open(None, ReusePolicy::default()).unwrap();
    let predicted = predict_cells(&trials, &Placement::Cluster(&cluster), &mut cache, "golden", &mut |_| {}).unwrap();
    let rows = predicted.rows;
    assert_eq!(rows.len(), trials.iter().filter(|trial| trial.repeat == 0).count());
    // Every pipeline cell with a step has its simulated step stored, ending where it does.
    for (row, trial) in rows.iter().zip(trials.iter().filter(|trial| trial.repeat == 0)) {
        let passes: Vec<_> = predicted.passes.iter().filter(|pass| pass.trial_id == row.trial_id).collect();
        match (trial.strategy.schedule(), row.step_s) {
            (Some(schedule), Some(step_s)) => {
                let end_s = passes.iter().map(|pass| pass.end_s).fold(0.0, f64::max);
                assert!(end_s > 0.0 && passes.iter().all(|pass| pass.start_s >= 0.0 && pass.end_s >= pass.start_s));
                // A flushed step adds the last stage's loss to the others after the drawn
                // blocks; PipeDream's steady-state period is shorter than one step's span.
                if !schedule.updates_per_micro_batch() {
                    assert!(end_s <= step_s * (1.0 + 1e-9), "{}: {end_s} past {step_s}", row.trial_id);
                }
            }
            _ => assert!(passes.is_empty(), "{} is no predicted pipeline", row.trial_id),
        }
    }
    assert!(rows.iter().any(|row| row.step_s.is_some()), "{suite} on {cluster:?}: nothing predicted");
    rows.iter().map(|row| serde_json::to_string(row).unwrap()).collect::<Vec<_>>().join("\n")
}

#[test]
fn shipped_suites_on_shipped_clusters_predict_the_rows_they_always_have() {
    for (suite, cluster, name) in [
        ("scaling-predicted.yaml", "sixteen-nodes-4-h100-100gbit.yaml", "scaling_predicted_on_sixteen_nodes"),
        ("scaling-predicted.yaml", "one-server-8-p40-pcie.yaml", "scaling_predicted_on_eight_p40"),
        ("pipeline-study.yaml", "one-node-4-small-gpu.yaml", "pipeline_study_on_four_small_gpus"),
        ("zero-memory.yaml", "one-node-4-h100.yaml", "zero_memory_on_four_h100"),
        ("default.yaml", "two-dgx1-v100-4x100gbit-ib.yaml", "default_on_two_dgx1"),
        // The thesis's matrix on its own cluster: NVLink pairs inside a node.
        ("papers/thesis-ch3.yaml", "thesis-4x-titan-rtx.yaml", "thesis_ch3_on_the_thesis_cluster"),
    ] {
        insta::assert_snapshot!(name, rows_of(suite, cluster));
    }
}

/// A probe of two ranks on one machine: 20 µs one way, 2 GB/s point to point, and the
/// collectives' mean times at three sizes (loaded all-reduce and reduce-scatter, idle
/// all-gather), as `stratlab probe` stores them.
fn probe_rows() -> Vec<ProbeRow> {
    let row = |kind: ProbeKind, bytes: u64, seconds: f64| ProbeRow {
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
        median_s: seconds,
        min_s: seconds,
        max_s: seconds,
        mean_s: Some(seconds),
        link: None,
        algorithm_gbps: 1.0,
        bus_gbps: 1.0,
    };
    let mut rows = vec![row(ProbeKind::P2p, 4, 20e-6), row(ProbeKind::P2p, 4 << 20, 20e-6 + (4 << 20) as f64 / 2e9)];
    for (kind, bandwidth) in
        [(ProbeKind::AllReduceLoaded, 0.5e9), (ProbeKind::AllGather, 1e9), (ProbeKind::ReduceScatterLoaded, 0.8e9)]
    {
        for bytes in [4u64 << 10, 1 << 20, 16 << 20] {
            rows.push(row(kind, bytes, 50e-6 + bytes as f64 / bandwidth));
        }
    }
    rows
}

/// This machine's path, made machine-independent: two cores, the probe above, and each
/// network's profile on a fixed roofline (1 TFLOP/s, 10 GB/s) held by the cache, so the
/// rows follow from the plan, the probe and the model (core sharing, the loopback copies,
/// the measured collectives) alone.
#[test]
fn a_suite_predicted_here_from_held_profiles_and_a_probe_gives_the_rows_it_always_has() {
    let suite = "name: local-golden
networks: [small-cnn, resnet18]
datasets: [cifar10:synthetic]
strategies:
  - single
  - {name: data-parallel, workers: [2]}
  - {name: parameter-server, workers: [2]}
  - {name: gpipe, workers: [2], micro_batches: [4], balance: time}
  - {name: pipedream, workers: [2], micro_batches: [4]}
  - {name: sharded-data-parallel, workers: [2], stage: [1, 3]}
batch_size: 32
threads: 2
device: cpu
budget: {steps: 4}
";
    let suite_file = SuiteFile::parse(suite).unwrap();
    let trials = plan(&suite_file, Path::new("local-golden.yaml")).unwrap();
    let mut cache = ProfileCache::open(None, ReusePolicy::default()).unwrap();
    let roofline = |flops: f64, bytes: f64| (flops / 1e12).max(bytes / 10e9);
    for trial in trials.iter().filter(|trial| trial.repeat == 0) {
        let mut sizes: Vec<usize> = trials
            .iter()
            .filter(|other| other.network == trial.network)
            .flat_map(|other| [other.train.batch_size, other.strategy.stage_samples(other.train.batch_size)])
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let spec = trial.network_spec().unwrap();
        let update = trial.train.update_rule();
        let profile = analytical_profile(&spec, &sizes, update, trial.train.precision, &roofline).unwrap();
        cache.hold(trial, profile);
    }
    let links = LocalLinks::from_probes(&probe_rows(), "fixture probe");
    let placement = Placement::Local { links: &links, cores: 2 };
    let rows =
        predict_cells(&trials, &placement, &mut cache, "golden", &mut |line| panic!("measured: {line}")).unwrap().rows;
    assert!(rows.iter().filter(|row| row.step_s.is_some()).count() >= 12, "{rows:?}");
    let text = rows.iter().map(|row| serde_json::to_string(row).unwrap()).collect::<Vec<_>>().join("\n");
    insta::assert_snapshot!("small_suite_here_on_two_cores", text);
}
