//! Speedup over `single` and scaling efficiency, from the throughput medians and
//! ranges of a cell and of its baseline; absent, with the reason, when there is no baseline.

use crate::{Plotted, Stat};

/// A cell's speedup over `single` (W = 1) with the same network, data set and batch per
/// worker, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Speedup {
    /// Both the cell and its baseline were measured.
    Measured {
        /// Median throughput ÷ the baseline's median; spread `[min ÷ baseline max, max ÷
        /// baseline min]`, the widest ratio the repeats allow; `n` is the smaller repeat
        /// count of the two.
        speedup: Stat,
        /// Scaling efficiency: speedup ÷ W.
        efficiency: Stat,
        /// The baseline's batch where it is not the cell's: a pipeline trained at its own
        /// batch (GPipe at the thesis's table 3.3 sizes) against the run's one `single`
        /// batch, compared by throughput.
        baseline_batch: Option<u32>,
    },
    /// The cell itself has no throughput: every repeat failed, or none recorded it.
    Failed(Plotted),
    /// The cell was measured but its baseline was not; never invented.
    NoBaseline {
        /// Why, for the table: e.g. "no single W=1 trial with batch 64".
        why: String,
    },
}

/// The figure label of a cell whose baseline is missing.
pub const NO_BASELINE: &str = "no baseline";

impl Speedup {
    /// Computes the speedup of a cell with throughput `cell` at `workers` workers against
    /// `baseline`, the throughput of its `single` W = 1 cell if the run has one.
    pub fn of(cell: &Plotted, workers: u32, batch_size: u32, baseline: Option<&Plotted>) -> Speedup {
        let cell = match cell {
            Plotted::Measured(stat) => stat,
            gap => return Speedup::Failed(gap.clone()),
        };
        let base = match baseline {
            Some(Plotted::Measured(base)) => base,
            Some(gap) => {
                let why = gap.gap_label().unwrap_or_default();
                return Speedup::NoBaseline { why: format!("single W=1 baseline has no throughput ({why})") };
            }
            None => return Speedup::NoBaseline { why: format!("no single W=1 trial with batch {batch_size}") },
        };
        let speedup = Stat {
            median: cell.median / base.median,
            min: cell.min / base.max,
            max: cell.max / base.min,
            n: cell.n.min(base.n),
        };
        Speedup::Measured { speedup, efficiency: speedup.scaled(1.0 / f64::from(workers)), baseline_batch: None }
    }

    /// The same speedup, said to be against `single` at `batch`, another batch than the
    /// cell's own.
    pub fn against_batch(self, batch: u32) -> Speedup {
        match self {
            Speedup::Measured { speedup, efficiency, .. } => {
                Speedup::Measured { speedup, efficiency, baseline_batch: Some(batch) }
            }
            other => other,
        }
    }

    /// What a table notes about the baseline: why there is none, or the other batch it
    /// was measured at.
    pub fn baseline_note(&self) -> Option<String> {
        match self {
            Speedup::NoBaseline { why } => Some(why.clone()),
            Speedup::Measured { baseline_batch: Some(batch), .. } => {
                Some(format!("its own batch, by throughput against single at batch {batch}"))
            }
            _ => None,
        }
    }

    /// The speedup as figures draw it; a missing baseline is drawn as a stub labelled
    /// [`NO_BASELINE`], so the cell shows instead of silently vanishing.
    pub fn plotted(&self) -> Plotted {
        match self {
            Speedup::Measured { speedup, .. } => Plotted::Measured(*speedup),
            Speedup::Failed(gap) => gap.clone(),
            Speedup::NoBaseline { .. } => Plotted::Missing(NO_BASELINE.into()),
        }
    }

    /// The speedup statistic, if measured.
    pub fn speedup(&self) -> Option<&Stat> {
        match self {
            Speedup::Measured { speedup, .. } => Some(speedup),
            _ => None,
        }
    }

    /// The efficiency statistic, if measured.
    pub fn efficiency(&self) -> Option<&Stat> {
        match self {
            Speedup::Measured { efficiency, .. } => Some(efficiency),
            _ => None,
        }
    }

    /// Why the speedup is absent although the cell was measured.
    pub fn missing_baseline(&self) -> Option<&str> {
        match self {
            Speedup::NoBaseline { why } => Some(why),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use stratlab_results::Outcome;

    use super::*;

    fn stat(median: f64, min: f64, max: f64, n: usize) -> Plotted {
        Plotted::Measured(Stat { median, min, max, n })
    }

    #[test]
    fn speedup_divides_medians_and_takes_the_widest_spread() {
        let base = stat(100.0, 95.0, 110.0, 3);
        let Speedup::Measured { speedup, efficiency, .. } =
            Speedup::of(&stat(180.0, 170.0, 200.0, 3), 2, 32, Some(&base))
        else {
            panic!("expected a measured speedup")
        };
        assert_eq!((speedup.median, speedup.min, speedup.max, speedup.n), (1.8, 170.0 / 110.0, 200.0 / 95.0, 3));
        assert!((efficiency.median - 0.9).abs() < 1e-12);
    }

    #[test]
    fn missing_or_failed_baseline_gives_no_speedup() {
        let cell = stat(180.0, 170.0, 200.0, 3);
        assert!(Speedup::of(&cell, 2, 64, None).missing_baseline().unwrap().contains("batch 64"));
        let failed = Plotted::Failed(Outcome::Oom);
        assert!(Speedup::of(&cell, 2, 64, Some(&failed)).missing_baseline().unwrap().contains("OOM"));
        assert_eq!(Speedup::of(&failed, 2, 64, Some(&cell)), Speedup::Failed(Plotted::Failed(Outcome::Oom)));
    }
}
