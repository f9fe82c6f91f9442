//! Published measurements the model is judged against on hardware we do not have
//! (`validation/published/*.yaml`): where a table comes from, the cluster it ran on (a
//! cluster file, [`Cluster`]), the network, its input and precision, and per row the
//! strategy, its workers and batch and what was measured. One row is the model's input: the
//! single-device one where the source has it, else a multi-device row (seed 004's tables
//! start at two GPUs), which calibrates the device's speed through the model's own
//! prediction of that row. Every other row is predicted from it and judged.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stratlab_strategy_spec::{Balance, Parameters, Precision, Strategy, StrategyKind};

use crate::{Cluster, ClusterError};

/// One published table, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedTable {
    /// The file it was read from.
    pub path: PathBuf,
    /// A short name for reports (`ddp-resnet50-v100`).
    pub name: String,
    /// Where the numbers come from.
    pub source: Source,
    /// The cluster file, as the table names it (relative to the table's folder).
    pub cluster_path: PathBuf,
    /// The hardware the rows ran on.
    pub cluster: Cluster,
    /// A stratlab network name (`resnet101`).
    pub network: String,
    /// The data set whose input layout the network got (`imagenet`).
    pub dataset: String,
    /// The precision the rows trained in.
    pub precision: Precision,
    /// Where the source cuts a network into finer layers than stratlab's stages: how many
    /// of its layers each of stratlab's stages holds, in order, so a source's balance in
    /// its own layers can be put onto stratlab's stages ([`Self::stage_balance`]).
    pub source_layers_per_stage: Option<Vec<usize>>,
    /// The rows, in the file's order; exactly one is the input.
    pub rows: Vec<PublishedRow>,
}

/// Where a table's numbers were read.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// What it is (`PyTorch DDP benchmark`).
    pub title: String,
    /// Where it can be read, pinned (a URL with the commit in it).
    pub url: String,
    /// The file in that repository or document.
    pub file: String,
    /// Which table or figure of it.
    pub table: String,
    /// The commit (or, for a paper, the version and date) the numbers were read at.
    pub pinned: String,
    /// How the source measured, in its own words or a summary of its script.
    #[serde(default)]
    pub method: Option<String>,
}

/// One published measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedRow {
    /// As the source names it (`8 GPUs`, `pipeline-4`).
    pub label: String,
    /// Devices the row used.
    pub workers: usize,
    /// Samples per worker (data parallelism, single) or per pipeline, per step: what a
    /// stratlab trial's `batch_size` means for the strategy.
    pub batch: usize,
    /// The strategy as stratlab names it, with the source's parameters.
    pub strategy: Strategy,
    /// What was measured.
    pub measured: Measured,
    /// The source's own balance, in its layers (where its layers are finer than stratlab's
    /// stages); the strategy's balance was derived from it.
    pub source_balance: Option<Vec<usize>>,
    /// Whether this row is the model's input.
    pub input: bool,
    /// The source's series the row belongs to where a table holds several (`TGP size`:
    /// one library and balance over device counts); `None` where the whole table is one.
    pub series: Option<String>,
}

/// What a table's input row calibrates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calibration {
    /// A single device trained alone: its step is the sequential step the roofline is
    /// scaled to.
    SingleDevice,
    /// A row on several devices: the roofline is scaled until the model's prediction of
    /// that row equals its measured step; the links keep the cluster file's values, so the
    /// row's communication and bubble are the model's, not fitted.
    MultiDevice,
}

/// A published number: seconds per step, samples per second, or a whole training's
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measured {
    /// Median (or the source's statistic of) seconds per optimizer step.
    StepSeconds(f64),
    /// Samples per second.
    SamplesPerSecond(f64),
    /// Seconds a whole training took over `samples` training samples (the table's
    /// `training` epochs × samples per epoch).
    TrainingSeconds {
        /// The source's seconds.
        seconds: f64,
        /// Samples trained in them.
        samples: f64,
    },
}

/// How long the trainings behind a table's `train_s` rows were.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// Epochs of each training.
    pub epochs: usize,
    /// Training samples per epoch.
    pub samples_per_epoch: usize,
}

impl PublishedRow {
    /// Samples per optimizer step over all the row's workers.
    pub fn global_batch(&self) -> usize {
        self.strategy.global_batch(self.batch, self.workers)
    }

    /// Seconds per step, measured or from the throughput.
    pub fn step_s(&self) -> f64 {
        match self.measured {
            Measured::StepSeconds(seconds) => seconds,
            Measured::SamplesPerSecond(rate) => self.global_batch() as f64 / rate,
            Measured::TrainingSeconds { seconds, samples } => seconds * self.global_batch() as f64 / samples,
        }
    }

    /// Samples per second.
    pub fn samples_per_s(&self) -> f64 {
        self.global_batch() as f64 / self.step_s()
    }
}

/// Why a published table could not be used, naming the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    /// The file could not be read.
    #[error("cannot read published table {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not YAML, an unknown or missing field, a value of the wrong type; the message
    /// carries the field path and the parser's line.
    #[error("published table {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's message, prefixed with the field path.
        message: String,
    },
    /// Each field read, but together they do not describe a table the model can take.
    #[error("published table {}: `{field}` {problem}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// Dotted path of the field (`rows[3].strategy`).
        field: String,
        /// What is wrong and what would be valid.
        problem: String,
    },
    /// The cluster file it names.
    #[error("published table {}: {source}", path.display())]
    Cluster {
        /// The table.
        path: PathBuf,
        /// The cluster file's error.
        source: ClusterError,
    },
}

impl PublishedTable {
    /// Reads, parses and checks the table at `path` and the cluster file it names.
    pub fn load(path: &Path) -> Result<PublishedTable, PublishedError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PublishedError::Read { path: path.to_path_buf(), source })?;
        let file = crate::yaml::from_yaml::<TableFile>(&text)
            .map_err(|error| PublishedError::Invalid { path: path.to_path_buf(), message: error.to_string() })?;
        let cluster_file = path.parent().unwrap_or(Path::new(".")).join(&file.cluster);
        let cluster = Cluster::load(&cluster_file)
            .map_err(|source| PublishedError::Cluster { path: path.to_path_buf(), source })?;
        file.validate(path, cluster)
    }

    /// The row the model takes as given.
    pub fn input_row(&self) -> &PublishedRow {
        self.rows.iter().find(|row| row.input).expect("validated: exactly one input row")
    }

    /// What the input row calibrates.
    pub fn calibration(&self) -> Calibration {
        let input = self.input_row();
        match input.workers == 1 && !input.strategy.kind().is_distributed() {
            true => Calibration::SingleDevice,
            false => Calibration::MultiDevice,
        }
    }

    /// The source's balance in its own layers put onto stratlab's stages: each of the
    /// source's cuts moved to the nearest boundary between stratlab stages (a residual
    /// block cannot be cut inside), keeping every part at least one stage.
    pub fn stage_balance(layers_per_stage: &[usize], source_balance: &[usize]) -> Option<Vec<usize>> {
        let stages = layers_per_stage.len();
        if source_balance.is_empty() || source_balance.len() > stages {
            return None;
        }
        // Layer index at each stratlab stage boundary (0 and the total included).
        let mut boundaries = vec![0usize];
        for layers in layers_per_stage {
            boundaries.push(boundaries.last().unwrap() + layers);
        }
        let mut cuts = Vec::with_capacity(source_balance.len() - 1);
        let mut at = 0usize;
        for (part, layers) in source_balance[..source_balance.len() - 1].iter().enumerate() {
            at += layers;
            let parts_after = source_balance.len() - 1 - part;
            let lowest = cuts.last().map_or(1, |cut| cut + 1);
            let highest = stages - parts_after;
            let nearest = (lowest..=highest).min_by_key(|&stage| boundaries[stage].abs_diff(at))?;
            cuts.push(nearest);
        }
        let mut balance = Vec::with_capacity(source_balance.len());
        let mut previous = 0;
        for cut in cuts.into_iter().chain([stages]) {
            balance.push(cut - previous);
            previous = cut;
        }
        Some(balance)
    }
}

/// The null model: data parallelism at one device's time per sample (perfect scaling), a
/// pipeline at its ideal bubble, `(m + p − 1) / m` times its compute spread over `p`
/// devices, nothing else; one device's time per sample is the input row's step divided by
/// the null model's own shape of that row. What a table's rows differ by is what the model
/// must explain beyond it.
pub fn null_model_step_s(input: &PublishedRow, row: &PublishedRow) -> f64 {
    let per_sample = input.step_s() / null_samples(input);
    per_sample * null_samples(row)
}

/// A row's step under the null model in units of one device's time per sample.
fn null_samples(row: &PublishedRow) -> f64 {
    let (kind, m) = (row.strategy.kind(), row.strategy.micro_batches().max(1) as f64);
    match row.strategy.pipeline_shape(row.workers) {
        Ok((stages, _)) if kind.is_pipeline() => {
            let stages = stages as f64;
            let bubble = match kind {
                // Model parallelism runs the whole batch through one stage at a time.
                StrategyKind::ModelParallel => stages,
                _ => (m + stages - 1.0) / m,
            };
            row.batch as f64 / stages * bubble
        }
        _ => row.batch as f64,
    }
}

/// A table as written: every field typed, so serde names the field of a bad value; what
/// spans fields is checked by [`TableFile::validate`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    name: String,
    source: Source,
    cluster: PathBuf,
    network: String,
    dataset: String,
    #[serde(default)]
    precision: Precision,
    #[serde(default)]
    source_layers_per_stage: Option<Vec<usize>>,
    #[serde(default)]
    training: Option<Training>,
    rows: Vec<RowFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RowFile {
    label: String,
    workers: usize,
    batch: usize,
    strategy: Strategy,
    #[serde(default)]
    step_s: Option<f64>,
    #[serde(default)]
    samples_per_s: Option<f64>,
    #[serde(default)]
    train_s: Option<f64>,
    #[serde(default)]
    source_balance: Option<Vec<usize>>,
    #[serde(default)]
    input: bool,
    #[serde(default)]
    series: Option<String>,
}

impl TableFile {
    fn validate(self, origin: &Path, cluster: Cluster) -> Result<PublishedTable, PublishedError> {
        let error =
            |field: String, problem: String| PublishedError::Field { path: origin.to_path_buf(), field, problem };
        if self.name.trim().is_empty() {
            return Err(error("name".into(), "is empty: name the table, e.g. `ddp-resnet50-v100`".into()));
        }
        let inputs = self.rows.iter().filter(|row| row.input).count();
        if inputs != 1 {
            return Err(error(
                "rows".into(),
                format!(
                    "mark exactly one row `input: true` (the row the model is calibrated on: the single-device one \
                     where the source has it); {inputs} are"
                ),
            ));
        }
        let mut rows = Vec::with_capacity(self.rows.len());
        for (index, row) in self.rows.into_iter().enumerate() {
            let field = |name: &str| format!("rows[{index}].{name}");
            let given = [row.step_s, row.samples_per_s, row.train_s];
            let measured = match given {
                [Some(seconds), None, None] if seconds > 0.0 && seconds.is_finite() => Measured::StepSeconds(seconds),
                [None, Some(rate), None] if rate > 0.0 && rate.is_finite() => Measured::SamplesPerSecond(rate),
                [None, None, Some(seconds)] if seconds > 0.0 && seconds.is_finite() => {
                    let Some(training) = self.training else {
                        return Err(error(
                            field("train_s"),
                            "needs the table's `training: {epochs, samples_per_epoch}` to say what it trained".into(),
                        ));
                    };
                    let samples = (training.epochs * training.samples_per_epoch) as f64;
                    Measured::TrainingSeconds { seconds, samples }
                }
                _ if given.iter().flatten().count() != 1 => {
                    return Err(error(
                        field("step_s"),
                        "give exactly one of `step_s`, `samples_per_s` and `train_s`".into(),
                    ))
                }
                _ => return Err(error(field("step_s"), "must be a positive number".into())),
            };
            if row.workers == 0 || row.batch == 0 {
                return Err(error(field("workers"), "`workers` and `batch` must be at least 1".into()));
            }
            if row.workers > cluster.devices() {
                return Err(error(
                    field("workers"),
                    format!("is {}: the cluster `{}` has {} devices", row.workers, cluster.name, cluster.devices()),
                ));
            }
            let mut strategy = row.strategy;
            if let Some(source_balance) = &row.source_balance {
                let Some(layers) = &self.source_layers_per_stage else {
                    return Err(error(
                        field("source_balance"),
                        "needs the table's `source_layers_per_stage` to map it onto stratlab's stages".into(),
                    ));
                };
                let total: usize = layers.iter().sum();
                if source_balance.iter().sum::<usize>() != total {
                    return Err(error(
                        field("source_balance"),
                        format!(
                            "sums to {}, the source's network has {total} layers",
                            source_balance.iter().sum::<usize>()
                        ),
                    ));
                }
                let balance = PublishedTable::stage_balance(layers, source_balance).ok_or_else(|| {
                    error(field("source_balance"), format!("has more parts than stratlab's {} stages", layers.len()))
                })?;
                let parameters = Parameters { balance: Some(Balance::Explicit(balance)), ..strategy.parameters() };
                strategy = Strategy::new(strategy.kind(), parameters).map_err(|why| {
                    error(field("strategy"), format!("takes no balance, but the row gives `source_balance`: {why}"))
                })?;
            }
            rows.push(PublishedRow {
                label: row.label,
                workers: row.workers,
                batch: row.batch,
                strategy,
                measured,
                source_balance: row.source_balance,
                input: row.input,
                series: row.series,
            });
        }
        Ok(PublishedTable {
            path: origin.to_path_buf(),
            name: self.name,
            source: self.source,
            cluster_path: self.cluster,
            cluster,
            network: self.network,
            dataset: self.dataset,
            precision: self.precision,
            source_layers_per_stage: self.source_layers_per_stage,
            rows,
        })
    }
}

#[cfg(test)]
mod tests;
