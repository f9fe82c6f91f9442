//! Build-script helper shared by every crate that links libtorch.
//!
//! tch embeds no rpath, so binaries and test binaries would need `LD_LIBRARY_PATH`; and
//! with `--as-needed` linking, a CUDA libtorch's `libtorch_cuda` is dropped because no
//! symbol of ours references it, after which CUDA silently reports unavailable
//! (tch-rs issues #907 and #980). Each crate's `build.rs` calls [`link_libtorch`].

use std::path::{Path, PathBuf};

/// Emits the linker arguments for this package's binaries, tests, benches and examples.
///
/// The package must depend on `torch-sys` directly: cargo then hands its build script
/// `DEP_TCH_LIBTORCH_LIB`, the folder torch-sys linked against.
pub fn link_libtorch() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB").map(PathBuf::from) else {
        println!("cargo:warning=DEP_TCH_LIBTORCH_LIB is unset: add torch-sys as a direct dependency");
        return;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if lib.join("libtorch_cuda.so").exists() {
        for arg in ["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed"] {
            println!("cargo:rustc-link-arg={arg}");
        }
    }
}

/// Where `libtorch` is a CUDA build (its `libtorch_cuda.so` present): the `include/` folders
/// of the nvidia wheels installed beside it (`site-packages/nvidia/<package>/include`, or
/// `nvidia/cu13/include`; `tools/libtorch.py` links the install's `lib/` into the venv's
/// `site-packages/torch/lib`), which c10's CUDA headers need. `None` for a CPU libtorch.
pub fn cuda_include_dirs(libtorch: &Path) -> Option<Vec<PathBuf>> {
    if !libtorch.join("lib/libtorch_cuda.so").exists() {
        return None;
    }
    let torch_lib = libtorch.join("lib").canonicalize().unwrap_or_else(|_| libtorch.join("lib"));
    let Some(nvidia) = torch_lib.parent().and_then(Path::parent).map(|site| site.join("nvidia")) else {
        return Some(Vec::new());
    };
    let Ok(entries) = std::fs::read_dir(&nvidia) else {
        return Some(Vec::new());
    };
    Some(entries.filter_map(Result::ok).map(|entry| entry.path().join("include")).filter(|dir| dir.is_dir()).collect())
}

/// Captures at build time what identifies this build, as `env!` variables of the package:
/// `STRATLAB_GIT_COMMIT` and `STRATLAB_GIT_DIRTY` (of the workspace checkout, empty outside
/// git), `STRATLAB_RUSTC_VERSION` (the compiler cargo used) and `STRATLAB_TCH_VERSION` (the
/// tch release in `Cargo.lock`, i.e. the one linked).
///
/// Captured when compiling, not when running: a binary copied elsewhere or run after more
/// edits still reports the code it was built from. The script re-runs when any workspace
/// source or the git HEAD changes, so the dirty flag follows the sources.
pub fn embed_provenance() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir.parent().map(PathBuf::from).unwrap_or(manifest_dir);
    let crates = [
        "build-support",
        "columns",
        "units",
        "profile",
        "strategy-spec",
        "results",
        "telemetry",
        "perf-model",
        "regressions",
        "comm",
        "datasets",
        "networks",
        "strategies",
        "link-emulation",
        "reports",
        "suite/src",
    ];
    for watched in crates.iter().chain(&["Cargo.toml"]) {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    // Only what exists: cargo counts a watched path that is missing (a checkout without
    // packed refs) as changed on every build, and the crate would compile every time.
    for watched in [".git/HEAD", ".git/refs", ".git/packed-refs", "Cargo.lock"] {
        let path = workspace.join(watched);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    // `--no-optional-locks`: a plain `git status` may rewrite .git/index, which would make
    // every build re-run this script.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("--no-optional-locks")
            .args(args)
            .current_dir(&workspace)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    let dirty = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(status) => (!status.is_empty()).to_string(),
        None => String::new(),
    };
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let rustc_version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    let tch_version = std::fs::read_to_string(workspace.join("Cargo.lock"))
        .ok()
        .and_then(|lock| locked_version(&lock, "tch"))
        .unwrap_or_default();
    println!("cargo:rustc-env=STRATLAB_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=STRATLAB_GIT_DIRTY={dirty}");
    println!("cargo:rustc-env=STRATLAB_RUSTC_VERSION={rustc_version}");
    println!("cargo:rustc-env=STRATLAB_TCH_VERSION={tch_version}");
}

/// The version of package `name` in a `Cargo.lock` (the first one, if several).
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next()?.trim().strip_prefix("version = \"")?.strip_suffix('"')?;
            return Some(version.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_locked_version() {
        let lock =
            "[[package]]\nname = \"tchx\"\nversion = \"9\"\n\n[[package]]\nname = \"tch\"\nversion = \"0.26.0\"\n";
        assert_eq!(locked_version(lock, "tch").as_deref(), Some("0.26.0"));
        assert_eq!(locked_version(lock, "polars"), None);
    }
}
