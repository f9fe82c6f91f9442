//! Compiles the c10d shim (`cpp/c10d_shim.cpp`) against the linked libtorch's headers and
//! Debian's gloo headers (`libgloo-dev`, installed by `just setup`), and links libtorch.
//!
//! With a CUDA libtorch (its `libtorch_cuda.so` present) the NCCL process group is compiled
//! in as well, against the CUDA and NCCL headers of the nvidia wheels beside torch.

use std::path::{Path, PathBuf};

fn main() {
    stratlab_build::link_libtorch();
    println!("cargo:rerun-if-changed=cpp/c10d_shim.cpp");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let libtorch = PathBuf::from(std::env::var_os("LIBTORCH").expect("LIBTORCH is set by .cargo/config.toml"));
    let libtorch = libtorch.canonicalize().unwrap_or(libtorch);
    if !Path::new("/usr/include/gloo/config.h").is_file() {
        println!(
            "cargo:warning=gloo headers missing (/usr/include/gloo): run `just setup`, which installs Debian's libgloo-dev"
        );
    }
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("cpp/c10d_shim.cpp")
        .include(libtorch.join("include"))
        .include(libtorch.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        // The shim includes ProcessGroupGloo.hpp, which libtorch guards by this macro.
        .define("USE_C10D_GLOO", None)
        // PyPI's torch wheels are built with the C++11 string ABI.
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false);
    if let Some(cuda_includes) = stratlab_build::cuda_include_dirs(&libtorch) {
        build.define("STRATLAB_NCCL", None).define("USE_C10D_NCCL", None).define("USE_CUDA", None);
        for include in cuda_includes {
            build.include(include);
        }
        println!("cargo:rustc-cfg=stratlab_nccl");
    }
    println!("cargo:rustc-check-cfg=cfg(stratlab_nccl)");
    build.compile("stratlab_c10d_shim");
    // The shim's symbols come from these; torch-sys links them too, but the static archive
    // must be followed by them on the link line.
    for lib in ["torch_cpu", "c10"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
}
