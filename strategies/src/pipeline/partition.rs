//! Pipeline partitioning: which consecutive network stages each pipeline stage (worker)
//! holds, chosen by a [`Balance`] and checked before anything is built.
//!
//! Every balance but `uniform` and an explicit list first puts a cost on each network stage
//! ([`stage_costs`]), then cuts the stage list into the contiguous parts whose largest cost
//! is smallest ([`linear_partition`]): a pipeline runs at the pace of its slowest stage.

mod linear;
mod profile;
mod saved;

use std::ops::Range;

use serde::{Deserialize, Serialize};
use stratlab_networks::NetworkSpec;
use stratlab_strategy_spec::{check_balance, Balance, PartitionError};
use tch::Device;

pub use linear::{linear_partition, shared_partition};
pub use profile::PROFILE_REPEATS;
pub use saved::{activation_bytes_per_sample, ActivationBytes};

/// Bytes per parameter the `size` balance charges: the f32 weight, its gradient and SGD's
/// momentum buffer (momentum SGD, the default optimizer; Adam's second moment is not
/// charged, which shifts a cut only where activations weigh as much as weights).
pub const SIZE_BYTES_PER_PARAMETER: u64 = 3 * std::mem::size_of::<f32>() as u64;

/// Which network stages each pipeline stage holds, and what the balance predicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// The balance that produced the plan.
    pub balance: Balance,
    /// Network stage indices of each pipeline stage, consecutive and covering all.
    pub ranges: Vec<Range<usize>>,
    /// Predicted cost of each pipeline stage, in `unit`.
    pub costs: Vec<f64>,
    /// What `costs` count.
    pub unit: String,
}

impl StagePlan {
    /// Predicted imbalance: slowest stage's cost over the mean, minus 1 (0 = balanced).
    pub fn predicted_imbalance(&self) -> f64 {
        let mean = self.costs.iter().sum::<f64>() / self.costs.len().max(1) as f64;
        let max = self.costs.iter().copied().fold(0.0, f64::max);
        if mean > 0.0 {
            max / mean - 1.0
        } else {
            0.0
        }
    }
}

/// A cost per network stage, and what it counts.
#[derive(Debug, Clone, PartialEq)]
pub struct StageCosts {
    /// One cost per network stage, in order.
    pub per_stage: Vec<f64>,
    /// `stages`, `parameters`, `seconds` or `bytes`.
    pub unit: &'static str,
}

/// Stages per part under `uniform`: part `i` of `parts` gets `n / parts` stages plus one
/// if `i < n % parts` (earlier parts take the remainder).
pub fn uniform_counts(stage_count: usize, parts: usize) -> Vec<usize> {
    (0..parts).map(|i| stage_count / parts + usize::from(i < stage_count % parts)).collect()
}

/// Puts a cost on every network stage of `spec` as `balance` measures it:
///
/// - `uniform`: 1 per stage (unit `stages`);
/// - `parameters` and explicit lists: trainable parameters (unit `parameters`), so an
///   explicit list's predicted imbalance still says how lopsided it is;
/// - `time`: forward+backward seconds of one micro-batch of `micro_batch` samples
///   on `device` (unit `seconds`; see *Time* below);
/// - `size`: bytes one micro-batch needs (unit `bytes`): [`SIZE_BYTES_PER_PARAMETER`] per
///   parameter, plus the stage's output and the tensors autograd keeps inside the stage
///   ([`activation_bytes_per_sample`]), both for `micro_batch` samples.
///
/// # Time
///
/// Builds the whole network in a throwaway VarStore on `device` and runs every stage once
/// to warm up, then [`PROFILE_REPEATS`] timed passes, the device synchronised before each
/// clock read; the cost is the faster pass. Inputs are ones of the stage's input shape (the
/// previous stage's output), requiring a gradient from the second stage on, as a pipeline
/// worker's received activations do. Building draws initial weights from libtorch's global
/// generator, so plan *before* seeding the weights a trial trains.
///
/// # Size
///
/// An estimate from the ops, not a measurement: one micro-batch's activations and SGD
/// state, with no allocator caching, workspaces or fragmentation, and with no extra copy
/// of a pipeline worker's received input; a schedule that keeps several micro-batches in
/// flight (GPipe without checkpointing) holds several times the activation part.
/// torchgpipe's `balance_by_size` instead profiles the CUDA memory a sample micro-batch
/// allocates, which needs the device and a run.
pub fn stage_costs(
    spec: &NetworkSpec,
    balance: &Balance,
    micro_batch: i64,
    device: Device,
) -> Result<StageCosts, PartitionError> {
    // Parameters and per-sample shapes: batch 1, whatever the micro-batch.
    let analyze = || spec.analyze(1).map_err(|error| PartitionError(format!("cannot analyse {}: {error}", spec.name)));
    let micro_batch_checked = || {
        if micro_batch < 1 {
            return Err(PartitionError(format!(
                "balance {balance} needs a micro-batch of at least 1 sample, got {micro_batch}"
            )));
        }
        Ok(micro_batch)
    };
    let (per_stage, unit) = match balance {
        Balance::Uniform => (vec![1.0; spec.stages.len()], "stages"),
        Balance::Parameters | Balance::Explicit(_) => {
            (analyze()?.stages.iter().map(|s| s.parameters as f64).collect(), "parameters")
        }
        Balance::Time => (profile::stage_seconds(spec, micro_batch_checked()?, device)?, "seconds"),
        Balance::Size => {
            let batch = micro_batch_checked()? as u64;
            let analysis = analyze()?;
            let mut input = spec.input.sample_dims();
            let mut per_stage = Vec::with_capacity(spec.stages.len());
            for (stage, row) in spec.stages.iter().zip(&analysis.stages) {
                let activation = activation_bytes_per_sample(&stage.block, &input)
                    .map_err(|reason| PartitionError(format!("stage `{}`: {reason}", stage.name)))?;
                let bytes = row.parameters * SIZE_BYTES_PER_PARAMETER + activation.total() * batch;
                per_stage.push(bytes as f64);
                input = row.output_shape[1..].to_vec();
            }
            (per_stage, "bytes")
        }
    };
    Ok(StageCosts { per_stage, unit })
}

/// Splits `spec` into `parts` pipeline stages by `balance` for micro-batches of
/// `micro_batch` samples on `device` (`time` profiles there).
///
/// `uniform` and explicit lists take their counts as given; the other balances cut
/// [`stage_costs`] with [`linear_partition`]. The plan's `costs` sum each part's
/// network-stage costs.
pub fn plan_stages(
    spec: &NetworkSpec,
    balance: &Balance,
    parts: usize,
    micro_batch: i64,
    device: Device,
) -> Result<StagePlan, PartitionError> {
    plan_shared_stages(spec, balance, &vec![1; parts], micro_batch, device)
}

/// [`plan_stages`] into one part per entry of `shares`, the workers each part runs on:
/// the balances that cut by cost give a part on several workers that many times the cost
/// ([`shared_partition`]).
pub fn plan_shared_stages(
    spec: &NetworkSpec,
    balance: &Balance,
    shares: &[usize],
    micro_batch: i64,
    device: Device,
) -> Result<StagePlan, PartitionError> {
    let (n, parts) = (spec.stages.len(), shares.len());
    check_balance(n, balance, parts)?;
    let costs = stage_costs(spec, balance, micro_batch, device)?;
    let ranges = match balance {
        Balance::Uniform => ranges_from_counts(&uniform_counts(n, parts)),
        Balance::Explicit(list) => ranges_from_counts(list),
        _ => shared_partition(&costs.per_stage, shares),
    };
    Ok(plan_of(balance.clone(), ranges, &costs))
}

/// The `time` balance's plan from seconds per network stage measured beforehand (one per
/// stage of `spec`, at the micro-batch): the cut [`plan_stages`] makes of the seconds it
/// times itself, without timing anything.
pub fn plan_by_stage_seconds(spec: &NetworkSpec, seconds: &[f64], parts: usize) -> Result<StagePlan, PartitionError> {
    plan_shared_by_stage_seconds(spec, seconds, &vec![1; parts])
}

/// [`plan_by_stage_seconds`] into one part per entry of `shares`, the workers each part
/// runs on ([`shared_partition`]).
pub fn plan_shared_by_stage_seconds(
    spec: &NetworkSpec,
    seconds: &[f64],
    shares: &[usize],
) -> Result<StagePlan, PartitionError> {
    let (n, parts) = (spec.stages.len(), shares.len());
    check_balance(n, &Balance::Time, parts)?;
    if seconds.len() != n || seconds.iter().any(|s| !s.is_finite() || *s < 0.0) {
        return Err(PartitionError(format!(
            "balance time: {} stage times given for the {n} stages of {}, each finite and not negative: {seconds:?}",
            seconds.len(),
            spec.name
        )));
    }
    let costs = StageCosts { per_stage: seconds.to_vec(), unit: "seconds" };
    Ok(plan_of(Balance::Time, shared_partition(seconds, shares), &costs))
}

/// A plan's parts with the cost each sums.
fn plan_of(balance: Balance, ranges: Vec<Range<usize>>, costs: &StageCosts) -> StagePlan {
    let part_costs = ranges.iter().map(|range| costs.per_stage[range.clone()].iter().sum()).collect();
    StagePlan { balance, ranges, costs: part_costs, unit: costs.unit.to_string() }
}

/// Consecutive ranges of the given lengths, starting at 0.
fn ranges_from_counts(counts: &[usize]) -> Vec<Range<usize>> {
    let mut start = 0;
    counts
        .iter()
        .map(|&count| {
            let range = start..start + count;
            start += count;
            range
        })
        .collect()
}

#[cfg(test)]
mod tests;
