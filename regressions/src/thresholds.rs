//! When a change counts: the significance level and the noise threshold, with the defaults
//! chosen from repeated unchanged runs (regressions/README.md has the study).

use serde::Serialize;

use crate::bootstrap::{BootstrapSettings, RatioEstimate, Statistic};
use crate::RegressionError;

/// Default significance level α: the interval is the two-sided 1 − α = 95 % bootstrap
/// interval (criterion's default too).
pub const DEFAULT_SIGNIFICANCE: f64 = 0.05;

/// Default noise threshold: a change counts only when its whole interval lies more than
/// this far from no change. Chosen from 14 back-to-back runs of `suite/noise-study.yaml` on
/// a 2-core VM, where unchanged runs moved by up to 45 %: see regressions/README.md for the
/// false-alarm rate and the smallest slowdown it catches. A steadier machine can pass a
/// smaller `--noise-threshold`.
pub const DEFAULT_NOISE_THRESHOLD: f64 = 0.30;

/// Default statistic of a cell's step times (see [`Statistic`] and regressions/README.md).
pub const DEFAULT_STATISTIC: Statistic = Statistic::P10;

/// What a change must clear to count, and the statistic it is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// Which order statistic of the step times stands for a cell.
    pub statistic: Statistic,
    /// α: the confidence interval is the two-sided 1 − α interval.
    pub significance: f64,
    /// Relative change (0.10 = 10 %) that run-to-run noise can reach on its own.
    pub noise: f64,
    /// The bootstrap's resamples and seed.
    pub bootstrap: BootstrapSettings,
    /// Whether `compare` judges each cell's step-time ratio divided by the machine's own
    /// ratio (the runner's fixed reference work, new ÷ baseline, timed before each trial), so
    /// that a host which ran slower or faster as a whole during one run (a shared VM's
    /// neighbours, throttling) is not read as a change of the code. Off by default: the
    /// division assumes the cell slows as the reference does, which a change of threads,
    /// memory or links need not. Cells without a timed reference are judged as measured;
    /// `history`'s series stay as measured.
    pub per_machine_speed: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            statistic: DEFAULT_STATISTIC,
            significance: DEFAULT_SIGNIFICANCE,
            noise: DEFAULT_NOISE_THRESHOLD,
            bootstrap: BootstrapSettings::default(),
            per_machine_speed: false,
        }
    }
}

impl Thresholds {
    /// The interval's confidence, 1 − α.
    pub fn confidence(&self) -> f64 {
        1.0 - self.significance
    }

    /// Checks the values a user gave: α in (0, 0.5], noise in [0, 1).
    pub fn validate(&self) -> Result<(), RegressionError> {
        if !(self.significance > 0.0 && self.significance <= 0.5) {
            return Err(RegressionError::Thresholds(format!(
                "significance {} is outside (0, 0.5]: it is α, the chance the interval misses (0.05 gives a 95 % interval)",
                self.significance
            )));
        }
        if !(0.0..1.0).contains(&self.noise) {
            return Err(RegressionError::Thresholds(format!(
                "noise threshold {} is outside [0, 1): it is a relative change (0.10 = 10 %)",
                self.noise
            )));
        }
        if self.bootstrap.resamples < 100 {
            return Err(RegressionError::Thresholds(format!(
                "{} bootstrap resamples are too few for a 2.5 % tail; use at least 100",
                self.bootstrap.resamples
            )));
        }
        Ok(())
    }

    /// The verdict on a ratio where above 1 is worse (new step time ÷ baseline step time):
    /// regressed when the whole interval is above 1 + noise, improved when it is wholly
    /// below 1 ÷ (1 + noise) (a throughput gain of more than `noise`), noise otherwise.
    /// Like criterion's, a verdict needs the interval, not just the point, past the band.
    pub fn verdict(&self, worse_above_one: RatioEstimate) -> Verdict {
        if worse_above_one.low > 1.0 + self.noise {
            Verdict::Regressed
        } else if worse_above_one.high < 1.0 / (1.0 + self.noise) {
            Verdict::Improved
        } else {
            Verdict::Noise
        }
    }
}

/// What happened to a cell between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Slower beyond noise, or a repeat that finished before no longer does.
    Regressed,
    /// Faster beyond noise, or a failed repeat now finishes.
    Improved,
    /// Within the noise band, or an interval too wide to tell.
    Noise,
    /// One side has no timed step (every repeat failed): no speed to compare.
    Unmeasured,
}

impl Verdict {
    /// The word shown in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::Noise => "noise",
            Verdict::Unmeasured => "unmeasured",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(low: f64, high: f64) -> RatioEstimate {
        RatioEstimate { ratio: (low + high) / 2.0, low, high }
    }

    #[test]
    fn a_verdict_needs_the_whole_interval_past_the_noise_band() {
        let t = Thresholds { noise: 0.1, ..Thresholds::default() };
        assert_eq!(t.verdict(ratio(1.11, 1.3)), Verdict::Regressed);
        assert_eq!(t.verdict(ratio(1.05, 1.3)), Verdict::Noise, "point past the band, interval not");
        assert_eq!(t.verdict(ratio(0.7, 0.9)), Verdict::Improved);
        assert_eq!(t.verdict(ratio(0.7, 0.92)), Verdict::Noise, "0.92 is a throughput gain under 10 %");
        assert_eq!(t.verdict(ratio(0.95, 1.05)), Verdict::Noise);
    }

    #[test]
    fn out_of_range_settings_are_refused_with_their_meaning() {
        let bad = Thresholds { significance: 0.0, ..Thresholds::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("α"));
        let bad = Thresholds { noise: 1.5, ..Thresholds::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("relative change"));
        assert!(Thresholds::default().validate().is_ok());
    }
}
