//! `compare` and `history` refuse what is not a run. The comparisons of real runs, which
//! measure time and so need the machine to themselves, are in `tests/timing/`.

use assert_cmd::Command;

fn stratlab(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("stratlab").unwrap().args(args).output().unwrap()
}

#[test]
fn compare_names_a_folder_that_is_not_a_run_and_exits_2() {
    let store = tempfile::tempdir().unwrap();
    let output = stratlab(&["compare", store.path().to_str().unwrap(), store.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("baseline") && stderr.contains(store.path().to_str().unwrap()), "{stderr}");
    let output = stratlab(&["history", store.path().to_str().unwrap(), "--suite", "nightly"]);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}

/// A copy of the default run that `stratlab-reports`' tests keep (`suite/default.yaml` on a
/// 2-core machine, 13 trials), at `dir/<name>`.
fn default_run_copy(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &to.join(entry.file_name()));
            } else {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    }
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/tests/data/default-run");
    let run = dir.join(name);
    copy(&fixture, &run);
    run
}

fn compare_exit(baseline: &std::path::Path, new: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["compare", baseline.to_str().unwrap(), new.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = stratlab(&args);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

#[test]
fn a_run_whose_trials_are_all_missing_is_nothing_to_compare_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = default_run_copy(dir.path(), "20261125T030746Z-default");
    let empty = default_run_copy(dir.path(), "20261125T040000Z-default");
    std::fs::remove_dir_all(empty.join("trials")).unwrap();
    let (code, stdout, stderr) = compare_exit(&baseline, &empty, &[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("nothing to compare") && stderr.contains("13 cells only in the baseline"), "{stderr}");
    assert!(!stdout.contains("RESULT"), "no verdict is printed for a comparison that compared nothing: {stdout}");
    // --allow-missing does not make an empty comparison pass either.
    assert_eq!(compare_exit(&baseline, &empty, &["--allow-missing"]).0, Some(2));
}

#[test]
fn a_baseline_cell_missing_from_the_new_run_exits_3_unless_allow_missing_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = default_run_copy(dir.path(), "20261125T030746Z-default");
    let new = default_run_copy(dir.path(), "20261125T040000Z-default");
    // The same run again: every cell compares, nothing missing, and the gate passes.
    let (code, stdout, _) = compare_exit(&baseline, &new, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("13 cells compared") && stdout.contains("RESULT: no regression"), "{stdout}");
    // The new run lost one trial (its trials part is what marks it finished).
    std::fs::remove_file(new.join("trials/small-cnn__mnist__gpipe__w2__b128__m4__bal-time__r0.parquet")).unwrap();
    let (code, stdout, stderr) = compare_exit(&baseline, &new, &[]);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("1 only in baseline") && stdout.contains("absent (fails the gate)"), "{stdout}");
    assert!(stdout.contains("RESULT: cells missing from the new run"), "{stdout}");
    let (code, stdout, _) = compare_exit(&baseline, &new, &["--allow-missing"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("absent (allowed)") && stdout.contains("RESULT: no regression (missing cells allowed)"));
}

#[test]
fn a_run_with_a_corrupt_table_or_fingerprint_is_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = default_run_copy(dir.path(), "20261125T030746Z-default");
    let new = default_run_copy(dir.path(), "20261125T040000Z-default");
    let part = new.join("trials/small-cnn__mnist__single__w1__b128__r0.parquet");
    std::fs::write(&part, b"PAR1 not a parquet file").unwrap();
    let (code, stdout, stderr) = compare_exit(&baseline, &new, &[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("new run") && stderr.contains(part.to_str().unwrap()), "{stderr}");

    let fingerprint = baseline.join("fingerprint.json");
    std::fs::write(&fingerprint, "{\"host\": ").unwrap();
    let (code, _, stderr) = compare_exit(&baseline, &new, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("baseline run") && stderr.contains(fingerprint.to_str().unwrap()), "{stderr}");
    // The report of a run with a corrupt table is refused the same way.
    let output = stratlab(&["report", new.to_str().unwrap(), "--out", dir.path().join("report").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}
