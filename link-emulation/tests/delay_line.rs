//! The delay line seen from outside: two network namespaces stand in for two machines, a
//! TUN in each, and UDP round trips between them take twice the one-way delay.
//!
//! Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for setns) and iproute2. Where namespaces cannot
//! be made the test fails saying why, unless STRATLAB_SKIP_NETNS is set: a skip is asked
//! for, never assumed.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stratlab_link_emulation::delay_line::{DelayLine, DelayLineError};
use stratlab_link_emulation::WorkerEnd;

const ADDRESSES: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 232, 0, 1), Ipv4Addr::new(10, 232, 0, 2)];
const ECHO_PORT: u16 = 9_000;
const BULK_PORT: u16 = 9_001;
const ROUND_TRIPS: usize = 20;
const BULK_BYTES: usize = 20 << 20;

/// The timing tests run one at a time: on two cores, one test's bulk transfer would show up
/// as delay in the other's round trips.
static TIMING: Mutex<()> = Mutex::new(());

/// Two namespaces, `-a` and `-b`, with loopback up; deleted on drop, whatever happened.
struct Namespaces {
    names: [String; 2],
    /// The TUN interface names to use in each; they carry the same pid and counter.
    interfaces: [String; 2],
}

impl Namespaces {
    /// Names carry this process's id and a counter so concurrent runs never collide.
    fn create() -> Result<Namespaces, String> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let namespaces = Namespaces {
            names: [format!("stratlab-dltest-{pid}-{n}-a"), format!("stratlab-dltest-{pid}-{n}-b")],
            // Interface names have at most 15 bytes.
            interfaces: [format!("sldta{pid}{n}"), format!("sldtb{pid}{n}")],
        };
        for name in &namespaces.names {
            ip(&["netns", "add", name])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
        }
        Ok(namespaces)
    }

    fn ends(&self) -> Vec<WorkerEnd> {
        (0..2)
            .map(|side| WorkerEnd {
                namespace: self.names[side].clone(),
                interface: self.interfaces[side].clone(),
                address: ADDRESSES[side],
            })
            .collect()
    }

    /// Gives each TUN its address in 10.232.0.0/24 and brings it up.
    fn configure_tuns(&self) {
        for ((name, interface), address) in self.names.iter().zip(&self.interfaces).zip(ADDRESSES) {
            ip(&["-n", name, "addr", "add", &format!("{address}/24"), "dev", interface]).unwrap();
            ip(&["-n", name, "link", "set", interface, "up"]).unwrap();
        }
    }

    fn interface_exists(&self, side: usize) -> bool {
        Command::new("ip")
            .args(["-n", &self.names[side], "link", "show", &self.interfaces[side]])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run ip")
            .success()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = ip(&["netns", "delete", name]);
        }
    }
}

/// Runs `ip args`, its stderr as the error.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The namespaces, or `None` when they cannot be made and STRATLAB_SKIP_NETNS asks to skip;
/// otherwise failing to make them fails the test.
fn namespaces_or_skip() -> Option<Namespaces> {
    stratlab_link_emulation::testing::or_skip(Namespaces::create())
}

/// Runs `body` on a thread that has entered network namespace `name` (setns moves only the
/// calling thread).
fn in_namespace<T: Send + 'static>(name: &str, body: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let file = File::open(format!("/run/netns/{name}")).expect("namespace file");
    std::thread::spawn(move || {
        // SAFETY: a valid namespace descriptor; affects only this thread.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
        body()
    })
}

/// Echoes UDP datagrams on side b until `stop` is set; returns once the socket is bound.
fn start_echo_server(namespaces: &Namespaces, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let (bound, is_bound) = mpsc::channel();
    let server = in_namespace(&namespaces.names[1], move || {
        let socket = UdpSocket::bind((ADDRESSES[1], ECHO_PORT)).expect("bind the echo server");
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        bound.send(()).unwrap();
        let mut buffer = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((length, peer)) = socket.recv_from(&mut buffer) {
                socket.send_to(&buffer[..length], peer).expect("echo");
            }
        }
    });
    is_bound.recv_timeout(Duration::from_secs(5)).expect("the echo server binds");
    server
}

/// Median of `ROUND_TRIPS` UDP round trips from side a to the echo server on side b.
fn median_round_trip(namespaces: &Namespaces) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let server = start_echo_server(namespaces, Arc::clone(&stop));
    let client = in_namespace(&namespaces.names[0], || {
        let socket = UdpSocket::bind((ADDRESSES[0], 0)).expect("bind the client");
        socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let server = SocketAddr::from((ADDRESSES[1], ECHO_PORT));
        let mut buffer = [0u8; 2048];
        let mut round_trips = Vec::new();
        // Two untimed trips first, so first-packet costs (route caches, page faults) are not measured.
        for sequence in 0..ROUND_TRIPS as u32 + 2 {
            let sent_at = Instant::now();
            socket.send_to(&sequence.to_be_bytes(), server).expect("send");
            let (length, _) = socket.recv_from(&mut buffer).unwrap_or_else(|e| panic!("echo {sequence}: {e}"));
            let elapsed = sent_at.elapsed();
            assert_eq!(&buffer[..length], &sequence.to_be_bytes(), "the echo of datagram {sequence}");
            if sequence >= 2 {
                round_trips.push(elapsed);
            }
        }
        round_trips
    });
    let round_trips = client.join();
    stop.store(true, Ordering::Relaxed);
    server.join().expect("echo server");
    let mut round_trips = round_trips.expect("client");
    round_trips.sort();
    eprintln!("round trips: min {:?}, max {:?}", round_trips[0], round_trips[round_trips.len() - 1]);
    round_trips[round_trips.len() / 2]
}

/// Sends `BULK_BYTES` over TCP from side a to side b; returns the seconds it took.
fn bulk_transfer(namespaces: &Namespaces) -> f64 {
    let (listening, is_listening) = mpsc::channel();
    let receiver = in_namespace(&namespaces.names[1], move || {
        let listener = TcpListener::bind((ADDRESSES[1], BULK_PORT)).expect("listen");
        listening.send(()).unwrap();
        let (mut stream, _) = listener.accept().expect("accept");
        let mut received = 0;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match stream.read(&mut buffer).expect("receive") {
                0 => return received,
                length => received += length,
            }
        }
    });
    is_listening.recv_timeout(Duration::from_secs(5)).expect("the receiver listens");
    let started = Instant::now();
    let sender = in_namespace(&namespaces.names[0], || {
        let mut stream = TcpStream::connect((ADDRESSES[1], BULK_PORT)).expect("connect");
        let chunk = vec![7u8; 1 << 16];
        for _ in 0..BULK_BYTES / chunk.len() {
            stream.write_all(&chunk).expect("send");
        }
    });
    sender.join().expect("sender");
    assert_eq!(receiver.join().expect("receiver"), BULK_BYTES);
    started.elapsed().as_secs_f64()
}

/// Measures the round trip and what forwarding costs at `one_way`, checks the devices go
/// with the delay line, and returns the median round trip.
fn round_trip_through_delay_line(one_way: Duration) -> Option<Duration> {
    let _one_at_a_time = TIMING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let namespaces = namespaces_or_skip()?;
    let line = DelayLine::start(&namespaces.ends(), one_way).expect("the delay line starts");
    namespaces.configure_tuns();

    let median = median_round_trip(&namespaces);
    let after_pings = line.counters();
    assert!(
        after_pings.forwarded_packets >= 2 * ROUND_TRIPS as u64,
        "each round trip crosses the delay line twice: {after_pings:?}"
    );
    assert!(after_pings.forwarded_bytes >= 2 * ROUND_TRIPS as u64 * 32, "{after_pings:?}");
    assert_eq!(after_pings.dropped_no_route, 0, "{after_pings:?}");

    let cpu_before = line.cpu_seconds();
    let seconds = bulk_transfer(&namespaces);
    let cpu_used = line.cpu_seconds() - cpu_before;
    let counters = line.counters();
    let bytes = counters.forwarded_bytes - after_pings.forwarded_bytes;
    assert!(bytes >= BULK_BYTES as u64, "the bulk transfer crossed the delay line: {counters:?}");
    eprintln!(
        "one-way {one_way:?}: median round trip {median:?}; {} MB over TCP in {seconds:.3} s ({:.0} Mbit/s), \
         delay line CPU {cpu_used:.3} s ({:.2} CPU s per GB, {:.2} µs per packet); {counters:?}",
        BULK_BYTES >> 20,
        BULK_BYTES as f64 * 8.0 / seconds / 1e6,
        cpu_used / (bytes as f64 / 1e9),
        cpu_used * 1e6 / (counters.forwarded_packets - after_pings.forwarded_packets) as f64,
    );
    assert!(line.first_error().is_none(), "{:?}", line.first_error());

    let dropped_at = Instant::now();
    drop(line);
    assert!(dropped_at.elapsed() < Duration::from_secs(1), "drop took {:?}", dropped_at.elapsed());
    for side in 0..2 {
        assert!(!namespaces.interface_exists(side), "{} outlived the delay line", namespaces.interfaces[side]);
    }
    Some(median)
}

#[test]
fn a_five_ms_one_way_delay_makes_a_ten_ms_round_trip_and_leaves_no_device_behind() {
    let Some(median) = round_trip_through_delay_line(Duration::from_millis(5)) else { return };
    let (low, high) = (Duration::from_millis(10), Duration::from_millis(12) + Duration::from_millis(1));
    assert!(low <= median && median <= high, "median round trip {median:?} outside [{low:?}, {high:?}]");
}

#[test]
fn no_delay_forwards_a_round_trip_within_two_milliseconds() {
    let Some(median) = round_trip_through_delay_line(Duration::ZERO) else { return };
    assert!(median < Duration::from_millis(2), "median round trip {median:?}");
}

#[test]
fn an_unknown_namespace_is_an_error_naming_it() {
    let namespace = format!("stratlab-dltest-{}-missing", std::process::id());
    let end = WorkerEnd { namespace: namespace.clone(), interface: "sldtmissing".into(), address: ADDRESSES[0] };
    let error = DelayLine::start(&[end], Duration::ZERO).err().expect("no such namespace");
    assert!(matches!(error, DelayLineError::OpenNamespace { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("/run/netns/{namespace}")) && message.contains("No such file"),
        "the error names the namespace and the OS error: {message}"
    );
}
