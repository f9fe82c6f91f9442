//! Where each rank of a trial across nodes ran: the node's own fingerprint, taken by the rank
//! there (the run's fingerprint is the runner's host, which may be a login or batch host).

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::{Fingerprint, Table};

/// One rank of a multi-node trial and the node it ran on, as stored in `trial_nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct TrialNodeRow {
    /// The run this row belongs to.
    pub run_id: String,
    /// The trial this row belongs to.
    pub trial_id: String,
    /// The rank, from 0.
    pub rank: u32,
    /// The node's host name (`uname -n`).
    pub host_name: Option<String>,
    /// Its CPU model.
    pub cpu_model: Option<String>,
    /// Its online logical cores.
    pub logical_cores: u64,
    /// Its installed memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Its GPU models in NVML order; empty without NVML.
    pub gpu_models: Vec<String>,
    /// Its NVIDIA driver version.
    pub nvidia_driver_version: Option<String>,
    /// The highest CUDA version its driver supports.
    pub cuda_driver_version: Option<String>,
    /// The NCCL version the rank loaded.
    pub nccl_version: Option<String>,
    /// The libtorch release the rank loaded.
    pub libtorch_version: Option<String>,
    /// The CUDA version that libtorch was built with.
    pub libtorch_cuda_version: Option<String>,
    /// SHA-256 of the stratlab binary the rank ran: a node with another build shows here.
    pub binary_sha256: Option<String>,
    /// Its kernel release.
    pub kernel: Option<String>,
}

impl TrialNodeRow {
    /// Rank `rank` of trial `trial_id` of run `run_id`, on the node `node` describes.
    pub fn new(run_id: &str, trial_id: &str, rank: u32, node: &Fingerprint) -> TrialNodeRow {
        TrialNodeRow {
            run_id: run_id.to_owned(),
            trial_id: trial_id.to_owned(),
            rank,
            host_name: node.host_name.clone(),
            cpu_model: node.cpu_model.clone(),
            logical_cores: node.logical_cores as u64,
            memory_total_bytes: node.memory_total_bytes,
            gpu_models: node.gpu_models.clone(),
            nvidia_driver_version: node.nvidia_driver_version.clone(),
            cuda_driver_version: node.cuda_driver_version.clone(),
            nccl_version: node.nccl_version.clone(),
            libtorch_version: node.libtorch_version.clone(),
            libtorch_cuda_version: node.libtorch_cuda_version.clone(),
            binary_sha256: node.binary_sha256.clone(),
            kernel: node.kernel.clone(),
        }
    }

    /// The fields that tell two nodes' environments apart, by name, for `compare` and
    /// `history` to attribute a change to the node that changed.
    pub fn environment(&self) -> [(&'static str, Option<String>); 8] {
        [
            ("cpu_model", self.cpu_model.clone()),
            ("gpu_models", (!self.gpu_models.is_empty()).then(|| self.gpu_models.join(", "))),
            ("nvidia_driver_version", self.nvidia_driver_version.clone()),
            ("cuda_driver_version", self.cuda_driver_version.clone()),
            ("nccl_version", self.nccl_version.clone()),
            ("libtorch_version", self.libtorch_version.clone()),
            ("binary_sha256", self.binary_sha256.clone()),
            ("kernel", self.kernel.clone()),
        ]
    }
}

impl Table for TrialNodeRow {
    const NAME: &'static str = crate::table_names::TRIAL_NODES;

    fn trial_id(&self) -> Option<&str> {
        Some(&self.trial_id)
    }
}
