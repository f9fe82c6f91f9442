//! How a strategy is named: its trial-id suffix (file names and resume keys), and the
//! labels rankings, comparisons and reports show, all from one rendering of each parameter.

use super::{Strategy, PARAMETERS};

/// How one given parameter is spelled: its key, its fragment of a trial id (`__m4`) and its
/// label (`m4`), as its declaration in [`PARAMETERS`] says.
struct Spelling {
    key: &'static str,
    label_rank: u8,
    id: String,
    label: String,
}

impl Strategy {
    /// Every parameter given, each spelled once for ids and labels, in trial-id order.
    fn spellings(&self) -> Vec<Spelling> {
        let parameters = self.parameters();
        PARAMETERS
            .iter()
            .filter_map(|declared| {
                let value = (declared.given)(&parameters)?;
                let (id, label) = (declared.spell)(&value);
                Some(Spelling { key: declared.key, label_rank: declared.label_rank, id, label })
            })
            .collect()
    }

    /// The parameters given, as they appear in a trial id after `__w<W>__b<B>`:
    /// `__m4__bal-2-3__ckpt-except_last`.
    pub fn id_parameters(&self) -> String {
        self.spellings().into_iter().map(|spelling| spelling.id).collect()
    }

    /// Every parameter given, in the order labels name them, as (its key, how a label
    /// says it): `("pipeline_stages", "pp2")`, `("micro_batches", "m4")`, `("balance", "bal
    /// [2,3]")`, `("fusion_threshold_mib", "fusion 64 MiB")`, `("server", "dedicated
    /// server")`. The one rendering every label uses.
    pub fn labelled_parameters(&self) -> Vec<(&'static str, String)> {
        let mut spellings = self.spellings();
        spellings.sort_by_key(|spelling| spelling.label_rank);
        spellings.into_iter().map(|spelling| (spelling.key, spelling.label)).collect()
    }

    /// The strategy with its workers and the parameters given, as comparisons and
    /// rankings name it: `gpipe ×2 m4 bal time`, `hybrid ×4 pp2 m4`.
    pub fn label_with_workers(&self, workers: usize) -> String {
        let mut label = format!("{} ×{workers}", self.name());
        for (_, text) in self.labelled_parameters() {
            label.push(' ');
            label.push_str(&text);
        }
        label
    }

    /// The pipeline's shape and schedule as given, by key (`micro_batches`,
    /// `pipeline_stages`, `balance`, `checkpoint`; `None` where not given): a report names
    /// one in a strategy's label only where the run tried that strategy with more than one
    /// value of it.
    pub fn pipeline_parameters(&self) -> Vec<(&'static str, Option<String>)> {
        let parameters = self.parameters();
        PARAMETERS
            .iter()
            .filter(|declared| declared.shapes_pipeline)
            .map(|declared| (declared.key, (declared.given)(&parameters)))
            .collect()
    }

    /// The label reports group and draw by: the name, then in parentheses the pipeline
    /// parameters `varies` says the run varied, the fusion threshold and the server
    /// placement where given: `gpipe (m4)`, `parameter-server (dedicated server)`.
    pub fn report_label(&self, varies: impl Fn(&str) -> bool) -> String {
        let pipeline: Vec<&str> = self.pipeline_parameters().into_iter().map(|(key, _)| key).collect();
        let shown: Vec<String> = self
            .labelled_parameters()
            .into_iter()
            .filter(|(key, _)| !pipeline.contains(key) || varies(key))
            .map(|(_, text)| text)
            .collect();
        match shown.is_empty() {
            true => self.name().to_owned(),
            false => format!("{} ({})", self.name(), shown.join(", ")),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        f.write_str(&self.id_parameters().replace("__", " "))
    }
}

/// `1 thread`, `2 threads`: how labels name a swept thread count.
pub fn threads_label(threads: i64) -> String {
    match threads {
        1 => "1 thread".to_owned(),
        n => format!("{n} threads"),
    }
}

#[cfg(test)]
mod tests {
    use crate::{Balance, Checkpoint, Parameters, ServerPlacement, Strategy, StrategyKind};

    #[test]
    fn ids_and_labels_name_exactly_the_parameters_given() {
        let hybrid = Strategy::new(
            StrategyKind::Hybrid,
            Parameters {
                pipeline_stages: Some(2),
                micro_batches: Some(4),
                balance: Some(Balance::Explicit(vec![2, 3])),
                checkpoint: Some(Checkpoint::ExceptLast),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(hybrid.id_parameters(), "__m4__pp2__bal-2-3__ckpt-except_last");
        assert_eq!(hybrid.label_with_workers(4), "hybrid ×4 pp2 m4 bal [2,3] ckpt except_last");
        assert_eq!(hybrid.report_label(|key| key == "micro_batches"), "hybrid (m4)");
        assert_eq!(hybrid.report_label(|key| key == "pipeline_stages"), "hybrid (pp2)");
        let fused = Strategy::new(
            StrategyKind::DataParallel,
            Parameters { fusion_threshold_mib: Some(1), ..Default::default() },
        )
        .unwrap();
        assert_eq!(fused.label_with_workers(16), "data-parallel ×16 fusion 1 MiB");
        assert_eq!(fused.report_label(|_| false), "data-parallel (fusion 1 MiB)");
        assert_eq!(fused.id_parameters(), "__fusion1mib");
        let server = Strategy::new(
            StrategyKind::ParameterServer,
            Parameters { server: Some(ServerPlacement::Dedicated), ..Default::default() },
        )
        .unwrap();
        assert_eq!(server.report_label(|_| true), "parameter-server (dedicated server)");
        assert_eq!(server.id_parameters(), "__server-dedicated");
        assert_eq!(Strategy::Single.report_label(|_| true), "single");
        let zero = Strategy::new(
            StrategyKind::ShardedDataParallel,
            Parameters {
                stage: Some(crate::ZeroStage::Three),
                shard_unit: Some(crate::ShardUnit::Network),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(zero.id_parameters(), "__zero3__unit-network");
        assert_eq!(zero.label_with_workers(2), "sharded-data-parallel ×2 ZeRO-3 gathers each network");
        // Each declaration's place in labels is its own.
        let mut ranks: Vec<u8> = super::PARAMETERS.iter().map(|declared| declared.label_rank).collect();
        ranks.sort();
        assert_eq!(ranks, (0..super::PARAMETERS.len() as u8).collect::<Vec<_>>());
    }
}
