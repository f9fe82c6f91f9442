//! What `sharded-data-parallel` shards (ZeRO's stages) and, at stage 3, which weights it
//! gathers at a time.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::UnknownName;

/// ZeRO's stage (Rajbhandari et al., 2020): what each rank keeps only its 1/N shard of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum ZeroStage {
    /// The optimizer state (DeepSpeed's ZeRO-1).
    One,
    /// The optimizer state and the gradients (ZeRO-2; FSDP's `SHARD_GRAD_OP`).
    Two,
    /// The optimizer state, the gradients and the weights (ZeRO-3; FSDP's `FULL_SHARD`,
    /// its default, and so this one's).
    #[default]
    Three,
}

impl ZeroStage {
    /// Every stage, in order.
    pub const ALL: [ZeroStage; 3] = [ZeroStage::One, ZeroStage::Two, ZeroStage::Three];

    /// The stage's number (1, 2, 3).
    pub fn number(self) -> u8 {
        match self {
            ZeroStage::One => 1,
            ZeroStage::Two => 2,
            ZeroStage::Three => 3,
        }
    }

    /// Whether each rank keeps only its shard of the gradients.
    pub fn shards_gradients(self) -> bool {
        self >= ZeroStage::Two
    }

    /// Whether each rank keeps only its shard of the weights between their uses.
    pub fn shards_weights(self) -> bool {
        self == ZeroStage::Three
    }
}

stratlab_columns::text_column!(ShardUnit);

/// Stored as its number.
impl stratlab_columns::ColumnValue for ZeroStage {
    fn column_type() -> stratlab_columns::ColumnType {
        stratlab_columns::ColumnType::Int64
    }
}

impl TryFrom<u8> for ZeroStage {
    type Error = UnknownName;
    fn try_from(number: u8) -> Result<Self, UnknownName> {
        ZeroStage::ALL.into_iter().find(|stage| stage.number() == number).ok_or_else(|| unknown_stage(number))
    }
}

fn unknown_stage(name: impl ToString) -> UnknownName {
    UnknownName { what: "ZeRO stage", name: name.to_string(), valid: "1, 2, 3".into() }
}

impl From<ZeroStage> for u8 {
    fn from(stage: ZeroStage) -> u8 {
        stage.number()
    }
}

impl fmt::Display for ZeroStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

impl FromStr for ZeroStage {
    type Err = UnknownName;
    fn from_str(text: &str) -> Result<Self, UnknownName> {
        text.parse::<u8>().map_err(|_| unknown_stage(text))?.try_into()
    }
}

/// At ZeRO stage 3, the weights gathered at once before a forward or a backward and freed
/// after it (FSDP's wrapping unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ShardUnit {
    /// Each network stage (a convolution, a residual block, the classifier: the units the
    /// pipelines cut between), as FSDP wraps each block: the least memory, the most
    /// collectives.
    #[default]
    Stage,
    /// The whole network at once, as FSDP wrapping only the root: one gather before the
    /// forward and one before the backward, the whole model's weights alive in each pass.
    Network,
}

impl ShardUnit {
    /// The name in suite files and results.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl FromStr for ShardUnit {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("shard unit", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_numbers_in_suites_and_names_and_an_unknown_one_lists_the_valid() {
        assert_eq!(serde_saphyr::from_str::<ZeroStage>("2").unwrap(), ZeroStage::Two);
        let error = serde_saphyr::from_str::<ZeroStage>("4").unwrap_err().to_string();
        assert!(error.contains("unknown ZeRO stage `4`; valid: 1, 2, 3"), "{error}");
        assert_eq!("3".parse::<ZeroStage>(), Ok(ZeroStage::Three));
        assert!(ZeroStage::Two.shards_gradients() && !ZeroStage::One.shards_gradients());
        assert!(ZeroStage::Three.shards_weights() && !ZeroStage::Two.shards_weights());
        assert_eq!("network".parse::<ShardUnit>(), Ok(ShardUnit::Network));
        assert!("layer".parse::<ShardUnit>().unwrap_err().to_string().contains("stage, network"));
    }
}
