//! The values a strategy's parameters take: how a pipeline is balanced, which micro-batches
//! it checkpoints, where a parameter server runs.

use std::fmt;

use serde::{Deserialize, Serialize};
use strum::VariantArray;

use crate::{Infeasible, UnknownName};

/// How a pipeline's stages are split among workers. Written as a name (`time`) or a list
/// of stage counts (`[2, 3]`); an unknown name is an error listing the valid ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "BalanceText")]
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

/// What a balance is written as, before its name is checked.
#[derive(Deserialize)]
#[serde(untagged)]
enum BalanceText {
    Name(String),
    Counts(Vec<usize>),
}

impl TryFrom<BalanceText> for Balance {
    type Error = UnknownName;

    fn try_from(text: BalanceText) -> Result<Self, Self::Error> {
        match text {
            BalanceText::Counts(counts) => Ok(Balance::Explicit(counts)),
            BalanceText::Name(name) => name.parse(),
        }
    }
}

impl std::str::FromStr for Balance {
    type Err = UnknownName;

    /// A name, or the stored form of an explicit list (`[2,3]`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "uniform" => Ok(Balance::Uniform),
            "parameters" => Ok(Balance::Parameters),
            "time" => Ok(Balance::Time),
            "size" => Ok(Balance::Size),
            other => other
                .strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|list| list.split(',').map(|count| count.trim().parse().ok()).collect::<Option<Vec<usize>>>())
                .map(Balance::Explicit)
                .ok_or_else(|| UnknownName {
                    what: "balance",
                    name: other.to_owned(),
                    valid: "uniform, parameters, time, size, or a list of stage counts such as [2, 3]".into(),
                }),
        }
    }
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

// Stored as its name or list (`time`, `[2,3]`), by `stored_balance` in a column.
stratlab_columns::text_column!(Balance, Checkpoint, ServerPlacement);

/// Serde for a stored `Option<Balance>` column: the balance's text (`time`, `[2,3]`), which
/// its own serde writes as a list where suites write a list.
pub(crate) mod stored_balance {
    use serde::{de, Deserialize, Deserializer, Serializer};

    use super::Balance;

    pub(crate) fn serialize<S: Serializer>(balance: &Option<Balance>, serializer: S) -> Result<S::Ok, S::Error> {
        match balance {
            Some(balance) => serializer.serialize_some(&balance.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Balance>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|text| text.parse::<Balance>().map_err(de::Error::custom))
            .transpose()
    }
}

/// Checks that `balance` can split `stage_count` network stages into `parts` without
/// building or profiling anything (what the planner uses to mark a trial infeasible).
pub fn check_balance(stage_count: usize, balance: &Balance, parts: usize) -> Result<(), Infeasible> {
    let fail = |reason: String| Err(Infeasible(reason));
    if parts == 0 {
        return fail("0 pipeline stages requested; a pipeline needs at least 1".into());
    }
    if parts > stage_count {
        return fail(format!(
            "{parts} pipeline stages requested but the network has only {stage_count} stages to split"
        ));
    }
    if let Balance::Explicit(list) = balance {
        if list.len() != parts {
            return fail(format!("balance {balance} lists {} pipeline stages but {parts} were requested", list.len()));
        }
        if let Some(empty) = list.iter().position(|&count| count == 0) {
            return fail(format!(
                "balance {balance} gives pipeline stage {empty} no network stages; every count must be at least 1"
            ));
        }
        let sum: usize = list.iter().sum();
        if sum != stage_count {
            return fail(format!(
                "balance {balance} sums to {sum} but must sum to {stage_count}, the network's stage count"
            ));
        }
    }
    Ok(())
}

/// Why a micro-batch count given in a suite is refused: the one wording of the rule, for a
/// single count and for a sweep's list.
pub(crate) const MICRO_BATCHES_AT_LEAST_ONE: &str = "give one or more micro-batch counts, each at least 1";

/// Why `micro_batches` micro-batches cannot split a per-worker (per-pipeline) batch of
/// `batch` samples, if they cannot: each micro-batch needs a sample.
pub fn micro_batches_fit(micro_batches: usize, batch: usize) -> Result<(), Infeasible> {
    if micro_batches > batch {
        return Err(Infeasible(format!("{micro_batches} micro-batches exceed the batch of {batch} samples")));
    }
    Ok(())
}

/// Activation checkpointing of a synchronous pipeline (torchgpipe's `checkpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Checkpoint {
    /// Recompute every micro-batch's activations in the backward pass.
    Always,
    /// All but the last micro-batch (torchgpipe's default: the last one's backward
    /// starts right after its forward, so keeping it costs no extra memory at the peak).
    ExceptLast,
    /// Keep all activations.
    #[default]
    Never,
}

impl Checkpoint {
    /// Every mode, in the order error messages list them (declaration order). An array, not a
    /// slice, so that callers iterate by value.
    pub const ALL: [Checkpoint; 3] = *Self::VARIANTS.as_array().expect("three checkpoint modes");

    /// Whether micro-batch `micro_batch` of `micro_batches` keeps only its input in the
    /// forward pass and recomputes the rest in backward.
    pub fn recomputes(self, micro_batch: usize, micro_batches: usize) -> bool {
        match self {
            Checkpoint::Always => true,
            Checkpoint::ExceptLast => micro_batch + 1 < micro_batches,
            Checkpoint::Never => false,
        }
    }

    /// The name in suite files and results.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl std::str::FromStr for Checkpoint {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("checkpoint", text)
    }
}

/// Where a parameter server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "kebab-case")]
pub enum ServerPlacement {
    /// Rank 0 trains and serves.
    #[default]
    Colocated,
    /// The last rank only serves.
    Dedicated,
}

impl ServerPlacement {
    /// Both placements, in the order error messages list them (declaration order). An array,
    /// not a slice, so that callers iterate by value.
    pub const ALL: [ServerPlacement; 2] = *Self::VARIANTS.as_array().expect("two placements");

    /// The name used in suites and results.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The server's rank in a group of `world_size`.
    pub fn server_rank(self, world_size: usize) -> usize {
        match self {
            ServerPlacement::Colocated => 0,
            ServerPlacement::Dedicated => world_size - 1,
        }
    }

    /// Ranks that train on data.
    pub fn training_ranks(self, world_size: usize) -> usize {
        match self {
            ServerPlacement::Colocated => world_size,
            ServerPlacement::Dedicated => world_size - 1,
        }
    }
}

impl std::str::FromStr for ServerPlacement {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("server placement", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_keeps_its_serde_names_display_and_stored_form() {
        let balances = [
            (Balance::Uniform, "\"uniform\""),
            (Balance::Parameters, "\"parameters\""),
            (Balance::Time, "\"time\""),
            (Balance::Size, "\"size\""),
            (Balance::Explicit(vec![2, 3]), "[2,3]"),
        ];
        for (balance, json) in balances {
            assert_eq!(serde_json::to_string(&balance).unwrap(), json);
            assert_eq!(serde_json::from_str::<Balance>(json).unwrap(), balance);
            assert_eq!(balance.to_string(), json.trim_matches('"'));
            assert_eq!(balance.to_string().parse::<Balance>().unwrap(), balance);
        }
        let unknown = serde_json::from_str::<Balance>("\"even\"").unwrap_err().to_string();
        assert!(unknown.starts_with("unknown balance `even`; valid: uniform, parameters, time, size"), "{unknown}");
    }

    #[test]
    fn checkpoint_and_placement_names_are_the_stored_ones_and_serde_uses_them() {
        assert_eq!(Checkpoint::ALL.map(Checkpoint::name), ["always", "except_last", "never"]);
        for mode in Checkpoint::ALL {
            assert_eq!(mode.to_string(), mode.name());
            assert_eq!(serde_json::to_string(&mode).unwrap(), format!("\"{}\"", mode.name()));
        }
        assert_eq!(ServerPlacement::ALL.map(ServerPlacement::name), ["colocated", "dedicated"]);
        for placement in ServerPlacement::ALL {
            assert_eq!(placement.to_string(), placement.name());
            assert_eq!(serde_json::to_string(&placement).unwrap(), format!("\"{}\"", placement.name()));
        }
    }

    #[test]
    fn checkpoint_and_placement_names_parse_back() {
        for mode in Checkpoint::ALL {
            assert_eq!(mode.name().parse::<Checkpoint>().unwrap(), mode);
        }
        assert_eq!(
            "some".parse::<Checkpoint>().unwrap_err().to_string(),
            "unknown checkpoint `some`; valid: always, except_last, never"
        );
        assert_eq!("dedicated".parse::<ServerPlacement>().unwrap(), ServerPlacement::Dedicated);
        assert_eq!(
            "remote".parse::<ServerPlacement>().unwrap_err().to_string(),
            "unknown server placement `remote`; valid: colocated, dedicated"
        );
    }
}
