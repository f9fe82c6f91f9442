//! `just test` right after `just bench-matrix` must not compile the release build's
//! dependencies again. Cargo compiles a crate once per feature set, and the test build adds
//! dev-dependencies that can switch features on (criterion once turned on `either/use_std`
//! and `regex-automata/dfa-search`, and with them half of polars was rebuilt). So the
//! features the binary's build resolves and those the workspace's test build resolves must
//! be the same, apart from the binary's own test-only `fault-injection`.

use std::collections::BTreeSet;
use std::process::Command;

/// Every package of the dependency graph with its enabled features, one line each, as
/// `cargo tree` resolves them for `scope`.
fn resolved_features(scope: &[&str]) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--offline", "--prefix", "none", "--format", "{p} [{f}]"])
        .args(scope)
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "cargo tree {scope:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| line.replace(" (*)", "").replace(" (proc-macro)", ""))
        .filter(|line| !line.is_empty() && !line.starts_with("stratlab v"))
        .collect()
}

#[test]
fn the_test_build_resolves_the_features_the_release_binary_does() {
    let binary = resolved_features(&["-p", "stratlab", "-e", "normal,build"]);
    let tests = resolved_features(&["--workspace", "-e", "normal,build,dev"]);
    assert!(binary.len() > 100, "expected the whole graph, got {} lines", binary.len());
    // The test build has packages of its own (criterion, assert_cmd, …); what both builds
    // compile must be compiled with the same features.
    let differing: Vec<&String> = binary.iter().filter(|line| !tests.contains(*line)).collect();
    assert!(
        differing.is_empty(),
        "the test build compiles these with other features than `cargo build --bin stratlab` \
         (ask for the test build's features in suite/Cargo.toml):\n{differing:#?}\ntest build:\n{:#?}",
        tests
            .iter()
            .filter(|t| differing.iter().any(|d| d.split(' ').take(2).eq(t.split(' ').take(2))))
            .collect::<Vec<_>>()
    );
}
