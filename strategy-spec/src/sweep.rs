//! A suite file's strategy entry: a name, or a map of the strategy's worker counts and
//! parameters, where `workers` and `micro_batches` are axes (lists) to sweep.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::parameters::MICRO_BATCHES_AT_LEAST_ONE;
use crate::{
    check_backup_workers, micro_batches_fit, AutoOr, Balance, Checkpoint, LearningRate, MemoryFormat, Parameters,
    Placement, Precision, ServerMode, ServerPlacement, ShardUnit, StageReplicas, Strategy, StrategyKind, SweepError,
    ZeroStage,
};

/// One entry of a suite's `strategies` axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(remote = "Self")]
pub struct StrategySweep {
    /// Which strategy.
    pub name: StrategyKind,
    /// Worker counts to try.
    #[serde(default = "one_worker")]
    pub workers: Vec<usize>,
    /// Micro-batch counts to try (pipelines).
    #[serde(default)]
    pub micro_batches: Option<Vec<usize>>,
    /// Pipeline partitioning.
    #[serde(default)]
    pub balance: Option<Balance>,
    /// Pipeline checkpoint mode.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// Gradient fusion bucket size in MiB (data parallel; Horovod's default is 64).
    #[serde(default)]
    pub fusion_threshold_mib: Option<u64>,
    /// Where the parameter server runs (`colocated` on rank 0, default, or `dedicated`).
    #[serde(default)]
    pub server: Option<ServerPlacement>,
    /// The parameter server's modes to try (`sync`, the default, `async`, `bounded`; an
    /// axis).
    #[serde(default)]
    pub mode: Option<Vec<ServerMode>>,
    /// The staleness bounds k to try for `mode: bounded` (an axis; the other modes take
    /// none).
    #[serde(default)]
    pub staleness: Option<Vec<usize>>,
    /// Gradients per round a `sync` server does not wait for.
    #[serde(default)]
    pub backup_workers: Option<usize>,
    /// The learning rate of each per-gradient update (`async`, `bounded`; default the
    /// suite's ÷ the training ranks).
    #[serde(default)]
    pub lr_per_update: Option<LearningRate>,
    /// Stages per pipeline (pp) of `hybrid`; its replicas are workers ÷ pp.
    #[serde(default)]
    pub pipeline_stages: Option<usize>,
    /// Stages per worker of `interleaved-1f1b` and `zero-bubble` to try (an axis).
    #[serde(default)]
    pub virtual_stages: Option<Vec<usize>>,
    /// How `zero-bubble` places its stages (`loop`, the default, or `v`).
    #[serde(default)]
    pub placement: Option<Placement>,
    /// Workers per stage of `1f1b` (`[2, 1]`: PipeDream's replicated stages; the workers
    /// are their sum).
    #[serde(default)]
    pub stage_replicas: Option<StageReplicas>,
    /// ZeRO stages to try (sharded data parallelism: 1, 2, 3; an axis).
    #[serde(default)]
    pub stage: Option<Vec<ZeroStage>>,
    /// What ZeRO stage 3 gathers at once (`stage`, the default, or `network`).
    #[serde(default)]
    pub shard_unit: Option<ShardUnit>,
    /// The precisions of the suite's `precision` axis this strategy runs (all when absent).
    #[serde(default)]
    pub precision: Option<Vec<AutoOr<Precision>>>,
    /// The memory formats of the suite's `memory_format` axis this strategy runs (all when
    /// absent).
    #[serde(default)]
    pub memory_format: Option<Vec<AutoOr<MemoryFormat>>>,
}

fn one_worker() -> Vec<usize> {
    vec![1]
}

impl StrategySweep {
    /// The entry a bare name stands for: one worker, default parameters.
    pub fn named(name: StrategyKind) -> StrategySweep {
        StrategySweep {
            name,
            workers: one_worker(),
            micro_batches: None,
            balance: None,
            checkpoint: None,
            fusion_threshold_mib: None,
            server: None,
            mode: None,
            staleness: None,
            backup_workers: None,
            lr_per_update: None,
            pipeline_stages: None,
            virtual_stages: None,
            placement: None,
            stage_replicas: None,
            stage: None,
            shard_unit: None,
            precision: None,
            memory_format: None,
        }
    }

    /// Checks what serde cannot, for per-worker batches `batches` (`(data set, batch)`,
    /// one per data set of the suite): empty axes, zero counts, more micro-batches than a
    /// batch has samples, and every rule of [`Strategy::new`].
    pub fn validate(&self, batches: &[(String, usize)]) -> Result<(), SweepError> {
        let error = |field, message: String| Err(SweepError { field, message });
        if self.workers.is_empty() || self.workers.contains(&0) {
            return error("workers", "give one or more worker counts, each at least 1".into());
        }
        if self.stage.as_ref().is_some_and(Vec::is_empty) {
            return error("stage", "give one or more ZeRO stages (1, 2, 3)".into());
        }
        let gathers = self.stage.as_ref().is_none_or(|stages| stages.iter().any(|stage| stage.shards_weights()));
        if self.shard_unit.is_some() && self.name == StrategyKind::ShardedDataParallel && !gathers {
            return error("shard_unit", "gathers sharded weights: it applies to stage 3 only".into());
        }
        if let Some(layout) = &self.stage_replicas {
            if let Some(&workers) = self.workers.iter().find(|&&workers| workers != layout.workers()) {
                return error(
                    "workers",
                    format!("{workers} workers: stage_replicas {layout} runs on {} (their sum)", layout.workers()),
                );
            }
        }
        if self.virtual_stages.as_ref().is_some_and(Vec::is_empty) {
            return error("virtual_stages", "give one or more stage counts per worker".into());
        }
        if self.mode.as_ref().is_some_and(Vec::is_empty) {
            return error("mode", "give one or more modes (sync, async, bounded)".into());
        }
        let modes = || self.mode.iter().flatten();
        if self.staleness.is_some() && self.mode.is_some() && !modes().any(|&mode| mode == ServerMode::Bounded) {
            return error("staleness", "bounds mode bounded only, which this entry's modes do not include".into());
        }
        if self.staleness.as_ref().is_some_and(Vec::is_empty) {
            return error("staleness", "give one or more bounds k (0 or more updates ahead)".into());
        }
        if self.backup_workers.is_some() && self.mode.is_some() && !modes().any(|&mode| mode == ServerMode::Sync) {
            return error(
                "backup_workers",
                "applies to mode sync only, which this entry's modes do not include".into(),
            );
        }
        let per_gradient = |mode: &ServerMode| *mode != ServerMode::Sync;
        if self.lr_per_update.is_some() && self.mode.is_some() && !modes().any(per_gradient) {
            return error(
                "lr_per_update",
                "applies to modes async and bounded, which this entry's modes do not include".into(),
            );
        }
        if let Some(counts) = &self.micro_batches {
            if counts.is_empty() || counts.contains(&0) {
                return error("micro_batches", MICRO_BATCHES_AT_LEAST_ONE.into());
            }
            for (dataset, batch) in batches {
                for &count in counts {
                    if let Err(too_many) = micro_batches_fit(count, *batch) {
                        return error("micro_batches", format!("{too_many} for {dataset}"));
                    }
                }
            }
        }
        self.expand().map(|_| ())
    }

    /// The `(mode, staleness, backup_workers)` of each parameter-server cell, in order: the
    /// modes, `bounded` once per bound; backup workers go to `sync` only. One cell of
    /// nothing where no mode is given.
    fn server_modes(&self) -> Vec<(Option<ServerMode>, Option<usize>, Option<usize>)> {
        let Some(modes) = &self.mode else {
            return vec![(None, self.staleness.as_ref().and_then(|k| k.first().copied()), self.backup_workers)];
        };
        modes
            .iter()
            .flat_map(|&mode| match mode {
                ServerMode::Bounded => match &self.staleness {
                    Some(bounds) => bounds.iter().map(|&k| (Some(mode), Some(k), None)).collect(),
                    None => vec![(Some(mode), None, None)],
                },
                ServerMode::Sync => vec![(Some(mode), None, self.backup_workers)],
                ServerMode::Async => vec![(Some(mode), None, None)],
            })
            .collect()
    }

    /// Every `(workers, strategy)` of the entry, in order: worker counts, then micro-batch
    /// counts, then stages per worker, or ZeRO stages or server modes.
    pub fn expand(&self) -> Result<Vec<(usize, Strategy)>, SweepError> {
        let micro_batches: Vec<Option<usize>> = match &self.micro_batches {
            Some(counts) => counts.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let stages: Vec<Option<ZeroStage>> = match &self.stage {
            Some(stages) => stages.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let virtual_stages: Vec<Option<usize>> = match &self.virtual_stages {
            Some(counts) => counts.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let modes = self.server_modes();
        let mut cells = Vec::new();
        for &workers in &self.workers {
            let mut shapes = Vec::new();
            for m in &micro_batches {
                for v in &virtual_stages {
                    shapes.extend(stages.iter().map(|s| (m, v, s)));
                }
            }
            for ((&micro_batches, &virtual_stages, &stage), &(mode, staleness, backup_workers)) in
                shapes.into_iter().flat_map(|shape| modes.iter().map(move |mode| (shape, mode)))
            {
                // At stages 1 and 2 nothing is gathered: an entry sweeping stages gives its
                // unit to stage 3 only.
                let shard_unit = self.shard_unit.filter(|_| stage.is_none_or(ZeroStage::shards_weights));
                let parameters = Parameters {
                    micro_batches,
                    balance: self.balance.clone(),
                    checkpoint: self.checkpoint,
                    fusion_threshold_mib: self.fusion_threshold_mib,
                    server: self.server,
                    pipeline_stages: self.pipeline_stages,
                    stage,
                    shard_unit,
                    mode,
                    staleness,
                    backup_workers,
                    // Given to the per-gradient modes; where no mode is, Strategy::new refuses it.
                    lr_per_update: self.lr_per_update.filter(|_| mode.is_none_or(|mode| mode != ServerMode::Sync)),
                    virtual_stages,
                    stage_replicas: self.stage_replicas.clone(),
                    placement: self.placement,
                };
                let strategy = Strategy::new(self.name, parameters)?;
                if let Some(backups) = backup_workers {
                    check_backup_workers(backups, workers, strategy.server_placement())
                        .map_err(|message| SweepError { field: "backup_workers", message })?;
                }
                cells.push((workers, strategy));
            }
        }
        Ok(cells)
    }
}

impl Serialize for StrategySweep {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StrategySweep::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for StrategySweep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = StrategySweep;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a strategy name, or a map with `name` and the strategy's parameters")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<StrategySweep, E> {
                Ok(StrategySweep::named(name.parse().map_err(E::custom)?))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<StrategySweep, M::Error> {
                StrategySweep::deserialize(de::value::MapAccessDeserializer::new(map))
            }
            fn visit_seq<S: SeqAccess<'de>>(self, _seq: S) -> Result<StrategySweep, S::Error> {
                Err(de::Error::custom("a strategy entry is a name or a map, not a list"))
            }
        }
        deserializer.deserialize_any(EntryVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(yaml: &str) -> StrategySweep {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn an_entry_is_a_name_or_a_map_and_expands_workers_then_micro_batches() {
        assert_eq!(sweep("single"), StrategySweep::named(StrategyKind::Single));
        let entry = sweep("{name: gpipe, workers: [2, 4], micro_batches: [1, 8], balance: time}");
        let cells = entry.expand().unwrap();
        let ids: Vec<String> = cells.iter().map(|(w, s)| format!("w{w}{}", s.id_parameters())).collect();
        assert_eq!(ids, ["w2__m1__bal-time", "w2__m8__bal-time", "w4__m1__bal-time", "w4__m8__bal-time"]);
        let entry = sweep("{name: sharded-data-parallel, workers: [2], stage: [1, 3], shard_unit: network}");
        let cells = entry.expand().unwrap();
        let ids: Vec<String> = cells.iter().map(|(w, s)| format!("w{w}{}", s.id_parameters())).collect();
        assert_eq!(ids, ["w2__zero1", "w2__zero3__unit-network"], "the unit goes to stage 3 only");
        assert_eq!(cells[1].1.label_with_workers(2), "sharded-data-parallel ×2 ZeRO-3 gathers each network");
        assert_eq!(cells[1].1.global_batch(32, 2), 64, "every rank trains its own batch");
    }

    fn sweep_error(yaml: &str) -> String {
        serde_saphyr::from_str::<StrategySweep>(yaml).unwrap_err().to_string()
    }

    #[test]
    fn server_modes_expand_bounded_once_per_bound_and_sync_keeps_its_id() {
        let entry = sweep(
            "{name: parameter-server, workers: [3], server: dedicated, mode: [sync, async, bounded], staleness: [0, 2], \
             backup_workers: 1}",
        );
        entry.validate(&[]).unwrap();
        let cells = entry.expand().unwrap();
        let ids: Vec<String> = cells.iter().map(|(w, s)| format!("w{w}{}", s.id_parameters())).collect();
        assert_eq!(
            ids,
            [
                "w3__server-dedicated__backup1",
                "w3__server-dedicated__async",
                "w3__server-dedicated__bounded__k0",
                "w3__server-dedicated__bounded__k2"
            ]
        );
        assert_eq!(cells[3].1.label_with_workers(3), "parameter-server ×3 dedicated server bounded k=2");
        assert_eq!(cells[0].1.label_with_workers(3), "parameter-server ×3 dedicated server 1 backup");
        let rated = sweep("{name: parameter-server, workers: [2], mode: [sync, async], lr_per_update: 0.005}");
        let ids: Vec<String> = rated.expand().unwrap().iter().map(|(_, s)| s.id_parameters()).collect();
        assert_eq!(ids, ["", "__async__lru0.005"], "the rate goes to the per-gradient modes only");
        let error = sweep("{name: parameter-server, workers: [2], lr_per_update: 0.005}").validate(&[]).unwrap_err();
        assert_eq!(error.field, "lr_per_update");
        let error = sweep("{name: parameter-server, mode: [async], lr_per_update: -1}").validate(&[]).unwrap_err();
        assert_eq!(error.to_string(), "lr_per_update: -1 is not a learning rate: give a positive number");
        let plain = sweep("{name: parameter-server, workers: [2], mode: [sync]}").expand().unwrap();
        assert_eq!(plain[0].1.id_parameters(), "", "sync is today's parameter server, under today's id");
    }

    #[test]
    fn validation_names_the_field_and_the_valid_choices() {
        let error = sweep("{name: single, server: dedicated}").validate(&[]).unwrap_err();
        assert_eq!(
            (error.field, error.message.as_str()),
            ("server", "does not apply to strategy single; it applies to parameter-server")
        );
        let error = sweep("{name: gpipe, micro_batches: [4, 64]}").validate(&[("mnist".into(), 32)]).unwrap_err();
        assert_eq!(error.to_string(), "micro_batches: 64 micro-batches exceed the batch of 32 samples for mnist");
        let error = sweep("{name: hybrid, workers: [4]}").validate(&[]).unwrap_err();
        assert_eq!(error.field, "pipeline_stages");
        let error =
            sweep("{name: sharded-data-parallel, stage: [1, 2], shard_unit: network}").validate(&[]).unwrap_err();
        assert_eq!(error.to_string(), "shard_unit: gathers sharded weights: it applies to stage 3 only");
        let error = sweep("{name: data-parallel, stage: [1]}").validate(&[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "stage: does not apply to strategy data-parallel; it applies to sharded-data-parallel"
        );
        let error = sweep("{name: parameter-server, workers: [2], mode: [sync, async], staleness: [2]}")
            .validate(&[])
            .unwrap_err();
        assert_eq!(error.to_string(), "staleness: bounds mode bounded only, which this entry's modes do not include");
        let error = sweep("{name: parameter-server, workers: [2], staleness: [2]}").validate(&[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "staleness: bounds mode bounded only: give mode: bounded, or leave staleness out"
        );
        let error = sweep("{name: parameter-server, workers: [2], mode: [bounded]}").validate(&[]).unwrap_err();
        assert_eq!(error.field, "staleness");
        let error = sweep("{name: parameter-server, workers: [3], server: dedicated, backup_workers: 2}")
            .validate(&[])
            .unwrap_err();
        assert_eq!(error.field, "backup_workers");
        assert!(error.message.contains("at most 1"), "{error}");
        let error = sweep("{name: parameter-server, workers: [2], mode: [async], backup_workers: 1}")
            .validate(&[])
            .unwrap_err();
        assert_eq!(error.field, "backup_workers");
        let unknown = sweep_error("{name: parameter-server, mode: [hogwild]}");
        assert!(unknown.contains("unknown variant `hogwild`") || unknown.contains("hogwild"), "{unknown}");
        let unknown = serde_saphyr::from_str::<StrategySweep>("zb-h2").unwrap_err().to_string();
        assert!(unknown.contains("unknown strategy `zb-h2`; valid: single, data-parallel"), "{unknown}");
        let unknown = sweep_error("{name: zero-bubble, placement: w}");
        assert!(unknown.contains("unknown variant `w`, expected one of loop, v"), "{unknown}");
    }
}
