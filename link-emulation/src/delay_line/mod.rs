//! A userspace delay line between network namespaces, in the manner of mahimahi's delay
//! shell: this kernel has no `sch_netem`, so one-way latency cannot be added with `tc`.
//! Instead each namespace gets a TUN device; every IPv4 packet the kernel routes into one TUN
//! is read here, held for the one-way delay, and written to the TUN that owns its
//! destination address. Bandwidth stays the kernel's job (a tbf qdisc on each TUN).
//!
//! What it costs: two threads per end (a reader and a writer), one `read` and one `write`
//! system call and one heap copy per packet, and a futex wake-up per burst of packets that
//! fall due together. Nothing spins: readers block in `poll`, writers sleep until the next
//! packet's release time with 1 ns timer slack, so idle links cost nothing and the error on
//! the delay is the scheduler's wake-up latency (tens of microseconds). [`DelayLine::cpu_seconds`]
//! reports the CPU time spent so that runs can record what the emulation took from the
//! workers sharing the machine.
//!
//! The TUN devices are not persistent: they vanish when [`DelayLine`] is dropped or the
//! process dies, so nothing is left behind however a run ends.

use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::end::WorkerEnd;

mod error;
mod thread_cpu;
mod tun;

pub use error::DelayLineError;

use thread_cpu::{RecordCpuOnExit, ThreadCpu};
use tun::{check_interface_name, create_tun_in_namespace};

/// Largest packet a read can return: the caller may raise the MTU up to 64 KiB.
const READ_BUFFER_BYTES: usize = 65_536;
/// Packets a reader takes from its TUN before looking at the stop flag again, so that a
/// flood cannot keep it from stopping.
const READS_PER_WAKE: usize = 64;
/// Bytes a destination's queue may hold before new packets to it are dropped, as a router's
/// buffer would: without a bound a sender faster than the writer would grow it without end.
const QUEUE_LIMIT_BYTES: usize = 64 << 20;

/// Traffic seen by a [`DelayLine`] since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DelayLineCounters {
    /// Packets written to their destination TUN.
    pub forwarded_packets: u64,
    /// IP bytes (headers included) of the forwarded packets.
    pub forwarded_bytes: u64,
    /// Packets whose destination address no end owns.
    pub dropped_no_route: u64,
    /// Packets that were not IPv4 (IPv6 neighbour discovery, for one).
    pub dropped_not_ipv4: u64,
    /// Packets dropped because their destination's queue already held 64 MiB.
    pub dropped_queue_full: u64,
    /// Packets the destination TUN refused (it was down, for one).
    pub dropped_write_failed: u64,
}

impl DelayLineCounters {
    /// Packets dropped for any reason.
    pub fn dropped_packets(&self) -> u64 {
        self.dropped_no_route + self.dropped_not_ipv4 + self.dropped_queue_full + self.dropped_write_failed
    }
}

/// Forwards IPv4 packets between TUN devices in several network namespaces, each held for a
/// fixed one-way delay. Dropping it stops its threads and removes the TUN devices.
pub struct DelayLine {
    ends: Vec<Arc<EndState>>,
    shared: Arc<Shared>,
    threads: Vec<WorkerThread>,
    /// CPU time of the short-lived threads that created the TUN devices.
    setup_cpu_ns: u64,
}

/// What every thread of a delay line sees.
struct Shared {
    stopping: AtomicBool,
    /// Made readable once, on stop, to wake every reader out of `poll`.
    stop_event: OwnedFd,
    counters: AtomicCounters,
    /// The first error that ended a thread early, if any.
    first_error: Mutex<Option<String>>,
}

#[derive(Default)]
struct AtomicCounters {
    forwarded_packets: AtomicU64,
    forwarded_bytes: AtomicU64,
    dropped_no_route: AtomicU64,
    dropped_not_ipv4: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_write_failed: AtomicU64,
}

/// One end's TUN device and the queue of packets waiting to be written to it.
struct EndState {
    end: WorkerEnd,
    tun: OwnedFd,
    queue: Mutex<Queue>,
    /// Signalled when a packet lands in an empty queue, and on stop.
    queue_changed: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Packets in release order: the delay is the same for all, so arrival order is release order.
    packets: VecDeque<DelayedPacket>,
    bytes: usize,
    stopping: bool,
}

struct DelayedPacket {
    release_at: Instant,
    bytes: Vec<u8>,
}

/// A running reader or writer, and how to read its CPU time.
struct WorkerThread {
    handle: JoinHandle<()>,
    cpu: Arc<ThreadCpu>,
}

impl DelayLine {
    /// Creates each end's TUN (IFF_TUN | IFF_NO_PI, not persistent: the devices vanish when
    /// the DelayLine is dropped or the process dies, which is what makes cleanup automatic)
    /// inside its namespace and starts forwarding with `one_way` delay.
    ///
    /// The devices are created down and without addresses; the caller configures them
    /// (`ip -n <ns> addr add …`, `ip -n <ns> link set <tun> up`, a tbf qdisc for bandwidth).
    pub fn start(ends: &[WorkerEnd], one_way: Duration) -> Result<DelayLine, DelayLineError> {
        for (index, end) in ends.iter().enumerate() {
            check_interface_name(end)?;
            if let Some(first) = ends[..index].iter().find(|other| other.address == end.address) {
                return Err(DelayLineError::DuplicateAddress {
                    address: end.address,
                    first: format!("{} in {}", first.interface, first.namespace),
                    second: format!("{} in {}", end.interface, end.namespace),
                });
            }
        }

        let mut states = Vec::with_capacity(ends.len());
        let mut setup_cpu_ns = 0;
        for end in ends {
            let (tun, cpu_ns) = create_tun_in_namespace(end)?;
            setup_cpu_ns += cpu_ns;
            states.push(Arc::new(EndState {
                end: end.clone(),
                tun,
                queue: Mutex::new(Queue::default()),
                queue_changed: Condvar::new(),
            }));
        }

        // SAFETY: plain system call; the result is checked before use.
        let stop_event = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if stop_event < 0 {
            return Err(DelayLineError::Start { what: "stop eventfd".into(), source: io::Error::last_os_error() });
        }
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            // SAFETY: a fresh descriptor that nothing else owns.
            stop_event: unsafe { OwnedFd::from_raw_fd(stop_event) },
            counters: AtomicCounters::default(),
            first_error: Mutex::new(None),
        });

        let mut line = DelayLine { ends: states, shared, threads: Vec::new(), setup_cpu_ns };
        // From here on, dropping `line` on an error stops the threads already started.
        let routes: Arc<Vec<(Ipv4Addr, Arc<EndState>)>> =
            Arc::new(line.ends.iter().map(|state| (state.end.address, Arc::clone(state))).collect());
        for state in line.ends.clone() {
            let writer_state = Arc::clone(&state);
            let writer_shared = Arc::clone(&line.shared);
            line.spawn(format!("dl-w-{}", state.end.interface), move || write_loop(&writer_state, &writer_shared))?;
            let reader_shared = Arc::clone(&line.shared);
            let reader_routes = Arc::clone(&routes);
            line.spawn(format!("dl-r-{}", state.end.interface), move || {
                read_loop(&state, &reader_routes, one_way, &reader_shared)
            })?;
        }
        Ok(line)
    }

    /// CPU seconds (user + system) the delay line's threads have used so far, so that a run
    /// can record what the emulation took from the workers sharing the machine.
    pub fn cpu_seconds(&self) -> f64 {
        let threads_ns: u64 = self.threads.iter().map(|thread| thread.cpu.nanoseconds()).sum();
        (threads_ns + self.setup_cpu_ns) as f64 * 1e-9
    }

    /// Packets and bytes forwarded, and packets dropped, since the start.
    pub fn counters(&self) -> DelayLineCounters {
        let counters = &self.shared.counters;
        DelayLineCounters {
            forwarded_packets: counters.forwarded_packets.load(Ordering::Relaxed),
            forwarded_bytes: counters.forwarded_bytes.load(Ordering::Relaxed),
            dropped_no_route: counters.dropped_no_route.load(Ordering::Relaxed),
            dropped_not_ipv4: counters.dropped_not_ipv4.load(Ordering::Relaxed),
            dropped_queue_full: counters.dropped_queue_full.load(Ordering::Relaxed),
            dropped_write_failed: counters.dropped_write_failed.load(Ordering::Relaxed),
        }
    }

    /// The error that stopped one of the threads early, if one did: forwarding through
    /// that end has then stopped, and measurements taken since are not to be trusted.
    pub fn first_error(&self) -> Option<String> {
        self.shared.first_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The ends this delay line serves.
    pub fn ends(&self) -> impl Iterator<Item = &WorkerEnd> {
        self.ends.iter().map(|state| &state.end)
    }

    fn spawn(&mut self, name: String, body: impl FnOnce() + Send + 'static) -> Result<(), DelayLineError> {
        let cpu = ThreadCpu::new();
        let thread_cpu = Arc::clone(&cpu);
        let handle = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let _record = RecordCpuOnExit(thread_cpu);
                body()
            })
            .map_err(|source| DelayLineError::Start { what: format!("thread {name}"), source })?;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: the thread is not joined yet, so its pthread_t is valid.
        if unsafe { libc::pthread_getcpuclockid(handle.as_pthread_t(), &mut clock) } == 0 {
            *cpu.clock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(clock);
        }
        self.threads.push(WorkerThread { handle, cpu });
        Ok(())
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. It is never read, so it
        // stays readable and wakes every reader.
        unsafe { libc::write(self.shared.stop_event.as_raw_fd(), (&one as *const u64).cast(), 8) };
        for state in &self.ends {
            lock(&state.queue).stopping = true;
            state.queue_changed.notify_all();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.handle.join();
        }
        // The TUN descriptors close as the last `Arc<EndState>`s go, with `self.ends`.
    }
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records the error that ends a thread, keeping the first.
fn record_error(shared: &Shared, message: String) {
    let mut first = shared.first_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    first.get_or_insert(message);
}

/// Reads packets from `source`'s TUN, stamps each with its release time and queues it for
/// the end that owns its destination.
fn read_loop(source: &EndState, routes: &[(Ipv4Addr, Arc<EndState>)], one_way: Duration, shared: &Shared) {
    let counters = &shared.counters;
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    let mut poll_fds = [
        libc::pollfd { fd: source.tun.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: shared.stop_event.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    while !shared.stopping.load(Ordering::Relaxed) {
        // SAFETY: two valid pollfd entries that outlive the call.
        if unsafe { libc::poll(poll_fds.as_mut_ptr(), poll_fds.len() as libc::nfds_t, -1) } < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            record_error(shared, format!("poll on {}: {error}", source.end.interface));
            return;
        }
        if poll_fds[1].revents != 0 {
            return;
        }
        if poll_fds[0].revents & (libc::POLLERR | libc::POLLNVAL | libc::POLLHUP) != 0 {
            record_error(shared, format!("{} in {} failed (poll)", source.end.interface, source.end.namespace));
            return;
        }
        for _ in 0..READS_PER_WAKE {
            let length = match read_packet(source.tun.as_raw_fd(), &mut buffer) {
                Ok(Some(length)) => length,
                Ok(None) => break,
                Err(error) => {
                    record_error(
                        shared,
                        format!("read from {} in {}: {error}", source.end.interface, source.end.namespace),
                    );
                    return;
                }
            };
            let release_at = Instant::now() + one_way;
            let packet = &buffer[..length];
            let Some(destination) = ipv4_destination(packet) else {
                counters.dropped_not_ipv4.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let Some((_, target)) = routes.iter().find(|(address, _)| *address == destination) else {
                counters.dropped_no_route.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let mut queue = lock(&target.queue);
            if queue.bytes + length > QUEUE_LIMIT_BYTES {
                counters.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let was_empty = queue.packets.is_empty();
            queue.bytes += length;
            queue.packets.push_back(DelayedPacket { release_at, bytes: packet.to_vec() });
            drop(queue);
            // A writer with packets queued already sleeps until the front one is due, which
            // this later packet does not change; only an idle writer needs waking.
            if was_empty {
                target.queue_changed.notify_one();
            }
        }
    }
}

/// One packet from a non-blocking TUN: `None` when none is waiting.
fn read_packet(fd: RawFd, buffer: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: reads at most `buffer.len()` bytes into `buffer`.
        let read = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        if read >= 0 {
            return Ok(Some(read as usize));
        }
        let error = io::Error::last_os_error();
        match error.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(error),
        }
    }
}

/// The destination of an IPv4 packet; `None` for anything else.
fn ipv4_destination(packet: &[u8]) -> Option<Ipv4Addr> {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return None;
    }
    Some(Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]))
}

/// Writes the packets queued for `target` to its TUN as each falls due.
fn write_loop(target: &EndState, shared: &Shared) {
    // Sleeps end when asked rather than up to the default 50 µs later, which would add to
    // every packet's delay. Best effort: without it the delay is only less exact.
    // SAFETY: plain prctl on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let counters = &shared.counters;
    let mut due = Vec::new();
    let mut queue = lock(&target.queue);
    loop {
        if queue.stopping {
            return;
        }
        let now = Instant::now();
        while queue.packets.front().is_some_and(|packet| packet.release_at <= now) {
            let packet = queue.packets.pop_front().expect("front exists");
            queue.bytes -= packet.bytes.len();
            due.push(packet.bytes);
        }
        if due.is_empty() {
            queue = match queue.packets.front() {
                Some(next) => {
                    let wait = next.release_at - now;
                    target.queue_changed.wait_timeout(queue, wait).unwrap_or_else(|poisoned| poisoned.into_inner()).0
                }
                None => target.queue_changed.wait(queue).unwrap_or_else(|poisoned| poisoned.into_inner()),
            };
            continue;
        }
        // Write without the lock, so the readers can go on queueing.
        drop(queue);
        for packet in due.drain(..) {
            // SAFETY: writes `packet.len()` bytes from `packet`.
            let written = unsafe { libc::write(target.tun.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
            if written == packet.len() as isize {
                counters.forwarded_packets.fetch_add(1, Ordering::Relaxed);
                counters.forwarded_bytes.fetch_add(packet.len() as u64, Ordering::Relaxed);
            } else {
                counters.dropped_write_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        queue = lock(&target.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_destination_reads_bytes_16_to_20_of_an_ipv4_header_only() {
        let mut header = [0u8; 20];
        header[0] = 0x45;
        header[16..20].copy_from_slice(&[10, 232, 0, 2]);
        assert_eq!(ipv4_destination(&header), Some(Ipv4Addr::new(10, 232, 0, 2)));
        header[0] = 0x60;
        assert_eq!(ipv4_destination(&header), None, "IPv6 is not forwarded");
        assert_eq!(ipv4_destination(&[0x45; 19]), None, "too short for an IPv4 header");
    }

    #[test]
    fn start_refuses_overlong_interface_names_and_shared_addresses() {
        let end = |interface: &str, address| WorkerEnd {
            namespace: "stratlab-nowhere".into(),
            interface: interface.into(),
            address,
        };
        let long = DelayLine::start(&[end("sixteen-bytes-xx", Ipv4Addr::new(10, 0, 0, 1))], Duration::ZERO);
        assert!(matches!(long, Err(DelayLineError::InvalidInterfaceName { .. })), "{:?}", long.err());
        let address = Ipv4Addr::new(10, 0, 0, 1);
        let shared = DelayLine::start(&[end("a", address), end("b", address)], Duration::ZERO);
        let message = shared.err().expect("duplicate address refused").to_string();
        assert!(message.contains("10.0.0.1") && message.contains("a in stratlab-nowhere"), "{message}");
    }
}
