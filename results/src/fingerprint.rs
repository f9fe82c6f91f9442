//! The environment a run was measured in, stored as `fingerprint.json` in every run.
//!
//! Numbers from two runs are only comparable when the code, libraries and hardware match,
//! and a report has to be able to say when they do not. The type lives here, with the
//! tables; probing the machine (libtorch, NVML, /proc) is the binary's job.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where and with what a run was measured: code version, host, OS, CPU, GPUs, libraries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// When the fingerprint was taken, RFC 3339 UTC.
    pub collected_at: String,
    /// stratlab's crate version.
    pub stratlab_version: String,
    /// `git rev-parse HEAD` of the checkout the binary was built from, captured at build time.
    pub git_commit: Option<String>,
    /// Whether that checkout had uncommitted changes to tracked files when it was built.
    pub git_dirty: Option<bool>,
    /// SHA-256 of the running executable: identifies the exact binary (code, features,
    /// compiler) that measured.
    pub binary_sha256: Option<String>,
    /// Whether this binary was built with the test-only `fault-injection` feature.
    pub fault_injection_enabled: bool,
    /// The fault rules (`STRATLAB_TEST_FAULT`) in force, in such a build: numbers from a run
    /// with faults injected are not measurements.
    pub active_fault: Option<String>,
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
    /// cuDNN version libtorch loaded (`91002` for 9.10.2), when cuDNN is available.
    pub cudnn_runtime_version: Option<i64>,
    /// libtorch release, as the linked library reports it (`at::show_config()`).
    pub libtorch_version: Option<String>,
    /// CUDA version the linked libtorch was built with; `None` for a CPU build.
    pub libtorch_cuda_version: Option<String>,
    /// cuDNN version the linked libtorch was built with; `None` for a CPU build.
    pub libtorch_cudnn_version: Option<String>,
    /// The tch crate's version, from the Cargo.lock the binary was built with.
    pub tch_version: String,
    /// `rustc --version` of the compiler that built the binary.
    pub rustc_version: Option<String>,
    /// libtorch intra-op threads of this process at collection time.
    pub torch_threads: i32,
}

impl Fingerprint {
    /// The fields that make measurements incomparable when they differ (host, driver, CUDA,
    /// libtorch, the binary itself), as `(field, this run's value, other's value)`.
    pub fn differences(&self, other: &Fingerprint) -> Vec<(&'static str, String, String)> {
        let show = |value: &Option<String>| value.clone().unwrap_or_else(|| "—".to_owned());
        let fields: [(&'static str, &Option<String>, &Option<String>); 7] = [
            ("host_name", &self.host_name, &other.host_name),
            ("nvidia_driver_version", &self.nvidia_driver_version, &other.nvidia_driver_version),
            ("cuda_driver_version", &self.cuda_driver_version, &other.cuda_driver_version),
            ("libtorch_version", &self.libtorch_version, &other.libtorch_version),
            ("libtorch_cuda_version", &self.libtorch_cuda_version, &other.libtorch_cuda_version),
            ("binary_sha256", &self.binary_sha256, &other.binary_sha256),
            ("active_fault", &self.active_fault, &other.active_fault),
        ];
        let mut differences: Vec<(&'static str, String, String)> = fields
            .into_iter()
            .filter(|(_, mine, theirs)| mine != theirs)
            .map(|(name, mine, theirs)| (name, show(mine), show(theirs)))
            .collect();
        if self.gpu_models != other.gpu_models {
            differences.push(("gpu_models", self.gpu_models.join(", "), other.gpu_models.join(", ")));
        }
        differences
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Fingerprint {
        serde_json::from_str(include_str!("../tests/data/fingerprint.json")).expect("sample fingerprint")
    }

    #[test]
    fn differences_name_the_fields_that_make_runs_incomparable() {
        let a = sample();
        let mut b = a.clone();
        assert!(a.differences(&b).is_empty());
        b.collected_at = "later".into();
        b.torch_threads += 1;
        assert!(a.differences(&b).is_empty(), "time and threads do not make runs incomparable");
        b.host_name = Some("other-host".into());
        b.nvidia_driver_version = Some("999.1".into());
        let names: Vec<&str> = a.differences(&b).iter().map(|d| d.0).collect();
        assert_eq!(names, ["host_name", "nvidia_driver_version"]);
    }

    #[test]
    fn round_trips_through_json() {
        let fingerprint = sample();
        let json = serde_json::to_string(&fingerprint).expect("serialise");
        let back: Fingerprint = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, fingerprint);
    }
}
