//! Device choice and the synchronisation every timing must do before reading a clock.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use stratlab_results::TrialDevice;
use tch::Device;

use crate::device_double::{self, DeviceCall};

/// Where a trial trains: `cpu`, `cuda:N`, or `auto` (the first GPU if libtorch sees one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeviceChoice {
    /// The CPU, with the thread count of the trial's configuration.
    Cpu,
    /// One CUDA device by index.
    Cuda(usize),
    /// CUDA device 0 when available, else the CPU (with a warning from [`DeviceChoice::resolve`]).
    Auto,
}

/// The device asked for is not here, or libtorch refused a setting of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeviceError(pub String);

impl DeviceChoice {
    /// The device a trial that never started is recorded on: the one asked for, the CPU
    /// for `auto` (nothing resolved it).
    pub fn planned(self) -> TrialDevice {
        match self {
            DeviceChoice::Cuda(index) => TrialDevice::Cuda(index as u32),
            DeviceChoice::Cpu | DeviceChoice::Auto => TrialDevice::Cpu,
        }
    }

    /// The libtorch device to use. A CUDA device that libtorch cannot see is an error, not a
    /// silent fall-back: a benchmark that quietly ran on the CPU would report wrong numbers.
    pub fn resolve(self) -> Result<Device, DeviceError> {
        let count = if tch::Cuda::is_available() { tch::Cuda::device_count() as usize } else { 0 };
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Cuda(index) if device_double::installed() => {
                device_double::record(DeviceCall::Resolved(index));
                Ok(Device::Cpu)
            }
            DeviceChoice::Cuda(index) if index < count => Ok(Device::Cuda(index)),
            DeviceChoice::Cuda(index) => Err(DeviceError(format!(
                "device cuda:{index} requested but libtorch sees {count} CUDA device(s); valid choices: cpu, auto{}",
                (0..count).map(|i| format!(", cuda:{i}")).collect::<String>()
            ))),
            DeviceChoice::Auto if count > 0 => Ok(Device::Cuda(0)),
            DeviceChoice::Auto => Ok(Device::Cpu),
        }
    }
}

impl FromStr for DeviceChoice {
    type Err = DeviceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "cpu" => Ok(DeviceChoice::Cpu),
            "auto" => Ok(DeviceChoice::Auto),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            _ => {
                text.strip_prefix("cuda:").and_then(|index| index.parse().ok()).map(DeviceChoice::Cuda).ok_or_else(
                    || DeviceError(format!("unknown device `{text}`; valid choices: cpu, auto, cuda, cuda:N")),
                )
            }
        }
    }
}

impl TryFrom<String> for DeviceChoice {
    type Error = DeviceError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<DeviceChoice> for String {
    fn from(choice: DeviceChoice) -> String {
        choice.to_string()
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Cpu => write!(f, "cpu"),
            DeviceChoice::Cuda(index) => write!(f, "cuda:{index}"),
            DeviceChoice::Auto => write!(f, "auto"),
        }
    }
}

/// Waits until every kernel queued on `device` has finished. CUDA runs asynchronously, so a
/// clock read without this measures the launch, not the work. A no-op on the CPU.
pub fn synchronize(device: Device) {
    match device {
        Device::Cuda(index) => tch::Cuda::synchronize(index as i64),
        _ => device_double::record(DeviceCall::Synchronize),
    }
}

/// The device as results record it (`cpu`, `cuda:0`).
pub fn device_label(device: Device) -> TrialDevice {
    match device {
        Device::Cuda(index) => TrialDevice::Cuda(index as u32),
        _ => TrialDevice::Cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling_and_round_trips() {
        for (text, choice) in
            [("cpu", DeviceChoice::Cpu), ("auto", DeviceChoice::Auto), ("cuda:3", DeviceChoice::Cuda(3))]
        {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), text);
        }
        assert_eq!("cuda".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cuda(0));
    }

    #[test]
    fn unknown_device_lists_valid_choices() {
        let error = "tpu".parse::<DeviceChoice>().unwrap_err();
        assert!(error.0.contains("cpu, auto, cuda, cuda:N"), "{error}");
    }

    #[test]
    fn missing_gpu_is_an_error_and_auto_falls_back_to_cpu() {
        // The first index this machine lacks (0 without a GPU): an error on any machine.
        let count = if tch::Cuda::is_available() { tch::Cuda::device_count() as usize } else { 0 };
        let error = DeviceChoice::Cuda(count).resolve().unwrap_err();
        assert!(error.0.contains(&format!("sees {count} CUDA device")), "{error}");
        let auto = if count > 0 { Device::Cuda(0) } else { Device::Cpu };
        assert_eq!(DeviceChoice::Auto.resolve().unwrap(), auto);
    }
}
