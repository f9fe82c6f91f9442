//! How a run's cells are named where they are drawn and printed, made once from their
//! typed keys: a strategy's label names the pipeline parameters only where the run tried
//! that strategy with more than one value of them (`gpipe (m4)`), its settings where the
//! run swept them (threads, links), and what it computed in apart, as a series within the
//! strategy.

use std::collections::{BTreeSet, HashMap};

use stratlab_results::CellKey;

use crate::StrategySeries;

/// The labels of one run's cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Labels {
    /// (strategy name, pipeline parameter) → the values the run gave it.
    values_of: HashMap<(&'static str, &'static str), BTreeSet<Option<String>>>,
}

impl Labels {
    /// The labels of a run with `cells`.
    pub fn of<'a>(cells: impl IntoIterator<Item = &'a CellKey>) -> Labels {
        let mut values_of: HashMap<(&'static str, &'static str), BTreeSet<Option<String>>> = HashMap::new();
        for key in cells {
            for (parameter, value) in key.strategy.pipeline_parameters() {
                values_of.entry((key.strategy.name(), parameter)).or_default().insert(value);
            }
        }
        Labels { values_of }
    }

    /// The series a cell is drawn as: its strategy's kind, its label in this run and
    /// what it computed in.
    pub fn series(&self, key: &CellKey) -> StrategySeries {
        let varies = |parameter: &str| {
            self.values_of.get(&(key.strategy.name(), parameter)).is_some_and(|values| values.len() > 1)
        };
        let compute = key.compute_label();
        StrategySeries {
            kind: key.kind(),
            label: key.strategy.report_label(varies) + &key.setting_label(),
            compute: compute.strip_prefix(" · ").unwrap_or(&compute).to_owned(),
        }
    }

    /// The strategy as tables name a cell: its series' label and what it computed in
    /// (`gpipe (m4) · bf16`).
    pub fn strategy(&self, key: &CellKey) -> String {
        self.series(key).full_label()
    }
}
