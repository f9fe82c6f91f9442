//! Runs a sampler on its own thread for the length of a trial.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stratlab_results::Sample;

use super::Sampler;

/// Samples on a background thread so the training loop never waits for `/proc` or NVML.
///
/// Ticks fall every `interval` after [`TelemetryRecorder::start`] (the first one an interval
/// in, so a `/proc` sampler built just before has a full interval to measure), plus one
/// final tick at [`TelemetryRecorder::stop`], so even a trial shorter than the interval
/// gets a reading. Each sample's `t_s` is stamped with the seconds since `start`.
#[derive(Debug)]
pub struct TelemetryRecorder {
    /// Dropping or sending on it tells the thread to take its last tick and finish.
    stop: Sender<()>,
    /// The sampling thread; it returns every sample it took.
    thread: Option<JoinHandle<Vec<Sample>>>,
}

impl TelemetryRecorder {
    /// The interval the runner samples at unless told otherwise: fine enough for epochs of a
    /// few seconds, coarse enough to cost well under 1 % of a core.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

    /// Starts sampling `sampler` every `interval` (a zero interval is raised to 1 ms).
    pub fn start(sampler: Box<dyn Sampler>, interval: Duration) -> TelemetryRecorder {
        let interval = interval.max(Duration::from_millis(1));
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name(format!("telemetry-{}", sampler.name())).spawn(move || {
            let mut sampler = sampler;
            let started = Instant::now();
            let mut samples = Vec::new();
            let mut next_tick = started + interval;
            loop {
                let wait = next_tick.saturating_duration_since(Instant::now());
                let last = !matches!(stopped.recv_timeout(wait), Err(RecvTimeoutError::Timeout));
                let t_s = started.elapsed().as_secs_f64();
                for mut sample in sampler.sample() {
                    sample.t_s = t_s;
                    samples.push(sample);
                }
                if last {
                    return samples;
                }
                // Keep the cadence even when a tick ran late; skip ticks rather than burst.
                next_tick += interval;
                let now = Instant::now();
                if next_tick < now {
                    next_tick = now + interval;
                }
            }
        });
        match thread {
            Ok(thread) => TelemetryRecorder { stop, thread: Some(thread) },
            Err(error) => {
                // Out of threads: the trial still runs, just without telemetry.
                eprintln!("warning: telemetry thread did not start: {error}");
                TelemetryRecorder { stop, thread: None }
            }
        }
    }

    /// Takes a final tick, stops the thread and returns all samples in time order.
    pub fn stop(mut self) -> Vec<Sample> {
        let _ = self.stop.send(());
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(samples)) => samples,
            Some(Err(_)) => {
                eprintln!("warning: the telemetry sampler panicked; this trial has no telemetry");
                Vec::new()
            }
            None => Vec::new(),
        }
    }
}

impl Drop for TelemetryRecorder {
    fn drop(&mut self) {
        // A recorder dropped without `stop` (the trial errored) must not leave its thread
        // sampling for the rest of the run.
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports a fixed reading and counts its calls, so timing is tested without devices.
    struct Constant;
    impl Sampler for Constant {
        fn name(&self) -> &str {
            "constant"
        }
        fn sample(&mut self) -> Vec<Sample> {
            vec![Sample {
                t_s: 0.0,
                device: "gpu0".into(),
                device_id: Some("00000000:3B:00.0".into()),
                utilization_pct: 50.0,
                memory_used_bytes: 1 << 20,
                process_memory_bytes: Some(1 << 19),
                power_w: Some(100.0),
                energy_counter_mj: Some(1_000),
                sm_clock_mhz: Some(1500),
            }]
        }
    }

    #[test]
    fn recorder_ticks_at_the_interval_and_stamps_time() {
        let recorder = TelemetryRecorder::start(Box::new(Constant), Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(210));
        let samples = recorder.stop();
        // About 10 ticks plus the final one; allow scheduling slack either way.
        assert!((6..=13).contains(&samples.len()), "{} samples", samples.len());
        assert!(samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
        assert!(samples[0].t_s >= 0.015, "first tick at {}", samples[0].t_s);
        assert!(samples.last().map_or(0.0, |s| s.t_s) >= 0.2);
    }

    #[test]
    fn stop_right_away_still_gives_one_sample() {
        let recorder = TelemetryRecorder::start(Box::new(Constant), TelemetryRecorder::DEFAULT_INTERVAL);
        let samples = recorder.stop();
        assert_eq!(samples.len(), 1);
        assert!(samples[0].t_s < 0.05);
    }
}
