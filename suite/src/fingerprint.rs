//! The environment a run was measured in, stored as `fingerprint.json` in every run.
//!
//! Numbers from two runs are only comparable when the code, libraries and hardware match,
//! and a report has to be able to say when they do not. Every probe is best effort: a
//! missing tool, file or driver leaves its field `None` and never stops a run.

use std::ffi::CStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::UtcTime;

/// The tch crate's minor version, which pins the libtorch release it binds (SPEC §6).
const TCH_VERSION: &str = "0.26";

/// Where and with what a run was measured: code version, host, OS, CPU, GPUs, libraries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// When the fingerprint was taken, RFC 3339 UTC.
    pub collected_at: String,
    /// stratlab's crate version.
    pub stratlab_version: String,
    /// `git rev-parse HEAD` of the workspace, when it is a git checkout with commits.
    pub git_commit: Option<String>,
    /// Whether the checkout had uncommitted changes to tracked files (`git status`).
    pub git_dirty: Option<bool>,
    /// The suite file the run executed.
    pub suite_path: Option<PathBuf>,
    /// SHA-256 of the suite file's bytes, hex.
    pub suite_sha256: Option<String>,
    /// Host name (`uname -n`).
    pub host_name: Option<String>,
    /// Operating system (`PRETTY_NAME` of `/etc/os-release`).
    pub os: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// CPU model (`model name` of `/proc/cpuinfo`).
    pub cpu_model: Option<String>,
    /// Online logical cores.
    pub logical_cores: usize,
    /// Installed memory (`MemTotal` of `/proc/meminfo`), bytes.
    pub memory_total_bytes: Option<u64>,
    /// GPU model names in NVML order; empty without NVML.
    pub gpu_models: Vec<String>,
    /// NVIDIA driver version, via NVML.
    pub nvidia_driver_version: Option<String>,
    /// Highest CUDA version the driver supports (`12.4`), via NVML.
    pub cuda_driver_version: Option<String>,
    /// Whether libtorch can use CUDA here.
    pub cuda_available: bool,
    /// CUDA devices libtorch sees.
    pub cuda_device_count: i64,
    /// Whether libtorch can use cuDNN here.
    pub cudnn_available: bool,
    /// libtorch release (`build-version` of the libtorch stratlab was built against).
    pub libtorch_version: Option<String>,
    /// The tch crate's version.
    pub tch_version: String,
    /// `rustc --version` on this machine at run time.
    pub rustc_version: Option<String>,
    /// libtorch intra-op threads of this process at collection time.
    pub torch_threads: i32,
}

impl Fingerprint {
    /// Probes this machine now. Never panics; anything not found is `None`.
    pub fn collect(suite_path: Option<&Path>) -> Fingerprint {
        let uname = Uname::read();
        let nvml = NvmlFacts::read();
        Fingerprint {
            collected_at: UtcTime::now().rfc3339(),
            stratlab_version: env!("CARGO_PKG_VERSION").to_owned(),
            git_commit: git(&["rev-parse", "HEAD"]),
            git_dirty: git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()),
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
            cudnn_available: tch::Cuda::cudnn_is_available(),
            libtorch_version: libtorch_version(),
            tch_version: TCH_VERSION.to_owned(),
            rustc_version: command_output("rustc", &["--version"], None),
            torch_threads: tch::get_num_threads(),
        }
    }
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

/// Runs `git` in the workspace this binary was built from (falling back to the current
/// folder when that checkout is gone, e.g. an installed binary).
fn git(args: &[&str]) -> Option<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().filter(|p| p.is_dir());
    command_output("git", args, workspace)
}

/// Trimmed stdout of a command that succeeded, else `None`.
fn command_output(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
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
        std::thread::available_parallelism().map_or(1, usize::from)
    }
}

/// `MemTotal` of `/proc/meminfo` (given in KiB), in bytes.
fn memory_total_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// `build-version` of the libtorch named by `LIBTORCH` when stratlab was compiled (the
/// workspace's `.cargo/config.toml` sets it), read now.
fn libtorch_version() -> Option<String> {
    let dir = option_env!("LIBTORCH")?;
    let text = fs::read_to_string(Path::new(dir).join("build-version")).ok()?;
    Some(text.trim().to_owned()).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_this_machine_without_panicking() {
        let fingerprint = Fingerprint::collect(None);
        assert!(fingerprint.logical_cores >= 1);
        assert!(fingerprint.kernel.as_deref().is_some_and(|k| !k.is_empty()));
        assert!(fingerprint.memory_total_bytes.is_some_and(|m| m > 0));
        assert_eq!(fingerprint.stratlab_version, env!("CARGO_PKG_VERSION"));
        assert_eq!(fingerprint.suite_sha256, None);
        assert!(fingerprint.torch_threads >= 1);
    }

    #[test]
    fn hashes_the_suite_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("suite.yaml");
        fs::write(&path, b"abc").expect("write suite");
        let fingerprint = Fingerprint::collect(Some(&path));
        // `printf abc | sha256sum`
        assert_eq!(
            fingerprint.suite_sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(fingerprint.suite_path.as_deref(), Some(path.as_path()));
    }

    #[test]
    fn round_trips_through_json() {
        let fingerprint = Fingerprint::collect(None);
        let json = serde_json::to_string(&fingerprint).expect("serialise");
        let back: Fingerprint = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, fingerprint);
    }
}
