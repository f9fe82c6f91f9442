//! Who a figure's panel, bar or line belongs to: a strategy as the run tells it apart,
//! with its kind kept, so colour and order come from the kind and a strategy is one
//! panel and one colour whatever it computed in.

use std::cmp::Ordering;

use stratlab_strategy_spec::StrategyKind;

use crate::style::strategy_rank;

/// A strategy as a figure draws it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StrategySeries {
    /// The strategy's kind: its colour and its place in every figure.
    pub kind: StrategyKind,
    /// The strategy as the run tells it apart: its name with the parameters the run varied
    /// and its settings (`gpipe (m4)`, `data-parallel · 2 threads over 1 Gbit/s`); one
    /// panel or legend entry each.
    pub label: String,
    /// What it computed in where that was not float32 on contiguous tensors with SGD
    /// (`bf16 · channels_last`, `adam`), drawn as a mark within the strategy's colour;
    /// empty otherwise.
    pub compute: String,
}

impl StrategySeries {
    /// A strategy that computed by default, labelled by its name: what figures of
    /// predictions and hand-made inputs draw.
    pub fn of(kind: StrategyKind) -> StrategySeries {
        StrategySeries { kind, label: kind.name().to_owned(), compute: String::new() }
    }

    /// The same strategy computing in `compute` (`bf16`).
    pub fn computing(mut self, compute: &str) -> StrategySeries {
        self.compute = compute.to_owned();
        self
    }

    /// The label with what it computed in: `gpipe (m4) · bf16`.
    pub fn full_label(&self) -> String {
        match self.compute.is_empty() {
            true => self.label.clone(),
            false => format!("{} · {}", self.label, self.compute),
        }
    }

    /// The series without its compute choice: the panel or colour it is drawn in.
    pub fn strategy(&self) -> StrategySeries {
        StrategySeries { compute: String::new(), ..self.clone() }
    }
}

impl PartialOrd for StrategySeries {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// In the figures' strategy order (`style::strategy_rank`), then by label, default compute first.
impl Ord for StrategySeries {
    fn cmp(&self, other: &Self) -> Ordering {
        (strategy_rank(self.kind), &self.label, !self.compute.is_empty(), &self.compute).cmp(&(
            strategy_rank(other.kind),
            &other.label,
            !other.compute.is_empty(),
            &other.compute,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_labelled_strategy_keeps_its_kind_s_place_and_its_compute_choice_follows_it() {
        let labelled = StrategySeries { label: "gpipe (m4)".into(), ..StrategySeries::of(StrategyKind::Gpipe) };
        let zero = StrategySeries {
            label: "sharded-data-parallel (ZeRO-1)".into(),
            ..StrategySeries::of(StrategyKind::ShardedDataParallel)
        };
        let mut series = [
            StrategySeries::of(StrategyKind::Hybrid),
            labelled.clone().computing("bf16"),
            labelled.clone(),
            zero.clone(),
            StrategySeries::of(StrategyKind::Single),
        ];
        series.sort();
        let labels: Vec<String> = series.iter().map(StrategySeries::full_label).collect();
        assert_eq!(labels, ["single", "sharded-data-parallel (ZeRO-1)", "gpipe (m4)", "gpipe (m4) · bf16", "hybrid"]);
        assert_eq!(labelled.clone().computing("bf16").strategy(), labelled);
    }
}
