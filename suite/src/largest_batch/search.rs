//! The search itself, apart from how a probe is run: from a first guess, double while the
//! batch fits and halve while it does not, then bisect between the largest that fitted and
//! the smallest that did not until they are within a sixteenth of the answer or one step
//! (a micro-batch per pipeline, a sample per worker elsewhere), whichever is larger.
//! Every batch tried is a whole number of steps, and none passes the data set's size.

/// Where a search stands: what it has learned, and what it tries next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSearch {
    step: usize,
    most: usize,
    first: usize,
    largest_fitting: Option<usize>,
    smallest_failing: Option<usize>,
}

impl BatchSearch {
    /// A search over per-worker batches that are multiples of `step`, at most `most`,
    /// starting from `first` (rounded down to a step, and kept within the bounds).
    pub fn new(first: usize, step: usize, most: usize) -> BatchSearch {
        let step = step.max(1);
        let most = (most / step * step).max(step);
        let first = (first / step * step).clamp(step, most);
        BatchSearch { step, most, first, largest_fitting: None, smallest_failing: None }
    }

    /// The batch to try next, or `None` when the search is done.
    pub fn next(&self) -> Option<usize> {
        let down = |batch: usize| (batch / self.step * self.step).max(self.step);
        match (self.largest_fitting, self.smallest_failing) {
            (None, None) => Some(self.first),
            (Some(fitting), None) => (fitting < self.most).then(|| down(fitting.saturating_mul(2)).min(self.most)),
            (None, Some(failing)) => (failing > self.step).then(|| down(failing / 2)),
            (Some(fitting), Some(failing)) => {
                if failing - fitting <= self.resolution(fitting) {
                    return None;
                }
                let middle = down(fitting + (failing - fitting) / 2);
                (middle > fitting && middle < failing).then_some(middle)
            }
        }
    }

    /// Records how a probe at `batch` ended.
    pub fn record(&mut self, batch: usize, fits: bool) {
        if fits {
            self.largest_fitting = Some(self.largest_fitting.map_or(batch, |known| known.max(batch)));
        } else {
            self.smallest_failing = Some(self.smallest_failing.map_or(batch, |known| known.min(batch)));
        }
    }

    /// The largest batch that fitted (the answer once [`Self::next`] is `None`); `None`
    /// while nothing has, and for good when even one step did not.
    pub fn largest(&self) -> Option<usize> {
        self.largest_fitting
    }

    /// How close the bracket must close around an answer near `batch`.
    fn resolution(&self, batch: usize) -> usize {
        stratlab_results::bisection_resolution(batch, self.step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against `fits`, returning the answer and the batches tried.
    fn search(first: usize, step: usize, most: usize, fits: impl Fn(usize) -> bool) -> (Option<usize>, Vec<usize>) {
        let mut search = BatchSearch::new(first, step, most);
        let mut tried = Vec::new();
        while let Some(batch) = search.next() {
            assert!(!tried.contains(&batch), "{batch} tried twice: {tried:?}");
            assert!(tried.len() < 64, "the search does not end: {tried:?}");
            search.record(batch, fits(batch));
            tried.push(batch);
        }
        (search.largest(), tried)
    }

    #[test]
    fn the_answer_fits_and_the_next_step_above_it_within_the_resolution_does_not() {
        for limit in [1, 2, 7, 16, 17, 100, 137, 1000, 4095] {
            for first in [1, 3, 64, 512, 5000] {
                let (largest, tried) = search(first, 1, 10_000, |batch| batch <= limit);
                let largest = largest.unwrap();
                assert!(largest <= limit, "{largest} does not fit under {limit} ({tried:?})");
                assert!(limit - largest <= (largest / 16).max(1), "{largest} is too far under {limit} ({tried:?})");
            }
        }
    }

    #[test]
    fn a_good_first_guess_needs_few_probes() {
        let (largest, tried) = search(120, 1, 10_000, |batch| batch <= 130);
        assert_eq!(tried[..2], [120, 240]);
        assert!(largest.unwrap() >= 123 && tried.len() <= 7, "{largest:?} after {tried:?}");
    }

    #[test]
    fn pipelines_search_in_whole_micro_batches() {
        let (largest, tried) = search(50, 4, 10_000, |batch| batch <= 37);
        assert!(tried.iter().all(|batch| batch % 4 == 0), "{tried:?}");
        assert_eq!(largest, Some(36));
    }

    #[test]
    fn nothing_fits_below_one_step_and_the_data_set_bounds_the_top() {
        let (largest, tried) = search(64, 4, 10_000, |_| false);
        assert_eq!(largest, None);
        assert_eq!(tried.last(), Some(&4));
        let (largest, tried) = search(64, 1, 300, |_| true);
        assert_eq!(largest, Some(300));
        assert_eq!(tried, [64, 128, 256, 300]);
    }
}
