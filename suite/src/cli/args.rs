//! The command line's option groups and values: what each command's arguments are, shared
//! where commands share them (`ProfileArgs`, `ThresholdArgs`, `FigureFormatArg`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use stratlab_strategy_spec::OptimizerKind;
use stratlab_units::ByteSize;

/// The default `--sizes`: powers of 4 from one float32 (4 B) to 64 MiB, 1 MiB among them.
pub const DEFAULT_SIZES: &str = "4,16,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M";

/// Where profiles are kept, and which stored ones are reused.
#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// The store whose `profiles` folder keeps the profiles taken.
    #[arg(long, default_value = stratlab_results::DEFAULT_STORE_DIR)]
    pub store: PathBuf,
    /// Which stored profiles to reuse.
    #[command(flatten)]
    pub reuse: ReuseArgs,
}

/// Which stored profiles are reused (`run`, `predict`, `recommend`, `profile`).
#[derive(Debug, clap::Args)]
pub struct ReuseArgs {
    /// Measure every profile again instead of reusing a stored one (the new ones are stored).
    #[arg(long)]
    pub fresh_profiles: bool,
    /// Retake a stored profile whose speed reference (a fixed piece of work timed on every
    /// core with it) read more than this many percent slower than the machine does now: a
    /// profile taken in a slow spell would predict every cell high. `inf` reuses every
    /// matching profile.
    #[arg(long, value_name = "PERCENT", default_value_t = 100.0 * crate::profiles::STALE_PROFILE_LIMIT)]
    pub stale_profile_limit: f64,
}

impl ReuseArgs {
    /// The policy these flags ask for.
    pub fn policy(&self) -> crate::profiles::ReusePolicy {
        crate::profiles::ReusePolicy { fresh: self.fresh_profiles, stale_limit: self.stale_profile_limit / 100.0 }
    }
}

/// Data subcommands.
#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Put a data set's real files into the data cache and verify them.
    Fetch {
        /// Data set names (mnist, fashion-mnist).
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Figure formats `report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FigureFormatArg {
    /// Scalable vector graphics: sharp at any size, small, text selectable.
    Svg,
    /// Raster images (2× resolution), for slides and tools without SVG.
    Png,
}

/// Formats `export` writes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormatArg {
    /// Comma-separated values, one file per table.
    Csv,
    /// JSON, one file per table.
    Json,
}

/// When a change counts; shared by `compare` and `history`.
#[derive(Debug, Clone, Args)]
pub struct ThresholdArgs {
    /// Which order statistic of a cell's timed step times stands for it. Interference only
    /// adds time, so low quantiles are the least disturbed (regressions/README.md).
    #[arg(long, value_enum, default_value_t = StatisticArg::from(stratlab_regressions::DEFAULT_STATISTIC))]
    pub statistic: StatisticArg,
    /// Significance level α: verdicts use the two-sided 1 − α bootstrap interval.
    #[arg(long, default_value_t = stratlab_regressions::DEFAULT_SIGNIFICANCE)]
    pub significance: f64,
    /// Relative change run-to-run noise reaches on its own (0.10 = 10 %): a cell regressed
    /// only when its whole interval is beyond it; a history step must exceed it. The
    /// default was chosen from repeated unchanged runs (regressions/README.md).
    #[arg(long = "noise-threshold", default_value_t = stratlab_regressions::DEFAULT_NOISE_THRESHOLD)]
    pub noise_threshold: f64,
    /// Bootstrap resamples per interval.
    #[arg(long, default_value_t = 2000)]
    pub resamples: usize,
}

/// The statistics `--statistic` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatisticArg {
    /// The median step time.
    Median,
    /// The 25th percentile.
    P25,
    /// The 10th percentile.
    P10,
}

impl From<stratlab_regressions::Statistic> for StatisticArg {
    fn from(statistic: stratlab_regressions::Statistic) -> Self {
        match statistic {
            stratlab_regressions::Statistic::Median => StatisticArg::Median,
            stratlab_regressions::Statistic::P25 => StatisticArg::P25,
            stratlab_regressions::Statistic::P10 => StatisticArg::P10,
        }
    }
}

impl From<StatisticArg> for stratlab_regressions::Statistic {
    fn from(statistic: StatisticArg) -> Self {
        match statistic {
            StatisticArg::Median => stratlab_regressions::Statistic::Median,
            StatisticArg::P25 => stratlab_regressions::Statistic::P25,
            StatisticArg::P10 => stratlab_regressions::Statistic::P10,
        }
    }
}

/// Options of `stratlab compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The run folder to compare against.
    pub baseline: PathBuf,
    /// The run folder under test.
    pub new: PathBuf,
    /// Thresholds.
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Folder for comparison.md and comparison.json (default: `<new>/compare/<baseline run id>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// List baseline cells the new run lacks instead of failing the gate on them (exit 3).
    #[arg(long)]
    pub allow_missing: bool,
    /// Judge each cell's step-time change divided by the machine's own (the runner's
    /// reference work, timed before every trial): for runs on a shared or throttled host,
    /// where the whole machine ran slower or faster during one of them.
    #[arg(long)]
    pub per_machine_speed: bool,
}

/// Options of `stratlab history`.
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// The folder holding the runs (`runs/`).
    pub runs: PathBuf,
    /// Only this suite (the label after the run id's time stamp); default: every suite found.
    #[arg(long)]
    pub suite: Option<String>,
    /// Thresholds (the noise threshold decides what is a step).
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Output folder (default: `<runs>/history`); each suite gets `<out>/<suite>/`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Figure format.
    #[arg(long, value_enum, default_value_t = FigureFormatArg::Svg)]
    pub format: FigureFormatArg,
}

/// A size as `--sizes` takes it: the one byte-size grammar of cluster files and suites.
fn parse_size(text: &str) -> anyhow::Result<u64> {
    if text.trim().is_empty() {
        anyhow::bail!("empty size; give sizes like {DEFAULT_SIZES}");
    }
    Ok(text.parse::<ByteSize>()?.0)
}

/// Options of `stratlab probe`.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Ranks to start on this machine (default 2). Under a launcher (RANK and WORLD_SIZE
    /// set) WORLD_SIZE decides and this may be left out.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Timed iterations per pair (or all-reduce) and size.
    #[arg(long, default_value_t = 20)]
    pub repeats: usize,
    /// Untimed iterations before the timed ones.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Message sizes, comma-separated: bytes, or with a unit (`64M` and `64MiB` are 64 MiB,
    /// `64MB` is 64 000 000 bytes; the grammar of cluster files); multiples of 4 (float32
    /// buffers).
    #[arg(long, value_delimiter = ',', value_parser = parse_size, default_value = DEFAULT_SIZES)]
    pub sizes: Vec<u64>,
    /// Where the probe run's folder is created (by rank 0).
    #[arg(long, default_value = stratlab_results::DEFAULT_STORE_DIR)]
    pub store: PathBuf,
    /// Seconds a rank waits for its peers (rendezvous, each transfer) before failing.
    #[arg(long = "timeout", value_name = "SECONDS", default_value_t = 120)]
    pub timeout_s: u64,
    /// Seconds the local ranks may take in all before they are stopped (local mode).
    #[arg(long = "time-limit", value_name = "SECONDS", default_value_t = 900)]
    pub time_limit_s: u64,
    /// libtorch threads per rank (default: cores / workers locally; libtorch's own under a
    /// launcher).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Measure over an emulated link, `bandwidth=100Mbit/s,latency=1ms` (latency optional):
    /// locally the ranks run in network namespaces joined by it (needs root, `ip`, `tc`),
    /// as a suite's `link:` trials do; under a launcher it only labels the rows. Recorded in
    /// the probe table's `link` column.
    #[arg(long, value_parser = str::parse::<crate::link_axis::TrialLink>)]
    pub link: Option<crate::link_axis::TrialLink>,
    /// Which all-reduce to time, comma-separated: `idle` ranks, and `loaded`, every
    /// libtorch thread's core kept busy as during a training step's backward.
    #[arg(long = "all-reduce", value_enum, value_delimiter = ',', default_value = "idle,loaded")]
    pub all_reduce: Vec<AllReduceLoad>,
    /// Also time all-gather and reduce-scatter (sharded data parallelism's collectives) at
    /// every size, in each of `--all-reduce`'s core states.
    #[arg(long = "gather-scatter")]
    pub gather_scatter: bool,
}

/// The cores' state a collective is timed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum AllReduceLoad {
    /// Nothing else runs on the ranks.
    Idle,
    /// A busy thread per libtorch thread of each rank.
    Loaded,
}

/// Options of `stratlab train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Network name.
    #[arg(long)]
    pub network: String,
    /// Data set (`mnist`, or `mnist:synthetic` for the generated twin).
    #[arg(long)]
    pub dataset: String,
    /// Epochs to train.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Optimizer steps to train.
    #[arg(long)]
    pub steps: Option<usize>,
    /// Seconds to train.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Per-step batch size (default: the data set's).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// The optimizer: `sgd` or `adam` (give Adam its own `--lr`, commonly 1e-3).
    #[arg(long, default_value_t = OptimizerKind::Sgd)]
    pub optimizer: OptimizerKind,
    /// Base learning rate.
    #[arg(long, default_value_t = 0.01)]
    pub lr: f64,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f64,
    /// Weight decay.
    #[arg(long, default_value_t = 5e-4)]
    pub weight_decay: f64,
    /// Learning-rate schedule.
    #[arg(long, value_enum, default_value_t = ScheduleArg::Constant)]
    pub schedule: ScheduleArg,
    /// Test accuracy for time-to-accuracy (default: the data set's target).
    #[arg(long)]
    pub target: Option<f64>,
    /// Also evaluate every N steps.
    #[arg(long)]
    pub eval_every: Option<usize>,
    /// Seed for weights, shuffling and synthetic data.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Device: cpu, cuda:N or auto.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// libtorch threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the full report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Learning-rate schedules on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScheduleArg {
    /// Constant rate.
    Constant,
    /// ×0.1 every 30 epochs (torchvision's ImageNet recipe).
    Step,
    /// Cosine decay to zero over the budget.
    Cosine,
}

/// What `stratlab validate` is asked.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Published tables (`validation/published/*.yaml`).
    #[arg(required = true)]
    pub tables: Vec<PathBuf>,
    /// Folder for `validation.csv` and the figures (default `runs/validate`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Figure format.
    #[arg(long, value_enum, default_value_t = FigureFormatArg::Svg)]
    pub format: FigureFormatArg,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sizes_are_powers_of_four_from_4_bytes_to_64_mib() {
        let sizes: Vec<u64> = DEFAULT_SIZES.split(',').map(|s| parse_size(s).unwrap()).collect();
        assert_eq!(sizes, (1..=13).map(|power| 4u64.pow(power)).collect::<Vec<_>>());
        assert!(sizes.contains(&(1 << 20)) && sizes.contains(&(64 << 20)));
    }

    #[test]
    fn sizes_on_the_command_line_read_like_cluster_files() {
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("64MB").unwrap(), 64_000_000, "SI, as in a cluster file");
        assert!(parse_size("64 megs").unwrap_err().to_string().contains("MiB"));
    }
}
