//! The YAML suite file: a matrix of networks × data sets × strategies plus the settings
//! every trial shares. Parsed with serde so that every mistake is reported with the field
//! path and line serde-saphyr knows; names are checked while parsing for the same reason.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use stratlab_datasets::DatasetSelector;
use stratlab_strategies::loss_scale::LossScaleSettings;
use stratlab_strategies::{Budget, DeviceChoice, Numerics, DEFAULT_METRICS_EVERY_STEPS};
use stratlab_strategy_spec::{
    AutoOr, MemoryFormat, OptimizerKind, Precision, StragglerEntry, StrategyKind, StrategySweep, UnknownName,
};

use crate::link_axis::TrialLink;
pub use crate::optimizer_settings::OptimizerSettings;
use crate::suite_error::SuiteError;

/// A suite file as written by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    /// Short name, used in run folder names.
    pub name: String,
    /// What the suite is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The source papers' figures and tables the suite regenerates (`suite/papers/`), the
    /// source's settings it keeps and those it changes, and its expected time; the report
    /// draws each named figure in its paper's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerates: Option<stratlab_results::Regenerates>,
    /// Networks axis.
    pub networks: Vec<NetworkName>,
    /// Data sets axis: `mnist` (real files) or `mnist:synthetic`.
    pub datasets: Vec<DatasetSelector>,
    /// Strategies axis: a name, or a map with the strategy's parameters.
    pub strategies: Vec<StrategySweep>,
    /// Per-worker batch size: a number or a list of numbers (an axis) for every data set, a
    /// map per data set of either, or omitted for the thesis's sizes (MNIST 128, CIFAR 64,
    /// ImageNet and Highres 32). `max` (alone or in a list) is the largest batch that trains
    /// under `memory_limit_mib`, searched for before the trials.
    #[serde(default)]
    pub batch_size: Option<BatchSizes>,
    /// Precision axis: `fp32` (default), `bf16` (autocast, float32 weights), `tf32` (CUDA
    /// only), or `auto`: what is fastest on the device, measured there before the trials
    /// (fp32 or tf32 against bf16 where the device computes bfloat16 natively). A strategy
    /// entry may narrow it.
    #[serde(default = "float32_only")]
    pub precision: Vec<AutoOr<Precision>>,
    /// Memory-format axis: `contiguous` (NCHW, default), `channels_last` (NHWC), or `auto`
    /// (the faster of the two, measured). A strategy entry may narrow it.
    #[serde(default = "contiguous_only")]
    pub memory_format: Vec<AutoOr<MemoryFormat>>,
    /// How long each trial trains.
    pub budget: Budget,
    /// Repeats of every cell (seed `seed + repeat`). They run in rounds: every cell's first
    /// trial, then every cell's second, so that a drift of the machine over the run shows
    /// as run-to-run spread of each cell instead of moving whole cells.
    #[serde(default = "one")]
    pub repeats: usize,
    /// Cells that run another number of times than `repeats`; the first rule a cell matches
    /// decides (`{cells: {strategy: single, threads: 2}, repeats: 3}`).
    #[serde(default)]
    pub repeats_of: Vec<RepeatRule>,
    /// Base seed.
    #[serde(default)]
    pub seed: u64,
    /// Device of every trial.
    #[serde(default = "auto_device")]
    pub device: DeviceChoice,
    /// libtorch threads per trial (shared among its workers; for a cell across nodes, among
    /// the workers of each node): a count, or a list of counts (an axis); default: all cores.
    #[serde(default)]
    pub threads: Option<Threads>,
    /// Where multi-worker trials' workers talk (an axis): `loopback`, or emulated links
    /// `{bandwidth: 1 Gbit/s, latency: 1 ms}` (network namespaces, veth or TUN, tbf; needs
    /// root, `ip` and `tc`, else those trials are recorded infeasible). Single-worker
    /// trials run once, on loopback. Default: loopback.
    #[serde(default = "loopback_only")]
    pub link: Vec<TrialLink>,
    /// Nodes a multi-worker cell's ranks span (an axis): `workers` is the total, spread
    /// evenly and rank-major (ranks 0..k−1 on the first node). Cells of more than one node
    /// run as Slurm job steps inside an allocation (`salloc`, `sbatch`), elsewhere they are
    /// recorded infeasible; single-worker trials run on one. Default: `[1]`.
    #[serde(default = "one_node")]
    pub nodes: Vec<usize>,
    /// Slow workers (an axis): `none`, or `{ranks: [1], slowdown: 2.0, jitter: 0.2}`: the
    /// named ranks wait (slowdown − 1) × each forward's and backward's own time after it
    /// (`jitter` draws each step's factor from slowdown × (1 ± jitter)). Trials with fewer
    /// ranks than a straggler names, and single-worker trials, run without it. Default:
    /// `[none]`.
    #[serde(default = "no_straggler")]
    pub straggler: Vec<StragglerEntry>,
    /// Test-accuracy targets per data set name, overriding the registry's defaults.
    #[serde(default)]
    pub targets: BTreeMap<String, f64>,
    /// The optimizer axis (`name: [sgd, adam]`; SGD where absent) and each optimizer's
    /// settings (`lr` and `momentum` are SGD's, `adam: {lr, betas, eps}` Adam's).
    #[serde(default)]
    pub optimizer: OptimizerSettings,
    /// How fp16 cells' dynamic loss scale starts and moves (`initial`, `growth_factor`,
    /// `backoff_factor`, `growth_interval`: PyTorch's `GradScaler` arguments and defaults);
    /// no other precision scales its loss.
    #[serde(default)]
    pub loss_scale: LossScaleSettings,
    /// Evaluation settings.
    #[serde(default)]
    pub eval: EvalSettings,
    /// Steps excluded from timing at the start of every trial.
    #[serde(default = "default_warmup")]
    pub warmup_steps: usize,
    /// Read training losses and accuracies back from the device every N steps (default 5);
    /// between reads a step holds no host synchronisation but the one that ends it.
    #[serde(default = "default_metrics_every")]
    pub metrics_every_steps: usize,
    /// cuDNN benchmark mode and TF32 (defaults: benchmark on, matmul `highest`, cuDNN TF32
    /// on); recorded with every trial. A cell's precision overrides the TF32 switches: `fp32`
    /// turns both off, `tf32` both on.
    #[serde(default)]
    pub numerics: Numerics,
    /// Seconds after which a trial is killed and recorded as `timeout`.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// Each worker's limit in MiB: on a CPU its libtorch tensor storage, counted by its
    /// allocator (out-of-memory becomes testable, at the same size every run); on CUDA the
    /// resident memory of the workers (`memory_guard.rs`).
    #[serde(default)]
    pub memory_limit_mib: Option<u64>,
    /// Each CUDA worker's cap on its device's caching allocator in MiB
    /// (`setMemoryFraction` of the device's memory), so a large GPU stands in for a smaller
    /// one; allocator peaks are read per step either way. Ignored, with a warning, by CPU
    /// workers, which `memory_limit_mib` limits.
    #[serde(default)]
    pub device_memory_limit_mib: Option<u64>,
    /// Telemetry sampling interval.
    #[serde(default = "default_interval")]
    pub telemetry_interval_ms: u64,
    /// Cells to drop: every field given must match.
    #[serde(default)]
    pub exclude: Vec<CellRule>,
    /// Extra cells to add (network, data set and strategy required), as in CI matrices.
    #[serde(default)]
    pub include: Vec<IncludeCell>,
}

fn no_straggler() -> Vec<StragglerEntry> {
    vec![StragglerEntry(None)]
}

fn one_node() -> Vec<usize> {
    vec![1]
}

fn loopback_only() -> Vec<TrialLink> {
    vec![TrialLink::Loopback]
}

fn float32_only() -> Vec<AutoOr<Precision>> {
    vec![AutoOr::Given(Precision::Float32)]
}

fn contiguous_only() -> Vec<AutoOr<MemoryFormat>> {
    vec![AutoOr::Given(MemoryFormat::Contiguous)]
}

fn one() -> usize {
    1
}
fn auto_device() -> DeviceChoice {
    DeviceChoice::Auto
}
fn default_warmup() -> usize {
    5
}
fn default_metrics_every() -> usize {
    DEFAULT_METRICS_EVERY_STEPS
}
fn default_timeout() -> f64 {
    1800.0
}
fn default_interval() -> u64 {
    100
}

/// Evaluation settings shared by every trial of the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalSettings {
    /// Also evaluate every N steps (time-to-accuracy at a finer grain than epochs).
    pub every_steps: Option<usize>,
    /// Evaluate on at most this many test samples.
    pub samples: Option<usize>,
    /// Evaluation batch size.
    pub batch_size: usize,
}

impl Default for EvalSettings {
    fn default() -> Self {
        EvalSettings { every_steps: None, samples: None, batch_size: 500 }
    }
}

/// A network name, checked against the zoo while parsing so the error carries the line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NetworkName(pub String);

impl TryFrom<String> for NetworkName {
    type Error = UnknownName;
    fn try_from(name: String) -> Result<Self, UnknownName> {
        if stratlab_networks::network_names().contains(&name.as_str()) {
            Ok(NetworkName(name))
        } else {
            Err(UnknownName { what: "network", name, valid: stratlab_networks::network_names().join(", ") })
        }
    }
}

impl From<NetworkName> for String {
    fn from(name: NetworkName) -> String {
        name.0
    }
}

impl fmt::Display for NetworkName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Per-worker batch sizes: one size or a list of sizes to sweep for every data set, or a
/// size or list per data set name; `max` among them asks for the largest that fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BatchSizes {
    /// The same sizes for every data set.
    All(Vec<BatchSize>),
    /// Sizes per data set name; data sets not named use the thesis's default for them.
    PerDataset(BTreeMap<String, Vec<BatchSize>>),
}

/// One value of the batch axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum BatchSize {
    /// Samples per worker (per pipeline).
    Samples(usize),
    /// `max`: the largest batch the cell trains under its memory limit, found by the runner
    /// before the trials (probes in worker processes of their own), then trained like any.
    #[serde(serialize_with = "max_word")]
    Largest,
}

fn max_word<S: serde::Serializer>(serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str("max")
}

impl<'de> Deserialize<'de> for BatchSizes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = BatchSizes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive batch size or `max`, a list of them, or a map from data set name to either")
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<BatchSizes, E> {
                Sizes::One(SizeValue::Number(value as i64)).checked().map(BatchSizes::All).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<BatchSizes, E> {
                Sizes::One(SizeValue::Number(value)).checked().map(BatchSizes::All).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<BatchSizes, E> {
                Sizes::One(SizeValue::Word(value.to_owned())).checked().map(BatchSizes::All).map_err(E::custom)
            }
            fn visit_seq<S: SeqAccess<'de>>(self, seq: S) -> Result<BatchSizes, S::Error> {
                let sizes = Vec::<SizeValue>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Sizes::Many(sizes).checked().map(BatchSizes::All).map_err(de::Error::custom)
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<BatchSizes, M::Error> {
                let mut per_dataset = BTreeMap::new();
                while let Some((name, sizes)) = map.next_entry::<String, Sizes>()? {
                    stratlab_datasets::info(&name).map_err(de::Error::custom)?;
                    per_dataset.insert(name, sizes.checked().map_err(de::Error::custom)?);
                }
                Ok(BatchSizes::PerDataset(per_dataset))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}

/// One batch size or a list, as written.
#[derive(Deserialize)]
#[serde(untagged)]
enum Sizes {
    One(SizeValue),
    Many(Vec<SizeValue>),
}

/// A number or a word, as written.
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Number(i64),
    Word(String),
}

impl Sizes {
    fn checked(self) -> Result<Vec<BatchSize>, NotAnAxis> {
        let sizes = match self {
            Sizes::One(size) => vec![size],
            Sizes::Many(sizes) => sizes,
        };
        if sizes.is_empty() {
            return Err(NotAnAxis("an empty list of batch sizes; give at least one".into()));
        }
        sizes
            .into_iter()
            .map(|size| match size {
                SizeValue::Number(size) if size >= 1 => Ok(BatchSize::Samples(size as usize)),
                SizeValue::Number(bad) => Err(NotAnAxis(format!("batch size must be a positive integer, got {bad}"))),
                SizeValue::Word(word) if word == "max" => Ok(BatchSize::Largest),
                SizeValue::Word(word) => {
                    Err(NotAnAxis(format!("batch size must be a positive integer or `max`, got `{word}`")))
                }
            })
            .collect()
    }
}

/// libtorch threads of each trial: one count for the whole suite (a setting every trial
/// shares), or a list to sweep (then each count is part of the cells it makes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Threads {
    /// One count.
    One(usize),
    /// Counts to sweep.
    Sweep(Vec<usize>),
}

impl Threads {
    /// The counts, in order.
    pub fn counts(&self) -> Vec<usize> {
        match self {
            Threads::One(count) => vec![*count],
            Threads::Sweep(counts) => counts.clone(),
        }
    }

    /// Whether the suite sweeps threads (more than one count), which makes the count part
    /// of every cell's identity.
    pub fn is_axis(&self) -> bool {
        matches!(self, Threads::Sweep(counts) if counts.len() > 1)
    }
}

/// A value that cannot be an axis.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct NotAnAxis(String);

/// A pattern over cells: every field given must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellRule {
    /// Network to match.
    #[serde(default)]
    pub network: Option<NetworkName>,
    /// Data set to match (real and synthetic are different data sets here).
    #[serde(default)]
    pub dataset: Option<DatasetSelector>,
    /// Strategy to match.
    #[serde(default)]
    pub strategy: Option<StrategyKind>,
    /// Worker count to match.
    #[serde(default)]
    pub workers: Option<usize>,
    /// Per-worker batch size to match.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Link to match (`loopback` or a link map, as in `link:`).
    #[serde(default)]
    pub link: Option<TrialLink>,
    /// Node count to match.
    #[serde(default)]
    pub nodes: Option<usize>,
    /// The trial's thread count to match (all its workers' together, as in `threads:`).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Precision to match, as the suite gives it (`auto` matches the cells it resolves).
    #[serde(default)]
    pub precision: Option<AutoOr<Precision>>,
    /// Memory format to match, as the suite gives it.
    #[serde(default)]
    pub memory_format: Option<AutoOr<MemoryFormat>>,
    /// Optimizer to match.
    #[serde(default)]
    pub optimizer: Option<OptimizerKind>,
}

/// Cells that run `repeats` times instead of the suite's `repeats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatRule {
    /// Which cells: every field given must match.
    pub cells: CellRule,
    /// How many trials each of them runs.
    pub repeats: usize,
}

/// One extra cell added by `include`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncludeCell {
    /// Network of the cell.
    pub network: NetworkName,
    /// Data set of the cell.
    pub dataset: DatasetSelector,
    /// Strategy of the cell, as a `strategies` entry: a name, or a map with `name`, the
    /// worker counts and the strategy's own parameters; lists in it add a cell per value.
    pub strategy: StrategySweep,
    /// Workers, for a strategy given by name (`strategy: data-parallel, workers: 2`);
    /// overrides the entry's own.
    #[serde(default)]
    pub workers: Option<usize>,
    /// Per-worker batch size, overriding the suite's.
    #[serde(default)]
    pub batch_size: Option<usize>,
}

impl SuiteFile {
    /// Reads and parses `path`; errors name the file and, from serde, the field path and line.
    pub fn load(path: &Path) -> Result<(SuiteFile, String), SuiteError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| SuiteError::Read { path: path.to_path_buf(), source })?;
        let suite = Self::parse(&text)
            .map_err(|error| SuiteError::Invalid { path: path.to_path_buf(), message: error.to_string() })?;
        Ok((suite, text))
    }

    /// Parses suite text; the error names the field path (`budget.steps`), the line and
    /// column, and shows the offending line.
    pub fn parse(text: &str) -> Result<SuiteFile, serde_saphyr::Error> {
        stratlab_perf_model::from_yaml::<SuiteFile>(text)
    }
}
