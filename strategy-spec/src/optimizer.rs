//! Which optimizer a cell trains with: the suite's `optimizer.name` axis (`[sgd, adam]`),
//! its name in tables, ids and labels, the optimizer state it keeps per weight (what
//! memory predictions count), and reading it from a stored column (null in runs stored
//! before the axis: SGD, the only optimizer then).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::UnknownName;

/// The update rule a cell trains with.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OptimizerKind {
    /// Stochastic gradient descent, with momentum where the suite gives one (the thesis's).
    #[default]
    Sgd,
    /// Adam (Kingma and Ba), as `torch.optim.Adam`: two float32 moments per weight, weight
    /// decay added to the gradient (L2, not AdamW's decoupled decay).
    Adam,
}

impl OptimizerKind {
    /// The name suites, tables and labels use (`sgd`, `adam`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether this is SGD: what every cell trained with before the axis existed, so it adds
    /// nothing to a trial's id or a cell's label.
    pub fn is_sgd(self) -> bool {
        self == OptimizerKind::Sgd
    }

    /// How the optimizer joins a cell's label: nothing for SGD, else ` · adam`.
    pub fn label(self) -> String {
        if self.is_sgd() {
            String::new()
        } else {
            format!(" · {self}")
        }
    }

    /// State tensors the optimizer keeps per weight tensor, each the weight's size in
    /// float32: SGD's momentum buffer (none without momentum), Adam's first and second
    /// moments.
    pub fn state_tensors_per_weight(self, momentum: f64) -> usize {
        match self {
            OptimizerKind::Sgd => usize::from(momentum != 0.0),
            OptimizerKind::Adam => 2,
        }
    }

    /// Temporaries of a weight tensor's size that one update of it allocates at once, in
    /// libtorch's C++ optimizers: the weight-decayed gradient (`grad + wd · w`, a new
    /// tensor), and for Adam the second moment's square root and its quotient by the bias
    /// correction, alive together before `eps` is added in place.
    pub fn update_temporaries(self, weight_decay: f64) -> usize {
        let decayed = usize::from(weight_decay != 0.0);
        match self {
            OptimizerKind::Sgd => decayed,
            OptimizerKind::Adam => 2 + decayed,
        }
    }
}

stratlab_columns::text_column!(OptimizerKind);

impl FromStr for OptimizerKind {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, UnknownName> {
        UnknownName::parse("optimizer", name)
    }
}

/// What the optimizer holds beside the weights, per weight tensor it updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptimizerFootprint {
    /// State tensors of the weight's size kept from step to step (momentum SGD 1, Adam 2).
    pub states: usize,
    /// Temporaries of the weight's size one update allocates at once (Adam with weight
    /// decay 3): the update's own high-water, on the largest tensor it updates.
    pub temporaries: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_an_unknown_one_lists_the_valid_names() {
        for kind in [OptimizerKind::Sgd, OptimizerKind::Adam] {
            assert_eq!(kind.name().parse::<OptimizerKind>().unwrap(), kind);
        }
        let error = "lamb".parse::<OptimizerKind>().unwrap_err().to_string();
        assert!(error.contains("lamb") && error.contains("sgd, adam"), "{error}");
    }

    #[test]
    fn sgd_labels_nothing_and_counts_its_momentum_buffer_only_with_momentum() {
        assert_eq!(OptimizerKind::Sgd.label(), "");
        assert_eq!(OptimizerKind::Adam.label(), " · adam");
        assert_eq!(OptimizerKind::Sgd.state_tensors_per_weight(0.9), 1);
        assert_eq!(OptimizerKind::Sgd.state_tensors_per_weight(0.0), 0);
        assert_eq!(OptimizerKind::Adam.state_tensors_per_weight(0.9), 2);
        assert_eq!(OptimizerKind::Adam.update_temporaries(5e-4), 3);
        assert_eq!(OptimizerKind::Sgd.update_temporaries(0.0), 0);
    }
}
