//! The worker process of a trial (`stratlab worker`, started by the runner): reads its
//! [`WorkerTrial`] as JSON on stdin, trains, and streams [`WorkerEvent`]s as JSON lines on
//! stdout. Running each trial in processes of its own means a crash, abort or hang takes
//! down only that trial, and the runner can kill a whole trial by its process group.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use stratlab_datasets::{Batch, DataError, Dataset, DatasetInfo, Source};
use stratlab_results::Outcome;
use stratlab_strategies::record::{EpochRecord, EvalRecord, StepRecord};
use stratlab_strategies::{device_memory, TrainError, TrainObserver, TrainReport};

use crate::fault::Fault;
use crate::job_step_worker::JobStepRank;
use crate::protocol::{failure_outcome, failure_reason, is_out_of_memory_message, panic_message, WorkerEvent};
use crate::training::{open_data, train, TrainingData};
use crate::trial::WorkerTrial;

/// Runs the worker side of a trial on this process's stdin and stdout. Returns the exit code.
pub fn run_worker() -> i32 {
    let spec: WorkerTrial = match crate::child_process::read_request_or_exit_code("worker", "the trial specification") {
        Ok(spec) => spec,
        Err(code) => return code,
    };
    // torchrun's variables from the runner, or Slurm's in a job step.
    let launch = stratlab_comm::Launch::from_env().ok();
    let (rank, local_rank) = launch.map_or((0, 0), |launch| (launch.rank, launch.local_rank));
    let job_step = spec.job_step_telemetry_ms.map(|interval| JobStepRank::start(&spec, local_rank, interval, emit));
    let fault = Fault::for_trial(&spec.trial_id, rank);
    let mut emitter = Emitter { fault, poisoned: Arc::new(AtomicBool::new(false)) };
    // Panics inside libtorch calls (tch's non-`f_` methods panic on C++ exceptions, an
    // out-of-memory among them) become a `Failed` event rather than a bare exit code.
    std::panic::set_hook(Box::new(|info| eprintln!("stratlab worker: {info}")));
    let outcome = catch_unwind(AssertUnwindSafe(|| run_trial(&spec, &mut emitter)));
    let event = match outcome {
        Ok(Ok(report)) => WorkerEvent::Finished(Box::new(report)),
        Ok(Err(error)) => {
            let message = error.to_string();
            let reason = failure_reason_on(&message, &spec);
            WorkerEvent::Failed {
                // A data set or loader that ran out reports it in its own error type.
                outcome: if error.is_out_of_memory() { Outcome::Oom } else { failure_outcome(&message) },
                detail: (reason != message).then_some(message),
                reason,
            }
        }
        Err(panic) => {
            let message = panic_message(&*panic);
            let reason = failure_reason_on(&message, &spec);
            WorkerEvent::Failed {
                outcome: failure_outcome(&message),
                detail: (reason != message).then(|| format!("panic: {message}")),
                reason: format!("panic: {reason}"),
            }
        }
    };
    if let Some(job_step) = job_step {
        job_step.finish(emit);
    }
    emit(&event);
    0
}

/// One line for a trial's `reason`: where a device's allocator ran out, what it refused (the
/// bytes, the pass, the cap and where the cap came from), else the message's own line.
fn failure_reason_on(message: &str, spec: &WorkerTrial) -> String {
    let refusal = || spec.train.device.resolve().ok().and_then(device_memory::last_refusal);
    match is_out_of_memory_message(message).then(refusal).flatten() {
        Some(refusal) => refusal.reason(),
        None => failure_reason(message),
    }
}

fn run_trial(spec: &WorkerTrial, emitter: &mut Emitter) -> Result<TrainReport, TrainError> {
    // A CPU worker's limit is on its tensor storage, counted from before the data loads.
    if spec.memory_limit_bytes.is_some() && spec.train.device.resolve().ok() == Some(tch::Device::Cpu) {
        stratlab_strategies::memory::limit_cpu_storage(spec.memory_limit_bytes);
    }
    let mut data = open_data(&spec.dataset, spec.train.seed, true)?;
    if emitter.fault == Some(Fault::Nan) {
        data = TrainingData {
            train: Arc::new(PoisonedDataset { inner: data.train, poisoned: emitter.poisoned.clone() }),
            test: data.test,
        };
    }
    train(&spec.strategy, &spec.network, &spec.dataset, &data, &spec.train, emitter)
}

fn emit(event: &WorkerEvent) {
    let line = crate::slurm_step::unambiguous_line(event.to_line());
    let mut stdout = std::io::stdout().lock();
    // A closed pipe means the runner is gone; nothing useful is left to do with the line.
    let _ = writeln!(stdout, "{line}").and_then(|_| stdout.flush());
}

/// Streams training progress and fires the trial's test fault, if any.
struct Emitter {
    fault: Option<Fault>,
    poisoned: Arc<AtomicBool>,
}

impl TrainObserver for Emitter {
    fn on_start(&mut self, steps_per_epoch: usize, total_steps: Option<usize>) {
        emit(&WorkerEvent::Started { steps_per_epoch, total_steps });
    }

    fn on_step(&mut self, step: &StepRecord) {
        emit(&WorkerEvent::Step {
            step: step.step,
            loss: step.loss.unwrap_or(f64::NAN),
            samples: step.samples,
            step_time_s: step.step_time_s,
        });
        if step.step + 1 == Fault::STEP {
            match self.fault {
                Some(Fault::Nan) => self.poisoned.store(true, Ordering::SeqCst),
                Some(fault) => fault.fire(),
                None => {}
            }
        }
    }

    fn on_eval(&mut self, eval: &EvalRecord) {
        emit(&WorkerEvent::Eval(eval.clone()));
    }

    fn on_epoch(&mut self, epoch: &EpochRecord) {
        emit(&WorkerEvent::Epoch(epoch.clone()));
    }
}

/// Test fault `nan`: once poisoned, every training batch is NaN, so the real divergence
/// check of the training loop is what records the outcome.
struct PoisonedDataset {
    inner: Arc<dyn Dataset>,
    poisoned: Arc<AtomicBool>,
}

impl Dataset for PoisonedDataset {
    fn info(&self) -> &'static DatasetInfo {
        self.inner.info()
    }
    fn source(&self) -> Source {
        self.inner.source()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError> {
        let batch = self.inner.batch(indices)?;
        if self.poisoned.load(Ordering::SeqCst) {
            Ok(Batch { images: batch.images.fill(f64::NAN), labels: batch.labels })
        } else {
            Ok(batch)
        }
    }
}
