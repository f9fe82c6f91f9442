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
    /// NCCL version the process loaded (`2.27.3`), when libtorch was built with NCCL;
    /// `None` for a CPU build and for runs stored before the field existed.
    #[serde(default)]
    pub nccl_version: Option<String>,
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

    /// The environment a measurement depends on, as `(field, value)` in a fixed order:
    /// code (commit, binary, compiler, tch), libraries (libtorch, CUDA, cuDNN, NCCL), driver,
    /// devices and host. Leaves out what changes every run (`collected_at`) and the suite
    /// file's path; `—` marks an unknown value.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        let show = |value: &Option<String>| value.clone().unwrap_or_else(|| "—".to_owned());
        let number = |value: Option<i64>| value.map_or_else(|| "—".to_owned(), |v| v.to_string());
        vec![
            ("stratlab_version", self.stratlab_version.clone()),
            ("git_commit", show(&self.git_commit)),
            ("git_dirty", self.git_dirty.map_or_else(|| "—".to_owned(), |dirty| dirty.to_string())),
            ("binary_sha256", show(&self.binary_sha256)),
            ("rustc_version", show(&self.rustc_version)),
            ("tch_version", self.tch_version.clone()),
            ("suite_sha256", show(&self.suite_sha256)),
            ("libtorch_version", show(&self.libtorch_version)),
            ("libtorch_cuda_version", show(&self.libtorch_cuda_version)),
            ("libtorch_cudnn_version", show(&self.libtorch_cudnn_version)),
            ("cudnn_runtime_version", number(self.cudnn_runtime_version)),
            ("nccl_version", show(&self.nccl_version)),
            ("nvidia_driver_version", show(&self.nvidia_driver_version)),
            ("cuda_driver_version", show(&self.cuda_driver_version)),
            ("gpu_models", if self.gpu_models.is_empty() { "—".to_owned() } else { self.gpu_models.join(", ") }),
            ("cpu_model", show(&self.cpu_model)),
            ("logical_cores", self.logical_cores.to_string()),
            ("memory_total_bytes", number(self.memory_total_bytes.map(|bytes| bytes as i64))),
            ("host_name", show(&self.host_name)),
            ("os", show(&self.os)),
            ("kernel", show(&self.kernel)),
            ("active_fault", show(&self.active_fault)),
        ]
    }

    /// Every [`environment`](Self::environment) field whose value differs from `later`'s,
    /// as `(field, this value, later value)`: what changed between two runs and could
    /// explain a change in their numbers.
    pub fn changes_to(&self, later: &Fingerprint) -> Vec<(&'static str, String, String)> {
        self.environment()
            .into_iter()
            .zip(later.environment())
            .filter(|((_, before), (_, after))| before != after)
            .map(|((field, before), (_, after))| (field, before, after))
            .collect()
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
    fn changes_list_every_environment_field_that_moved_and_nothing_else() {
        let a = sample();
        let mut b = a.clone();
        b.collected_at = "later".into();
        assert!(a.changes_to(&b).is_empty(), "the collection time is not an environment change");
        b.git_commit = Some("feedbeef".into());
        b.nccl_version = Some("2.27.3".into());
        b.gpu_models = vec!["NVIDIA H100".into()];
        let changes = a.changes_to(&b);
        let names: Vec<&str> = changes.iter().map(|c| c.0).collect();
        assert_eq!(names, ["git_commit", "nccl_version", "gpu_models"]);
        assert_eq!(changes[1].1, "—");
        assert_eq!(changes[1].2, "2.27.3");
    }

    #[test]
    fn round_trips_through_json() {
        let fingerprint = sample();
        let json = serde_json::to_string(&fingerprint).expect("serialise");
        let back: Fingerprint = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, fingerprint);
    }
}
