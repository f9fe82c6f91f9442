//! Links libtorch (rpath, libtorch_cuda) and compiles the small C++ shim over libtorch's
//! global context (`cpp/torch_context.cpp`), the calls tch lacks (the autograd call, autocast
//! regions, memory formats, the loss scaler's unscale: `cpp/autograd.cpp`, `cpp/autocast.cpp`,
//! `cpp/memory_format.cpp`, `cpp/loss_scale.cpp`, with one error channel in
//! `cpp/shim_call.h`)
//! and the counting CPU allocator (`cpp/cpu_memory.cpp`) against the same libtorch's headers.

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
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    // torch-sys read LIBTORCH (set by .cargo/config.toml) to find the library; its headers
    // sit beside it.
    let libtorch = PathBuf::from(std::env::var_os("LIBTORCH").expect("LIBTORCH is set by .cargo/config.toml"));
    cc::Build::new()
        .cpp(true)
        .file("cpp/torch_context.cpp")
        .file("cpp/autograd.cpp")
        .file("cpp/autocast.cpp")
        .file("cpp/memory_format.cpp")
        .file("cpp/cpu_memory.cpp")
        .file("cpp/loss_scale.cpp")
        .file("cpp/shim_call.cpp")
        .include(libtorch.join("include"))
        .include(libtorch.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        // PyPI's torch wheels are built with the C++11 string ABI.
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false)
        .compile("stratlab_torch_context");
}
