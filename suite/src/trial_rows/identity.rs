//! Where a trial ran, as every row of it records: the host, the device's name and ids.

use stratlab_results::Fingerprint;
use stratlab_strategies::DeviceChoice;
use stratlab_telemetry::TelemetrySummary;

use crate::trial::TrialSpec;

/// Where a trial ran: every row carries it, so trials of a mixed run stay tellable apart.
pub(crate) struct Identity {
    pub(crate) host_name: Option<String>,
    pub(crate) device_name: Option<String>,
    pub(crate) device_ids: Option<String>,
}

impl Identity {
    /// `board_names` are the GPU boards telemetry sampled (empty without NVML).
    pub(crate) fn of(
        trial: &TrialSpec,
        fingerprint: &Fingerprint,
        summary: &TelemetrySummary,
        board_names: &[String],
    ) -> Identity {
        let device_name = match trial.train.device {
            DeviceChoice::Cuda(index) => {
                let mut names = board_names.to_vec();
                names.dedup();
                match names.is_empty() {
                    false => Some(names.join(", ")),
                    // No NVML: say which ordinal, not a guess at the board.
                    true => Some(format!("CUDA device {index} (board unknown without NVML)")),
                }
            }
            _ => fingerprint.cpu_model.clone(),
        };
        Identity {
            host_name: fingerprint.host_name.clone(),
            device_name,
            device_ids: (!summary.device_ids.is_empty()).then(|| summary.device_ids.join(",")),
        }
    }
}
