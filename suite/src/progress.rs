//! Terminal progress with indicatif: a bar for the matrix (trials done, ETA, the cell now
//! running, counts per outcome) and one for the running trial (steps, samples/s, loss).
//! indicatif hides the bars when stderr is not a terminal, so logs of CI runs stay clean.

use std::cell::RefCell;
use std::collections::BTreeMap;

use std::time::Instant;
use stratlab_results::Outcome;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use stratlab_strategies::record::{EpochRecord, EvalRecord, StepRecord};
use stratlab_strategies::TrainObserver;

use crate::protocol::WorkerEvent;

/// Progress of one training run: steps, samples/s and loss.
pub struct TrainProgress {
    bar: ProgressBar,
    samples: usize,
    started: Instant,
}

impl TrainProgress {
    /// A bar drawn under `multi` (or on its own).
    pub fn new(multi: Option<&MultiProgress>) -> Self {
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("  trial [{bar:30.green/white}] {pos}/{len} steps  {msg}  ETA {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        let bar = match multi {
            Some(multi) => multi.add(bar),
            None => bar,
        };
        TrainProgress { bar, samples: 0, started: Instant::now() }
    }

    fn reset(&mut self, total_steps: Option<usize>, steps_per_epoch: usize) {
        self.bar.set_length(total_steps.unwrap_or(steps_per_epoch) as u64);
        self.bar.set_position(0);
        self.samples = 0;
        self.started = Instant::now();
    }

    fn step(&mut self, step: usize, loss: f64, samples: usize) {
        self.samples += samples;
        let rate = self.samples as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        if step as u64 >= self.bar.length().unwrap_or(0) {
            self.bar.set_length(step as u64 + 1);
        }
        self.bar.set_position(step as u64 + 1);
        self.bar.set_message(format!("{rate:>8.0} samples/s  loss {loss:.4}"));
    }

    fn eval(&self, eval: &EvalRecord) {
        self.println(format!(
            "  eval after step {}: test accuracy {:.4}, loss {:.4}",
            eval.after_step, eval.accuracy, eval.loss
        ));
    }

    /// A line above the bar, or on stderr when the bar is hidden (not a terminal), so logs
    /// keep the per-epoch lines.
    fn println(&self, line: String) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl TrainObserver for TrainProgress {
    fn on_start(&mut self, steps_per_epoch: usize, total_steps: Option<usize>) {
        self.reset(total_steps, steps_per_epoch);
    }
    fn on_step(&mut self, step: &StepRecord) {
        // The training loop reads every step's loss back before reporting it.
        self.step(step.step, step.loss.unwrap_or(f64::NAN), step.samples);
    }
    fn on_eval(&mut self, eval: &EvalRecord) {
        self.eval(eval);
    }
    fn on_epoch(&mut self, epoch: &EpochRecord) {
        self.println(format!(
            "  epoch {}: {:.1} s, {:.0} samples/s, train loss {:.4}, test accuracy {:.4}",
            epoch.epoch,
            epoch.epoch_time_s,
            epoch.wall_samples_per_s.unwrap_or(f64::NAN),
            epoch.train_loss.unwrap_or(f64::NAN),
            epoch.test_accuracy.unwrap_or(f64::NAN)
        ));
    }
}

/// Progress of a whole matrix, with the running trial's bar beneath.
pub struct MatrixProgress {
    multi: MultiProgress,
    matrix: ProgressBar,
    trial: RefCell<TrainProgress>,
    counts: RefCell<BTreeMap<Outcome, usize>>,
    current: RefCell<String>,
}

impl MatrixProgress {
    /// Bars for `total` trials of which `done` are already finished (a resumed run).
    pub fn new(total: usize, done: usize) -> Self {
        let multi = MultiProgress::new();
        let matrix = multi.add(
            ProgressBar::new(total as u64).with_style(
                ProgressStyle::with_template("matrix [{bar:30.cyan/blue}] {pos}/{len} trials  ETA {eta}  {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            ),
        );
        matrix.set_position(done as u64);
        let trial = RefCell::new(TrainProgress::new(Some(&multi)));
        MatrixProgress {
            multi,
            matrix,
            trial,
            counts: RefCell::new(BTreeMap::new()),
            current: RefCell::new(String::new()),
        }
    }

    fn refresh(&self) {
        let counts = self.counts.borrow();
        let counts: Vec<String> = counts.iter().map(|(outcome, n)| format!("{outcome} {n}")).collect();
        self.matrix.set_message(format!("[{}]  now: {}", counts.join(", "), self.current.borrow()));
    }

    /// A trial starts.
    pub fn start_trial(&self, label: &str) {
        *self.current.borrow_mut() = label.to_string();
        self.trial.borrow_mut().reset(None, 0);
        self.refresh();
    }

    /// An event from the running trial's lead worker.
    pub fn worker_event(&self, event: &WorkerEvent) {
        let mut trial = self.trial.borrow_mut();
        match event {
            WorkerEvent::Started { steps_per_epoch, total_steps } => trial.reset(*total_steps, *steps_per_epoch),
            WorkerEvent::Step { step, loss, samples, .. } => trial.step(*step, *loss, *samples),
            _ => {}
        }
    }

    /// A trial ended with `outcome`; failures are printed above the bars with their reason.
    pub fn finish_trial(&self, outcome: Outcome, reason: Option<&str>) {
        *self.counts.borrow_mut().entry(outcome).or_insert(0) += 1;
        let outcome = outcome.name();
        let line = match reason {
            Some(reason) => format!("{outcome:>10}  {}  ({reason})", self.current.borrow()),
            None => format!("{outcome:>10}  {}", self.current.borrow()),
        };
        self.multi.suspend(|| eprintln!("{line}"));
        self.matrix.inc(1);
        self.refresh();
    }

    /// Removes the bars.
    pub fn finish(&self) {
        self.trial.borrow().finish();
        self.matrix.finish_and_clear();
    }
}
