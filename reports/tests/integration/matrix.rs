//! The results matrix: a row per network, data set, batch (and compute), a column per
//! strategy and W, each cell the throughput with its speedup or the failure.

use stratlab_reports::tables::results_matrix;
use stratlab_reports::{aggregate_run, matrix_for_terminal, summary_tables};
use stratlab_results::TrialTables;

use crate::aggregate::{epochs, hand_made_run, new_store, trial};

#[test]
fn results_matrix_shows_speedups_failures_and_gaps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aggregates = aggregate_run(&hand_made_run(dir.path())).expect("aggregate");
    let matrix = results_matrix(&aggregates).expect("matrix");
    let (header, rows, _) = matrix.cells();
    assert_eq!(
        header,
        [
            "network",
            "dataset",
            "batch/worker",
            "single W=1",
            "data-parallel W=2",
            "data-parallel W=4",
            "data-parallel W=8",
            "gpipe W=2"
        ]
    );
    assert_eq!(
        rows[0],
        ["small-cnn", "mnist", "32", "100 ×1.00", "180 ×1.80", "300 ×3.00 (1/4 failed)", "DIVERGED", "OOM"]
    );
    assert_eq!(rows[1], ["small-cnn", "mnist", "64", "—", "350", "—", "—", "—"]);
    let terminal = matrix_for_terminal(&aggregates);
    assert!(terminal.contains("×1.80") && terminal.contains("OOM") && terminal.contains('│'), "{terminal}");
    assert_eq!(summary_tables(&aggregates).expect("tables").len(), 6);
}

#[test]
fn what_a_cell_computed_in_is_a_row_of_the_matrix_not_a_column() {
    // Single and data parallelism in fp32 and in bf16 + channels-last: two rows of the same
    // network, each with its own speedup over its own single; the strategy columns stay two.
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let cases = [("single", 1, None, 100.0), ("data-parallel", 2, None, 180.0), ("single", 1, Some("bf16"), 150.0)];
    let bf16_dp = ("data-parallel", 2, Some("bf16"), 240.0);
    for (index, (strategy, workers, precision, wall)) in cases.into_iter().chain([bf16_dp]).enumerate() {
        let mut row = trial(index as i64, strategy, workers, 32, 0, "ok", Some(wall));
        if let Some(precision) = precision {
            row.trial_id += "__bf16__channels-last";
            row.stored_precision = Some(precision.parse().unwrap());
            row.stored_memory_format = Some("channels_last".parse().unwrap());
        }
        let epochs = epochs(&row);
        store.write_trial(TrialTables { epochs: &epochs, ..TrialTables::new(&row) }).expect("write trial");
    }
    let aggregates = aggregate_run(&store).expect("aggregate");
    let (header, rows, _) = results_matrix(&aggregates).expect("matrix").cells();
    assert_eq!(header, ["network", "dataset", "batch/worker", "compute", "single W=1", "data-parallel W=2"]);
    assert_eq!(rows[0], ["small-cnn", "mnist", "32", "fp32 · contiguous", "100 ×1.00", "180 ×1.80"]);
    assert_eq!(rows[1], ["small-cnn", "mnist", "32", "bf16 · channels_last", "150 ×1.00", "240 ×1.60"]);
}

#[test]
fn the_optimizer_is_a_row_of_the_matrix_with_its_own_single_baseline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = new_store(dir.path());
    let cases = [("single", 1, None, 100.0), ("data-parallel", 2, None, 180.0), ("single", 1, Some("adam"), 90.0)];
    let adam_dp = ("data-parallel", 2, Some("adam"), 171.0);
    for (index, (strategy, workers, optimizer, wall)) in cases.into_iter().chain([adam_dp]).enumerate() {
        let mut row = trial(index as i64, strategy, workers, 32, 0, "ok", Some(wall));
        if let Some(optimizer) = optimizer {
            row.trial_id += "__adam";
            row.stored_optimizer = Some(optimizer.parse().unwrap());
        }
        let epochs = epochs(&row);
        store.write_trial(TrialTables { epochs: &epochs, ..TrialTables::new(&row) }).expect("write trial");
    }
    let aggregates = aggregate_run(&store).expect("aggregate");
    let (header, rows, _) = results_matrix(&aggregates).expect("matrix").cells();
    assert_eq!(header, ["network", "dataset", "batch/worker", "optimizer", "single W=1", "data-parallel W=2"]);
    assert_eq!(rows[0], ["small-cnn", "mnist", "32", "sgd", "100 ×1.00", "180 ×1.80"]);
    assert_eq!(rows[1], ["small-cnn", "mnist", "32", "adam", "90.0 ×1.00", "171 ×1.90"]);
}
