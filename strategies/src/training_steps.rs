//! The sequential step as the trials time it: a few real training steps of the whole
//! network by one worker (`single`), on the trial's data, threads and optimizer, measured
//! before any trial. The per-stage profile times each stage alone on a fixed input; a
//! training step also holds the loss, the loader's threads beside the compute, and the
//! allocator in its training state, and on this project's 2-core machine the two differed
//! by a third either way (MobileNetV2 at one thread and 64 samples: 1.25 s profiled,
//! 0.93 s trained; the small CNN at two threads: 34 ms profiled, 43 ms trained). Single
//! cells ranked against other strategies are predicted from these steps, time and memory.

use crate::{Budget, NoObserver, TrainConfig, TrainContext, TrainError, TrainReport};

/// Untimed steps first. A fresh worker's first two steps are the slowest (its heap and
/// caches still filling), and a 10th percentile over more steps after them falls among the
/// steady ones: two untimed and six timed steps matched a trial's later steps more closely
/// than five untimed and three timed (`perf-model/VALIDATION.md`).
const WARMUP_STEPS: usize = 2;
/// Timed steps at least, and at most, after the warm-up: their 10th percentile is the
/// statistic trials are compared by, and it falls among a trial's steady steps. Short
/// steps vary most (the small CNN at 64 samples, 40 ms a step, gave 35 and 46 ms as the
/// p10 of five steps in two runs a minute apart), so they are timed until about
/// [`ENOUGH_S`] of them; long ones need few.
const MIN_TIMED_STEPS: usize = 6;
const MAX_TIMED_STEPS: usize = 40;
const ENOUGH_S: f64 = 0.5;

/// One batch's training steps, measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredSteps {
    /// Samples per step.
    pub batch: usize,
    /// The 10th percentile of the timed steps' seconds.
    pub p10_s: f64,
    /// The largest peak of allocated bytes among them (`None` where the allocator cannot
    /// count).
    pub peak_bytes: Option<f64>,
}

/// The training steps of `context`'s network trained by one worker at each of `batches`
/// samples per step, with `context.config`'s threads, optimizer and data (its budget,
/// evaluation and warm-up replaced). A first run of [`MIN_TIMED_STEPS`] tells how long a
/// step takes; steps so short that it timed less than half of [`ENOUGH_S`] are trained
/// again, about that long.
pub fn measure_training_steps(context: &TrainContext<'_>, batches: &[usize]) -> Result<Vec<MeasuredSteps>, TrainError> {
    let mut measured = Vec::with_capacity(batches.len());
    for &batch in batches {
        let first = train_steps(context, batch, MIN_TIMED_STEPS)?;
        let report = match crate::stats::median(&first.timed_step_times()) {
            Some(seconds) if seconds > 0.0 && seconds * (MIN_TIMED_STEPS as f64) < ENOUGH_S / 2.0 => {
                train_steps(context, batch, ((ENOUGH_S / seconds).ceil() as usize).min(MAX_TIMED_STEPS))?
            }
            _ => first,
        };
        if let Some(p10_s) = crate::stats::quantile(&report.timed_step_times(), 0.1) {
            let peak_bytes = report.peak_memory_bytes().map(|bytes| bytes as f64);
            measured.push(MeasuredSteps { batch, p10_s, peak_bytes });
        }
    }
    Ok(measured)
}

/// [`measure_training_steps`] at one batch in three steps instead of eight: two timed after
/// one untimed. Enough to tell apart candidates that differ by a tenth or more (`auto`'s
/// precisions and formats of one network differed by 5-45 % here), and on a network whose
/// step takes seconds the steps are what `auto` costs.
pub fn measure_training_steps_briefly(
    context: &TrainContext<'_>,
    batch: usize,
) -> Result<Option<MeasuredSteps>, TrainError> {
    let report = train_steps_after(context, batch, 1, 2)?;
    let peak_bytes = report.peak_memory_bytes().map(|bytes| bytes as f64);
    Ok(crate::stats::quantile(&report.timed_step_times(), 0.1).map(|p10_s| MeasuredSteps { batch, p10_s, peak_bytes }))
}

/// `timed_steps` steps at `batch` samples after [`WARMUP_STEPS`] untimed ones.
fn train_steps(context: &TrainContext<'_>, batch: usize, timed_steps: usize) -> Result<TrainReport, TrainError> {
    train_steps_after(context, batch, WARMUP_STEPS, timed_steps)
}

/// `timed_steps` steps at `batch` samples after `warmup_steps` untimed ones.
fn train_steps_after(
    context: &TrainContext<'_>,
    batch: usize,
    warmup_steps: usize,
    timed_steps: usize,
) -> Result<TrainReport, TrainError> {
    let config = TrainConfig {
        batch_size: batch,
        budget: Budget { steps: Some(warmup_steps + timed_steps), ..Budget::default() },
        warmup_steps,
        eval_every_steps: None,
        // The end of training evaluates; one batch is the least it can read.
        eval_samples: Some(batch),
        eval_batch_size: batch,
        ..context.config.clone()
    };
    let context = TrainContext {
        network: context.network,
        train: context.train.clone(),
        test: context.test.clone(),
        config: &config,
    };
    crate::single::train(&context, &mut NoObserver)
}
