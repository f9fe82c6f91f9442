//! Training loss per step from the steps table, placed in epochs and thinned for drawing
//! (the single-GPU vs data/model/GPipe study, figs. 18–19).

use std::collections::HashMap;

use stratlab_results::StepRow;

use super::trial::{TrialInfo, TrialRecord};
use crate::LossPoint;

/// Most points kept per curve; a figure cannot show more, and a report stays light.
pub const MAX_LOSS_POINTS: usize = 500;

/// How many steps make an epoch, and how that was found out (the steps table has no such
/// column; the trainer knew it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepsPerEpoch {
    /// Counted: the trial went past its first epoch, whose steps are all in the table.
    Counted(u64),
    /// Recovered from `trials.seconds_per_epoch_estimate`, which is steps per epoch × the
    /// mean wall time of the timed steps, divided by that mean (rounded).
    FromEstimate(u64),
    /// Only a lower bound: the trial never finished an epoch and has no estimate, so its
    /// steps are drawn as if they were one whole epoch.
    AtLeast(u64),
}

impl StepsPerEpoch {
    /// The number of steps.
    pub fn steps(self) -> u64 {
        match self {
            StepsPerEpoch::Counted(n) | StepsPerEpoch::FromEstimate(n) | StepsPerEpoch::AtLeast(n) => n,
        }
    }
}

/// One trial's loss curve.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialLoss {
    /// The trial.
    pub trial: TrialInfo,
    /// The worker whose losses these are: the lowest rank that computes a loss (in a
    /// pipeline only the last stage does).
    pub worker: Option<i64>,
    /// Steps per epoch, for the x position; `None` without steps.
    pub steps_per_epoch: Option<StepsPerEpoch>,
    /// Steps with a recorded loss on that worker.
    pub steps: usize,
    /// Loss of the first recorded step.
    pub first_loss: Option<f64>,
    /// Loss of the last recorded step (NaN or ±∞ when it diverged).
    pub last_loss: Option<f64>,
    /// Smallest finite loss.
    pub min_loss: Option<f64>,
    /// Step at which the loss first stopped being finite.
    pub diverged_at_step: Option<i64>,
    /// Steps whose update float16's loss scale skipped after a gradient overflowed (null
    /// where the trial scaled no loss): each skipped step still trained the loss shown.
    pub skipped_updates: Option<i64>,
    /// At most about [`MAX_LOSS_POINTS`] points: every k-th step, the last one and the first
    /// non-finite one (where the curve ends), in step order.
    pub points: Vec<LossPoint>,
}

/// One row of the steps table.
struct StepSample {
    worker: i64,
    epoch: i64,
    step: i64,
    loss: Option<f64>,
    wall_s: f64,
    warmup: bool,
}

/// Loss curves for every trial in `records`, from the steps table's rows.
pub(crate) fn trial_losses(records: &[TrialRecord], steps: &[StepRow]) -> Vec<TrialLoss> {
    let mut by_trial: HashMap<&str, Vec<StepSample>> = HashMap::new();
    for row in steps {
        let step = &row.record;
        let wall_s = step.step_time_s + step.data_wait_s + step.h2d_s;
        let sample = StepSample {
            worker: row.worker,
            epoch: step.epoch as i64,
            step: step.step as i64,
            loss: step.loss,
            wall_s,
            warmup: step.warmup,
        };
        by_trial.entry(&row.trial_id).or_default().push(sample);
    }
    records
        .iter()
        .map(|record| {
            let samples = by_trial.remove(record.info.trial_id.as_str()).unwrap_or_default();
            trial_loss(record, samples)
        })
        .collect()
}

fn trial_loss(record: &TrialRecord, samples: Vec<StepSample>) -> TrialLoss {
    let steps_per_epoch = steps_per_epoch(&samples, record.seconds_per_epoch_estimate);
    let worker = samples.iter().filter(|s| s.loss.is_some()).map(|s| s.worker).min();
    let mut series: Vec<(i64, f64)> =
        samples.iter().filter(|s| Some(s.worker) == worker).filter_map(|s| Some((s.step, s.loss?))).collect();
    series.sort_by_key(|(step, _)| *step);
    let diverged = series.iter().position(|(_, loss)| !loss.is_finite());
    let per_epoch = steps_per_epoch.map_or(1.0, |spe| spe.steps().max(1) as f64);
    let points = thin(series.len(), diverged)
        .into_iter()
        .map(|i| LossPoint { epoch: series[i].0 as f64 / per_epoch, loss: series[i].1 })
        .collect();
    TrialLoss {
        trial: record.info.clone(),
        worker,
        steps_per_epoch,
        steps: series.len(),
        first_loss: series.first().map(|(_, loss)| *loss),
        last_loss: series.last().map(|(_, loss)| *loss),
        min_loss: series.iter().map(|(_, loss)| *loss).filter(|loss| loss.is_finite()).reduce(f64::min),
        diverged_at_step: diverged.map(|i| series[i].0),
        skipped_updates: record.skipped_updates,
        points,
    }
}

/// Steps per epoch of a trial from its steps (lead worker = the lowest rank recorded, as the
/// trials row's numbers are the lead's) and its estimate of seconds per epoch.
fn steps_per_epoch(samples: &[StepSample], estimate_s: Option<f64>) -> Option<StepsPerEpoch> {
    let lead = samples.iter().map(|s| s.worker).min()?;
    let lead: Vec<&StepSample> = samples.iter().filter(|s| s.worker == lead).collect();
    let first_epoch = lead.iter().map(|s| s.epoch).min()?;
    let in_first = lead.iter().filter(|s| s.epoch == first_epoch).count() as u64;
    if lead.iter().any(|s| s.epoch > first_epoch) {
        return Some(StepsPerEpoch::Counted(in_first));
    }
    let timed: Vec<f64> = lead.iter().filter(|s| !s.warmup).map(|s| s.wall_s).collect();
    let mean = timed.iter().sum::<f64>() / timed.len() as f64;
    if let Some(estimate) = estimate_s.filter(|e| e.is_finite() && *e > 0.0 && mean.is_finite() && mean > 0.0) {
        // The trainer's own formula inverted; a partial epoch holds no more than a whole one.
        return Some(StepsPerEpoch::FromEstimate(((estimate / mean).round() as u64).max(in_first)));
    }
    Some(StepsPerEpoch::AtLeast(in_first))
}

/// Indices of the points to keep out of `len`: every k-th so at most [`MAX_LOSS_POINTS`]
/// remain, plus the last point and the first non-finite one (`diverged`), in order.
fn thin(len: usize, diverged: Option<usize>) -> Vec<usize> {
    let stride = len.div_ceil(MAX_LOSS_POINTS).max(1);
    let mut keep: Vec<usize> = (0..len).step_by(stride).collect();
    keep.extend(len.checked_sub(1));
    keep.extend(diverged);
    keep.sort_unstable();
    keep.dedup();
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(worker: i64, epoch: i64, step: i64, warmup: bool) -> StepSample {
        StepSample { worker, epoch, step, loss: Some(1.0), wall_s: 0.5, warmup }
    }

    #[test]
    fn thinning_keeps_at_most_the_limit_plus_the_last_and_the_divergence() {
        assert_eq!(thin(5, None), vec![0, 1, 2, 3, 4]);
        let kept = thin(2000, Some(1234));
        assert!(kept.len() <= MAX_LOSS_POINTS + 2, "{}", kept.len());
        assert!(kept.contains(&1234) && kept.contains(&1999) && kept.contains(&0));
        assert!(thin(0, None).is_empty());
    }

    #[test]
    fn steps_per_epoch_is_counted_then_recovered_then_bounded() {
        let two_epochs: Vec<StepSample> = (0..6).map(|s| sample(0, s / 4, s, s < 1)).collect();
        assert_eq!(steps_per_epoch(&two_epochs, None), Some(StepsPerEpoch::Counted(4)));
        let partial: Vec<StepSample> = (0..3).map(|s| sample(0, 0, s, s < 1)).collect();
        // 10 steps of 0.5 s: the estimate is 5 s.
        assert_eq!(steps_per_epoch(&partial, Some(5.0)), Some(StepsPerEpoch::FromEstimate(10)));
        assert_eq!(steps_per_epoch(&partial, None), Some(StepsPerEpoch::AtLeast(3)));
        assert_eq!(steps_per_epoch(&[], Some(5.0)), None);
    }
}
