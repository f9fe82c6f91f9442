//! STUB — replaced by the partitioner work (see the helper's brief). Contract only.

use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use stratlab_networks::NetworkSpec;
use tch::Device;

/// How a pipeline's stages are split among workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// The same number of stages per worker.
    Uniform,
    /// Equal parameter counts.
    Parameters,
    /// Equal profiled forward+backward time.
    Time,
    /// Equal memory.
    Size,
    /// Stages per worker, given explicitly (e.g. `[2, 3, 2, 3]`).
    #[serde(untagged)]
    Explicit(Vec<usize>),
}

impl fmt::Display for Balance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Balance::Uniform => f.write_str("uniform"),
            Balance::Parameters => f.write_str("parameters"),
            Balance::Time => f.write_str("time"),
            Balance::Size => f.write_str("size"),
            Balance::Explicit(stages) => {
                let stages: Vec<String> = stages.iter().map(|n| n.to_string()).collect();
                write!(f, "[{}]", stages.join(","))
            }
        }
    }
}

/// Why a balance cannot split a network into the requested parts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PartitionError(pub String);

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
        if mean > 0.0 { max / mean - 1.0 } else { 0.0 }
    }
}

/// Checks that `balance` can split `stage_count` network stages into `parts` without
/// building or profiling anything (what the planner uses to mark a trial infeasible).
pub fn check_balance(stage_count: usize, balance: &Balance, parts: usize) -> Result<(), PartitionError> {
    if parts == 0 || parts > stage_count {
        return Err(PartitionError(format!("{parts} pipeline stages requested but the network has {stage_count} stages")));
    }
    if let Balance::Explicit(list) = balance {
        if list.len() != parts || list.iter().sum::<usize>() != stage_count || list.contains(&0) {
            return Err(PartitionError(format!("balance {balance} must list {parts} positive counts summing to {stage_count}")));
        }
    }
    Ok(())
}

/// Splits `spec` into `parts` pipeline stages by `balance` for micro-batches of
/// `micro_batch` samples on `device` (`time` profiles there).
pub fn plan_stages(
    spec: &NetworkSpec,
    balance: &Balance,
    parts: usize,
    _micro_batch: i64,
    _device: Device,
) -> Result<StagePlan, PartitionError> {
    let n = spec.stages.len();
    check_balance(n, balance, parts)?;
    let counts: Vec<usize> = match balance {
        Balance::Explicit(list) => list.clone(),
        _ => (0..parts).map(|i| n / parts + usize::from(i < n % parts)).collect(),
    };
    let mut start = 0;
    let ranges: Vec<Range<usize>> = counts.iter().map(|&c| { let r = start..start + c; start += c; r }).collect();
    let costs = counts.iter().map(|&c| c as f64).collect();
    Ok(StagePlan { balance: balance.clone(), ranges, costs, unit: "stages".into() })
}
