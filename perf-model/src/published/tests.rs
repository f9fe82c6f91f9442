use super::*;

const CLUSTER: &str = "name: two-nodes-2-gpus
nodes: 2
devices_per_node: 2
device: {name: toy GPU, memory: 16 GiB, peak_flops: 10 TFLOP/s, memory_bandwidth: 900 GB/s}
links:
  intra_node: {bandwidth: 100 GB/s, latency: 2 us}
  inter_node: {bandwidth: 10 GB/s, latency: 5 us}
";

fn table(rows: &str) -> Result<PublishedTable, PublishedError> {
    table_trained(rows, "")
}

/// A table whose `train_s` rows trained as `training` (a YAML line, or empty) says.
fn table_trained(rows: &str, training: &str) -> Result<PublishedTable, PublishedError> {
    let folder = std::env::temp_dir().join(format!(
        "stratlab-published-{}-{}-{}",
        std::process::id(),
        rows.len(),
        training.len()
    ));
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("cluster.yaml"), CLUSTER).unwrap();
    let text = format!(
        "name: toy
source: {{title: a toy, url: https://example.com/x, file: README.md, table: 1, pinned: abc123}}
cluster: cluster.yaml
network: resnet18
dataset: cifar10
source_layers_per_stage: [2, 3, 3, 1]
{training}
rows:
{rows}"
    );
    let path = folder.join("table.yaml");
    std::fs::write(&path, text).unwrap();
    PublishedTable::load(&path)
}

const INPUT: &str = "  - {label: one, workers: 1, batch: 32, strategy: {name: single}, step_s: 0.1, input: true}\n";

#[test]
fn a_table_reads_with_its_cluster_and_rows_know_their_step_and_throughput() {
    let rows = format!(
        "{INPUT}  - {{label: four, workers: 4, batch: 32, strategy: {{name: data-parallel, fusion_threshold_mib: 25}}, step_s: 0.125}}
  - {{label: pipe, workers: 2, batch: 64, strategy: {{name: gpipe, micro_batches: 4}}, samples_per_s: 400, source_balance: [4, 5]}}
"
    );
    let table = table(&rows).unwrap();
    assert_eq!(table.cluster.devices(), 4);
    assert_eq!(table.input_row().label, "one");
    let four = &table.rows[1];
    assert_eq!(four.global_batch(), 128);
    assert!((four.samples_per_s() - 1024.0).abs() < 1e-9);
    let pipe = &table.rows[2];
    assert!((pipe.step_s() - 0.16).abs() < 1e-12);
    // The source's cut after its 4th layer falls inside stratlab's second stage (layers
    // 2–4): the nearest boundary is after it (layer 5, one away) rather than before (2).
    assert_eq!(pipe.strategy.balance(), Balance::Explicit(vec![2, 2]));
}

#[test]
fn a_source_balance_maps_to_the_nearest_stage_boundary_keeping_every_part_nonempty() {
    // Stages of 3 layers each; cuts at layers 4 and 5 both nearest boundary 3, so the
    // second moves on to the next boundary.
    assert_eq!(PublishedTable::stage_balance(&[3, 3, 3, 3], &[4, 1, 7]), Some(vec![1, 1, 2]));
    assert_eq!(PublishedTable::stage_balance(&[3, 3], &[6]), Some(vec![2]));
    assert_eq!(PublishedTable::stage_balance(&[3, 3], &[1, 1, 4]), None, "more parts than stages");
}

#[test]
fn bad_tables_name_the_field_and_what_is_valid() {
    let message = |rows: &str| table(rows).unwrap_err().to_string();
    let two_values = format!("{INPUT}  - {{label: x, workers: 2, batch: 32, strategy: {{name: data-parallel}}, step_s: 0.1, samples_per_s: 3}}\n");
    assert!(message(&two_values).contains("rows[1].step_s"), "{}", message(&two_values));
    let no_input = "  - {label: one, workers: 1, batch: 32, strategy: {name: single}, step_s: 0.1}\n";
    assert!(message(no_input).contains("exactly one row `input: true`"));
    let too_many =
        format!("{INPUT}  - {{label: x, workers: 8, batch: 32, strategy: {{name: data-parallel}}, step_s: 0.1}}\n");
    assert!(message(&too_many).contains("has 4 devices"), "{}", message(&too_many));
    let unknown = format!("{INPUT}  - {{label: x, workers: 2, batch: 32, strategy: {{name: ring}}, step_s: 0.1}}\n");
    assert!(message(&unknown).contains("rows[1]"), "{}", message(&unknown));
    let wrong_sum = format!("{INPUT}  - {{label: x, workers: 2, batch: 32, strategy: {{name: gpipe}}, step_s: 0.1, source_balance: [1, 2]}}\n");
    assert!(message(&wrong_sum).contains("the source's network has 9 layers"), "{}", message(&wrong_sum));
}

#[test]
fn the_null_model_scales_perfectly_and_pipelines_pay_only_their_ideal_bubble() {
    let rows = format!(
        "{INPUT}  - {{label: dp, workers: 4, batch: 16, strategy: {{name: data-parallel}}, step_s: 1}}
  - {{label: pipe, workers: 2, batch: 64, strategy: {{name: gpipe, micro_batches: 4}}, step_s: 1}}
  - {{label: mp, workers: 2, batch: 64, strategy: {{name: model-parallel}}, step_s: 1}}
"
    );
    let table = table(&rows).unwrap();
    let input = table.input_row();
    // 0.1 s for 32 samples: 16 samples on each worker take 0.05 s.
    assert!((null_model_step_s(input, &table.rows[1]) - 0.05).abs() < 1e-12);
    // 64 samples over 2 stages: 0.1 s of compute each, times (4 + 1) / 4.
    assert!((null_model_step_s(input, &table.rows[2]) - 0.125).abs() < 1e-12);
    // Model parallelism: one stage at a time, the whole sequential step.
    assert!((null_model_step_s(input, &table.rows[3]) - 0.2).abs() < 1e-12);
}

#[test]
fn a_multi_device_row_calibrates_a_table_that_starts_at_two_devices() {
    // Seed 004's shape: whole trainings in seconds, no single-device row.
    let rows = "  - {label: mp2, workers: 2, batch: 64, strategy: {name: model-parallel}, train_s: 100, input: true}
  - {label: pipe2, workers: 2, batch: 64, strategy: {name: gpipe, micro_batches: 4}, train_s: 80}
";
    let table = table_trained(rows, "training: {epochs: 10, samples_per_epoch: 6400}").unwrap();
    assert_eq!(table.calibration(), Calibration::MultiDevice);
    let (input, pipe) = (table.input_row(), &table.rows[1]);
    // 64 000 samples in 100 s: 640 samples/s, a 64-sample step in 0.1 s.
    assert!((input.samples_per_s() - 640.0).abs() < 1e-9 && (input.step_s() - 0.1).abs() < 1e-12);
    // Model parallelism's 0.1 s is both stages in turn: 0.05 s each; GPipe at m 4 pays
    // (4 + 1) / 4 of one stage.
    assert!((null_model_step_s(input, pipe) - 0.0625).abs() < 1e-12);
    assert_eq!(table_trained(INPUT, "").unwrap().calibration(), Calibration::SingleDevice);

    let untrained = table_trained(rows, "").unwrap_err().to_string();
    assert!(untrained.contains("rows[0].train_s") && untrained.contains("training"), "{untrained}");
    let both = rows.replace("train_s: 80", "train_s: 80, step_s: 0.1");
    let message = table_trained(&both, "training: {epochs: 1, samples_per_epoch: 64}").unwrap_err().to_string();
    assert!(message.contains("exactly one of `step_s`, `samples_per_s` and `train_s`"), "{message}");
}
