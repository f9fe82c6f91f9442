//! A run made by the previous release (`reports/tests/data/default-run`) reads to the same
//! report tables and `compare` verdicts as that release produced (`tests/data/previous-release`).

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn expected(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/previous-release").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/tests/data/default-run")
}

fn copy_dir(from: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if skip(&entry.path()) {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()), skip);
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// `stratlab compare` of `baseline` and `new`: exit code and standard output without the
/// two lines naming the files it wrote.
fn compare(baseline: &Path, new: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .arg("compare")
        .args([baseline, new])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() > 3 && lines[lines.len() - 1].ends_with("comparison.json"), "{stdout}");
    (output.status.code(), lines[..lines.len() - 3].join("\n") + "\n")
}

#[test]
fn the_report_tables_are_the_ones_the_previous_release_wrote() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .arg("report")
        .arg(fixture())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let tables = out.path().join("tables");
    let mut names: Vec<String> =
        std::fs::read_dir(&tables).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let expected_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/previous-release/tables");
    let mut expected_names: Vec<String> = std::fs::read_dir(&expected_dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    expected_names.sort();
    assert_eq!(names, expected_names);
    for name in names {
        let written = std::fs::read_to_string(tables.join(&name)).unwrap();
        assert_eq!(written, expected(&format!("tables/{name}")), "tables/{name} differs");
    }
}

#[test]
fn compare_gives_the_previous_release_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture();
    // The new run is a copy of the baseline without its hybrid trial, named `new`.
    let new = dir.path().join("new");
    copy_dir(&fixture, &new, &|path| {
        path.file_name().unwrap().to_string_lossy().starts_with("small-cnn__mnist__hybrid")
    });

    assert_eq!(compare(&fixture, &fixture, &dir.path().join("self"), &[]), (Some(0), expected("compare_self.txt")));
    assert_eq!(
        compare(&fixture, &new, &dir.path().join("missing"), &[]),
        (Some(3), expected("compare_missing_hybrid.txt"))
    );
    assert_eq!(
        compare(&fixture, &new, &dir.path().join("allowed"), &["--allow-missing"]),
        (Some(0), expected("compare_missing_hybrid_allowed.txt"))
    );
}
