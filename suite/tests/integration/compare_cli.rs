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
