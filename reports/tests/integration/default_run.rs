//! The report of a real default run (`tests/data/default-run`, made by `stratlab run
//! suite/default.yaml` on a 2-core CPU machine, traces left out) says what a reader needs
//! to read it: how a speedup reads when workers share the CPU, and which axes are logarithmic.

use std::path::Path;

use stratlab_reports::{write_run_report, Format};

fn default_run() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/default-run")
}

#[test]
fn the_notes_say_that_workers_share_the_cores_single_has_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let report = write_run_report(&default_run(), dir.path(), Format::Svg, None).unwrap();
    let html = std::fs::read_to_string(report.index_html).unwrap();
    let note = html
        .split("<li>")
        .find(|item| item.starts_with("Reading a speedup on the CPU"))
        .expect("a note on reading CPU speedups");
    assert!(note.contains("`single` trains in one process with 2 threads"), "{note}");
    assert!(note.contains("W = 2: 2 processes of 1 thread each; W = 4: 4 processes of 1 thread each"), "{note}");
}

#[test]
fn throughput_spanning_thirty_times_is_drawn_on_a_log_axis_and_speedups_are_not() {
    let dir = tempfile::tempdir().unwrap();
    write_run_report(&default_run(), dir.path(), Format::Svg, None).unwrap();
    let figure = |name: &str| std::fs::read_to_string(dir.path().join("figures").join(name)).unwrap();
    // ResNet-18's 50 samples/s beside the small CNN's 1430.
    let throughput = figure("throughput.svg");
    assert!(
        throughput.contains("Training throughput (log scale)") && throughput.contains("Time per epoch (log scale)")
    );
    assert!(!figure("speedup_w2.svg").contains("log scale"), "speedups are read against the linear ideal line");
}
