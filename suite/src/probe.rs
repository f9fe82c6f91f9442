//! `stratlab probe`: what the links between ranks can do, measured before any training so
//! strategy results can be read against it. Point-to-point latency and bandwidth for every
//! ordered pair of ranks (ping-pong), and all-reduce time against message size, as
//! algorithm and bus bandwidth (nccl-tests' definitions), stored as a probe run.
//!
//! One measurement, two ways to start it:
//! - launched: `RANK`/`WORLD_SIZE` are set (torchrun, `srun`, the network-namespace test),
//!   so this process is one rank of a group that may span machines;
//! - local: no `RANK`, so this process starts `--workers` copies of itself as the ranks of a
//!   group on 127.0.0.1, waits for them, and fails, stopping the rest, as soon as one fails
//!   or the time limit passes.
//!
//! Rank 0 writes the rows and prints the tables.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_comm::{free_port, Backend, CommError, GroupOptions, Launch, ProcessGroup, ReduceOp};
use stratlab_results::{ProbeKind, ProbeRow, ProbeSpec, RunStore};
use tch::{Device, Kind, Tensor};

use crate::cli::ProbeArgs;
use crate::commands::InputError;

/// The default `--sizes`: powers of 4 from one float32 (4 B) to 64 MiB, 1 MiB among them.
pub const DEFAULT_SIZES: &str = "4,16,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M";

/// Bytes per element of the probe's buffers (float32, as gradients are all-reduced).
const ELEMENT_BYTES: u64 = 4;
/// The backend the probe measures: Gloo, on the CPU tensors this lab trains with.
const BACKEND: Backend = Backend::Gloo;
/// Tags that keep a pair's ping and pong apart.
const PING_TAG: u32 = 1;
const PONG_TAG: u32 = 2;

/// Runs `stratlab probe`: as one rank when the launch variables are set, otherwise as the
/// launcher of `--workers` local ranks.
pub fn probe(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let plan = ProbePlan::from_args(args)?;
    if std::env::var_os("RANK").is_some() || std::env::var_os("WORLD_SIZE").is_some() {
        let launch = Launch::from_env().context("reading the launch variables (RANK, WORLD_SIZE, …)")?;
        check_world_size(launch.world_size, "WORLD_SIZE")?;
        if let Some(workers) = args.workers.filter(|&workers| workers != launch.world_size) {
            return Err(InputError(format!(
                "--workers {workers} disagrees with WORLD_SIZE={} set by the launcher; leave --workers out \
                 when a launcher starts the ranks",
                launch.world_size
            ))
            .into());
        }
        let (rank, world_size) = (launch.rank, launch.world_size);
        run_rank(args, &plan, &launch).with_context(|| format!("rank {rank} of {world_size}"))
    } else {
        let workers = args.workers.unwrap_or(2);
        check_world_size(workers, "--workers")?;
        run_local(args, workers)
    }
}

/// Parses a message size: bytes, or with a binary suffix `K`, `M`, `G` (`KiB`, `MiB`, `GiB`
/// too), so `64M` is 64 MiB.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("empty size; give sizes like {DEFAULT_SIZES}"));
    }
    let digits_end = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(digits_end);
    let number: u64 = number.parse().map_err(|_| format!("`{text}` is not a size (bytes, or with K, M, G)"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "ki" | "kib" => 10,
        "m" | "mi" | "mib" => 20,
        "g" | "gi" | "gib" => 30,
        _ => return Err(format!("`{text}` has an unknown unit `{suffix}` (K, M, G are binary: 1K = 1024 bytes)")),
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("`{text}` is too large"))
}

/// `64 MiB`, `256 KiB`, `4 B`: a size as the tables show it.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale && bytes % scale == 0 {
            return format!("{} {unit}", bytes / scale);
        }
    }
    match UNITS.iter().find(|(_, scale)| bytes >= *scale) {
        Some((unit, scale)) => format!("{:.1} {unit}", bytes as f64 / *scale as f64),
        None => format!("{bytes} B"),
    }
}

/// A probe needs two ranks: with one there is no pair to time and no traffic to all-reduce.
fn check_world_size(world_size: usize, source: &str) -> Result<(), InputError> {
    match world_size {
        0 => Err(InputError(format!("{source} must be at least 2, got 0"))),
        1 => Err(InputError(format!(
            "{source} is 1: with a single rank there is nothing to measure (no pair of ranks, no traffic); \
             probe at least 2 ranks"
        ))),
        _ => Ok(()),
    }
}

/// What every rank measures, checked once before anything starts.
#[derive(Debug, Clone, PartialEq)]
struct ProbePlan {
    /// Message sizes, bytes, in the order given.
    sizes: Vec<u64>,
    /// Untimed iterations before the timed ones, per pair (or all-reduce) and size.
    warmup: usize,
    /// Timed iterations per pair (or all-reduce) and size.
    repeats: usize,
    /// How long a rank waits for its peers (rendezvous, each operation).
    timeout: Duration,
}

impl ProbePlan {
    fn from_args(args: &ProbeArgs) -> Result<ProbePlan, InputError> {
        if args.sizes.is_empty() {
            return Err(InputError(format!("--sizes is empty; give sizes like {DEFAULT_SIZES}")));
        }
        if let Some(bad) = args.sizes.iter().find(|&&bytes| bytes == 0 || bytes % ELEMENT_BYTES != 0) {
            return Err(InputError(format!(
                "--sizes: {bad} bytes is not a positive multiple of {ELEMENT_BYTES} (the buffers are float32)"
            )));
        }
        if args.repeats == 0 {
            return Err(InputError("--repeats must be at least 1".into()));
        }
        if args.timeout_s == 0 || args.time_limit_s == 0 {
            return Err(InputError("--timeout and --time-limit must be at least 1 second".into()));
        }
        if args.threads == Some(0) {
            return Err(InputError("--threads must be at least 1".into()));
        }
        Ok(ProbePlan {
            sizes: args.sizes.clone(),
            warmup: args.warmup,
            repeats: args.repeats,
            timeout: Duration::from_secs(args.timeout_s),
        })
    }
}

/// The timed repeats of one probe: a p2p pair (`src` → `dst`) or the all-reduce, one size.
#[derive(Debug, Clone, PartialEq)]
struct Measurement {
    kind: ProbeKind,
    src: Option<usize>,
    dst: Option<usize>,
    bytes: u64,
    /// One entry per timed repeat: one-way time of a p2p transfer, or the slowest rank's
    /// time of an all-reduce.
    times_s: Vec<f64>,
}

/// This process as one rank: join the group, measure, and (rank 0) store and print.
fn run_rank(args: &ProbeArgs, plan: &ProbePlan, launch: &Launch) -> anyhow::Result<ExitCode> {
    if let Some(threads) = args.threads {
        tch::set_num_threads(threads as i32);
    }
    let is_reporter = launch.rank == 0;
    if is_reporter {
        // Fail before the peers wait on us, not after minutes of measuring.
        std::fs::create_dir_all(&args.store)
            .with_context(|| format!("creating the store folder {}", args.store.display()))?;
    }
    let options = GroupOptions::for_launch(launch, BACKEND, plan.timeout);
    let group = ProcessGroup::init(launch, &options).with_context(|| {
        let via = options.interface.as_deref().map(|name| format!(" via {name}")).unwrap_or_default();
        format!("joining the group at {}:{}{via}", launch.master_addr, launch.master_port)
    })?;
    let measurements = measure(&group, plan, is_reporter)?;
    if !is_reporter {
        return Ok(ExitCode::SUCCESS);
    }
    let fingerprint = crate::fingerprint::collect(None);
    let store = RunStore::create_probe(&args.store, &fingerprint)?;
    let rows = probe_rows(store.run_id(), launch.world_size, &measurements)?;
    store.write_probes(&rows)?;
    print_tables(&rows, launch.world_size, plan);
    println!("probe run: {}", store.run_dir().display());
    Ok(ExitCode::SUCCESS)
}

/// Every ordered pair's ping-pong, then the all-reduce, at every size. Every rank takes part
/// in every step (barriers, sharing the times) and returns the same measurements.
fn measure(group: &ProcessGroup, plan: &ProbePlan, report_progress: bool) -> anyhow::Result<Vec<Measurement>> {
    let world_size = group.world_size();
    let pairs: Vec<(usize, usize)> = (0..world_size)
        .flat_map(|src| (0..world_size).filter(move |&dst| dst != src).map(move |dst| (src, dst)))
        .collect();
    let mut measurements = Vec::with_capacity((pairs.len() + 1) * plan.sizes.len());
    for &(src, dst) in &pairs {
        if report_progress {
            eprintln!("probe: p2p {src}→{dst}, {} sizes", plan.sizes.len());
        }
        for &bytes in &plan.sizes {
            let times_s = ping_pong(group, src, dst, bytes, plan)
                .with_context(|| format!("p2p {src}→{dst} of {}", format_size(bytes)))?;
            measurements.push(Measurement { kind: ProbeKind::P2p, src: Some(src), dst: Some(dst), bytes, times_s });
        }
    }
    if report_progress {
        eprintln!("probe: all-reduce over {world_size} ranks, {} sizes", plan.sizes.len());
    }
    for &bytes in &plan.sizes {
        let times_s =
            all_reduce(group, bytes, plan).with_context(|| format!("all-reduce of {}", format_size(bytes)))?;
        measurements.push(Measurement { kind: ProbeKind::AllReduce, src: None, dst: None, bytes, times_s });
    }
    Ok(measurements)
}

/// `src` sends `bytes` to `dst`, which sends them back; half the round trip is one transfer.
/// Each iteration starts from a barrier of all ranks; the others wait it out.
fn ping_pong(
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
        group.barrier()?;
        if rank == src {
            let started = Instant::now();
            // Posted first, so the pong lands as soon as it arrives.
            let receiving = group.recv_async(&mut pong, dst, PONG_TAG)?;
            group.send(&ping, dst, PING_TAG)?;
            receiving.wait()?;
            let one_way_s = started.elapsed().as_secs_f64() / 2.0;
            if let Some(slot) = iteration.checked_sub(plan.warmup) {
                times_s[slot] = one_way_s;
            }
        } else if rank == dst {
            group.recv(&mut pong, src, PING_TAG)?;
            group.send(&pong, src, PONG_TAG)?;
        }
    }
    // Only `src` timed; the others hold zeros, so the maximum is its times, on every rank.
    share_max(group, &times_s)
}

/// All ranks all-reduce (sum) `bytes` of float32; each iteration's time is the slowest
/// rank's, the time of the collective.
fn all_reduce(group: &ProcessGroup, bytes: u64, plan: &ProbePlan) -> Result<Vec<f64>, CommError> {
    // Zeros stay zeros under a sum, so repeated reductions never overflow.
    let mut buffer = float_buffer(bytes);
    let mut times_s = vec![0.0; plan.repeats];
    for iteration in 0..plan.warmup + plan.repeats {
        group.barrier()?;
        let started = Instant::now();
        group.all_reduce(&mut buffer, ReduceOp::Sum)?;
        let elapsed_s = started.elapsed().as_secs_f64();
        if let Some(slot) = iteration.checked_sub(plan.warmup) {
            times_s[slot] = elapsed_s;
        }
    }
    share_max(group, &times_s)
}

/// The element-wise maximum of every rank's `times_s`, on every rank.
fn share_max(group: &ProcessGroup, times_s: &[f64]) -> Result<Vec<f64>, CommError> {
    let mut shared = Tensor::from_slice(times_s);
    group.all_reduce(&mut shared, ReduceOp::Max)?;
    Ok(Vec::<f64>::try_from(&shared).expect("a 1-D float64 tensor converts to Vec<f64>"))
}

fn float_buffer(bytes: u64) -> Tensor {
    Tensor::zeros([(bytes / ELEMENT_BYTES) as i64], (Kind::Float, Device::Cpu))
}

/// The stored rows of `measurements`.
fn probe_rows(run_id: &str, world_size: usize, measurements: &[Measurement]) -> anyhow::Result<Vec<ProbeRow>> {
    let world_size = u32::try_from(world_size).context("world size")?;
    measurements
        .iter()
        .map(|m| {
            let spec = ProbeSpec {
                run_id: run_id.to_owned(),
                kind: m.kind,
                backend: BACKEND.name().to_owned(),
                world_size,
                src: m.src.map(|rank| rank as u32),
                dst: m.dst.map(|rank| rank as u32),
                bytes: m.bytes,
            };
            ProbeRow::from_times(spec, &m.times_s).map_err(anyhow::Error::from)
        })
        .collect()
}

/// Prints one table per kind: size, median/min/max time, algorithm and bus bandwidth.
fn print_tables(rows: &[ProbeRow], world_size: usize, plan: &ProbePlan) {
    let repeats = format!("{} repeats after {} warm-up", plan.repeats, plan.warmup);
    println!(
        "point-to-point, {} over {world_size} ranks: ping-pong, one-way time = round trip / 2; {repeats}",
        BACKEND.name()
    );
    println!("{}", kind_table(rows, ProbeKind::P2p));
    println!(
        "all-reduce (sum, float32), {} over {world_size} ranks: each repeat's time is the slowest rank's; \
         busbw = algbw × 2(W−1)/W; {repeats}",
        BACKEND.name()
    );
    println!("{}", kind_table(rows, ProbeKind::AllReduce));
}

fn kind_table(rows: &[ProbeRow], kind: ProbeKind) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let p2p = kind == ProbeKind::P2p;
    let mut header = vec!["size", "median", "min", "max", "algbw GB/s", "busbw GB/s"];
    if p2p {
        header.insert(0, "pair");
    }
    table.set_header(header.clone());
    for row in rows.iter().filter(|row| row.kind == kind.name()) {
        let mut cells = vec![
            format_size(row.bytes),
            format_duration(row.median_s),
            format_duration(row.min_s),
            format_duration(row.max_s),
            format_gbps(row.algorithm_gbps),
            format_gbps(row.bus_gbps),
        ];
        if p2p {
            let rank = |rank: Option<u32>| rank.map_or("?".to_owned(), |rank| rank.to_string());
            cells.insert(0, format!("{}→{}", rank(row.src), rank(row.dst)));
        }
        table.add_row(cells);
    }
    for column in usize::from(p2p)..header.len() {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// `12.3 µs`, `4.56 ms`, `1.23 s`.
fn format_duration(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// Three significant digits, without switching to scientific notation.
fn format_gbps(gbps: f64) -> String {
    if gbps >= 100.0 {
        format!("{gbps:.0}")
    } else if gbps >= 10.0 {
        format!("{gbps:.1}")
    } else if gbps >= 1.0 {
        format!("{gbps:.2}")
    } else if gbps >= 0.001 {
        format!("{gbps:.3}")
    } else {
        format!("{gbps:.2e}")
    }
}

/// Starts `workers` ranks of this binary on 127.0.0.1, each with its share of the cores,
/// and waits for all of them.
fn run_local(args: &ProbeArgs, workers: usize) -> anyhow::Result<ExitCode> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = args.threads.unwrap_or((cores / workers).max(1));
    let addr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let port = free_port(addr).context("finding a free port for the rendezvous store")?;
    let exe = std::env::current_exe().context("locating the stratlab executable")?;
    eprintln!("probe: starting {workers} ranks on {addr}:{port}, {threads} libtorch thread(s) each");
    let mut ranks = LocalRanks { children: Vec::with_capacity(workers) };
    for rank in 0..workers {
        let mut command = Command::new(&exe);
        command.args(rank_args(args, threads)).envs(Launch::local_env(rank, workers, addr, port));
        // SAFETY: only async-signal-safe calls (setpgid, prctl) run between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // A group of its own, so stopping a rank stops whatever it started; and it
                // dies with this launcher instead of waiting out its peers' timeout.
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().with_context(|| format!("starting rank {rank} of {workers}"))?;
        ranks.children.push(Some(child));
    }
    ranks.wait_all(Duration::from_secs(args.time_limit_s))?;
    Ok(ExitCode::SUCCESS)
}

/// The command line of a local rank: the same probe, with the launch variables in its
/// environment instead of `--workers`.
fn rank_args(args: &ProbeArgs, threads: usize) -> Vec<OsString> {
    let sizes: Vec<String> = args.sizes.iter().map(u64::to_string).collect();
    let mut command: Vec<OsString> = [
        "probe".to_owned(),
        "--repeats".to_owned(),
        args.repeats.to_string(),
        "--warmup".to_owned(),
        args.warmup.to_string(),
        "--sizes".to_owned(),
        sizes.join(","),
        "--timeout".to_owned(),
        args.timeout_s.to_string(),
        "--threads".to_owned(),
        threads.to_string(),
        "--store".to_owned(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    command.push(args.store.clone().into_os_string());
    command
}

/// The local ranks; any still running when this is dropped (an error, a panic) are killed.
struct LocalRanks {
    /// `None` once the rank has exited and been reaped.
    children: Vec<Option<Child>>,
}

impl LocalRanks {
    /// Waits until every rank has exited successfully. The first rank to fail, or the time
    /// limit, stops all the others and is the error.
    fn wait_all(&mut self, time_limit: Duration) -> anyhow::Result<()> {
        let workers = self.children.len();
        let deadline = Instant::now() + time_limit;
        loop {
            let mut failed = None;
            for (rank, slot) in self.children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                if let Some(status) = child.try_wait().with_context(|| format!("waiting for rank {rank}"))? {
                    *slot = None;
                    if !status.success() {
                        failed = Some((rank, status));
                        break;
                    }
                }
            }
            if let Some((rank, status)) = failed {
                self.kill_all();
                bail!(
                    "rank {rank} of {workers} failed ({}; its error is above); stopped the other ranks",
                    describe_status(status)
                );
            }
            if self.children.iter().all(Option::is_none) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let running: Vec<String> = self
                    .children
                    .iter()
                    .enumerate()
                    .filter(|(_, slot)| slot.is_some())
                    .map(|(rank, _)| rank.to_string())
                    .collect();
                self.kill_all();
                bail!(
                    "the probe did not finish within --time-limit {} s (ranks {} still running); stopped them \
                     (fewer --sizes or --repeats, or a longer --time-limit)",
                    time_limit.as_secs(),
                    running.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill_all(&mut self) {
        for mut child in self.children.iter_mut().filter_map(Option::take) {
            // SAFETY: killpg has no memory-safety preconditions; the group id is the child's
            // pid (it called setpgid(0, 0)).
            unsafe {
                libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}

impl Drop for LocalRanks {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command as CliCommand};

    fn args(sizes: Vec<u64>) -> ProbeArgs {
        ProbeArgs {
            workers: None,
            repeats: 20,
            warmup: 5,
            sizes,
            store: PathBuf::from("runs"),
            timeout_s: 120,
            time_limit_s: 900,
            threads: None,
        }
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("4"), Ok(4));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("").unwrap_err().contains("empty"));
        assert!(parse_size("1.5M").unwrap_err().contains("unknown unit"));
        assert!(parse_size("M").unwrap_err().contains("not a size"));
    }

    #[test]
    fn default_sizes_are_powers_of_four_from_4_bytes_to_64_mib() {
        let sizes: Vec<u64> = DEFAULT_SIZES.split(',').map(|s| parse_size(s).unwrap()).collect();
        assert_eq!(sizes, (1..=13).map(|power| 4u64.pow(power)).collect::<Vec<_>>());
        assert!(sizes.contains(&(1 << 20)) && sizes.contains(&(64 << 20)));
    }

    #[test]
    fn sizes_are_shown_in_binary_units() {
        assert_eq!(format_size(4), "4 B");
        assert_eq!(format_size(1 << 20), "1 MiB");
        assert_eq!(format_size(64 << 20), "64 MiB");
        assert_eq!(format_size(1536), "1.5 KiB");
    }

    #[test]
    fn plans_reject_sizes_that_are_not_whole_floats_and_empty_lists() {
        assert!(ProbePlan::from_args(&args(vec![])).unwrap_err().0.contains("empty"));
        assert!(ProbePlan::from_args(&args(vec![4, 6])).unwrap_err().0.contains("6 bytes"));
        assert!(ProbePlan::from_args(&args(vec![0])).is_err());
        let zero_repeats = ProbeArgs { repeats: 0, ..args(vec![4]) };
        assert!(ProbePlan::from_args(&zero_repeats).unwrap_err().0.contains("--repeats"));
        assert_eq!(ProbePlan::from_args(&args(vec![4, 1 << 20])).unwrap().sizes, vec![4, 1 << 20]);
    }

    #[test]
    fn local_ranks_are_given_the_same_probe() {
        let given = ProbeArgs { warmup: 2, repeats: 7, timeout_s: 30, ..args(vec![4, 1 << 20]) };
        let mut argv = vec![OsString::from("stratlab")];
        argv.extend(rank_args(&given, 3));
        let CliCommand::Probe(parsed) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("rank_args must parse as `stratlab probe`")
        };
        assert_eq!(ProbePlan::from_args(&parsed).unwrap(), ProbePlan::from_args(&given).unwrap());
        assert_eq!((parsed.threads, parsed.workers, &parsed.store), (Some(3), None, &given.store));
    }

    #[test]
    fn one_rank_has_nothing_to_measure_and_zero_is_an_error() {
        assert!(check_world_size(1, "--workers").unwrap_err().0.contains("nothing to measure"));
        assert!(check_world_size(0, "--workers").unwrap_err().0.contains("at least 2"));
        assert!(check_world_size(2, "--workers").is_ok());
    }

    #[test]
    fn rows_carry_pairs_and_bus_bandwidth() {
        let measurements = vec![
            Measurement {
                kind: ProbeKind::P2p,
                src: Some(1),
                dst: Some(0),
                bytes: 1_000_000,
                times_s: vec![1e-3, 2e-3, 3e-3],
            },
            Measurement { kind: ProbeKind::AllReduce, src: None, dst: None, bytes: 1_000_000, times_s: vec![1e-3] },
        ];
        let rows = probe_rows("r", 4, &measurements).unwrap();
        assert_eq!((rows[0].src, rows[0].dst, rows[0].kind.as_str()), (Some(1), Some(0), "p2p"));
        // 1e6 bytes in a 2 ms median: 0.5 GB/s, the same on the bus for p2p.
        assert!((rows[0].algorithm_gbps - 0.5).abs() < 1e-12 && rows[0].bus_gbps == rows[0].algorithm_gbps);
        // All-reduce over 4 ranks: 1 GB/s × 2·3/4.
        assert!((rows[1].bus_gbps - 1.5).abs() < 1e-12, "{}", rows[1].bus_gbps);
    }
}
