//! A strategy as the `trials` table stores it: its name and one nullable column per
//! parameter, under the column names every stored run has.

use serde::{Deserialize, Serialize};

use crate::{
    Balance, Checkpoint, ColumnsError, Parameters, ServerPlacement, ShardUnit, Strategy, StrategyKind, ZeroStage,
};

/// The strategy columns of a trial row, flattened into it. A parameter not given is null.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StrategyColumns {
    /// Strategy name (`single`, `data-parallel`, `gpipe`, …).
    pub strategy: String,
    /// Micro-batches per step, for pipeline strategies.
    pub micro_batches: Option<i64>,
    /// How layers were split into stages (`uniform`, `time`, `[2,3]`), for pipelines.
    pub balance: Option<String>,
    /// Activation checkpointing mode, when given.
    pub checkpoint: Option<String>,
    /// Stages per pipeline of a `hybrid` trial (its pp; replicas = workers ÷ pp); null for
    /// other strategies and for runs stored before the column existed.
    #[serde(default)]
    pub pipeline_stages: Option<i64>,
    /// Gradient-bucket fusion threshold in bytes, for data-parallel.
    pub fusion_threshold_bytes: Option<i64>,
    /// Parameter-server placement (`colocated`, `dedicated`), when given; null for runs
    /// stored before the column existed.
    #[serde(default)]
    pub server: Option<String>,
    /// Sharded data parallelism's ZeRO stage (1, 2, 3), when given; null for other
    /// strategies and for runs stored before the column existed.
    #[serde(default)]
    pub zero_stage: Option<i64>,
    /// What ZeRO stage 3 gathers at once (`stage`, `network`), when given.
    #[serde(default)]
    pub shard_unit: Option<String>,
}

impl From<&Strategy> for StrategyColumns {
    fn from(strategy: &Strategy) -> StrategyColumns {
        let Parameters {
            micro_batches,
            balance,
            checkpoint,
            fusion_threshold_mib,
            server,
            pipeline_stages,
            stage,
            shard_unit,
        } = strategy.parameters();
        StrategyColumns {
            strategy: strategy.name().to_owned(),
            micro_batches: micro_batches.map(|m| m as i64),
            balance: balance.map(|balance| balance.to_string()),
            checkpoint: checkpoint.map(|checkpoint| checkpoint.to_string()),
            pipeline_stages: pipeline_stages.map(|pp| pp as i64),
            fusion_threshold_bytes: fusion_threshold_mib.map(|mib| (mib << 20) as i64),
            server: server.map(|server| server.to_string()),
            zero_stage: stage.map(|stage| i64::from(stage.number())),
            shard_unit: shard_unit.map(|unit| unit.to_string()),
        }
    }
}

impl StrategyColumns {
    /// The strategy of the row of trial `trial_id`.
    ///
    /// The one legacy path: runs stored before the `pipeline_stages` column existed carry a
    /// hybrid trial's pp only in its id (`…__hybrid__w4__pp2__b128…`, or after the batch
    /// in later ids), so a null column is read from there.
    pub fn strategy(&self, trial_id: &str) -> Result<Strategy, ColumnsError> {
        let error = |message: String| ColumnsError { trial_id: trial_id.to_owned(), message };
        let kind: StrategyKind = self.strategy.parse().map_err(|e: crate::UnknownName| error(e.to_string()))?;
        let count = |value: Option<i64>, column: &str| {
            value
                .map(|value| usize::try_from(value).map_err(|_| error(format!("{column} {value} is negative"))))
                .transpose()
        };
        let parameters = Parameters {
            micro_batches: count(self.micro_batches, "micro_batches")?,
            balance: self
                .balance
                .as_deref()
                .map(str::parse::<Balance>)
                .transpose()
                .map_err(|e| error(e.to_string()))?,
            checkpoint: self
                .checkpoint
                .as_deref()
                .map(str::parse::<Checkpoint>)
                .transpose()
                .map_err(|e| error(e.to_string()))?,
            fusion_threshold_mib: count(self.fusion_threshold_bytes, "fusion_threshold_bytes")?
                .map(|bytes| (bytes >> 20) as u64),
            server: self
                .server
                .as_deref()
                .map(str::parse::<ServerPlacement>)
                .transpose()
                .map_err(|e| error(e.to_string()))?,
            stage: self
                .zero_stage
                .map(|number| u8::try_from(number).map_err(|_| format!("unknown ZeRO stage {number}")))
                .transpose()
                .and_then(|number| number.map(ZeroStage::try_from).transpose())
                .map_err(error)?,
            shard_unit: self
                .shard_unit
                .as_deref()
                .map(str::parse::<ShardUnit>)
                .transpose()
                .map_err(|e| error(e.to_string()))?,
            pipeline_stages: match count(self.pipeline_stages, "pipeline_stages")? {
                Some(stages) => Some(stages),
                None if kind == StrategyKind::Hybrid => pipeline_stages_in_id(trial_id),
                None => None,
            },
        };
        Strategy::new(kind, parameters).map_err(|e| error(e.to_string()))
    }
}

/// The pp of a hybrid trial id from before the `pipeline_stages` column: its `pp<N>` part.
fn pipeline_stages_in_id(trial_id: &str) -> Option<usize> {
    trial_id.split("__").find_map(|part| part.strip_prefix("pp")?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_round_trip_every_parameter() {
        let hybrid = Strategy::Hybrid {
            pipeline_stages: 2,
            micro_batches: Some(4),
            balance: Some(Balance::Explicit(vec![2, 3])),
            checkpoint: Some(Checkpoint::ExceptLast),
        };
        let data_parallel = Strategy::DataParallel { fusion_threshold_mib: Some(16) };
        let sharded =
            Strategy::ShardedDataParallel { stage: Some(ZeroStage::Three), shard_unit: Some(ShardUnit::Network) };
        for strategy in [hybrid, data_parallel, sharded, Strategy::Single] {
            let columns = StrategyColumns::from(&strategy);
            assert_eq!(columns.strategy("any").unwrap(), strategy);
        }
    }

    #[test]
    fn a_hybrid_row_stored_before_the_pipeline_stages_column_takes_pp_from_its_id() {
        let mut columns = StrategyColumns::from(&Strategy::Hybrid {
            pipeline_stages: 2,
            micro_batches: Some(4),
            balance: None,
            checkpoint: None,
        });
        columns.pipeline_stages = None;
        for id in ["small-cnn__mnist__hybrid__w4__pp2__b128__m4__r0", "small-cnn__mnist__hybrid__w4__b128__m4__pp2__r0"]
        {
            assert_eq!(columns.strategy(id).unwrap().parameters().pipeline_stages, Some(2), "{id}");
        }
        let error = columns.strategy("small-cnn__mnist__hybrid__w4__b128__r0").unwrap_err();
        assert!(error.to_string().contains("pipeline_stages"), "{error}");
    }

    #[test]
    fn columns_naming_no_known_strategy_are_an_error_naming_the_trial() {
        let mut columns = StrategyColumns::from(&Strategy::Single);
        columns.strategy = "zero-bubble".into();
        let error = columns.strategy("t1").unwrap_err().to_string();
        assert!(error.starts_with("trial t1: unknown strategy `zero-bubble`; valid: single"), "{error}");
    }
}
