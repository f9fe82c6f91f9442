//! `stratlab probe`: what the links between ranks can do, measured before any training so
//! strategy results can be read against it. Point-to-point latency and bandwidth for every
//! pair of ranks (ping-pong), and all-reduce time against message size, as
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

use std::process::ExitCode;

use anyhow::Context;
use stratlab_comm::{GroupOptions, Launch, ProcessGroup};
use stratlab_results::RunStore;

use crate::cli::ProbeArgs;
use crate::exit::InputError;

mod local;
mod measurement;
mod output;
mod plan;

use local::run_local;
use measurement::measure;
use output::{print_tables, probe_rows};
use plan::{check_world_size, ProbePlan, BACKEND};

/// Runs `stratlab probe`: as one rank when the launch variables are set, otherwise as the
/// launcher of `--workers` local ranks.
pub fn probe(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let plan = ProbePlan::from_args(args)?;
    if Launch::is_launched(|name| std::env::var(name).ok()) {
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
    let hosts = rank_hosts(&group).context("gathering every rank's host name")?;
    let measurements = measure(&group, plan, is_reporter)?;
    if !is_reporter {
        return Ok(ExitCode::SUCCESS);
    }
    let fingerprint = crate::fingerprint::collect(None);
    let store = RunStore::create_probe(&args.store, &fingerprint)?;
    let link = args.link.and_then(|link| link.emulated().copied());
    let rows = probe_rows(store.run_id(), &hosts, &measurements, link)?;
    store.write_probes(&rows)?;
    print_tables(&rows, launch.world_size, plan);
    println!("probe run: {}", store.run_dir().display());
    Ok(ExitCode::SUCCESS)
}

/// Bytes a host name takes in the gather (longer names are cut; DNS allows 253).
const HOST_NAME_BYTES: usize = 256;

/// Every rank's host name, by rank: which pairs cross between nodes.
fn rank_hosts(group: &ProcessGroup) -> anyhow::Result<Vec<String>> {
    let name = crate::fingerprint::host_name().unwrap_or_else(|| "unknown".to_owned());
    let mut bytes = [0u8; HOST_NAME_BYTES];
    let cut = name.len().min(HOST_NAME_BYTES);
    bytes[..cut].copy_from_slice(&name.as_bytes()[..cut]);
    let mine = tch::Tensor::from_slice(&bytes);
    let mut all: Vec<tch::Tensor> = (0..group.world_size()).map(|_| mine.zeros_like()).collect();
    group.all_gather(&mut all, &mine)?;
    all.iter().map(|gathered| Ok(host_of(&Vec::<u8>::try_from(gathered)?))).collect()
}

/// A gathered host name: its bytes up to the first NUL.
fn host_of(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&byte| byte == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser;

    use std::ffi::OsString;

    use stratlab_results::ProbeKind;

    use super::local::rank_args;
    use super::plan::{Collective, Measurement};
    use super::*;
    use crate::cli::{AllReduceLoad, Cli, Command as CliCommand};

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
            link: None,
            all_reduce: vec![AllReduceLoad::Loaded, AllReduceLoad::Idle],
            gather_scatter: false,
        }
    }

    #[test]
    fn plans_reject_sizes_that_are_not_whole_floats_and_empty_lists() {
        assert!(ProbePlan::from_args(&args(vec![])).unwrap_err().0.contains("empty"));
        assert!(ProbePlan::from_args(&args(vec![4, 6])).unwrap_err().0.contains("6 bytes"));
        assert!(ProbePlan::from_args(&args(vec![0])).is_err());
        let zero_repeats = ProbeArgs { repeats: 0, ..args(vec![4]) };
        assert!(ProbePlan::from_args(&zero_repeats).unwrap_err().0.contains("--repeats"));
        assert_eq!(ProbePlan::from_args(&args(vec![4, 1 << 20])).unwrap().sizes, vec![4, 1 << 20]);
        let no_all_reduce = ProbeArgs { all_reduce: Vec::new(), ..args(vec![4]) };
        assert!(ProbePlan::from_args(&no_all_reduce).unwrap_err().0.contains("--all-reduce"));
        let plan = ProbePlan::from_args(&args(vec![4])).unwrap();
        assert_eq!(plan.all_reduce, [AllReduceLoad::Idle, AllReduceLoad::Loaded], "idle first, each once");
        assert_eq!(plan.collectives, [Collective::AllReduce]);
        let sharded = ProbePlan::from_args(&ProbeArgs { gather_scatter: true, ..args(vec![4]) }).unwrap();
        assert_eq!(sharded.collectives, [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter]);
        // A gather's buffer splits into one float32 chunk per rank: 4 bytes over 3 ranks
        // is timed as 12; an all-reduce takes any multiple of 4.
        assert_eq!(Collective::AllGather.message_bytes(4, 3), 12);
        assert_eq!(Collective::ReduceScatter.message_bytes(1 << 20, 2), 1 << 20);
        assert_eq!(Collective::AllReduce.message_bytes(4, 3), 4);
        assert_eq!(Collective::ReduceScatter.kind(AllReduceLoad::Loaded), ProbeKind::ReduceScatterLoaded);
    }

    #[test]
    fn local_ranks_are_given_the_same_probe() {
        let given = ProbeArgs {
            warmup: 2,
            repeats: 7,
            timeout_s: 30,
            all_reduce: vec![AllReduceLoad::Loaded],
            gather_scatter: true,
            ..args(vec![4, 1 << 20])
        };
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
    fn gathered_host_names_end_at_their_first_nul() {
        assert_eq!(host_of(b"node1\0\0\0"), "node1");
        assert_eq!(host_of(b"full"), "full");
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
        // Ranks 0 and 1 on node1, 2 and 3 on node2.
        let hosts: Vec<String> = ["node1", "node1", "node2", "node2"].map(String::from).to_vec();
        let rows = probe_rows("r", &hosts, &measurements, None).unwrap();
        assert_eq!((rows[0].src, rows[0].dst, rows[0].kind.name()), (Some(1), Some(0), "p2p"));
        assert_eq!(
            (rows[0].src_host.as_deref(), rows[0].dst_host.as_deref(), rows[0].hosts),
            (Some("node1"), Some("node1"), Some(2))
        );
        assert_eq!((rows[1].src_host.as_deref(), rows[1].hosts), (None, Some(2)), "a collective spans every host");
        let across = Measurement { src: Some(1), dst: Some(2), ..measurements[0].clone() };
        let table = output::kind_table(&probe_rows("r", &hosts, &[across], None).unwrap(), ProbeKind::P2p).to_string();
        assert!(table.contains("1→2 (node1→node2)"), "{table}");
        let within = output::kind_table(&rows, ProbeKind::P2p).to_string();
        assert!(within.contains("1→0 (within node1)"), "{within}");
        // 1e6 bytes in a 2 ms median: 0.5 GB/s, the same on the bus for p2p.
        assert!((rows[0].algorithm_gbps - 0.5).abs() < 1e-12 && rows[0].bus_gbps == rows[0].algorithm_gbps);
        // All-reduce over 4 ranks: 1 GB/s × 2·3/4.
        assert!((rows[1].bus_gbps - 1.5).abs() < 1e-12, "{}", rows[1].bus_gbps);
    }
}
