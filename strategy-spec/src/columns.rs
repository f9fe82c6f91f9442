//! A strategy's parameters as the `trials` table stores them: one nullable column per
//! parameter, each typed, under the column names every stored run has (the strategy's kind
//! is a column of its own, `strategy`, just before the trial's workers and batch).

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::{
    Balance, Checkpoint, ColumnsError, LearningRate, Parameters, Placement, ServerMode, ServerPlacement, ShardUnit,
    StageReplicas, Strategy, StrategyKind, ZeroStage,
};

/// The parameter columns of a trial row, flattened into it. A parameter not given is null.
/// Every value is stored as the text or number suites write (`time`, `[2,3]`, `dedicated`,
/// `3`), so a table reads the same by eye and by older readers.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Columns)]
pub struct ParameterColumns {
    /// Micro-batches per step, for pipeline strategies.
    pub micro_batches: Option<i64>,
    /// How layers were split into stages (`uniform`, `time`, `[2,3]`), for pipelines.
    #[serde(with = "crate::parameters::stored_balance")]
    pub balance: Option<Balance>,
    /// Activation checkpointing mode, when given.
    pub checkpoint: Option<Checkpoint>,
    /// Stages per pipeline of a `hybrid` trial (its pp; replicas = workers ÷ pp); null for
    /// other strategies. Runs stored before the column existed hold null for hybrid trials
    /// too; their `pipeline_stages` table says it (`stratlab_results::RunView`).
    #[serde(default)]
    pub pipeline_stages: Option<i64>,
    /// Gradient-bucket fusion threshold in bytes, for data-parallel.
    pub fusion_threshold_bytes: Option<i64>,
    /// Parameter-server placement (`colocated`, `dedicated`), when given; null for runs
    /// stored before the column existed.
    #[serde(default)]
    pub server: Option<ServerPlacement>,
    /// Sharded data parallelism's ZeRO stage (1, 2, 3), when given; null for other
    /// strategies and for runs stored before the column existed.
    #[serde(default)]
    pub zero_stage: Option<ZeroStage>,
    /// What ZeRO stage 3 gathers at once (`stage`, `network`), when given.
    #[serde(default)]
    pub shard_unit: Option<ShardUnit>,
    /// The parameter server's mode (`async`, `bounded`); null for `sync`, for other
    /// strategies and for runs stored before the column existed.
    #[serde(default)]
    pub mode: Option<ServerMode>,
    /// `bounded`'s staleness bound k.
    #[serde(default)]
    pub staleness: Option<i64>,
    /// `sync`'s backup workers, when given.
    #[serde(default)]
    pub backup_workers: Option<i64>,
    /// The asynchronous modes' learning rate per update, when given.
    #[serde(default)]
    pub lr_per_update: Option<LearningRate>,
    /// Interleaved 1F1B's stages per worker; null for other strategies and for runs
    /// stored before the column existed.
    #[serde(default)]
    pub virtual_stages: Option<i64>,
    /// 1F1B's workers per stage (`[2, 1]`); null where no stage is replicated, for other
    /// strategies and for runs stored before the column existed.
    #[serde(default)]
    pub stage_replicas: Option<Vec<i64>>,
    /// Zero-bubble's placement, when given; null for other strategies and for runs stored
    /// before the column existed.
    #[serde(default)]
    pub placement: Option<Placement>,
}

impl From<&Strategy> for ParameterColumns {
    fn from(strategy: &Strategy) -> ParameterColumns {
        let Parameters {
            micro_batches,
            balance,
            checkpoint,
            fusion_threshold_mib,
            server,
            pipeline_stages,
            stage,
            shard_unit,
            mode,
            staleness,
            backup_workers,
            lr_per_update,
            virtual_stages,
            stage_replicas,
            placement,
        } = strategy.parameters();
        ParameterColumns {
            micro_batches: micro_batches.map(|m| m as i64),
            balance,
            checkpoint,
            pipeline_stages: pipeline_stages.map(|pp| pp as i64),
            fusion_threshold_bytes: fusion_threshold_mib.map(|mib| (mib << 20) as i64),
            server,
            zero_stage: stage,
            shard_unit,
            mode,
            staleness: staleness.map(|k| k as i64),
            backup_workers: backup_workers.map(|b| b as i64),
            lr_per_update,
            virtual_stages: virtual_stages.map(|v| v as i64),
            stage_replicas: stage_replicas.map(|layout| layout.counts().iter().map(|&r| r as i64).collect()),
            placement,
        }
    }
}

impl ParameterColumns {
    /// Strategy `kind` with these parameters, of the row of trial `trial_id`, or the rule
    /// the columns break (a negative count, a parameter the strategy does not take: a
    /// corrupt or foreign table).
    pub fn strategy(&self, kind: StrategyKind, trial_id: &str) -> Result<Strategy, ColumnsError> {
        let error = |message: String| ColumnsError { trial_id: trial_id.to_owned(), message };
        let count = |value: Option<i64>, column: &str| {
            value
                .map(|value| usize::try_from(value).map_err(|_| error(format!("{column} {value} is negative"))))
                .transpose()
        };
        let parameters = Parameters {
            micro_batches: count(self.micro_batches, "micro_batches")?,
            balance: self.balance.clone(),
            checkpoint: self.checkpoint,
            fusion_threshold_mib: count(self.fusion_threshold_bytes, "fusion_threshold_bytes")?
                .map(|bytes| (bytes >> 20) as u64),
            server: self.server,
            stage: self.zero_stage,
            shard_unit: self.shard_unit,
            pipeline_stages: count(self.pipeline_stages, "pipeline_stages")?,
            mode: self.mode,
            staleness: count(self.staleness, "staleness")?,
            backup_workers: count(self.backup_workers, "backup_workers")?,
            lr_per_update: self.lr_per_update,
            virtual_stages: count(self.virtual_stages, "virtual_stages")?,
            stage_replicas: match &self.stage_replicas {
                None => None,
                Some(counts) => {
                    let counts = counts
                        .iter()
                        .map(|&r| count(Some(r), "stage_replicas").map(Option::unwrap_or_default))
                        .collect::<Result<Vec<usize>, _>>()?;
                    Some(StageReplicas::try_from(counts).map_err(|why| error(format!("stage_replicas {why}")))?)
                }
            },
            placement: self.placement,
        };
        Strategy::new(kind, parameters).map_err(|e| error(e.to_string()))
    }
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
        let bounded = Strategy::ParameterServer {
            server: Some(ServerPlacement::Dedicated),
            mode: Some(ServerMode::Bounded),
            staleness: Some(2),
            backup_workers: None,
            lr_per_update: Some(LearningRate(0.005)),
        };
        let backups = Strategy::ParameterServer {
            server: None,
            mode: None,
            staleness: None,
            backup_workers: Some(1),
            lr_per_update: None,
        };
        let replicated = Strategy::OneFOneB {
            micro_batches: Some(4),
            balance: None,
            checkpoint: None,
            stage_replicas: Some(StageReplicas::try_from(vec![2, 1]).unwrap()),
        };
        for strategy in [hybrid, data_parallel, sharded, bounded, backups, replicated, Strategy::Single] {
            let columns = ParameterColumns::from(&strategy);
            assert_eq!(columns.strategy(strategy.kind(), "any").unwrap(), strategy);
            let json = serde_json::to_string(&columns).unwrap();
            assert_eq!(serde_json::from_str::<ParameterColumns>(&json).unwrap(), columns, "{json}");
        }
    }

    #[test]
    fn columns_are_stored_as_the_text_and_numbers_suites_write() {
        let columns = ParameterColumns::from(&Strategy::Hybrid {
            pipeline_stages: 2,
            micro_batches: Some(4),
            balance: Some(Balance::Explicit(vec![2, 3])),
            checkpoint: Some(Checkpoint::ExceptLast),
        });
        let json = serde_json::to_value(&columns).unwrap();
        assert_eq!(json["balance"], "[2,3]");
        assert_eq!(json["checkpoint"], "except_last");
        let sharded =
            ParameterColumns::from(&Strategy::ShardedDataParallel { stage: Some(ZeroStage::Two), shard_unit: None });
        assert_eq!(serde_json::to_value(&sharded).unwrap()["zero_stage"], 2);
    }

    #[test]
    fn a_hybrid_row_without_its_stage_count_is_an_error_naming_the_trial() {
        let mut columns = ParameterColumns::from(&Strategy::Hybrid {
            pipeline_stages: 2,
            micro_batches: Some(4),
            balance: None,
            checkpoint: None,
        });
        columns.pipeline_stages = None;
        let error = columns.strategy(StrategyKind::Hybrid, "t1").unwrap_err().to_string();
        assert!(error.starts_with("trial t1: pipeline_stages"), "{error}");
    }

    #[test]
    fn a_parameter_the_strategy_does_not_take_is_an_error_naming_the_trial() {
        let columns = ParameterColumns { micro_batches: Some(4), ..ParameterColumns::default() };
        let error = columns.strategy(StrategyKind::DataParallel, "t2").unwrap_err().to_string();
        assert!(error.starts_with("trial t2: micro_batches: does not apply to strategy data-parallel"), "{error}");
    }
}
