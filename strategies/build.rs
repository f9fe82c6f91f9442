//! Links libtorch (rpath, libtorch_cuda) and compiles the small C++ shim over libtorch's
//! global context (`cpp/torch_context.cpp`), the calls tch lacks (the autograd call, autocast
//! regions, memory formats, the loss scaler's unscale: `cpp/autograd.cpp`, `cpp/autocast.cpp`,
//! `cpp/memory_format.cpp`, `cpp/loss_scale.cpp`, with one error channel in
//! `cpp/shim_call.h`)
//! the counting CPU allocator (`cpp/cpu_memory.cpp`) and the CUDA caching allocator's
//! statistics and cap (`cpp/cuda_memory.cpp`) against the same libtorch's headers. With a
//! CUDA libtorch (its `libtorch_cuda.so` present) the cap and the out-of-memory observer are
//! compiled in (`STRATLAB_CUDA`), against the CUDA headers of the nvidia wheels beside torch,
//! and `libc10_cuda` is linked.

use std::path::PathBuf;

fn main() {
    stratlab_build::link_libtorch();
    println!("cargo:rerun-if-changed=cpp/torch_context.cpp");
    println!("cargo:rerun-if-changed=cpp/autograd.cpp");
    println!("cargo:rerun-if-changed=cpp/autocast.cpp");
    println!("cargo:rerun-if-changed=cpp/memory_format.cpp");
    println!("cargo:rerun-if-changed=cpp/cpu_memory.cpp");
    println!("cargo:rerun-if-changed=cpp/loss_scale.cpp");
    println!("cargo:rerun-if-changed=cpp/shim_call.h");
    println!("cargo:rerun-if-changed=cpp/shim_call.cpp");
    println!("cargo:rerun-if-changed=cpp/cuda_memory.cpp");
    println!("cargo:rerun-if-changed=cpp/pass_name.h");
    println!("cargo:rerun-if-changed=cpp/refusal.h");
    println!("cargo:rerun-if-changed=cpp/refusal.cpp");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    // torch-sys read LIBTORCH (set by .cargo/config.toml) to find the library; its headers
    // sit beside it.
    let libtorch = PathBuf::from(std::env::var_os("LIBTORCH").expect("LIBTORCH is set by .cargo/config.toml"));
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("cpp/torch_context.cpp")
        .file("cpp/autograd.cpp")
        .file("cpp/autocast.cpp")
        .file("cpp/memory_format.cpp")
        .file("cpp/cpu_memory.cpp")
        .file("cpp/loss_scale.cpp")
        .file("cpp/shim_call.cpp")
        .file("cpp/cuda_memory.cpp")
        .file("cpp/refusal.cpp")
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
