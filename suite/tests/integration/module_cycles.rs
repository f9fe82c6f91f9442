//! The house's shape: within every crate of the workspace, no two modules import each other,
//! directly or around a circle (`tools/module_cycles.py` says which modules and lines when
//! one appears). A circle makes modules that can only be understood, tested and moved
//! together; the crates' layering (no arrow pointing back up) is cargo's to enforce.

use std::path::Path;
use std::process::Command;

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("suite/ sits in the workspace");
    let output = Command::new("python3")
        .arg(workspace.join("tools/module_cycles.py"))
        .arg(workspace)
        .output()
        .expect("python3 runs (the justfile's setup needs it too)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("no module cycles in"), "{text}");
    // Every crate was looked at, not none: the workspace has ten or more.
    let crates: usize = text.split_whitespace().rev().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(crates >= 10, "{text}");
}
