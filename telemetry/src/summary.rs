//! The per-trial reduction of a telemetry series.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use stratlab_results::{DeviceLoad, Sample};

use crate::energy::energy_of;

/// A trial's telemetry reduced: the device load its `trials` row stores, and which boards
/// were sampled how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySummary {
    /// Means, peaks and energy over all samples of all devices.
    #[serde(flatten)]
    pub load: DeviceLoad,
    /// Identities of the boards sampled (PCI bus ids, `00000000:3B:00.0`), sorted (which
    /// is bus order) and each once; empty for CPU trials.
    pub device_ids: Vec<String>,
    /// Number of samples summarised.
    pub sample_count: usize,
}

impl TelemetrySummary {
    /// Summarises samples from a recorder (any device order; each device sorted by time).
    pub fn from_samples(samples: &[Sample]) -> TelemetrySummary {
        let n = samples.len();
        let mean = |total: f64| (n > 0).then(|| total / n as f64);
        let utilization_mean_pct = mean(samples.iter().map(|s| s.utilization_pct).sum());
        let utilization_max_pct = samples.iter().map(|s| s.utilization_pct).reduce(f64::max);
        let memory_mean_bytes = mean(samples.iter().map(|s| s.memory_used_bytes as f64).sum());
        let memory_max_bytes = samples.iter().map(|s| s.memory_used_bytes).max();

        let process_memory: Vec<u64> = samples.iter().filter_map(|s| s.process_memory_bytes).collect();
        let process_memory_mean_bytes = (!process_memory.is_empty())
            .then(|| process_memory.iter().map(|&bytes| bytes as f64).sum::<f64>() / process_memory.len() as f64);
        let process_memory_max_bytes = process_memory.iter().copied().max();
        let (energy_j, energy_source) = energy_of(samples).unzip();
        let device_ids: BTreeSet<&str> = samples.iter().filter_map(|s| s.device_id.as_deref()).collect();

        TelemetrySummary {
            load: DeviceLoad {
                utilization_mean_pct,
                utilization_max_pct,
                memory_mean_bytes,
                memory_max_bytes,
                process_memory_mean_bytes,
                process_memory_max_bytes,
                energy_j,
                energy_source,
            },
            device_ids: device_ids.into_iter().map(str::to_owned).collect(),
            sample_count: n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratlab_results::EnergySource;

    fn sample(t_s: f64, device: &str, utilization_pct: f64, memory_used_bytes: u64, power_w: Option<f64>) -> Sample {
        Sample {
            t_s,
            device: device.into(),
            device_id: None,
            utilization_pct,
            memory_used_bytes,
            process_memory_bytes: None,
            power_w,
            energy_counter_mj: None,
            sm_clock_mhz: None,
        }
    }

    #[test]
    fn constant_100_w_for_2_s_is_200_j() {
        let samples: Vec<Sample> =
            (0..=20).map(|i| sample(f64::from(i) * 0.1, "gpu0", 50.0, 1000, Some(100.0))).collect();
        let summary = TelemetrySummary::from_samples(&samples);
        assert!((summary.load.energy_j.unwrap_or(0.0) - 200.0).abs() < 1e-9, "{:?}", summary.load.energy_j);
        assert_eq!(summary.load.energy_source, Some(EnergySource::PowerIntegration));
        assert_eq!(summary.sample_count, 21);
    }

    #[test]
    fn means_maxima_and_energy_of_two_devices() {
        let samples = vec![
            sample(0.0, "gpu0", 20.0, 100, Some(50.0)),
            sample(0.0, "gpu1", 40.0, 300, Some(150.0)),
            sample(1.0, "gpu0", 60.0, 200, Some(150.0)),
            sample(1.0, "gpu1", 80.0, 400, Some(250.0)),
        ];
        let summary = TelemetrySummary::from_samples(&samples);
        assert_eq!(summary.load.utilization_mean_pct, Some(50.0));
        assert_eq!(summary.load.utilization_max_pct, Some(80.0));
        assert_eq!(summary.load.memory_mean_bytes, Some(250.0));
        assert_eq!(summary.load.memory_max_bytes, Some(400));
        // gpu0: a ramp 50→150 W over 1 s = 100 J; gpu1: 150→250 W = 200 J.
        assert_eq!(summary.load.energy_j, Some(300.0));
    }

    #[test]
    fn no_power_means_no_energy_and_no_samples_means_none() {
        let summary = TelemetrySummary::from_samples(&[sample(0.0, "cpu", 10.0, 5, None)]);
        assert_eq!(summary.load.energy_j, None);
        assert_eq!(summary.load.utilization_mean_pct, Some(10.0));
        let empty = TelemetrySummary::from_samples(&[]);
        assert_eq!(empty.sample_count, 0);
        assert_eq!(empty.load.utilization_mean_pct, None);
        assert_eq!(empty.load.memory_max_bytes, None);
        assert_eq!(empty.load.energy_j, None);
        assert_eq!(empty.load.energy_source, None);
        assert!(empty.device_ids.is_empty());
        assert_eq!(empty.load.process_memory_max_bytes, None);
    }

    #[test]
    fn process_memory_device_ids_and_counter_energy_of_two_boards() {
        let board = |t_s: f64, device: &str, id: &str, process: Option<u64>, counter_mj: u64| Sample {
            device_id: Some(id.into()),
            process_memory_bytes: process,
            energy_counter_mj: Some(counter_mj),
            ..sample(t_s, device, 50.0, 1000, Some(300.0))
        };
        let samples = vec![
            board(0.0, "gpu3", "00000000:5E:00.0", Some(100), 1_000_000),
            board(0.0, "gpu2", "00000000:1A:00.0", None, 7_000),
            board(2.0, "gpu3", "00000000:5E:00.0", Some(300), 1_250_000),
            board(2.0, "gpu2", "00000000:1A:00.0", Some(500), 57_000),
        ];
        let summary = TelemetrySummary::from_samples(&samples);
        assert_eq!(summary.load.process_memory_mean_bytes, Some(300.0));
        assert_eq!(summary.load.process_memory_max_bytes, Some(500));
        assert_eq!(summary.device_ids, ["00000000:1A:00.0", "00000000:5E:00.0"]);
        // Counters: 250 J + 50 J, not the 1200 J that 300 W × 2 s × 2 boards would give.
        assert_eq!(summary.load.energy_j, Some(300.0));
        assert_eq!(summary.load.energy_source, Some(EnergySource::Counter));
    }
}
