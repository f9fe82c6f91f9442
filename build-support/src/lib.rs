//! Build-script helper shared by every crate that links libtorch.
//!
//! tch embeds no rpath, so binaries and test binaries would need `LD_LIBRARY_PATH`; and
//! with `--as-needed` linking, a CUDA libtorch's `libtorch_cuda` is dropped because no
//! symbol of ours references it, after which CUDA silently reports unavailable
//! (tch-rs issues #907 and #980). Each crate's `build.rs` calls [`link_libtorch`].

use std::path::PathBuf;

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
