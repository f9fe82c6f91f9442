//! Behaviour seen from outside: the `stratlab` binary end to end.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod build_features;
mod cli;
mod compare_cli;
mod emulated_links;
mod largest_batch;
mod module_cycles;
mod multi_worker;
mod netns_probe;
mod paper_suites;
mod plan_golden;
mod predict_cli;
mod prediction_rows;
mod previous_release;
mod probe_cli;
mod run_inputs;
mod runner_faults;
mod slurm_runs;
mod slurm_testbed;
mod suite_errors;
mod validate_cli;

use std::path::{Path, PathBuf};

/// The run folders of a store, in name order: beside them it keeps the profiles its runs
/// took. None before the store exists.
pub(crate) fn run_folders(store: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(store) else { return Vec::new() };
    let mut runs: Vec<PathBuf> =
        entries.map(|entry| entry.unwrap().path()).filter(|path| path.join("fingerprint.json").is_file()).collect();
    runs.sort();
    runs
}

/// The `*.yaml` files directly in `folder`, in name order: the shipped suites.
pub(crate) fn yaml_files(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}
