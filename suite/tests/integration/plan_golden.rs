//! The trial ids of every shipped suite (`suite/*.yaml`, `suite/papers/*.yaml`), as `stratlab plan` prints them,
//! held as snapshots (`snapshots/integration__plan_golden__plan_<suite>.snap`). Run folders,
//! `compare` and `history` pair trials by these ids across releases: a change to how a
//! strategy parameter is spelled in an id shows here first.

use assert_cmd::Command;

#[test]
fn every_shipped_suite_plans_the_trial_ids_it_always_has() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (shipped, papers) = (crate::yaml_files(folder), crate::yaml_files(&folder.join("papers")));
    assert!(shipped.len() >= 11, "the shipped suites: {shipped:?}");
    assert!(papers.len() >= 14, "the paper suites: {papers:?}");
    for suite in shipped.into_iter().chain(papers) {
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
