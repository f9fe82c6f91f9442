//! Order statistics for timings: medians and percentiles, which resist the outliers that
//! a shared machine produces better than means do.

/// The `q`-quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between order
/// statistics (numpy's default); `None` for no values.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(quantile_of_sorted(&sorted, q))
}

/// [`quantile`] of values already sorted ascending (callers that take many quantiles of
/// one sample, or resample in a loop, sort once). `sorted` must not be empty.
pub fn quantile_of_sorted(sorted: &[f64], q: f64) -> f64 {
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lower = position.floor() as usize;
    let upper = position.ceil() as usize;
    let weight = position - lower as f64;
    sorted[lower] * (1.0 - weight) + sorted[upper] * weight
}

/// The median of `values`.
pub fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

/// The arithmetic mean of `values`.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Kendall's τ-b between two rankings of the same items (`a[i]` and `b[i]` score item
/// `i`): +1 when they order every pair alike, −1 when they reverse it; ties count as
/// neither and shrink the denominator. `None` for fewer than two items or no untied pair.
pub fn kendall_tau(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    let (mut concordant, mut discordant, mut tied_a, mut tied_b) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..n {
        for j in i + 1..n {
            let (da, db) = (a[i] - a[j], b[i] - b[j]);
            match (da == 0.0, db == 0.0) {
                (true, true) => {}
                (true, false) => tied_a += 1,
                (false, true) => tied_b += 1,
                (false, false) if (da > 0.0) == (db > 0.0) => concordant += 1,
                (false, false) => discordant += 1,
            }
        }
    }
    let pairs_a = (concordant + discordant + tied_b) as f64;
    let pairs_b = (concordant + discordant + tied_a) as f64;
    (pairs_a > 0.0 && pairs_b > 0.0).then(|| (concordant - discordant) as f64 / (pairs_a * pairs_b).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kendall_tau_counts_pairs_ordered_alike() {
        assert_eq!(kendall_tau(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(kendall_tau(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // One swapped pair of three: (2 − 1) ÷ 3.
        assert!((kendall_tau(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]).unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // scipy.stats.kendalltau([1, 2, 2, 3], [1, 2, 3, 3]) == 0.8
        assert!((kendall_tau(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 3.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(kendall_tau(&[1.0], &[1.0]), None);
    }

    #[test]
    fn quantiles_match_numpy_linear_interpolation() {
        // numpy.quantile([1, 2, 3, 4, 10], [0.1, 0.5, 0.9]) == [1.4, 3.0, 7.6]
        let values = [4.0, 1.0, 10.0, 3.0, 2.0];
        assert!((quantile(&values, 0.1).unwrap() - 1.4).abs() < 1e-12);
        assert_eq!(median(&values), Some(3.0));
        assert!((quantile(&values, 0.9).unwrap() - 7.6).abs() < 1e-12);
        assert_eq!(median(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
    }
}
