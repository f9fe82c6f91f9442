//! What one call into c10d costs, apart from moving bytes: the per-collective overhead a
//! training step pays for every bucket it all-reduces.
//!
//! - `monotonic_ns`: one read of the timeline clock through the shim (the floor: an FFI call
//!   that does nothing else).
//! - `world1`: a 4-byte float all-reduce on a Gloo group of one rank, blocking and as
//!   launch + wait. Nothing crosses a socket, so this is the shim, c10d's dispatch, Gloo's
//!   work queue and the completion callback: the fixed cost of crossing into c10d.
//! - `world2_threads`: the same all-reduce between two ranks (threads of this process) over
//!   loopback TCP: the smallest real collective's latency on this machine.
//!
//! Device: CPU (Gloo), named in every benchmark id. Run with `cargo bench -p stratlab-comm`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::Criterion;
use stratlab_comm::{free_port, monotonic_ns, Backend, GroupOptions, Launch, ProcessGroup, ReduceOp};
use tch::{Device, Kind, Tensor};

fn options() -> GroupOptions {
    GroupOptions {
        backend: Backend::Gloo,
        timeout: Duration::from_secs(60),
        gloo_threads: 1,
        interface: None,
        hostname: Some(Ipv4Addr::LOCALHOST.to_string()),
    }
}

fn launch(rank: usize, world_size: usize, port: u16) -> Launch {
    Launch { rank, world_size, local_rank: rank, master_addr: Ipv4Addr::LOCALHOST.to_string(), master_port: port }
}

/// One float32: 4 bytes, so the time is all overhead.
fn four_bytes() -> Tensor {
    Tensor::zeros([1], (Kind::Float, Device::Cpu))
}

/// Rank 1 of a two-rank loopback group, on a thread: for every count received, it runs that
/// many all-reduces (matching rank 0's timed loop); it ends when the sender is dropped.
struct Peer {
    iterations: mpsc::Sender<u64>,
    thread: JoinHandle<()>,
}

impl Peer {
    fn start(port: u16) -> Peer {
        let (iterations, counts) = mpsc::channel::<u64>();
        let thread = std::thread::spawn(move || {
            let group = ProcessGroup::init(&launch(1, 2, port), &options()).expect("rank 1 rendezvous");
            let mut tensor = four_bytes();
            for count in counts {
                for _ in 0..count {
                    group.all_reduce(&mut tensor, ReduceOp::Sum).expect("rank 1 all-reduce");
                }
            }
        });
        Peer { iterations, thread }
    }

    fn stop(self) {
        drop(self.iterations);
        self.thread.join().expect("rank 1 thread");
    }
}

fn main() {
    tch::set_num_threads(1);
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();

    let mut group = criterion.benchmark_group("c10d_overhead_cpu_gloo");
    group.bench_function("monotonic_ns", |bencher| bencher.iter(|| black_box(monotonic_ns())));

    let port = free_port(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("free port");
    let single = ProcessGroup::init(&launch(0, 1, port), &options()).expect("world-size-1 group");
    let mut tensor = four_bytes();
    group.bench_function("world1/all_reduce_4B_blocking", |bencher| {
        bencher.iter(|| single.all_reduce(&mut tensor, ReduceOp::Sum).expect("all-reduce"))
    });
    group.bench_function("world1/all_reduce_4B_async_launch_wait", |bencher| {
        bencher.iter(|| {
            let work = single.all_reduce_async(&mut tensor, ReduceOp::Sum).expect("launch");
            black_box(work.wait().expect("wait"))
        })
    });
    drop(single);

    let port = free_port(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("free port");
    let peer = Peer::start(port);
    let pair = ProcessGroup::init(&launch(0, 2, port), &options()).expect("rank 0 rendezvous");
    let mut tensor = four_bytes();
    group.bench_function("world2_threads/all_reduce_4B_blocking", |bencher| {
        bencher.iter_custom(|iters| {
            peer.iterations.send(iters).expect("rank 1 is running");
            let started = Instant::now();
            for _ in 0..iters {
                pair.all_reduce(&mut tensor, ReduceOp::Sum).expect("rank 0 all-reduce");
            }
            started.elapsed()
        })
    });
    group.finish();
    peer.stop();
    drop(pair);
    criterion.final_summary();
}
