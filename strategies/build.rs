//! Links libtorch (rpath, libtorch_cuda) and compiles the small C++ shim over libtorch's
//! global context (`cpp/torch_context.cpp`), the calls tch lacks (the autograd call, autocast
//! regions, memory formats, the loss scaler's unscale, the split backward: `cpp/autograd.cpp`,
//! `cpp/split_backward.cpp`, `cpp/autocast.cpp`,
//! `cpp/memory_format.cpp`, `cpp/loss_scale.cpp`, with one error channel in
//! `cpp/shim_call.h`)
//! the counting CPU allocator (`cpp/cpu_memory.cpp`) and the CUDA caching allocator's
//! statistics and cap (`cpp/cuda_memory.cpp`) against the same libtorch's headers. With a
//! CUDA libtorch (its `libtorch_cuda.so` present) the cap and the out-of-memory observer are
//! compiled in (`STRATLAB_CUDA`), against the CUDA headers of the nvidia wheels beside torch,
//! and `libc10_cuda` is linked.

use std::path::PathBuf;

/// The shim's sources, compiled as one translation unit (a unity build): each includes
/// libtorch's headers, whose parsing is nearly all of their compile time (the optimisation
/// level hardly matters), and one unit parses them once. Names private to a file live in its
/// anonymous namespace, which the unit shares, so they must differ across files.
const SHIM_SOURCES: [&str; 10] = [
    "torch_context.cpp",
    "autograd.cpp",
    "split_backward.cpp",
    "autocast.cpp",
    "memory_format.cpp",
    "cpu_memory.cpp",
    "loss_scale.cpp",
    "shim_call.cpp",
    "cuda_memory.cpp",
    "refusal.cpp",
];

const SHIM_HEADERS: [&str; 3] = ["shim_call.h", "pass_name.h", "refusal.h"];

fn main() {
    stratlab_build::link_libtorch();
    for file in SHIM_SOURCES.iter().chain(&SHIM_HEADERS) {
        println!("cargo:rerun-if-changed=cpp/{file}");
    }
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    // torch-sys read LIBTORCH (set by .cargo/config.toml) to find the library; its headers
    // sit beside it.
    let libtorch = PathBuf::from(std::env::var_os("LIBTORCH").expect("LIBTORCH is set by .cargo/config.toml"));
    let cpp = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo")).join("cpp");
    let unity = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("shim_unity.cpp");
    let includes: String =
        SHIM_SOURCES.iter().map(|file| format!("#include \"{}\"\n", cpp.join(file).display())).collect();
    std::fs::write(&unity, includes).expect("write the shim's unity source into OUT_DIR");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file(&unity)
        .include(libtorch.join("include"))
        .include(libtorch.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        // PyPI's torch wheels are built with the C++11 string ABI.
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false);
    if let Some(cuda_includes) = stratlab_build::cuda_include_dirs(&libtorch) {
        build.define("STRATLAB_CUDA", None).define("USE_CUDA", None);
        for include in cuda_includes {
            build.include(include);
        }
        println!("cargo:rustc-cfg=stratlab_cuda");
    }
    println!("cargo:rustc-check-cfg=cfg(stratlab_cuda)");
    build.compile("stratlab_torch_context");
    if libtorch.join("lib/libtorch_cuda.so").exists() {
        // After the static archive on the link line: the cap and the observer live there.
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
}
