//! The command line, declared with clap's derive API: the commands here, their option
//! groups and values in `args.rs`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use stratlab_strategy_spec::{AutoOr, MemoryFormat, OptimizerKind, Precision};

mod args;

pub use args::*;

/// stratlab: benchmark distributed deep-learning training strategies.
#[derive(Debug, Parser)]
#[command(name = "stratlab", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List networks, their variants and the data sets.
    Networks,
    /// Per-stage output shape, parameters, FLOPs and activation memory of a network.
    Inspect {
        /// Network name (see `stratlab networks`).
        network: String,
        /// Data set whose variant to inspect.
        #[arg(long)]
        dataset: String,
        /// Batch size for FLOPs and activation memory.
        #[arg(long, default_value_t = 1)]
        batch: i64,
    },
    /// Data set management.
    Data {
        /// What to do with data.
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Train one network on one data set in this process (single device).
    Train(TrainArgs),
    /// Expand a suite file and print its trials without running them.
    Plan {
        /// The suite file.
        suite: PathBuf,
    },
    /// Run every trial of a suite, recording its tables in a new folder of the store.
    Run {
        /// The suite file.
        suite: PathBuf,
        /// Complete an interrupted run (its folder) instead of starting a new one.
        #[arg(long)]
        resume: Option<PathBuf>,
        /// Only trials whose id contains this text (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Where run folders are created.
        #[arg(long, default_value = stratlab_results::DEFAULT_STORE_DIR)]
        store: PathBuf,
        /// With --resume: add trials even if this machine's fingerprint (host, driver, CUDA,
        /// libtorch, binary) differs from the run's; the run records that it is mixed.
        #[arg(long, requires = "resume")]
        allow_mixed: bool,
        /// Do not write the report (`<run>/report/`) or print the results matrix at the end.
        #[arg(long)]
        no_report: bool,
        /// Do not predict the cells before training: no profile is taken and no link probed
        /// for them, and the report has no predictions to judge. For a quick look at a few
        /// cells; `batch_size: max` and `balance: time` still profile what they need.
        #[arg(long)]
        no_predict: bool,
        /// Which profiles (kept in the store's `profiles/`) the run's predictions reuse.
        #[command(flatten)]
        reuse: ReuseArgs,
    },
    /// Write a run's report: figures, Markdown/CSV tables and a self-contained index.html.
    /// Works on finished, partly failed and interrupted runs.
    Report {
        /// The run folder.
        run: PathBuf,
        /// Output folder (default: `<run>/report`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Figure format (the HTML report embeds it).
        #[arg(long, value_enum, default_value_t = FigureFormatArg::Svg)]
        format: FigureFormatArg,
        /// A folder of runs: adds a History section (this run's suite over time, step
        /// changes and the environment changes at them) to the report.
        #[arg(long, value_name = "RUNS_FOLDER")]
        history: Option<PathBuf>,
    },
    /// Compare two runs cell by cell: step-time and throughput change with a bootstrap
    /// interval, a verdict (improved, regressed, noise), outcome changes, cells in one run
    /// only, the fastest strategy per network and data set, and the environment fields that
    /// differ. Prints a table, writes Markdown and JSON. Exit status 3 when a cell regressed
    /// or a ranking flipped (0 otherwise; 1 on failure, 2 on bad input), so CI can gate on it.
    Compare(CompareArgs),
    /// Gather every run of a suite in a folder into one table keyed by environment, find
    /// lasting step changes per cell and attribute them to the fingerprint fields that
    /// changed, and draw each headline metric against run date.
    History(HistoryArgs),
    /// Write a run's tables as CSV or JSON.
    Export {
        /// The run folder.
        run: PathBuf,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormatArg,
        /// Output folder (default: `<run>/export-<format>`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Measure the links between ranks: point-to-point latency and bandwidth for every
    /// pair, all-reduce time against message size (and with `--gather-scatter` all-gather
    /// and reduce-scatter time, sharded data parallelism's), idle and again with every
    /// rank's cores kept busy (as a training step's buckets find them); stored as a probe
    /// run.
    /// Starts `--workers` ranks on this machine, or is one rank when RANK and WORLD_SIZE are
    /// set (torchrun, srun).
    Probe(ProbeArgs),
    /// Predict every trial of a suite without training it: each network is profiled on
    /// this machine at the trials' threads and batch sizes, and the performance model times
    /// the step (pipelines by simulating their schedules, data parallelism with its bucket
    /// plan, the parameter server's pushes and pulls), with each cell's peak memory.
    Predict {
        /// The suite file.
        suite: PathBuf,
        /// A `stratlab probe` run whose point-to-point medians give the link (latency from
        /// its smallest message, bandwidth from its largest); needed for multi-worker trials.
        #[arg(long)]
        probe: Option<PathBuf>,
        /// Where the cells would run: `local` (this machine, the default) or a cluster file
        /// (`examples/clusters/`): one device per worker, its links, and its device's speed
        /// (profiled here, or a datasheet roofline whose predictions are unvalidated); a
        /// `fits` column compares each cell's peak memory with the device's.
        #[arg(long, value_name = "FILE|local")]
        cluster: Option<PathBuf>,
        /// A run of the same suite: each prediction beside its measured step time, with the
        /// error, and the report's judgement (each group's pick, top-1, regret, Kendall τ);
        /// nothing is fitted to it.
        #[arg(long)]
        against: Option<PathBuf>,
        /// Also draw thesis fig. 3.2 from the predictions into this folder: each strategy's
        /// speedup over single against the workers (`predicted_speedup.svg`), the measured
        /// speedups of `--against`'s run beside them.
        #[arg(long, value_name = "DIR")]
        figure: Option<PathBuf>,
        /// Which stored profiles to reuse.
        #[command(flatten)]
        profiles: ProfileArgs,
    },
    /// Profile every network a suite's trials need, at their threads and batch sizes, on
    /// this machine's CPU (with the contention of workers sharing its cores), into the
    /// store's `profiles` table: `predict`, `recommend` and `run` reuse a profile while the
    /// network, data set, threads, optimizer, numerics, libtorch and binary match.
    Profile {
        /// The suite file.
        suite: PathBuf,
        /// Which stored profiles to reuse.
        #[command(flatten)]
        profiles: ProfileArgs,
    },
    /// Which strategy to use: every strategy, with the parameters searched for it
    /// (micro-batches, balance, checkpointing, pipeline stages, fusion threshold, server
    /// placement, ZeRO stage), predicted for one network, data set, optimizer and worker
    /// count; what does not fit the device's memory is set aside, the rest ranked by time
    /// per sample, each with why it loses to the first. Nothing is trained.
    Recommend {
        /// Network name (see `stratlab networks`).
        #[arg(long)]
        network: String,
        /// Data set (`cifar10`, or `cifar10:synthetic`).
        #[arg(long)]
        dataset: String,
        /// Workers (devices on a cluster, processes here).
        #[arg(long)]
        workers: usize,
        /// Global batch: samples per optimizer step over all workers, the same for every
        /// strategy ranked (data parallelism splits it over the workers, a pipeline into its
        /// micro-batches). Default: the data set's per-worker batch times the workers.
        #[arg(long)]
        batch: Option<usize>,
        /// Where: `local` (this machine, the default) or a cluster file.
        #[arg(long, value_name = "FILE|local")]
        cluster: Option<PathBuf>,
        /// A `stratlab probe` run giving this machine's link (multi-worker strategies
        /// need one unless a cluster file gives the links; one taken with
        /// `--gather-scatter` times ZeRO's collectives as measured).
        #[arg(long)]
        probe: Option<PathBuf>,
        /// The optimizer the candidates train with: `sgd` (with momentum) or `adam`, whose
        /// two moments per weight decide what fits.
        #[arg(long, default_value_t = OptimizerKind::Sgd)]
        optimizer: OptimizerKind,
        /// Memory per worker, MiB: a smaller device than this machine's share of its
        /// memory or the cluster file's device (as a run's `memory_limit_mib`).
        #[arg(long = "memory-limit-mib", value_name = "MIB")]
        memory_limit_mib: Option<u64>,
        /// What every candidate computes in: `fp32` (default), `bf16`, `tf32`, `fp16`, or
        /// `auto` (the fastest, measured here as `run` measures it; fp32 on a cluster).
        #[arg(long, default_value = "fp32")]
        precision: AutoOr<Precision>,
        /// How every candidate lays out its tensors: `contiguous` (default),
        /// `channels_last`, or `auto` (the faster, measured here).
        #[arg(long = "memory-format", default_value = "contiguous")]
        memory_format: AutoOr<MemoryFormat>,
        /// A run whose trials of this network and data set reached the data set's target:
        /// the median steps that took, per global batch, times each candidate's predicted
        /// step is its time to target (unknown without one).
        #[arg(long = "steps-from", value_name = "RUN")]
        steps_from: Option<PathBuf>,
        /// Which stored profiles to reuse.
        #[command(flatten)]
        profiles: ProfileArgs,
    },
    /// Judge the performance model against published GPU measurements
    /// (`validation/published/*.yaml`): from each table's single-device row alone, predict
    /// every other row on the table's cluster, beside the thesis's closed forms and a null
    /// model, and print, write (`validation.csv`) and draw predicted against published.
    /// Offline; nothing is trained.
    Validate(ValidateArgs),
    /// Print this machine's environment fingerprint (versions, devices).
    Env {
        /// Fail unless libtorch sees CUDA wherever nvidia-smi lists a GPU.
        #[arg(long)]
        check_cuda: bool,
    },
    /// Internal: the worker process of a trial (reads its specification on stdin).
    #[command(hide = true)]
    Worker,
    /// Internal: measures one profile in a process of its own (reads its request on stdin).
    #[command(hide = true)]
    ProfileWorker,
    /// Internal: one copy of a network that a profile times beside others (reads its trial,
    /// then orders, on stdin).
    #[command(hide = true)]
    ContentionCopy,
}

impl Command {
    /// Whether the command trains nothing and talks to no peer (it reads, prints and at most
    /// writes its own files), so a reader that stops early (`stratlab plan suite.yaml |
    /// head`) may end it as it ends `cat`. Commands that train or talk to peers keep Rust's ignored SIGPIPE, so a peer's
    /// closed socket is an error the trial reports, not a silent death.
    pub fn only_prints(&self) -> bool {
        matches!(
            self,
            Command::Networks
                | Command::Inspect { .. }
                | Command::Plan { .. }
                | Command::Compare(_)
                | Command::History(_)
                | Command::Export { .. }
                | Command::Env { .. }
        )
    }
}
