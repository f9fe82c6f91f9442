//! A cost against the number of samples, from a few measured points. Time per sample is
//! not constant (fixed costs dominate small batches, caches large ones: the thesis's table
//! 6.1), so the curve interpolates between measurements instead of scaling one of them.

use serde::{Deserialize, Serialize};

/// Seconds (or bytes) against a count (samples; bytes for an all-reduce): measured points, linear between them, and beyond
/// them the line through the nearest two (one point: proportional to the samples).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostCurve {
    /// `(samples, cost)`, strictly increasing in samples.
    points: Vec<(usize, f64)>,
}

/// Why points do not make a curve.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("a cost curve needs at least one point, samples strictly increasing from 1, costs finite and ≥ 0; got {0:?}")]
pub struct CurveError(pub Vec<(usize, f64)>);

impl CostCurve {
    /// The curve through `points` (any order).
    pub fn new(mut points: Vec<(usize, f64)>) -> Result<CostCurve, CurveError> {
        points.sort_by_key(|&(samples, _)| samples);
        let valid = !points.is_empty()
            && points[0].0 >= 1
            && points.windows(2).all(|pair| pair[0].0 < pair[1].0)
            && points.iter().all(|&(_, cost)| cost.is_finite() && cost >= 0.0);
        match valid {
            true => Ok(CostCurve { points }),
            false => Err(CurveError(points)),
        }
    }

    /// A cost proportional to the samples: `per_sample × samples`.
    pub fn proportional(per_sample: f64) -> CostCurve {
        CostCurve { points: vec![(1, per_sample)] }
    }

    /// The measured points.
    pub fn points(&self) -> &[(usize, f64)] {
        &self.points
    }

    /// The cost of `samples` samples (never negative).
    pub fn at(&self, samples: usize) -> f64 {
        let x = samples as f64;
        let line = |(x0, y0): (usize, f64), (x1, y1): (usize, f64)| {
            let (x0, x1) = (x0 as f64, x1 as f64);
            y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        };
        let cost = match self.points.as_slice() {
            [] => 0.0,
            [(x0, y0)] => y0 * x / *x0 as f64,
            points => {
                let after = points.iter().position(|&(at, _)| at >= samples).unwrap_or(points.len() - 1).max(1);
                line(points[after - 1], points[after])
            }
        };
        cost.max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_points_are_returned_and_between_them_the_line() {
        let curve = CostCurve::new(vec![(32, 0.05), (8, 0.02), (16, 0.03)]).unwrap();
        assert_eq!(curve.at(8), 0.02);
        assert_eq!(curve.at(16), 0.03);
        assert!((curve.at(12) - 0.025).abs() < 1e-15);
        assert!((curve.at(24) - 0.04).abs() < 1e-15);
    }

    #[test]
    fn beyond_the_points_the_nearest_segment_extends_and_a_fixed_cost_stays() {
        let curve = CostCurve::new(vec![(8, 0.02), (16, 0.03)]).unwrap();
        // 0.01 s of fixed cost, 1.25 ms a sample: not proportional to the batch.
        assert!((curve.at(64) - 0.09).abs() < 1e-12);
        assert!((curve.at(1) - 0.01125).abs() < 1e-12);
        assert_eq!(CostCurve::new(vec![(10, 1.0), (20, 0.0)]).unwrap().at(40), 0.0, "never negative");
        assert!((CostCurve::proportional(0.5).at(6) - 3.0).abs() < 1e-15);
    }

    #[test]
    fn repeated_or_empty_points_are_refused() {
        assert!(CostCurve::new(vec![]).is_err());
        assert!(CostCurve::new(vec![(4, 1.0), (4, 2.0)]).is_err());
        assert!(CostCurve::new(vec![(0, 1.0)]).is_err());
        assert!(CostCurve::new(vec![(4, f64::NAN)]).is_err());
    }
}
