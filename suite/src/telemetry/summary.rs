//! The per-trial reduction of a telemetry series.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::energy::energy_of;
use super::{EnergySource, Sample};

/// Mean and peak load of a trial's devices and the energy they drew (SPEC §7).
///
/// Means and maxima are over all samples of all devices, i.e. per device: with two GPUs
/// at 40 % and 60 % the mean is 50 %, not 100 %. Fields are `None` without samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySummary {
    /// Mean utilisation over all samples, percent.
    pub utilization_mean_pct: Option<f64>,
    /// Highest utilisation seen, percent.
    pub utilization_max_pct: Option<f64>,
    /// Mean memory in use over all samples, bytes.
    pub memory_mean_bytes: Option<f64>,
    /// Highest memory in use seen, bytes.
    pub memory_max_bytes: Option<u64>,
    /// Mean GPU memory held by the trial's own processes, over the samples that report it,
    /// bytes; unlike `memory_mean_bytes` it leaves out other jobs on a shared board.
    pub process_memory_mean_bytes: Option<f64>,
    /// Highest GPU memory held by the trial's own processes on one board, bytes.
    pub process_memory_max_bytes: Option<u64>,
    /// Energy drawn by all devices together between their first and last sample, joules:
    /// from the boards' energy counters when every device has one, else the trapezoidal
    /// integral of each device's power over time; summed over devices. `None` when no
    /// sample reports either.
    pub energy_j: Option<f64>,
    /// How `energy_j` was measured; `None` exactly when `energy_j` is.
    pub energy_source: Option<EnergySource>,
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
            utilization_mean_pct,
            utilization_max_pct,
            memory_mean_bytes,
            memory_max_bytes,
            process_memory_mean_bytes,
            process_memory_max_bytes,
            energy_j,
            energy_source,
            device_ids: device_ids.into_iter().map(str::to_owned).collect(),
            sample_count: n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!((summary.energy_j.unwrap_or(0.0) - 200.0).abs() < 1e-9, "{:?}", summary.energy_j);
        assert_eq!(summary.energy_source, Some(EnergySource::PowerIntegration));
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
        assert_eq!(summary.utilization_mean_pct, Some(50.0));
        assert_eq!(summary.utilization_max_pct, Some(80.0));
        assert_eq!(summary.memory_mean_bytes, Some(250.0));
        assert_eq!(summary.memory_max_bytes, Some(400));
        // gpu0: a ramp 50→150 W over 1 s = 100 J; gpu1: 150→250 W = 200 J.
        assert_eq!(summary.energy_j, Some(300.0));
    }

    #[test]
    fn no_power_means_no_energy_and_no_samples_means_none() {
        let summary = TelemetrySummary::from_samples(&[sample(0.0, "cpu", 10.0, 5, None)]);
        assert_eq!(summary.energy_j, None);
        assert_eq!(summary.utilization_mean_pct, Some(10.0));
        let empty = TelemetrySummary::from_samples(&[]);
        assert_eq!(empty.sample_count, 0);
        assert_eq!(empty.utilization_mean_pct, None);
        assert_eq!(empty.memory_max_bytes, None);
        assert_eq!(empty.energy_j, None);
        assert_eq!(empty.energy_source, None);
        assert!(empty.device_ids.is_empty());
        assert_eq!(empty.process_memory_max_bytes, None);
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
        assert_eq!(summary.process_memory_mean_bytes, Some(300.0));
        assert_eq!(summary.process_memory_max_bytes, Some(500));
        assert_eq!(summary.device_ids, ["00000000:1A:00.0", "00000000:5E:00.0"]);
        // Counters: 250 J + 50 J, not the 1200 J that 300 W × 2 s × 2 boards would give.
        assert_eq!(summary.energy_j, Some(300.0));
        assert_eq!(summary.energy_source, Some(EnergySource::Counter));
    }
}
