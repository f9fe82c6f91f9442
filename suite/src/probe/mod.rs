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

mod local;
mod measurement;
mod output;

use local::*;
use measurement::*;
use output::*;

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
