//! The per-trial reduction of a telemetry series.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Sample;

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
    /// Energy drawn by all devices together, joules: for each device the trapezoidal
    /// integral of its power over time, summed. `None` when no sample reports power.
    pub energy_j: Option<f64>,
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

        let mut power_by_device: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for sample in samples {
            if let Some(power_w) = sample.power_w {
                power_by_device.entry(&sample.device).or_default().push((sample.t_s, power_w));
            }
        }
        let energy_j = (!power_by_device.is_empty()).then(|| {
            power_by_device
                .into_values()
                .map(|mut series| {
                    series.sort_by(|a, b| a.0.total_cmp(&b.0));
                    series.windows(2).map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0).sum::<f64>()
                })
                .sum()
        });

        TelemetrySummary {
            utilization_mean_pct,
            utilization_max_pct,
            memory_mean_bytes,
            memory_max_bytes,
            energy_j,
            sample_count: n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, device: &str, utilization_pct: f64, memory_used_bytes: u64, power_w: Option<f64>) -> Sample {
        Sample { t_s, device: device.into(), utilization_pct, memory_used_bytes, power_w, sm_clock_mhz: None }
    }

    #[test]
    fn constant_100_w_for_2_s_is_200_j() {
        let samples: Vec<Sample> =
            (0..=20).map(|i| sample(f64::from(i) * 0.1, "gpu0", 50.0, 1000, Some(100.0))).collect();
        let summary = TelemetrySummary::from_samples(&samples);
        assert!((summary.energy_j.unwrap_or(0.0) - 200.0).abs() < 1e-9, "{:?}", summary.energy_j);
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
    }
}
