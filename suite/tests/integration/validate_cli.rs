//! `stratlab validate` seen from outside: a small made-up published table through the
//! whole path (parsed with its cluster file, predicted from its input row, judged, written
//! and drawn), and a broken one refused with the field named.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use polars::prelude::{CsvReadOptions, SerReader};
use stratlab_results::{from_frame, Table, ValidationRow};

fn stratlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stratlab")).args(args).output().expect("run stratlab")
}

/// Two nodes of two devices; the link between the nodes is slow enough that a ring
/// across them cannot hide behind a backward.
const CLUSTER: &str = "name: two-nodes-of-two
nodes: 2
devices_per_node: 2
device: {name: toy GPU, memory: 16 GiB, peak_flops: 10 TFLOP/s, memory_bandwidth: 500 GB/s}
links:
  intra_node: {bandwidth: 50 GB/s, latency: 2 us}
  inter_node: {bandwidth: 10 Mbit/s, latency: 50 us}
";

const TABLE: &str = "name: made-up
source: {title: a made-up table, url: https://example.com/t, file: t.md, table: 1, pinned: none}
cluster: cluster.yaml
network: small-cnn
dataset: mnist
source_layers_per_stage: [1, 1, 1, 1, 1]
rows:
  - {label: one, workers: 1, batch: 64, strategy: {name: single}, step_s: 0.010, input: true}
  - {label: dp-2, workers: 2, batch: 64, strategy: {name: data-parallel}, step_s: 0.011}
  - {label: dp-4, workers: 4, batch: 64, strategy: {name: data-parallel}, step_s: 0.5}
  - {label: pipe-2, workers: 2, batch: 64, strategy: {name: gpipe, micro_batches: 4}, samples_per_s: 9000, source_balance: [3, 2]}
";

fn write(dir: &Path, table: &str) -> String {
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).unwrap();
    let path = dir.join("table.yaml");
    std::fs::write(&path, table).unwrap();
    path.display().to_string()
}

fn rows(csv: &Path) -> Vec<ValidationRow> {
    let frame = CsvReadOptions::default()
        .with_schema(Some(Arc::new(ValidationRow::schema())))
        .try_into_reader_with_file_path(Some(csv.to_path_buf()))
        .expect("csv reader")
        .finish()
        .expect("csv parses");
    from_frame(&frame).expect("validation rows")
}

#[test]
fn a_made_up_table_is_predicted_from_its_input_row_judged_written_and_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let table = write(dir.path(), TABLE);
    let out = dir.path().join("out");
    let output = stratlab(&["validate", &table, "--out", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("made-up") && stdout.contains("Throughput error"), "{stdout}");
    let rows = rows(&out.join("validation.csv"));
    assert_eq!(rows.len(), 4);
    // The input row is what the roofline is scaled to: every predictor gives it back.
    let input = &rows[0];
    assert!(input.input);
    for predicted in [input.model_step_s.unwrap(), input.thesis_step_s.unwrap(), input.null_step_s] {
        assert!((predicted - 0.010).abs() < 1e-9, "{predicted}");
    }
    let (dp2, dp4, pipe) = (&rows[1], &rows[2], &rows[3]);
    // The null model scales perfectly; the model pays the ring over the slow link between
    // the nodes, which two workers on one node never cross.
    assert_eq!((dp2.null_efficiency, dp4.null_efficiency), (1.0, 1.0));
    let (efficiency2, efficiency4) = (dp2.model_efficiency.unwrap(), dp4.model_efficiency.unwrap());
    assert!(efficiency2 > 0.9 && efficiency4 < 0.5, "{efficiency2} {efficiency4}");
    assert!(dp4.model_exposed_comm_s.unwrap() > 10.0 * dp2.model_exposed_comm_s.unwrap());
    // The pipeline's cut came from the source's balance, and it has a bubble.
    assert!(pipe.strategy.contains("gpipe") && pipe.strategy.contains("[3,2]"), "{}", pipe.strategy);
    assert!(pipe.model_bubble_s.unwrap() > 0.0);
    assert!((pipe.published_samples_per_s - 9000.0).abs() < 1e-6);
    assert!(out.join("figures/made-up_scaling.svg").is_file());
}

#[test]
fn a_broken_table_names_its_file_and_field_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broken = TABLE.replace("step_s: 0.011", "step_s: 0.011, samples_per_s: 5");
    let table = write(dir.path(), &broken);
    let out = dir.path().join("out");
    let output = stratlab(&["validate", &table, "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("table.yaml") && stderr.contains("rows[1].step_s"), "{stderr}");
    assert!(!out.exists());
    // A source's layers listed for other stages than the network has.
    let wrong_network = TABLE.replace("[1, 1, 1, 1, 1]", "[1, 1, 1, 1, 1, 1]").replace("[3, 2]", "[3, 3]");
    let output = stratlab(&["validate", &write(dir.path(), &wrong_network), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`source_layers_per_stage` lists 6 stages; small-cnn has 5"), "{stderr}");
}
