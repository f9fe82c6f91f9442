//! The measurements: ping-pong between every pair, then each collective (the all-reduce;
//! all-gather and reduce-scatter where asked) per size, each iteration after a barrier, its
//! time the slowest rank's; idle, and with every libtorch thread's core kept busy, as a
//! training step's buckets find them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context;
use stratlab_comm::{CommError, ProcessGroup, ReduceOp};
use stratlab_results::ProbeKind;
use tch::{Device, Kind, Tensor};

use super::plan::{Collective, Measurement, ProbePlan, ELEMENT_BYTES};
use crate::cli::AllReduceLoad;
use stratlab_units::ByteSize;

/// Tags that keep a pair's ping and pong apart.
const PING_TAG: u32 = 1;
const PONG_TAG: u32 = 2;

/// Every pair's ping-pong, then the all-reduces the plan asks for, at every size. Every rank
/// takes part in every step (barriers, sharing the times) and returns the same measurements.
///
/// One ping-pong per pair, the lower rank pinging: a round trip crosses the link both ways
/// whoever starts it, so the pair's other order timed the same two transfers again (and
/// took a quarter of an emulated link's probe: 2.3 of 8.8 s at 1 Gbit/s).
pub(super) fn measure(
    group: &ProcessGroup,
    plan: &ProbePlan,
    report_progress: bool,
) -> anyhow::Result<Vec<Measurement>> {
    let world_size = group.world_size();
    let pairs: Vec<(usize, usize)> =
        (0..world_size).flat_map(|src| (src + 1..world_size).map(move |dst| (src, dst))).collect();
    let mut measurements = Vec::with_capacity((pairs.len() + 1) * plan.sizes.len());
    for &(src, dst) in &pairs {
        if report_progress {
            eprintln!("probe: p2p {src}→{dst}, {} sizes", plan.sizes.len());
        }
        for &bytes in &plan.sizes {
            let times_s = ping_pong(group, src, dst, bytes, plan)
                .with_context(|| format!("p2p {src}→{dst} of {}", ByteSize(bytes).approximate()))?;
            measurements.push(Measurement { kind: ProbeKind::P2p, src: Some(src), dst: Some(dst), bytes, times_s });
        }
    }
    let busy_threads = tch::get_num_threads().max(1) as usize;
    for &load in &plan.all_reduce {
        let busy = match load {
            AllReduceLoad::Idle => 0,
            AllReduceLoad::Loaded => busy_threads,
        };
        for &collective in &plan.collectives {
            let kind = collective.kind(load);
            if report_progress {
                eprintln!(
                    "probe: {kind} over {world_size} ranks, {} sizes in {} rounds, {busy} busy thread(s) per rank",
                    plan.sizes.len(),
                    ALL_REDUCE_ROUNDS.min(plan.repeats)
                );
            }
            let per_size = interleaved(group, plan, collective, busy).with_context(|| format!("{kind}"))?;
            for (&bytes, times_s) in plan.sizes.iter().zip(per_size) {
                let bytes = collective.message_bytes(bytes, world_size);
                measurements.push(Measurement { kind, src: None, dst: None, bytes, times_s });
            }
        }
    }
    Ok(measurements)
}

/// Rounds the all-reduce's repeats are split into, every size measured in each. On this
/// project's 2-core VM a small all-reduce takes 0.15–0.4 ms or 2–10 ms depending on how the
/// scheduler happens to treat Gloo's threads, and the regime holds for seconds: four probes
/// in a row, each timing 20 consecutive repeats per size, gave a loaded 1 MiB all-reduce a
/// mean of 1.7, 2.2, 10.6 and 3.4 ms. Consecutive repeats sample one regime; rounds over
/// all sizes, each with its own busy threads, spread the regimes over every size.
const ALL_REDUCE_ROUNDS: usize = 4;

/// Every size's times of `collective`, `plan.repeats` per size, taken in
/// [`ALL_REDUCE_ROUNDS`] rounds over all sizes (the warm-up in the first), with `load`
/// busy threads per rank started afresh each round.
fn interleaved(
    group: &ProcessGroup,
    plan: &ProbePlan,
    collective: Collective,
    load: usize,
) -> anyhow::Result<Vec<Vec<f64>>> {
    let rounds = ALL_REDUCE_ROUNDS.min(plan.repeats).max(1);
    let mut per_size: Vec<Vec<f64>> = vec![Vec::with_capacity(plan.repeats); plan.sizes.len()];
    for round in 0..rounds {
        // The repeats split as evenly as they go: 20 in 4 rounds of 5, 10 in 3, 3, 2, 2.
        let repeats = plan.repeats / rounds + usize::from(round < plan.repeats % rounds);
        let warmup = if round == 0 { plan.warmup } else { 0 };
        let busy = CoreLoad::start(load);
        for (&bytes, times_s) in plan.sizes.iter().zip(&mut per_size) {
            let bytes = collective.message_bytes(bytes, group.world_size());
            let taken = time_collective(group, collective, bytes, warmup, repeats)
                .with_context(|| format!("{} (round {})", ByteSize(bytes).approximate(), round + 1))?;
            times_s.extend(taken);
        }
        drop(busy);
    }
    Ok(per_size)
}

/// Threads that keep cores busy, as a worker's compute threads do, until dropped.
struct CoreLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl CoreLoad {
    fn start(threads: usize) -> CoreLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        CoreLoad { stop, threads }
    }
}

impl Drop for CoreLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `src` sends `bytes` to `dst`, which sends them back; half the round trip is one transfer.
/// Each iteration starts from a barrier of all ranks; the others wait it out.
///
/// Both receives are posted before the barrier. Gloo sends by rendezvous: the data leaves
/// only once the peer's "receive posted" notice has arrived, so a receive posted after the
/// barrier would put that notice's trip into the round trip whenever it lands after the
/// send, one link latency more in some iterations and not others. Posted before the
/// barrier, the notices travel ahead of the barrier's own messages on the same connection,
/// and the round trip is the two transfers alone.
pub(super) fn ping_pong(
    group: &ProcessGroup,
    src: usize,
    dst: usize,
    bytes: u64,
    plan: &ProbePlan,
) -> Result<Vec<f64>, CommError> {
    let ping = float_buffer(bytes);
    let mut pong = float_buffer(bytes);
    let rank = group.rank();
    let mut times_s = vec![0.0; plan.repeats];
    for iteration in 0..plan.warmup + plan.repeats {
        let receiving = if rank == src {
            Some(group.recv_async(&mut pong, dst, PONG_TAG)?)
        } else if rank == dst {
            Some(group.recv_async(&mut pong, src, PING_TAG)?)
        } else {
            None
        };
        group.barrier()?;
        let Some(receiving) = receiving else { continue };
        if rank == src {
            let started = Instant::now();
            group.send(&ping, dst, PING_TAG)?;
            receiving.wait()?;
            let one_way_s = started.elapsed().as_secs_f64() / 2.0;
            if let Some(slot) = iteration.checked_sub(plan.warmup) {
                times_s[slot] = one_way_s;
            }
        } else {
            receiving.wait()?;
            group.send(&pong, src, PONG_TAG)?;
        }
    }
    // Only `src` timed; the others hold zeros, so the maximum is its times, on every rank.
    share_max(group, &times_s)
}

/// All ranks run `collective` (a sum) over `bytes` of float32 (the all-reduced, gathered or
/// scattered buffer), `warmup` untimed times and `repeats` timed; each iteration's time is
/// the slowest rank's, the time of the collective.
fn time_collective(
    group: &ProcessGroup,
    collective: Collective,
    bytes: u64,
    warmup: usize,
    repeats: usize,
) -> Result<Vec<f64>, CommError> {
    // Zeros stay zeros under a sum, so repeated reductions never overflow.
    let mut whole = float_buffer(bytes);
    let mut chunk = float_buffer(bytes / group.world_size().max(1) as u64);
    let mut times_s = vec![0.0; repeats];
    for iteration in 0..warmup + repeats {
        group.barrier()?;
        let started = Instant::now();
        match collective {
            Collective::AllReduce => group.all_reduce(&mut whole, ReduceOp::Sum)?,
            Collective::AllGather => drop(group.all_gather_into_async(&mut whole, &chunk)?.wait()?),
            Collective::ReduceScatter => drop(group.reduce_scatter_async(&mut chunk, &whole, ReduceOp::Sum)?.wait()?),
        }
        let elapsed_s = started.elapsed().as_secs_f64();
        if let Some(slot) = iteration.checked_sub(warmup) {
            times_s[slot] = elapsed_s;
        }
    }
    share_max(group, &times_s)
}

/// The element-wise maximum of every rank's `times_s`, on every rank.
pub(super) fn share_max(group: &ProcessGroup, times_s: &[f64]) -> Result<Vec<f64>, CommError> {
    let mut shared = Tensor::from_slice(times_s);
    group.all_reduce(&mut shared, ReduceOp::Max)?;
    Ok(Vec::<f64>::try_from(&shared).expect("a 1-D float64 tensor converts to Vec<f64>"))
}

pub(super) fn float_buffer(bytes: u64) -> Tensor {
    Tensor::zeros([(bytes / ELEMENT_BYTES) as i64], (Kind::Float, Device::Cpu))
}
