//! How a strategy is named: its trial-id suffix (file names and resume keys), and the
//! labels rankings, comparisons and reports show, all from one rendering of each parameter.

use super::{Parameters, Strategy};

impl Strategy {
    /// The parameters given, as they appear in a trial id after `__w<W>__b<B>`:
    /// `__m4__bal-2-3__ckpt-except_last` (ids are file names: no brackets or commas).
    pub fn id_parameters(&self) -> String {
        let Parameters {
            micro_batches,
            balance,
            checkpoint,
            fusion_threshold_mib,
            server,
            pipeline_stages,
            stage,
            shard_unit,
        } = self.parameters();
        let mut id = String::new();
        if let Some(stage) = stage {
            id += &format!("__zero{stage}");
        }
        if let Some(unit) = shard_unit {
            id += &format!("__unit-{unit}");
        }
        if let Some(m) = micro_batches {
            id += &format!("__m{m}");
        }
        if let Some(mib) = fusion_threshold_mib {
            id += &format!("__fusion{mib}mib");
        }
        if let Some(server) = server {
            id += &format!("__server-{server}");
        }
        if let Some(stages) = pipeline_stages {
            id += &format!("__pp{stages}");
        }
        if let Some(balance) = balance {
            id += &format!("__bal-{}", balance.to_string().replace(['[', ']'], "").replace(',', "-"));
        }
        if let Some(checkpoint) = checkpoint {
            id += &format!("__ckpt-{checkpoint}");
        }
        id
    }

    /// Every parameter given, in the order labels name them, as (its name, how a label
    /// says it): `("pp", "pp2")`, `("m", "m4")`, `("balance", "bal [2,3]")`,
    /// `("checkpoint", "ckpt except_last")`, `("fusion", "fusion 64 MiB")`,
    /// `("server", "dedicated server")`. The one rendering every label uses; trial ids,
    /// which are file names and resume keys, keep their own spelling ([`Self::id_parameters`]).
    pub fn labelled_parameters(&self) -> Vec<(&'static str, String)> {
        let Parameters {
            micro_batches,
            balance,
            checkpoint,
            fusion_threshold_mib,
            server,
            pipeline_stages,
            stage,
            shard_unit,
        } = self.parameters();
        [
            ("stage", stage.map(|stage| format!("ZeRO-{stage}"))),
            ("shard_unit", shard_unit.map(|unit| format!("gathers each {unit}"))),
            ("pp", pipeline_stages.map(|pp| format!("pp{pp}"))),
            ("m", micro_batches.map(|m| format!("m{m}"))),
            ("balance", balance.map(|balance| format!("bal {balance}"))),
            ("checkpoint", checkpoint.map(|checkpoint| format!("ckpt {checkpoint}"))),
            ("fusion", fusion_threshold_mib.map(|mib| format!("fusion {mib} MiB"))),
            ("server", server.map(|server| format!("{server} server"))),
        ]
        .into_iter()
        .filter_map(|(name, text)| Some((name, text?)))
        .collect()
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

    /// The pipeline's shape and schedule as given, by name (`pp`, `m`, `balance`,
    /// `checkpoint`): a report names one in a strategy's label only where the run tried
    /// that strategy with more than one value of it.
    pub fn pipeline_parameters(&self) -> [(&'static str, Option<String>); 4] {
        let parameters = self.parameters();
        [
            ("pp", parameters.pipeline_stages.map(|pp| pp.to_string())),
            ("m", parameters.micro_batches.map(|m| m.to_string())),
            ("balance", parameters.balance.map(|balance| balance.to_string())),
            ("checkpoint", parameters.checkpoint.map(|checkpoint| checkpoint.to_string())),
        ]
    }

    /// The label reports group and draw by: the name, then in parentheses the pipeline
    /// parameters `varies` says the run varied, the fusion threshold and the server
    /// placement where given: `gpipe (m4)`, `parameter-server (dedicated server)`.
    pub fn report_label(&self, varies: impl Fn(&str) -> bool) -> String {
        let pipeline = self.pipeline_parameters().map(|(name, _)| name);
        let shown: Vec<String> = self
            .labelled_parameters()
            .into_iter()
            .filter(|(name, _)| !pipeline.contains(name) || varies(name))
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
        assert_eq!(hybrid.report_label(|name| name == "m"), "hybrid (m4)");
        assert_eq!(hybrid.report_label(|name| name == "pp"), "hybrid (pp2)");
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
    }
}
