//! The trial ids of every shipped suite (`suite/*.yaml`), as `stratlab plan` prints them,
//! held as snapshots (`snapshots/integration__plan_golden__plan_<suite>.snap`). Run folders,
//! `compare` and `history` pair trials by these ids across releases: a change to how a
//! strategy parameter is spelled in an id shows here first.

use assert_cmd::Command;

#[test]
fn every_shipped_suite_plans_the_trial_ids_it_always_has() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut suites: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    suites.sort();
    assert!(suites.len() >= 11, "the shipped suites: {suites:?}");
    for suite in suites {
        let output = Command::cargo_bin("stratlab").unwrap().arg("plan").arg(&suite).output().unwrap();
        assert!(output.status.success(), "{}: {}", suite.display(), String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8(output.stdout).unwrap();
        let (header, trials) = stdout.split_once('\n').unwrap();
        let count: usize = header.rsplit(": ").next().unwrap().trim_end_matches(" trials").parse().unwrap();
        assert_eq!(trials.lines().count(), count, "{header}");
        let name = suite.file_stem().unwrap().to_str().unwrap().replace('-', "_");
        insta::assert_snapshot!(format!("plan_{name}"), trials);
    }
}
