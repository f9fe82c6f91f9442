//! Robust statistics of step times: medians, and a bootstrap confidence interval for the
//! ratio of two medians that respects how benchmark samples are correlated.
//!
//! A cell's samples are its timed steps (warm-up excluded), grouped by repeat. Steps of one
//! trial are not independent: a background process slows a run of consecutive steps. So a
//! resample draws repeats with replacement (the between-trial spread, when there are
//! repeats), then rebuilds each drawn repeat from blocks of consecutive steps (circular
//! moving-block bootstrap, Künsch 1989; block length ⌈√n⌉), which keeps short bursts of
//! slowness together instead of spreading them thinly over the resample.

use rand::{Rng, RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use stratlab_results::stats::{median, quantile, quantile_of_sorted};

/// Which order statistic of a cell's step times stands for the cell.
///
/// Interference (another process, a noisy neighbour, frequency dips) only ever adds time to
/// a step, so the lower part of the distribution is the least contaminated: Chen & Revels
/// (2016, BenchmarkTools.jl) argue for the minimum on that ground. A low quantile keeps most
/// of that robustness while staying well-behaved under the bootstrap, which the minimum is
/// not (its resamples pile onto the few smallest values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Statistic {
    /// The median step time.
    Median,
    /// The 25th percentile.
    P25,
    /// The 10th percentile.
    P10,
}

impl Statistic {
    /// Every statistic, for studies.
    pub const ALL: [Statistic; 3] = [Statistic::Median, Statistic::P25, Statistic::P10];

    /// The quantile it takes.
    pub fn quantile(self) -> f64 {
        match self {
            Statistic::Median => 0.5,
            Statistic::P25 => 0.25,
            Statistic::P10 => 0.1,
        }
    }

    /// Its name in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Statistic::Median => "median",
            Statistic::P25 => "25th percentile",
            Statistic::P10 => "10th percentile",
        }
    }
}

/// The timed steps of one cell in one run: step times in seconds, one list per repeat, in
/// step order (the order matters to the block bootstrap).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct StepSamples {
    /// Per repeat, the timed step times.
    pub repeats: Vec<Vec<f64>>,
}

impl StepSamples {
    /// Whether there is no timed step at all.
    pub fn is_empty(&self) -> bool {
        self.repeats.iter().all(Vec::is_empty)
    }

    /// Number of timed steps over all repeats.
    pub fn len(&self) -> usize {
        self.repeats.iter().map(Vec::len).sum()
    }

    /// Median step time over every timed step of every repeat.
    pub fn median(&self) -> Option<f64> {
        median(&self.pooled())
    }

    /// The `q` quantile of the pooled step times.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        quantile(&self.pooled(), q)
    }

    /// The same samples with every step `factor` times as long: what a uniform slowdown
    /// would have measured.
    pub fn scaled(&self, factor: f64) -> StepSamples {
        StepSamples { repeats: self.repeats.iter().map(|r| r.iter().map(|t| t * factor).collect()).collect() }
    }

    fn pooled(&self) -> Vec<f64> {
        self.repeats.iter().flatten().copied().collect()
    }

    fn non_empty_repeats(&self) -> Vec<&[f64]> {
        self.repeats.iter().filter(|r| !r.is_empty()).map(Vec::as_slice).collect()
    }

    /// The step time `statistic` picks, over every timed step of every repeat.
    pub fn statistic(&self, statistic: Statistic) -> Option<f64> {
        self.quantile(statistic.quantile())
    }

    /// One bootstrap resample's `statistic`: repeats drawn with replacement, each rebuilt
    /// from circular blocks of ⌈√n⌉ consecutive steps.
    fn resampled(&self, statistic: Statistic, rng: &mut impl Rng, scratch: &mut Vec<f64>) -> f64 {
        let repeats = self.non_empty_repeats();
        scratch.clear();
        for _ in 0..repeats.len() {
            let steps = repeats[rng.random_range(0..repeats.len())];
            let n = steps.len();
            let block = (n as f64).sqrt().ceil() as usize;
            let start_len = scratch.len();
            while scratch.len() - start_len < n {
                let start = rng.random_range(0..n);
                scratch.extend((0..block).map(|offset| steps[(start + offset) % n]));
            }
            scratch.truncate(start_len + n);
        }
        scratch.sort_by(f64::total_cmp);
        quantile_of_sorted(scratch, statistic.quantile())
    }
}

/// How the bootstrap runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BootstrapSettings {
    /// Resamples drawn (criterion draws 100 000 for its own samples; 2 000 puts the 2.5 %
    /// and 97.5 % points within a fraction of a percent of their limit here).
    pub resamples: usize,
    /// Seed of the resampling: the same tables always give the same interval and verdict.
    pub seed: u64,
}

impl Default for BootstrapSettings {
    fn default() -> Self {
        BootstrapSettings { resamples: 2000, seed: 0x5eed_5747 }
    }
}

/// A ratio with its two-sided confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioEstimate {
    /// The point estimate.
    pub ratio: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
}

impl RatioEstimate {
    /// The reciprocal ratio (b ÷ a instead of a ÷ b), its interval flipped accordingly.
    pub fn reciprocal(self) -> RatioEstimate {
        RatioEstimate { ratio: 1.0 / self.ratio, low: 1.0 / self.high, high: 1.0 / self.low }
    }

    /// The same ratio with both sides weighted: `(a·weight_a) ÷ (b·weight_b)`.
    pub fn scaled(self, factor: f64) -> RatioEstimate {
        RatioEstimate { ratio: self.ratio * factor, low: self.low * factor, high: self.high * factor }
    }
}

/// `statistic(numerator) ÷ statistic(denominator)` with its percentile-bootstrap interval
/// at `confidence` (0.95 for α = 0.05); `None` when either side has no step.
pub fn statistic_ratio(
    numerator: &StepSamples,
    denominator: &StepSamples,
    statistic: Statistic,
    confidence: f64,
    settings: BootstrapSettings,
) -> Option<RatioEstimate> {
    let ratio = numerator.statistic(statistic)? / denominator.statistic(statistic)?;
    let mut rng = Pcg64Mcg::seed_from_u64(settings.seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut ratios: Vec<f64> = (0..settings.resamples.max(1))
        .map(|_| numerator.resampled(statistic, &mut rng, &mut a) / denominator.resampled(statistic, &mut rng, &mut b))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence.clamp(0.0, 1.0)) / 2.0;
    Some(RatioEstimate {
        ratio,
        low: quantile_of_sorted(&ratios, tail).min(ratio),
        high: quantile_of_sorted(&ratios, 1.0 - tail).max(ratio),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(repeats: &[&[f64]]) -> StepSamples {
        StepSamples { repeats: repeats.iter().map(|r| r.to_vec()).collect() }
    }

    #[test]
    fn identical_samples_give_a_ratio_of_one_with_an_interval_around_it() {
        let steps: Vec<f64> = (0..40).map(|i| 0.1 + 0.001 * f64::from(i % 7)).collect();
        let a = samples(&[&steps]);
        let estimate = statistic_ratio(&a, &a, Statistic::Median, 0.95, BootstrapSettings::default()).unwrap();
        assert_eq!(estimate.ratio, 1.0);
        assert!(estimate.low < 1.0 && estimate.high > 1.0, "{estimate:?}");
        assert!(estimate.high - estimate.low < 0.1, "{estimate:?}");
    }

    #[test]
    fn a_uniform_slowdown_is_recovered_with_an_interval_that_excludes_no_change() {
        let steps: Vec<f64> = (0..60).map(|i| 0.1 + 0.002 * f64::from((i * 13) % 11)).collect();
        let base = samples(&[&steps]);
        let slow = base.scaled(1.3);
        let estimate = statistic_ratio(&slow, &base, Statistic::P10, 0.95, BootstrapSettings::default()).unwrap();
        assert!((estimate.ratio - 1.3).abs() < 1e-12);
        assert!(estimate.low > 1.1 && estimate.high < 1.5, "{estimate:?}");
    }

    #[test]
    fn spread_between_repeats_widens_the_interval() {
        let steady: Vec<f64> = vec![0.1; 30];
        let faster: Vec<f64> = vec![0.08; 30];
        let one = samples(&[&steady]);
        let two = samples(&[&steady, &faster]);
        let settings = BootstrapSettings::default();
        let narrow = statistic_ratio(&one, &one, Statistic::Median, 0.95, settings).unwrap();
        let wide = statistic_ratio(&two, &one, Statistic::Median, 0.95, settings).unwrap();
        assert_eq!((narrow.low, narrow.high), (1.0, 1.0), "constant steps have no spread");
        assert!(wide.low <= 0.8 + 1e-12 && wide.high >= 1.0 - 1e-12, "{wide:?}");
    }

    #[test]
    fn the_same_inputs_give_the_same_interval() {
        let steps: Vec<f64> = (0..25).map(|i| 0.1 + 0.01 * f64::from((i * 7) % 5)).collect();
        let a = samples(&[&steps]);
        let b = a.scaled(1.05);
        let settings = BootstrapSettings::default();
        assert_eq!(
            statistic_ratio(&b, &a, Statistic::P25, 0.95, settings),
            statistic_ratio(&b, &a, Statistic::P25, 0.95, settings)
        );
    }

    #[test]
    fn no_steps_no_estimate() {
        let a = samples(&[&[0.1, 0.2]]);
        assert!(statistic_ratio(&a, &StepSamples::default(), Statistic::Median, 0.95, BootstrapSettings::default())
            .is_none());
    }
}
