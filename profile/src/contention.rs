//! Workers on one machine slow each other's compute even when each has cores of its own:
//! they share caches and memory bandwidth. A profile times each stage alone, so the
//! slowdown is measured apart, as a ratio: a whole pass's seconds with `copies` copies of
//! the network computing at once to the profile's seconds for it. The model applies it in
//! proportion to how many workers compute at the same time, which the strategy's own
//! structure decides: every data-parallel worker computes at once, a model-parallel
//! pipeline's stages take turns, GPipe's and 1F1B's overlap in their steady state (the
//! simulation says how much).

use serde::{Deserialize, Serialize};

use crate::CostCurve;

/// Measured slowdown of compute under co-running copies of the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// Copies that ran at once, each on the threads a worker gets (the most that fit the
    /// cores, so none waited for a core).
    pub copies: usize,
    /// `(samples, ratio)`: the median pass together over the profile's stages summed, ≥ 0.
    pub ratio: Vec<(usize, f64)>,
}

impl Contention {
    /// How much longer a pass of `samples` samples takes while `concurrent` workers compute
    /// (itself included; a time-weighted mean, so fractional): 1 alone, the measured ratio
    /// at `copies`, linear between. Beyond `copies` the workers outnumber the cores and
    /// take turns on them, which the model's core sharing charges, not this. Between the
    /// measured sizes the ratio is interpolated; outside them the nearest is taken.
    pub fn slowdown(&self, concurrent: f64, samples: usize) -> f64 {
        if self.copies < 2 || concurrent <= 1.0 {
            return 1.0;
        }
        let Ok(curve) = CostCurve::new(self.ratio.clone()) else { return 1.0 };
        let points = curve.points();
        let samples = samples.clamp(points[0].0, points[points.len() - 1].0);
        let share = ((concurrent - 1.0) / (self.copies - 1) as f64).min(1.0);
        // Copies cannot speed each other up: a ratio below 1 (a whole pass faster than its
        // stages timed one by one, or noise) is not applied.
        1.0 + (curve.at(samples).max(1.0) - 1.0) * share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alone_is_free_all_copies_pay_the_measured_ratio_and_between_is_linear() {
        let contention = Contention { copies: 2, ratio: vec![(16, 1.4), (64, 1.2)] };
        assert_eq!(contention.slowdown(1.0, 16), 1.0);
        assert!((contention.slowdown(2.0, 16) - 1.4).abs() < 1e-12);
        assert!((contention.slowdown(1.5, 16) - 1.2).abs() < 1e-12);
        assert!((contention.slowdown(2.0, 40) - 1.3).abs() < 1e-12);
        // Outside the measured sizes the nearest ratio, not a line running away.
        assert!((contention.slowdown(2.0, 1024) - 1.2).abs() < 1e-12);
        assert!((contention.slowdown(2.0, 1) - 1.4).abs() < 1e-12);
        // More workers than copies: the cores are time-shared, charged elsewhere.
        assert!((contention.slowdown(4.0, 16) - 1.4).abs() < 1e-12);
    }

    #[test]
    fn a_ratio_that_cannot_be_a_curve_changes_nothing() {
        assert_eq!(Contention { copies: 2, ratio: vec![] }.slowdown(2.0, 8), 1.0);
        assert_eq!(Contention { copies: 1, ratio: vec![(8, 2.0)] }.slowdown(2.0, 8), 1.0);
    }
}
