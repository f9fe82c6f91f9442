//! Step changes in a series of runs: where did a cell's level move and stay moved?
//!
//! The series is cut into segments of constant level by an exact optimal partition
//! (dynamic programming over every cut, as asv's step detection and PELT do): each segment
//! costs the sum of absolute deviations from its median (L1, so one wild run moves no
//! level), values are taken relative to the series' median, and every segment pays a
//! penalty equal to the noise threshold. A lasting change of d (relative) over k runs is
//! cut once k·d exceeds the penalty, so a change at the latest run is found once it is
//! larger than the noise threshold, while a one-run excursion in the middle, which needs
//! two cuts, must be twice that. Neighbouring segments whose medians differ by less than
//! the noise threshold are then merged: no step is smaller than noise.

use serde::Serialize;

use stratlab_results::stats::median;

/// A stretch of runs with one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    /// Index of its first value.
    pub start: usize,
    /// One past its last value.
    pub end: usize,
    /// Median of its values.
    pub level: f64,
}

/// A change of level between two neighbouring segments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelStep {
    /// Index of the first value at the new level.
    pub at: usize,
    /// Level before.
    pub before: f64,
    /// Level after.
    pub after: f64,
}

impl LevelStep {
    /// after ÷ before.
    pub fn ratio(&self) -> f64 {
        self.after / self.before
    }
}

/// The segments of `values` (in time order); `noise` is the relative noise threshold.
pub fn segments(values: &[f64], noise: f64) -> Vec<Segment> {
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let scale = median(&values.iter().map(|v| v.abs()).collect::<Vec<_>>()).filter(|s| *s > 0.0).unwrap_or(1.0);
    let x: Vec<f64> = values.iter().map(|v| v / scale).collect();
    let cost = |start: usize, end: usize| {
        let slice = &x[start..end];
        let level = median(slice).unwrap_or(0.0);
        slice.iter().map(|v| (v - level).abs()).sum::<f64>()
    };
    // best[j]: least cost of x[..j]; cut[j]: where its last segment starts.
    let mut best = vec![0.0; n + 1];
    let mut cut = vec![0usize; n + 1];
    for end in 1..=n {
        let (start, total) = (0..end)
            .map(|start| (start, best[start] + cost(start, end) + noise))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("a non-empty range of cuts");
        best[end] = total;
        cut[end] = start;
    }
    let mut bounds = Vec::new();
    let mut end = n;
    while end > 0 {
        bounds.push((cut[end], end));
        end = cut[end];
    }
    bounds.reverse();
    let mut segments: Vec<Segment> = bounds.into_iter().map(|(start, end)| segment(values, start, end)).collect();
    // Merge the closest neighbours while any pair is within noise of each other.
    loop {
        let closest = segments
            .windows(2)
            .enumerate()
            .map(|(i, pair)| (i, relative_gap(pair[0].level, pair[1].level)))
            .filter(|(_, gap)| *gap < noise)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((i, _)) = closest else { break };
        let merged = segment(values, segments[i].start, segments[i + 1].end);
        segments.splice(i..=i + 1, [merged]);
    }
    segments
}

/// The level changes of `values`: one per boundary between [`segments`].
pub fn level_steps(values: &[f64], noise: f64) -> Vec<LevelStep> {
    segments(values, noise)
        .windows(2)
        .map(|pair| LevelStep { at: pair[1].start, before: pair[0].level, after: pair[1].level })
        .collect()
}

fn segment(values: &[f64], start: usize, end: usize) -> Segment {
    Segment { start, end, level: median(&values[start..end]).unwrap_or(f64::NAN) }
}

/// max ÷ min − 1 of two levels: the same gap whichever way the level moved.
fn relative_gap(a: f64, b: f64) -> f64 {
    let (low, high) = if a.abs() < b.abs() { (a.abs(), b.abs()) } else { (b.abs(), a.abs()) };
    if low == 0.0 {
        return if high == 0.0 { 0.0 } else { f64::INFINITY };
    }
    high / low - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic ±2 % wiggle, like run-to-run noise.
    fn wiggle(i: usize) -> f64 {
        1.0 + 0.02 * (((i * 7919) % 13) as f64 / 6.0 - 1.0)
    }

    #[test]
    fn a_flat_noisy_series_has_no_step() {
        let values: Vec<f64> = (0..30).map(|i| 100.0 * wiggle(i)).collect();
        assert!(level_steps(&values, 0.1).is_empty());
    }

    #[test]
    fn one_lasting_step_is_found_where_it_happened() {
        let values: Vec<f64> = (0..20).map(|i| if i < 12 { 100.0 } else { 80.0 } * wiggle(i)).collect();
        let steps = level_steps(&values, 0.1);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].at, 12);
        assert!((steps[0].ratio() - 0.8).abs() < 0.03, "{steps:?}");
    }

    #[test]
    fn a_step_at_the_latest_run_is_found_once_it_exceeds_noise() {
        let mut values: Vec<f64> = (0..10).map(|i| 100.0 * wiggle(i)).collect();
        values.push(75.0);
        let steps = level_steps(&values, 0.1);
        assert_eq!(steps.iter().map(|s| s.at).collect::<Vec<_>>(), [10]);
        values.pop();
        values.push(95.0);
        assert!(level_steps(&values, 0.1).is_empty(), "5 % is within noise");
    }

    #[test]
    fn a_single_outlier_in_the_middle_is_not_a_step_unless_it_is_large() {
        let mut values: Vec<f64> = (0..15).map(|i| 100.0 * wiggle(i)).collect();
        values[7] = 115.0;
        assert!(level_steps(&values, 0.1).is_empty(), "15 % once is under twice the noise threshold");
        values[7] = 160.0;
        assert_eq!(level_steps(&values, 0.1).iter().map(|s| s.at).collect::<Vec<_>>(), [7, 8]);
    }

    #[test]
    fn small_steps_are_merged_into_noise() {
        let values: Vec<f64> = (0..20).map(|i| if i < 10 { 100.0 } else { 106.0 }).collect();
        assert!(level_steps(&values, 0.1).is_empty());
        assert_eq!(level_steps(&values, 0.05).len(), 1);
    }
}
