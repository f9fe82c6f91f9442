//! A suite's `optimizer:` block: the optimizer axis (`name: [sgd, adam]`, SGD alone where
//! it is not given, as in every suite written before the axis) and each optimizer's own
//! settings. `lr` and `momentum` are SGD's, as they always were; Adam takes its own
//! learning rate (PyTorch's 1e-3 by default: SGD's 0.01–0.1 diverges Adam), betas and
//! epsilon. Weight decay and the schedule are shared.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use stratlab_strategies::optimizer::AdamSettings;
use stratlab_strategies::{LrSchedule, OptimizerKind, TrainConfig};

/// The `optimizer:` block of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimizerSettings {
    /// The optimizer axis: `sgd`, `adam`, or a list of them.
    pub name: OptimizerAxis,
    /// SGD's base learning rate.
    pub lr: f64,
    /// SGD's momentum.
    pub momentum: f64,
    /// L2 weight decay, added to the gradient by either optimizer.
    pub weight_decay: f64,
    /// Learning-rate schedule.
    pub schedule: LrSchedule,
    /// Adam's settings.
    pub adam: AdamEntry,
}

impl Default for OptimizerSettings {
    fn default() -> Self {
        OptimizerSettings {
            name: OptimizerAxis::One(OptimizerKind::Sgd),
            lr: 0.01,
            momentum: 0.9,
            weight_decay: 5e-4,
            schedule: LrSchedule::Constant,
            adam: AdamEntry::default(),
        }
    }
}

/// One optimizer or a list (an axis).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum OptimizerAxis {
    /// Every cell trains with this one.
    One(OptimizerKind),
    /// Every cell runs once with each.
    Axis(Vec<OptimizerKind>),
}

impl OptimizerAxis {
    /// The optimizers, in the order given.
    pub fn kinds(&self) -> Vec<OptimizerKind> {
        match self {
            OptimizerAxis::One(kind) => vec![*kind],
            OptimizerAxis::Axis(kinds) => kinds.clone(),
        }
    }
}

/// A name or a list of names, each error naming the valid optimizers (serde's untagged
/// enums say only that no variant matched).
impl<'de> Deserialize<'de> for OptimizerAxis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AxisVisitor;
        impl<'de> Visitor<'de> for AxisVisitor {
            type Value = OptimizerAxis;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an optimizer (sgd, adam) or a list of them")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<OptimizerAxis, E> {
                name.parse().map(OptimizerAxis::One).map_err(E::custom)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OptimizerAxis, A::Error> {
                let mut kinds = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    kinds.push(name.parse().map_err(de::Error::custom)?);
                }
                Ok(OptimizerAxis::Axis(kinds))
            }
        }
        deserializer.deserialize_any(AxisVisitor)
    }
}

/// `optimizer.adam`: Adam's learning rate and `torch.optim.Adam`'s other arguments.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamEntry {
    /// Adam's base learning rate.
    pub lr: f64,
    /// Decay rates of the moment estimates.
    pub betas: [f64; 2],
    /// Added to the second moment's square root.
    pub eps: f64,
}

impl Default for AdamEntry {
    fn default() -> Self {
        let AdamSettings { betas, eps } = AdamSettings::default();
        AdamEntry { lr: 1e-3, betas, eps }
    }
}

impl OptimizerSettings {
    /// `config` (a trial's) training with `kind`: its learning rate, momentum, weight
    /// decay and schedule, and Adam's settings.
    pub fn apply(&self, kind: OptimizerKind, config: &mut TrainConfig) {
        config.optimizer = kind;
        config.lr = match kind {
            OptimizerKind::Sgd => self.lr,
            OptimizerKind::Adam => self.adam.lr,
        };
        config.momentum = self.momentum;
        config.weight_decay = self.weight_decay;
        config.schedule = self.schedule;
        config.adam = AdamSettings { betas: self.adam.betas, eps: self.adam.eps };
    }
}
