//! How much slower the machine ran during each trial than while the run's profiles were
//! taken, from the runner's fixed reference work timed before each profile and each trial
//! (`speed_reference_s` of predictions and trials). A prediction is calibrated on the
//! machine as its profile found it; a trial measured while a shared host ran 30 % slower
//! says that about the host, not about the model. Runs from before the reference was timed
//! have none.

use std::collections::BTreeMap;

use stratlab_results::stats::median;
use stratlab_results::{PredictionRow, TrialRow};

/// Trials on each side of a trial whose references join its own: one reference varies by
/// about ±10 % from one to the next on a quiet 2-core VM, a slowdown of the host lasts
/// minutes, so the median over five neighbours in run order (about a minute) follows the
/// second without the first.
const NEIGHBOURS: usize = 2;

/// Per trial id: the machine's slowdown during the trial against the profiling, as a
/// fraction (0.2: the reference work took 20 % longer; negative: faster). Empty without
/// references on both sides.
pub(crate) fn trial_slowdowns(predictions: &[PredictionRow], trials: &[TrialRow]) -> BTreeMap<String, f64> {
    // Every cell of a profile carries that profile's reference: one value per profile.
    let profiled: Vec<f64> = predictions.iter().filter_map(|prediction| prediction.speed_reference_s).collect();
    let timed: Vec<(i64, &str, f64)> = trials
        .iter()
        .filter_map(|trial| Some((trial.index, trial.trial_id.as_str(), trial.speed_reference_s?)))
        .collect();
    slowdowns(profiled, timed)
}

/// [`trial_slowdowns`] from the profiles' references and the trials' (index in the run,
/// id, reference).
fn slowdowns(mut profiled: Vec<f64>, mut timed: Vec<(i64, &str, f64)>) -> BTreeMap<String, f64> {
    profiled.sort_by(f64::total_cmp);
    profiled.dedup();
    let Some(profiling) = median(&profiled).filter(|&seconds| seconds > 0.0) else {
        return BTreeMap::new();
    };
    timed.sort_by_key(|&(index, ..)| index);
    (0..timed.len())
        .filter_map(|position| {
            let window = &timed[position.saturating_sub(NEIGHBOURS)..(position + NEIGHBOURS + 1).min(timed.len())];
            let during = median(&window.iter().map(|&(.., seconds)| seconds).collect::<Vec<_>>())?;
            Some((timed[position].1.to_owned(), during / profiling - 1.0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trials(references: &[Option<f64>]) -> Vec<(i64, String, Option<f64>)> {
        references
            .iter()
            .enumerate()
            .map(|(index, &reference)| (index as i64, format!("t{index}"), reference))
            .collect()
    }

    fn of(profiled: &[f64], trials: &[(i64, String, Option<f64>)]) -> BTreeMap<String, f64> {
        let timed = trials.iter().filter_map(|(index, id, reference)| Some((*index, id.as_str(), (*reference)?)));
        slowdowns(profiled.to_vec(), timed.collect())
    }

    #[test]
    fn a_slow_stretch_of_the_run_shows_and_one_slow_reference_does_not() {
        // Two profiles at 8 and 10 ms (their cells repeat the values): the profiling's 9 ms.
        let profiled = [0.008, 0.008, 0.010];
        let mut references = vec![Some(0.009); 12];
        references[2] = Some(0.020); // one reference caught a hiccup
        for reference in &mut references[7..] {
            *reference = Some(0.0117); // the host 30 % slower from the eighth trial on
        }
        references[5] = None; // an infeasible trial never timed it
        let mut listed = trials(&references);
        listed.reverse(); // run order is the index, not the listing
        let slowdowns = of(&profiled, &listed);
        assert!(slowdowns["t2"].abs() < 1e-9, "the hiccup is outvoted: {}", slowdowns["t2"]);
        assert!(slowdowns["t0"].abs() < 1e-9);
        assert!(!slowdowns.contains_key("t5"));
        assert!((slowdowns["t11"] - 0.3).abs() < 1e-9, "{}", slowdowns["t11"]);
        assert!((slowdowns["t9"] - 0.3).abs() < 1e-9);
    }

    #[test]
    fn without_references_on_either_side_nothing_is_said() {
        assert!(of(&[], &trials(&[Some(0.009)])).is_empty());
        assert!(of(&[0.009], &trials(&[None, None])).is_empty());
    }
}
