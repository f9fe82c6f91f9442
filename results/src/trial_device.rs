//! The device a trial trained on, as its row stores it (`cpu`, `cuda:0`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A trial's device, after `auto` was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum TrialDevice {
    /// The CPU.
    #[default]
    Cpu,
    /// One CUDA device, by the index the worker saw.
    Cuda(u32),
}

impl TrialDevice {
    /// Whether the trial ran on a GPU.
    pub fn is_cuda(self) -> bool {
        matches!(self, TrialDevice::Cuda(_))
    }
}

impl fmt::Display for TrialDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrialDevice::Cpu => f.write_str("cpu"),
            TrialDevice::Cuda(index) => write!(f, "cuda:{index}"),
        }
    }
}

/// A stored device name that is neither `cpu` nor `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device `{0}`; valid: cpu, cuda:N")]
pub struct UnknownDevice(pub String);

impl FromStr for TrialDevice {
    type Err = UnknownDevice;

    fn from_str(text: &str) -> Result<Self, UnknownDevice> {
        match text {
            "cpu" => Ok(TrialDevice::Cpu),
            _ => text
                .strip_prefix("cuda:")
                .and_then(|index| index.parse().ok())
                .map(TrialDevice::Cuda)
                .ok_or_else(|| UnknownDevice(text.to_owned())),
        }
    }
}

impl TryFrom<String> for TrialDevice {
    type Error = UnknownDevice;
    fn try_from(text: String) -> Result<Self, UnknownDevice> {
        text.parse()
    }
}

impl From<TrialDevice> for String {
    fn from(device: TrialDevice) -> String {
        device.to_string()
    }
}

stratlab_columns::text_column!(TrialDevice);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_read_back_what_rows_store() {
        for device in [TrialDevice::Cpu, TrialDevice::Cuda(0), TrialDevice::Cuda(3)] {
            assert_eq!(device.to_string().parse::<TrialDevice>(), Ok(device));
            assert_eq!(serde_json::to_string(&device).unwrap(), format!("\"{device}\""));
        }
        assert_eq!(
            "cuda:x".parse::<TrialDevice>().unwrap_err().to_string(),
            "unknown device `cuda:x`; valid: cpu, cuda:N"
        );
    }
}
