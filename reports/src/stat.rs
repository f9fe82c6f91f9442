//! A measured value over repeats: median with its min–max spread.

/// The median of repeated measurements with their range, so a figure can draw error bars
/// and mark values that rest on a single run (`n == 1`) instead of presenting them as fact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Median of the repeats.
    pub median: f64,
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
    /// Number of repeats (at least 1).
    pub n: usize,
}

impl Stat {
    /// One measurement: median = min = max, `n = 1`.
    pub fn single(value: f64) -> Self {
        Self { median: value, min: value, max: value, n: 1 }
    }

    /// Median and range of `samples`; `None` when empty or when any sample is not finite
    /// (a diverged or missing value must surface as a failure, not shift the median).
    pub fn from_samples(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = stratlab_results::stats::quantile_of_sorted(&sorted, 0.5);
        Some(Self { median, min: sorted[0], max: sorted[n - 1], n })
    }

    /// The same statistic in another unit (e.g. bytes → GiB); a negative factor flips the
    /// range so `min <= max` still holds.
    pub fn scaled(self, factor: f64) -> Self {
        let (a, b) = (self.min * factor, self.max * factor);
        Self { median: self.median * factor, min: a.min(b), max: a.max(b), n: self.n }
    }

    /// Whether all three numbers are finite, the precondition for drawing.
    pub fn is_finite(&self) -> bool {
        self.median.is_finite() && self.min.is_finite() && self.max.is_finite()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        let s = Stat::from_samples(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 4.0, 4));
    }

    #[test]
    fn median_of_odd_count_is_middle_value() {
        let s = Stat::from_samples(&[9.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 9.0, 3));
    }

    #[test]
    fn non_finite_or_empty_samples_give_no_stat() {
        assert!(Stat::from_samples(&[]).is_none());
        assert!(Stat::from_samples(&[1.0, f64::NAN]).is_none());
        assert!(Stat::from_samples(&[f64::INFINITY]).is_none());
    }

    #[test]
    fn scaling_converts_units() {
        let s = Stat::from_samples(&[2.0 * 1024.0, 4.0 * 1024.0]).unwrap().scaled(1.0 / 1024.0);
        assert_eq!((s.median, s.min, s.max), (3.0, 2.0, 4.0));
    }
}
