//! What the telemetry recorder costs a training step.
//!
//! A fixed single-threaded matrix-product workload (sized to ~5 ms, like a small training
//! step) is timed with no recorder and with a `ProcSampler` recorder sampling this very
//! process every 100 ms. Both times and their ratio are printed; a ratio near 1.00 means
//! sampling is free at the default interval. A third benchmark times one sampler tick, the
//! work the recorder's thread does every interval.

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use stratlab_telemetry::{ProcSampler, Sampler, TelemetryRecorder};

/// Side of the square matrices the stand-in step multiplies.
const N: usize = 128;

/// A stand-in for one training step on one core: `reps` chained N×N matrix products in
/// plain Rust (the crate stays libtorch-free; what is measured is the recorder's thread
/// taking cycles from a busy core, not the kernel).
struct Workload {
    a: Vec<f32>,
    b: Vec<f32>,
    reps: usize,
}

impl Workload {
    /// Picks `reps` so one step takes about `target` on this machine.
    fn sized_to(target: Duration) -> Workload {
        let a = (0..N * N).map(|i| ((i * 7919) % 97) as f32 / 97.0).collect();
        let b = (0..N * N).map(|i| ((i * 104_729) % 89) as f32 / (89.0 * N as f32)).collect();
        let mut workload = Workload { a, b, reps: 1 };
        workload.step(); // warm caches
        let started = Instant::now();
        for _ in 0..20 {
            workload.step();
        }
        let one = started.elapsed().as_secs_f64() / 20.0;
        workload.reps = ((target.as_secs_f64() / one).round() as usize).max(1);
        workload
    }

    fn step(&self) {
        let mut x = self.a.clone();
        let mut out = vec![0.0f32; N * N];
        for _ in 0..self.reps {
            out.fill(0.0);
            for i in 0..N {
                for k in 0..N {
                    let x_ik = x[i * N + k];
                    let (row, b_row) = (&mut out[i * N..(i + 1) * N], &self.b[k * N..(k + 1) * N]);
                    for (o, b) in row.iter_mut().zip(b_row) {
                        *o += x_ik * b;
                    }
                }
            }
            std::mem::swap(&mut x, &mut out);
        }
        black_box(x[0]);
    }
}

/// Times `iters` steps and adds them to the running totals.
fn timed(workload: &Workload, iters: u64, total: &Cell<(Duration, u64)>) -> Duration {
    let started = Instant::now();
    for _ in 0..iters {
        workload.step();
    }
    let elapsed = started.elapsed();
    let (sum, count) = total.get();
    total.set((sum + elapsed, count + iters));
    elapsed
}

fn main() {
    let workload = Workload::sized_to(Duration::from_millis(5));
    let mut criterion =
        Criterion::default().sample_size(30).measurement_time(Duration::from_secs(8)).configure_from_args();
    let without = Cell::new((Duration::ZERO, 0));
    let with = Cell::new((Duration::ZERO, 0));

    let mut group = criterion.benchmark_group(format!("training_step_cpu_matmul_x{}", workload.reps));
    group.bench_function("no_recorder", |bencher| bencher.iter_custom(|iters| timed(&workload, iters, &without)));
    let recorder =
        TelemetryRecorder::start(Box::new(ProcSampler::new(std::process::id())), TelemetryRecorder::DEFAULT_INTERVAL);
    group.bench_function("proc_recorder_100ms", |bencher| bencher.iter_custom(|iters| timed(&workload, iters, &with)));
    let samples = recorder.stop();
    // The cost of one tick itself (walking /proc), which the recorder pays every interval
    // on its own thread: tick time / interval is the share of one core sampling takes.
    let mut sampler = ProcSampler::new(std::process::id());
    group.bench_function("proc_sampler_tick", |bencher| bencher.iter(|| black_box(sampler.sample())));
    group.finish();
    criterion.final_summary();

    let mean = |cell: &Cell<(Duration, u64)>| {
        let (sum, count) = cell.get();
        sum.as_secs_f64() / count.max(1) as f64
    };
    let (base_s, sampled_s) = (mean(&without), mean(&with));
    if base_s > 0.0 && sampled_s > 0.0 {
        println!(
            "telemetry overhead: step {:.3} ms without recorder, {:.3} ms with ProcSampler at 100 ms \
             ({} samples); ratio {:.4}",
            base_s * 1e3,
            sampled_s * 1e3,
            samples.len(),
            sampled_s / base_s
        );
    }
}
