//! Fixtures shared by the store's integration tests: a fingerprint, a full trial row, a
//! fresh run, and the schema-versus-serde check every table must pass.

// Each test file uses its own part of the fixtures.
#![allow(dead_code)]

use std::fs;
use std::path::Path;

use stratlab_results::{
    DataSource, DeviceLoad, EventKind, EventRow, Fingerprint, Lane, Outcome, RunStore, Table, TrainingSummary,
    TrialDevice, TrialRow, UtcTime,
};
use stratlab_strategy_spec::{Balance, MatmulPrecision, ParameterColumns, StrategyKind};

/// The fingerprint of a real run on a CPU machine (the binary probes machines; this crate only stores).
pub fn fingerprint() -> Fingerprint {
    serde_json::from_str(include_str!("../../data/fingerprint.json")).expect("sample fingerprint")
}

/// A finished two-worker GPipe trial with every kind of column filled or null.
pub fn trial(run_id: &str, trial_id: &str, index: i64) -> TrialRow {
    TrialRow {
        run_id: run_id.into(),
        trial_id: trial_id.into(),
        index,
        network: "resnet18".into(),
        dataset: "cifar10".into(),
        data_source: DataSource::Synthetic,
        strategy: StrategyKind::Gpipe,
        parameters: ParameterColumns {
            micro_batches: Some(4),
            balance: Some(Balance::Uniform),
            ..ParameterColumns::default()
        },
        workers: 2,
        batch_size: 32,
        global_batch: 64,
        epochs_budget: Some(3),
        steps_budget: None,
        seconds_budget: Some(600.0),
        min_timed_steps_budget: None,
        repeat: 0,
        seed: 42,
        device: TrialDevice::Cpu,
        device_name: Some("AMD EPYC 7B13".into()),
        device_ids: None,
        host_name: Some("node-a".into()),
        threads: 1,
        swept_threads: None,
        stored_precision: None,
        stored_memory_format: None,
        precision_auto: None,
        memory_format_auto: None,
        stored_optimizer: None,
        link: None,
        nodes: None,
        straggler: Default::default(),
        link_emulation_cpu_s: None,
        speed_reference_s: None,
        memory_limit_bytes: None,
        device_memory_limit_bytes: None,
        cudnn_benchmark: Some(true),
        matmul_precision: Some(MatmulPrecision::Highest),
        cudnn_tf32: Some(true),
        metrics_every_steps: 5,
        target_accuracy: 0.8,
        outcome: Outcome::Ok,
        reason: None,
        reason_detail: None,
        epochs_completed: 3,
        steps_completed: 300,
        warmup_steps: 5,
        training: TrainingSummary {
            seconds_per_epoch_mean: Some(12.5),
            seconds_per_epoch_estimate: Some(12.25),
            step_time_median_s: Some(0.041),
            step_time_p10_s: Some(0.039),
            step_time_p90_s: Some(0.05),
            data_wait_median_s: Some(1e-4),
            h2d_median_s: Some(0.0),
            step_samples_per_s: Some(1560.5),
            wall_samples_per_s: Some(1500.25),
            val_samples_per_s: Some(4000.0),
            time_to_accuracy_s: None,
            final_accuracy: Some(0.61),
            final_loss: Some(1.07),
            eval_time_s: Some(3.5),
            peak_memory_bytes: Some(734_003_200),
            skipped_updates: Some(2),
        },
        load: DeviceLoad {
            utilization_mean_pct: Some(48.5),
            utilization_max_pct: Some(99.0),
            memory_mean_bytes: Some(1.5e9),
            memory_max_bytes: Some(2_000_000_000),
            process_memory_mean_bytes: None,
            process_memory_max_bytes: None,
            energy_j: None,
            energy_source: None,
        },
        wall_time_s: 40.2,
        started_at: UtcTime::parse_rfc3339("2026-11-22T21:45:01Z").unwrap(),
        finished_at: UtcTime::parse_rfc3339("2026-11-22T21:45:41Z").unwrap(),
    }
}

/// An event of `rank` in `step` of trial `t` of run `r`, on the lane its kind usually runs
/// on; communication moves 4 MiB.
pub fn event(rank: u32, step: u64, kind: EventKind, start_s: f64, end_s: f64) -> EventRow {
    let lane = if kind.is_communication() { Lane::Comm } else { Lane::Compute };
    EventRow {
        run_id: "r".into(),
        trial_id: "t".into(),
        rank,
        step,
        micro_batch: None,
        pipeline_stage: None,
        kind,
        name: String::new(),
        start_s,
        end_s,
        bytes: kind.is_communication().then_some(4 << 20),
        lane,
    }
}

/// A fresh run of the one-line suite `default` under `root/runs`.
pub fn new_store(root: &Path) -> RunStore {
    let suite = root.join("default.yaml");
    fs::write(&suite, "name: default\n").expect("write suite");
    RunStore::create(&root.join("runs"), "default", &suite, &fingerprint()).expect("create run")
}

/// The schema lists exactly the serde fields, in order: the two can never drift apart.
pub fn assert_schema_matches_serde<T: Table>(row: &T) {
    let json = serde_json::to_value(row).expect("serialise");
    let keys: Vec<String> = json.as_object().expect("object").keys().cloned().collect();
    let schema: Vec<String> = T::schema().iter_names().map(|n| n.to_string()).collect();
    let mut sorted_schema = schema.clone();
    sorted_schema.sort();
    assert_eq!(keys, sorted_schema, "{} schema vs serde fields", T::NAME);
}
