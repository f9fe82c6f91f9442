//! The update rule every strategy steps with: SGD with momentum (the thesis's) or Adam, as
//! the trial's [`OptimizerKind`] says, over a store's trainable variables.

use serde::{Deserialize, Serialize};
use stratlab_strategy_spec::OptimizerFootprint;
use stratlab_strategy_spec::OptimizerKind;
use tch::nn::{self, OptimizerConfig, VarStore};

use crate::TrainError;

/// Adam's own settings: `torch.optim.Adam`'s arguments beside the learning rate, with its
/// defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamSettings {
    /// Decay rates of the first and second moment estimates.
    pub betas: [f64; 2],
    /// Added to the second moment's square root, against division by zero.
    pub eps: f64,
}

impl Default for AdamSettings {
    fn default() -> Self {
        AdamSettings { betas: [0.9, 0.999], eps: 1e-8 }
    }
}

impl AdamSettings {
    /// Why these settings cannot train, naming the field, if they cannot.
    pub fn validate(&self) -> Result<(), TrainError> {
        let invalid = |field, reason: &str| Err(TrainError::InvalidConfig { field, reason: reason.to_string() });
        if !self.betas.iter().all(|beta| (0.0..1.0).contains(beta)) {
            return invalid("adam.betas", "each must lie in [0, 1)");
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return invalid("adam.eps", "must be a finite positive number");
        }
        Ok(())
    }
}

/// Everything that decides an update but the learning rate (which the schedule moves).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateRule {
    /// SGD or Adam.
    pub kind: OptimizerKind,
    /// SGD's momentum (Adam ignores it).
    pub momentum: f64,
    /// L2 weight decay, added to the gradient (as both `torch.optim` classes do).
    pub weight_decay: f64,
    /// Adam's betas and epsilon (SGD ignores them).
    pub adam: AdamSettings,
}

impl UpdateRule {
    /// SGD without momentum or weight decay: the cheapest update, where a measurement
    /// needs one but does not time it.
    pub fn plain_sgd() -> UpdateRule {
        UpdateRule { kind: OptimizerKind::Sgd, momentum: 0.0, weight_decay: 0.0, adam: AdamSettings::default() }
    }

    /// SGD with momentum 0.9 and no weight decay: the thesis's update, for measurements
    /// that time a typical one.
    pub fn momentum_sgd() -> UpdateRule {
        UpdateRule { momentum: 0.9, ..UpdateRule::plain_sgd() }
    }

    /// libtorch's optimizer for this rule over `store`'s trainable variables at `lr`: SGD
    /// without dampening or Nesterov, Adam without AMSGrad (the `torch.optim` defaults).
    pub fn build(&self, store: &VarStore, lr: f64) -> Result<nn::Optimizer, TrainError> {
        Ok(match self.kind {
            OptimizerKind::Sgd => {
                nn::Sgd { momentum: self.momentum, dampening: 0.0, wd: self.weight_decay, nesterov: false }
                    .build(store, lr)?
            }
            OptimizerKind::Adam => nn::Adam {
                beta1: self.adam.betas[0],
                beta2: self.adam.betas[1],
                wd: self.weight_decay,
                eps: self.adam.eps,
                amsgrad: false,
            }
            .build(store, lr)?,
        })
    }

    /// State tensors the rule keeps per weight tensor (see
    /// [`OptimizerKind::state_tensors_per_weight`]).
    pub fn state_tensors_per_weight(&self) -> usize {
        self.kind.state_tensors_per_weight(self.momentum)
    }

    /// What the rule keeps and allocates per weight tensor, as the memory model counts it.
    pub fn footprint(&self) -> OptimizerFootprint {
        OptimizerFootprint {
            states: self.state_tensors_per_weight(),
            temporaries: self.kind.update_temporaries(self.weight_decay),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    /// One step of `rule` at `lr` from weights `w` with gradient `g`; the new weights.
    fn one_step(rule: UpdateRule, lr: f64, w: &[f64], g: &[f64]) -> Vec<f64> {
        let mut store = VarStore::new(Device::Cpu);
        let weight = store.root().var_copy("w", &Tensor::from_slice(w));
        store.double();
        let mut optimizer = rule.build(&store, lr).unwrap();
        weight.sum(Kind::Double).backward();
        tch::no_grad(|| weight.grad().copy_(&Tensor::from_slice(g).to_kind(Kind::Double)));
        optimizer.step();
        Vec::<f64>::try_from(weight.detach()).unwrap()
    }

    #[test]
    fn adams_first_step_moves_each_weight_by_lr_in_its_gradients_sign_and_sgd_by_lr_times_it() {
        // After one step Adam's bias-corrected moments are g and g², so each weight moves by
        // lr · g / (|g| + eps): the gradient's sign, whatever its size. SGD moves lr · g.
        let (w, g) = ([1.0, -2.0, 0.5], [4.0, -0.01, 1e-3]);
        let adam = UpdateRule { kind: OptimizerKind::Adam, ..UpdateRule::plain_sgd() };
        let stepped = one_step(adam, 0.1, &w, &g);
        for ((after, before), grad) in stepped.iter().zip(w).zip(g) {
            let expected = before - 0.1 * grad / (grad.abs() + 1e-8);
            assert!((after - expected).abs() < 1e-9, "adam: {after} against {expected}");
        }
        let stepped = one_step(UpdateRule::plain_sgd(), 0.1, &w, &g);
        for ((after, before), grad) in stepped.iter().zip(w).zip(g) {
            assert!((after - (before - 0.1 * grad)).abs() < 1e-12, "sgd: {after}");
        }
    }

    #[test]
    fn adam_settings_out_of_range_name_their_field() {
        let bad_beta = AdamSettings { betas: [0.9, 1.0], ..AdamSettings::default() };
        assert!(bad_beta.validate().unwrap_err().to_string().contains("adam.betas"));
        let bad_eps = AdamSettings { eps: 0.0, ..AdamSettings::default() };
        assert!(bad_eps.validate().unwrap_err().to_string().contains("adam.eps"));
        assert!(AdamSettings::default().validate().is_ok());
    }
}
