//! Probes this machine for the run's [`Fingerprint`] (the type lives in `stratlab-results`).
//!
//! Every probe is best effort: a missing tool, file or driver leaves its field `None` and
//! never stops a run.

use std::ffi::CStr;
use std::fs;
use std::path::Path;

use sha2::{Digest, Sha256};
use stratlab_results::{Fingerprint, UtcTime};

/// Built-time facts (`stratlab_build::embed_provenance`); empty when unknown.
const GIT_COMMIT: &str = env!("STRATLAB_GIT_COMMIT");
const GIT_DIRTY: &str = env!("STRATLAB_GIT_DIRTY");
const RUSTC_VERSION: &str = env!("STRATLAB_RUSTC_VERSION");
const TCH_VERSION: &str = env!("STRATLAB_TCH_VERSION");

/// Probes this machine now. Never panics; anything not found is `None`.
pub fn collect(suite_path: Option<&Path>) -> Fingerprint {
    let uname = Uname::read();
    let nvml = NvmlFacts::read();
    let libtorch = stratlab_strategies::LibtorchBuild::read();
    let cudnn_available = tch::Cuda::cudnn_is_available();
    let fault_injection_enabled = crate::fault::ENABLED;
    Fingerprint {
        collected_at: UtcTime::now().rfc3339(),
        stratlab_version: env!("CARGO_PKG_VERSION").to_owned(),
        git_commit: non_empty(GIT_COMMIT),
        git_dirty: non_empty(GIT_DIRTY).map(|dirty| dirty == "true"),
        binary_sha256: std::env::current_exe().ok().and_then(|exe| sha256_hex(&exe)),
        fault_injection_enabled,
        active_fault: if fault_injection_enabled { crate::fault::configured_rules() } else { None },
        suite_path: suite_path.map(Path::to_path_buf),
        suite_sha256: suite_path.and_then(sha256_hex),
        host_name: uname.as_ref().map(|u| u.node_name.clone()),
        os: os_pretty_name(),
        kernel: uname.map(|u| u.release),
        cpu_model: cpu_model(),
        logical_cores: logical_cores(),
        memory_total_bytes: memory_total_bytes(),
        gpu_models: nvml.gpu_models,
        nvidia_driver_version: nvml.driver_version,
        cuda_driver_version: nvml.cuda_driver_version,
        cuda_available: tch::Cuda::is_available(),
        cuda_device_count: tch::Cuda::device_count(),
        cudnn_available,
        // SAFETY: a plain query of libtorch's global context; only asked when cuDNN is
        // there, since the CPU build's hooks would report an error instead.
        cudnn_runtime_version: cudnn_available
            .then(|| unsafe { torch_sys::at_context_version_cudnn() })
            .filter(|&version| version > 0),
        libtorch_version: libtorch.torch_version,
        libtorch_cuda_version: libtorch.cuda_version,
        libtorch_cudnn_version: libtorch.cudnn_version,
        nccl_version: stratlab_comm::Backend::Nccl.is_available().then(nccl_version).flatten(),
        tch_version: TCH_VERSION.to_owned(),
        rustc_version: non_empty(RUSTC_VERSION),
        torch_threads: tch::get_num_threads(),
    }
}

/// This machine's host name (`uname -n`), where it can be read.
pub(crate) fn host_name() -> Option<String> {
    Uname::read().map(|uname| uname.node_name)
}

/// The two `uname` fields we keep.
struct Uname {
    node_name: String,
    release: String,
}

impl Uname {
    fn read() -> Option<Uname> {
        // SAFETY: utsname is plain bytes, so all-zero is a valid value; uname fills it and
        // NUL-terminates each field.
        let mut buf: libc::utsname = unsafe { std::mem::zeroed() };
        if unsafe { libc::uname(&mut buf) } != 0 {
            return None;
        }
        let field = |chars: &[libc::c_char]| {
            // SAFETY: uname succeeded, so the field holds a NUL-terminated string within it.
            unsafe { CStr::from_ptr(chars.as_ptr()) }.to_string_lossy().into_owned()
        };
        Some(Uname { node_name: field(&buf.nodename), release: field(&buf.release) })
    }
}

/// What NVML says about GPUs and the driver; empty when it does not load.
#[derive(Default)]
struct NvmlFacts {
    gpu_models: Vec<String>,
    driver_version: Option<String>,
    cuda_driver_version: Option<String>,
}

impl NvmlFacts {
    fn read() -> NvmlFacts {
        let Ok(nvml) = nvml_wrapper::Nvml::init() else {
            return NvmlFacts::default();
        };
        let count = nvml.device_count().unwrap_or(0);
        NvmlFacts {
            gpu_models: (0..count).filter_map(|i| nvml.device_by_index(i).ok()?.name().ok()).collect(),
            driver_version: nvml.sys_driver_version().ok(),
            cuda_driver_version: nvml.sys_cuda_driver_version().ok().map(|v| {
                format!("{}.{}", nvml_wrapper::cuda_driver_version_major(v), nvml_wrapper::cuda_driver_version_minor(v))
            }),
        }
    }
}

/// The version of the NCCL library this process already loaded (libtorch's CUDA build links
/// it), from its own `ncclGetVersion`: `RTLD_NOLOAD` finds the loaded copy without loading
/// another. Codes are major·10000 + minor·100 + patch since NCCL 2.9 (·1000 before).
fn nccl_version() -> Option<String> {
    // SAFETY: dlopen with RTLD_NOLOAD only returns a handle to an already loaded library;
    // the symbol, when present, is NCCL's `ncclResult_t ncclGetVersion(int*)`.
    unsafe {
        let handle = libc::dlopen(c"libnccl.so.2".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return None;
        }
        let symbol = libc::dlsym(handle, c"ncclGetVersion".as_ptr());
        let version = if symbol.is_null() {
            None
        } else {
            let get_version: extern "C" fn(*mut libc::c_int) -> libc::c_int = std::mem::transmute(symbol);
            let mut code: libc::c_int = 0;
            (get_version(&mut code) == 0 && code > 0).then(|| {
                let base = if code >= 20900 { 10000 } else { 1000 };
                format!("{}.{}.{}", code / base, (code % base) / 100, code % 100)
            })
        };
        libc::dlclose(handle);
        version
    }
}

fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

/// SHA-256 of a file's bytes, lower-case hex.
fn sha256_hex(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    Some(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

/// `PRETTY_NAME` from `/etc/os-release`, quotes removed.
fn os_pretty_name() -> Option<String> {
    let text = fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))
        .map(|value| value.trim().trim_matches('"').to_owned())
}

/// The first `model name` of `/proc/cpuinfo` (x86; ARM kernels may not have one).
fn cpu_model() -> Option<String> {
    let text = fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_owned())
}

/// Online logical cores (`sysconf`), or what the standard library sees, or 1.
fn logical_cores() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if online > 0 {
        online as usize
    } else {
        cores_here()
    }
}

/// The cores this process may use (its affinity mask), at least 1: what its trials'
/// threads share.
pub fn cores_here() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `MemTotal` of `/proc/meminfo` (given in KiB), in bytes.
pub(crate) fn memory_total_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_this_machine_without_panicking() {
        let fingerprint = collect(None);
        assert!(fingerprint.logical_cores >= 1);
        assert!(fingerprint.kernel.as_deref().is_some_and(|k| !k.is_empty()));
        assert!(fingerprint.memory_total_bytes.is_some_and(|m| m > 0));
        assert_eq!(fingerprint.stratlab_version, env!("CARGO_PKG_VERSION"));
        assert_eq!(fingerprint.suite_sha256, None);
        assert!(fingerprint.torch_threads >= 1);
    }

    #[test]
    fn versions_come_from_the_build_and_the_linked_library() {
        let fingerprint = collect(None);
        // Captured by build.rs from this checkout and Cargo.lock, not typed in.
        assert!(fingerprint.git_commit.as_deref().is_some_and(|c| c.len() == 40), "{:?}", fingerprint.git_commit);
        assert!(fingerprint.git_dirty.is_some());
        assert!(fingerprint.tch_version.starts_with("0.26"), "{}", fingerprint.tch_version);
        assert!(fingerprint.rustc_version.as_deref().is_some_and(|v| v.starts_with("rustc ")));
        // From at::show_config() of the loaded libtorch.
        assert!(fingerprint.libtorch_version.as_deref().is_some_and(|v| v.starts_with("2.13")));
        assert_eq!(fingerprint.binary_sha256.as_ref().map(String::len), Some(64));
    }

    #[test]
    fn hashes_the_suite_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("suite.yaml");
        fs::write(&path, b"abc").expect("write suite");
        let fingerprint = collect(Some(&path));
        // `printf abc | sha256sum`
        assert_eq!(
            fingerprint.suite_sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(fingerprint.suite_path.as_deref(), Some(path.as_path()));
    }
}
