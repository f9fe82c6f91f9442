//! Where a suite would run: nodes of identical devices joined by an intra-node and an
//! inter-node link, and within a node optionally groups of devices on a faster link of
//! their own (NVLink pairs with PCIe between them), read from a YAML cluster file, so a
//! step can be predicted on machines we do not have (`examples/clusters/`).
//!
//! A device's speed is either measured here (`profile: local`) or a datasheet roofline
//! (`peak_flops`, `memory_bandwidth`); predictions resting on the latter are unvalidated,
//! which [`DeviceSpeed::is_validated`] lets reports say.

use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer};
use serde::Deserialize;

use stratlab_units::{Bandwidth, ByteSize, FlopRate, Link};

/// A cluster the performance model can place workers on.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// As the file names it, for reports.
    pub name: String,
    /// Machines, each with `devices_per_node` devices.
    pub nodes: usize,
    /// Devices of one node.
    pub devices_per_node: usize,
    /// Every device is this one: the model does not mix device kinds.
    pub device: DeviceDescription,
    /// Between two devices of one node (of different groups, where it has groups).
    pub intra_node: Link,
    /// Groups of devices within a node joined by a faster link of their own (NVLink
    /// bridges between pairs of PCIe cards); `None` where every pair of a node's devices
    /// talks over `intra_node`.
    pub groups: Option<DeviceGroups>,
    /// Between nodes; `None` only for a single node.
    pub inter_node: Option<Link>,
}

/// Devices of a node that share a faster link: the first `devices` of a node form one
/// group, the next `devices` the next.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceGroups {
    /// Devices per group.
    #[serde(deserialize_with = "count")]
    pub devices: usize,
    /// Between two devices of one group.
    pub link: Link,
}

/// One device (a GPU, or a CPU core for [`Cluster::local`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceDescription {
    /// As the vendor names it (`nvidia-smi`'s name for a GPU).
    pub name: String,
    /// Memory of one device, which bounds the batch and the stages it can hold.
    pub memory_bytes: u64,
    /// Where its speed comes from.
    pub speed: DeviceSpeed,
}

/// Where a device's speed comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DeviceSpeed {
    /// Measured on this machine (a profile of the network's stages).
    Profiled,
    /// Datasheet figures: a roofline, never checked against a run.
    Analytical {
        /// Floating-point operations per second at the precision the model trains in.
        peak_flops: f64,
        /// Bytes per second between the device and its memory.
        memory_bandwidth_bytes_per_s: f64,
    },
}

impl DeviceSpeed {
    /// Only a measured speed has been compared with a run; a roofline's predictions are
    /// reported as unvalidated.
    pub fn is_validated(&self) -> bool {
        matches!(self, DeviceSpeed::Profiled)
    }
}

/// Why a cluster file could not be used, naming the file, the field and what is valid.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The file could not be read.
    #[error("cannot read cluster file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not YAML, an unknown or missing field, a value of the wrong type or unit; the
    /// message carries the field path and the line from the YAML parser.
    #[error("cluster file {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's message, prefixed with the field path.
        message: String,
    },
    /// Each field read, but together they do not describe a cluster.
    #[error("cluster file {}: `{field}` {problem}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// Dotted path of the field (`links.inter_node`).
        field: &'static str,
        /// What is wrong and what would be valid.
        problem: String,
    },
    /// Workers that cannot be placed on the cluster.
    #[error("cluster `{cluster}`: {problem}")]
    Placement {
        /// The cluster's name.
        cluster: String,
        /// What does not fit.
        problem: String,
    },
}

/// What a speed needs, repeated by every error about it.
const SPEED_CHOICES: &str = "give either `profile: local` (the speed measured on this machine) or both \
     `peak_flops` (e.g. `67 TFLOP/s`) and `memory_bandwidth` (e.g. `3.35 TB/s`)";

impl Cluster {
    /// Reads, parses and validates the cluster file at `path`.
    pub fn load(path: &Path) -> Result<Cluster, ClusterError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ClusterError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, path)
    }

    /// Parses and validates cluster-file text; `origin` is the file errors name.
    pub fn parse(text: &str, origin: &Path) -> Result<Cluster, ClusterError> {
        let file = crate::yaml::from_yaml::<ClusterFile>(text)
            .map_err(|error| ClusterError::Invalid { path: origin.to_path_buf(), message: error.to_string() })?;
        file.validate(origin)
    }

    /// This machine as a cluster: one node whose `cores` each count as a device sharing
    /// the host's `memory_bytes`, at the speed its profile measured.
    pub fn local(name: &str, cores: usize, memory_bytes: u64, link: Link) -> Cluster {
        Cluster {
            name: name.to_owned(),
            nodes: 1,
            devices_per_node: cores,
            device: DeviceDescription { name: "CPU core".to_owned(), memory_bytes, speed: DeviceSpeed::Profiled },
            intra_node: link,
            groups: None,
            inter_node: None,
        }
    }

    /// Devices of the whole cluster.
    pub fn devices(&self) -> usize {
        self.nodes * self.devices_per_node
    }

    /// The slowest link a ring over the first `workers` devices crosses: placement fills a
    /// group, then a node, before the next, so a ring stays on its group's link while it
    /// fits one group, on the intra-node link while it fits one node, and is bound by the
    /// inter-node link once it spans two.
    pub fn ring_link(&self, workers: usize) -> Result<Link, ClusterError> {
        let problem = |problem: String| ClusterError::Placement { cluster: self.name.clone(), problem };
        if workers > self.devices() {
            return Err(problem(format!(
                "{workers} workers do not fit its {} devices ({} nodes × {} devices per node)",
                self.devices(),
                self.nodes,
                self.devices_per_node
            )));
        }
        if let Some(groups) = self.groups.filter(|groups| workers <= groups.devices) {
            return Ok(groups.link);
        }
        if workers <= self.devices_per_node {
            return Ok(self.intra_node);
        }
        self.inter_node
            .ok_or_else(|| problem(format!("{workers} workers span nodes, but the cluster has no `links.inter_node`")))
    }

    /// Seconds of a pass that computes `flops` and moves `bytes_moved` to and from device
    /// memory, on the roofline: whichever of the two the device is slower at bounds it.
    /// `None` for a profiled device, whose seconds come from its profile instead.
    pub fn analytical_seconds(&self, flops: f64, bytes_moved: f64) -> Option<f64> {
        match self.device.speed {
            DeviceSpeed::Profiled => None,
            DeviceSpeed::Analytical { peak_flops, memory_bandwidth_bytes_per_s } => {
                Some((flops / peak_flops).max(bytes_moved / memory_bandwidth_bytes_per_s))
            }
        }
    }
}

/// A cluster file as written: every field typed with its unit, so serde names the field
/// of a bad value; what spans fields is checked by [`ClusterFile::validate`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    name: String,
    #[serde(deserialize_with = "count")]
    nodes: usize,
    #[serde(deserialize_with = "count")]
    devices_per_node: usize,
    device: DeviceFile,
    links: LinksFile,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceFile {
    name: String,
    memory: ByteSize,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    peak_flops: Option<FlopRate>,
    #[serde(default)]
    memory_bandwidth: Option<Bandwidth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinksFile {
    #[serde(default)]
    groups: Option<DeviceGroups>,
    intra_node: Link,
    #[serde(default)]
    inter_node: Option<Link>,
}

impl ClusterFile {
    fn validate(self, origin: &Path) -> Result<Cluster, ClusterError> {
        let error = |field, problem: String| ClusterError::Field { path: origin.to_path_buf(), field, problem };
        if self.name.trim().is_empty() {
            return Err(error("name", "is empty: name the cluster, e.g. `one-node-4-h100`".to_owned()));
        }
        if self.nodes == 0 {
            return Err(error("nodes", "is 0: a cluster has 1 node or more".to_owned()));
        }
        if self.devices_per_node == 0 {
            return Err(error("devices_per_node", "is 0: a node has 1 device or more".to_owned()));
        }
        // Sizes read a bare number as bytes (`--sizes 4,1K`); a device's memory under 1 MiB
        // is a forgotten unit (`memory: 80`), never a device.
        if self.device.memory.0 < 1 << 20 {
            return Err(error(
                "device.memory",
                format!(
                    "is {} bytes: give the memory of one device with its unit, e.g. `80 GiB` (units: {})",
                    self.device.memory.0,
                    stratlab_units::byte_unit_names()
                ),
            ));
        }
        if self.nodes > 1 && self.links.inter_node.is_none() {
            return Err(error(
                "links.inter_node",
                format!(
                    "is missing: {} nodes need the link between them, e.g. \
                     `inter_node: {{bandwidth: 100 Gbit/s, latency: 5 us}}`",
                    self.nodes
                ),
            ));
        }
        if let Some(groups) = &self.links.groups {
            if groups.devices < 2
                || groups.devices >= self.devices_per_node
                || !self.devices_per_node.is_multiple_of(groups.devices)
            {
                return Err(error(
                    "links.groups.devices",
                    format!(
                        "is {}: a group holds 2 or more of a node's {} devices, fewer than all, and the groups divide \
                         the node evenly (NVLink pairs of 4 GPUs: `devices: 2`)",
                        groups.devices, self.devices_per_node
                    ),
                ));
            }
        }
        let device = self.device;
        let speed = match (device.profile.as_deref(), device.peak_flops, device.memory_bandwidth) {
            (Some("local"), None, None) => DeviceSpeed::Profiled,
            (Some("local"), ..) => {
                return Err(error("device", format!("gives both `profile: local` and a roofline: {SPEED_CHOICES}")));
            }
            (Some(other), ..) => {
                return Err(error(
                    "device.profile",
                    format!("is `{other}`: the only profile is `local`; {SPEED_CHOICES}"),
                ));
            }
            (None, Some(peak), Some(bandwidth)) => {
                DeviceSpeed::Analytical { peak_flops: peak.0, memory_bandwidth_bytes_per_s: bandwidth.0 }
            }
            (None, Some(_), None) => {
                return Err(error(
                    "device.memory_bandwidth",
                    format!("is missing beside `peak_flops`: {SPEED_CHOICES}"),
                ));
            }
            (None, None, Some(_)) => {
                return Err(error(
                    "device.peak_flops",
                    format!("is missing beside `memory_bandwidth`: {SPEED_CHOICES}"),
                ));
            }
            (None, None, None) => return Err(error("device", format!("gives no speed: {SPEED_CHOICES}"))),
        };
        Ok(Cluster {
            name: self.name,
            nodes: self.nodes,
            devices_per_node: self.devices_per_node,
            device: DeviceDescription { name: device.name, memory_bytes: device.memory.0, speed },
            intra_node: self.links.intra_node,
            groups: self.links.groups,
            inter_node: self.links.inter_node,
        })
    }
}

/// A count of nodes or devices; serde's own message for a bad one (`invalid u64`) says
/// neither what was read nor what would do.
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.trim()
        .parse()
        .map_err(|_| de::Error::custom(format!("`{text}` is not a count: write a whole number, 1 or more")))
}

#[cfg(test)]
mod tests;
