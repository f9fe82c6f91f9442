//! Energy a trial's devices drew, from the boards' counters or by integrating power.

use std::collections::BTreeMap;

use stratlab_results::{EnergySource, Sample};

/// Joules drawn by all devices of `samples` together, and how that was measured.
///
/// From the counters (last − first reading, per device, summed) when every device that
/// has samples has counter readings and none went backwards (a driver reload resets it);
/// otherwise from each device's trapezoidal power integral, summed. Mixing the two would
/// make a number whose quality no single label describes, so one missing counter sends
/// every device to integration. `None` when no sample has power or a counter.
pub(super) fn energy_of(samples: &[Sample]) -> Option<(f64, EnergySource)> {
    let mut by_device: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for sample in samples {
        by_device.entry(&sample.device).or_default().push(sample);
    }
    for series in by_device.values_mut() {
        series.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    }
    counter_energy_j(&by_device)
        .map(|joules| (joules, EnergySource::Counter))
        .or_else(|| integrated_energy_j(&by_device).map(|joules| (joules, EnergySource::PowerIntegration)))
}

/// Sum over devices of last − first counter reading, in joules; `None` unless every device
/// has a usable counter.
fn counter_energy_j(by_device: &BTreeMap<&str, Vec<&Sample>>) -> Option<f64> {
    if by_device.is_empty() {
        return None;
    }
    let mut millijoules = 0u64;
    for series in by_device.values() {
        let readings: Vec<u64> = series.iter().filter_map(|sample| sample.energy_counter_mj).collect();
        let (first, last) = (readings.first()?, readings.last()?);
        if readings.windows(2).any(|pair| pair[1] < pair[0]) {
            return None;
        }
        millijoules += last - first;
    }
    Some(millijoules as f64 / 1000.0)
}

/// Sum over devices of the trapezoidal integral of power over time, in joules; `None`
/// when no sample reports power.
fn integrated_energy_j(by_device: &BTreeMap<&str, Vec<&Sample>>) -> Option<f64> {
    let mut any_power = false;
    let mut joules = 0.0;
    for series in by_device.values() {
        let power: Vec<(f64, f64)> = series.iter().filter_map(|sample| Some((sample.t_s, sample.power_w?))).collect();
        any_power |= !power.is_empty();
        joules += power.windows(2).map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0).sum::<f64>();
    }
    any_power.then_some(joules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(t_s: f64, device: &str, power_w: Option<f64>, energy_counter_mj: Option<u64>) -> Sample {
        Sample {
            t_s,
            device: device.into(),
            device_id: Some(format!("id-{device}")),
            utilization_pct: 0.0,
            memory_used_bytes: 0,
            process_memory_bytes: None,
            power_w,
            energy_counter_mj,
            sm_clock_mhz: None,
        }
    }

    #[test]
    fn the_counter_wins_over_power_integration() {
        // Power says 100 W × 1 s = 100 J; the counter says 250 J, and is believed.
        let samples = [
            gpu(0.0, "gpu0", Some(100.0), Some(1_000_000)),
            gpu(0.5, "gpu0", Some(100.0), Some(1_100_000)),
            gpu(1.0, "gpu0", Some(100.0), Some(1_250_000)),
        ];
        assert_eq!(energy_of(&samples), Some((250.0, EnergySource::Counter)));
    }

    #[test]
    fn counters_of_several_boards_add_up_in_any_sample_order() {
        let samples = [
            gpu(1.0, "gpu1", None, Some(5_500)),
            gpu(0.0, "gpu0", None, Some(1_000)),
            gpu(0.0, "gpu1", None, Some(5_000)),
            // A tick where gpu0's counter failed changes nothing: the counter accumulates.
            gpu(0.5, "gpu0", Some(1.0), None),
            gpu(1.0, "gpu0", None, Some(3_000)),
        ];
        assert_eq!(energy_of(&samples), Some((2.5, EnergySource::Counter)));
    }

    #[test]
    fn one_board_without_a_counter_sends_all_to_integration() {
        let samples = [
            gpu(0.0, "gpu0", Some(50.0), Some(0)),
            gpu(1.0, "gpu0", Some(150.0), Some(999_000)),
            gpu(0.0, "gpu1", Some(100.0), None),
            gpu(1.0, "gpu1", Some(100.0), None),
        ];
        assert_eq!(energy_of(&samples), Some((200.0, EnergySource::PowerIntegration)));
    }

    #[test]
    fn a_counter_that_went_backwards_is_not_trusted() {
        let samples = [gpu(0.0, "gpu0", Some(10.0), Some(9_000)), gpu(2.0, "gpu0", Some(10.0), Some(1_000))];
        assert_eq!(energy_of(&samples), Some((20.0, EnergySource::PowerIntegration)));
    }

    #[test]
    fn nothing_to_measure_gives_none() {
        assert_eq!(energy_of(&[]), None);
        assert_eq!(energy_of(&[gpu(0.0, "cpu", None, None)]), None);
        assert_eq!(EnergySource::PowerIntegration.to_string(), "power-integration");
        let json = serde_json::to_string(&[EnergySource::Counter, EnergySource::PowerIntegration]).unwrap_or_default();
        assert_eq!(json, r#"["counter","power-integration"]"#);
    }
}
