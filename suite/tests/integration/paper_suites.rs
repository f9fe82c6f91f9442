//! The shipped paper suites (`suite/papers/`): every GPU suite has a `*-cpu.yaml` sibling of
//! the same shape, and each sibling runs here on a tiny budget into a report that shows
//! every figure and table its `regenerates:` names.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use stratlab::suite_file::SuiteFile;
use stratlab_strategies::Budget;

use crate::run_folders;

fn paper_suites() -> Vec<PathBuf> {
    crate::yaml_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("papers"))
}

/// The section of `html` that starts at the element with id `anchor`, up to the next section.
fn section<'a>(html: &'a str, anchor: &str) -> Option<&'a str> {
    let start = html.find(&format!("id=\"{anchor}\""))?;
    let rest = &html[start..];
    let end = rest[1..].find("<section").map_or(rest.len(), |end| end + 1);
    Some(&rest[..end])
}

#[test]
fn every_paper_suite_has_a_cpu_sibling_of_the_same_figures() {
    let suites = paper_suites();
    let gpu: Vec<&PathBuf> = suites.iter().filter(|path| !path.to_string_lossy().ends_with("-cpu.yaml")).collect();
    assert!(gpu.len() >= 7, "the papers' suites: {suites:?}");
    for suite in gpu {
        let sibling = suite.with_file_name(format!("{}-cpu.yaml", suite.file_stem().unwrap().to_string_lossy()));
        let (gpu_file, _) = SuiteFile::load(suite).unwrap();
        let (cpu_file, _) = SuiteFile::load(&sibling).unwrap_or_else(|error| panic!("{}: {error}", sibling.display()));
        let (gpu_figures, cpu_figures) =
            (gpu_file.regenerates.expect("regenerates").figures, cpu_file.regenerates.expect("regenerates").figures);
        assert!(!gpu_figures.is_empty(), "{}", suite.display());
        assert_eq!(gpu_figures, cpu_figures, "{} and its sibling regenerate different figures", suite.display());
    }
}

#[test]
fn every_cpu_paper_suite_runs_and_its_report_shows_what_it_regenerates() {
    let dir = tempfile::tempdir().unwrap();
    // One store for all, so that a network profiled for one suite serves the next.
    let store = dir.path().join("store");
    for suite in paper_suites().into_iter().filter(|path| path.to_string_lossy().ends_with("-cpu.yaml")) {
        let (mut file, _) = SuiteFile::load(&suite).unwrap();
        let figures = file.regenerates.as_ref().expect("a paper suite says what it regenerates").figures.clone();
        // The same matrix on a tiny budget: a few steps per trial, two evaluations, one
        // repeat. JSON is YAML, and `SuiteFile` serialises as it reads.
        file.budget = Budget { epochs: None, steps: Some(4), seconds: None, min_timed_steps: None };
        file.warmup_steps = 1;
        file.repeats = 1;
        file.eval.every_steps = Some(2);
        file.eval.samples = Some(64);
        let name = suite.file_name().unwrap();
        let tiny = dir.path().join(name);
        std::fs::write(&tiny, serde_json::to_string_pretty(&file).unwrap()).unwrap();
        let mut command = Command::cargo_bin("stratlab").unwrap();
        command.args(["run", tiny.to_str().unwrap(), "--store", store.to_str().unwrap()]);
        if !figures.iter().any(|figure| figure.needs_predictions()) {
            command.arg("--no-predict");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{}: {}", suite.display(), String::from_utf8_lossy(&output.stderr));
        let run = run_folders(&store)
            .into_iter()
            .rfind(|run| run.to_string_lossy().ends_with(&format!("-{}", file.name)))
            .expect("the suite's run folder");
        let html = std::fs::read_to_string(run.join("report/index.html")).unwrap();
        assert!(section(&html, "paper").is_some(), "{}: no paper overview", suite.display());
        for figure in figures {
            let shown = section(&html, &figure.anchor())
                .unwrap_or_else(|| panic!("{}: no section for {figure}", suite.display()));
            assert!(
                !shown.contains(stratlab_reports::NOT_DRAWN),
                "{}: {figure} not drawn: {shown:.600}",
                suite.display()
            );
            assert!(
                shown.contains("<img") || shown.contains("<table"),
                "{}: {figure} has no figure or table",
                suite.display()
            );
        }
    }
}
