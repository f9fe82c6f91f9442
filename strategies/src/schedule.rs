//! Learning-rate schedules, evaluated per optimizer step.

use serde::{Deserialize, Serialize};

/// How the learning rate changes over training.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LrSchedule {
    /// The base rate throughout.
    Constant,
    /// Multiply by `gamma` every `every_epochs` epochs (torch's StepLR).
    Step {
        /// Epochs between two multiplications.
        every_epochs: usize,
        /// The factor.
        gamma: f64,
    },
    /// Half-cosine from the base rate down to zero over the whole budget of steps.
    Cosine,
}

impl LrSchedule {
    /// The rate for optimizer step `step` (0-based) in epoch `epoch`, given the total number
    /// of steps the budget allows (`None` when the budget is wall time, where cosine cannot
    /// know its end and falls back to the base rate).
    pub fn rate(&self, base_lr: f64, epoch: usize, step: usize, total_steps: Option<usize>) -> f64 {
        match *self {
            LrSchedule::Constant => base_lr,
            LrSchedule::Step { every_epochs, gamma } => base_lr * gamma.powi((epoch / every_epochs.max(1)) as i32),
            LrSchedule::Cosine => match total_steps {
                Some(total) if total > 0 => {
                    let progress = (step as f64 / total as f64).min(1.0);
                    0.5 * base_lr * (1.0 + (std::f64::consts::PI * progress).cos())
                }
                _ => base_lr,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_schedule_decays_at_epoch_boundaries() {
        let schedule = LrSchedule::Step { every_epochs: 2, gamma: 0.1 };
        assert_eq!(schedule.rate(1.0, 0, 0, None), 1.0);
        assert_eq!(schedule.rate(1.0, 1, 0, None), 1.0);
        assert!((schedule.rate(1.0, 2, 0, None) - 0.1).abs() < 1e-12);
        assert!((schedule.rate(1.0, 5, 0, None) - 0.01).abs() < 1e-12);
    }

    #[test]
    fn cosine_starts_at_base_halves_midway_and_ends_at_zero() {
        let cosine = LrSchedule::Cosine;
        assert_eq!(cosine.rate(0.4, 0, 0, Some(100)), 0.4);
        assert!((cosine.rate(0.4, 0, 50, Some(100)) - 0.2).abs() < 1e-12);
        assert!(cosine.rate(0.4, 0, 100, Some(100)).abs() < 1e-12);
        assert_eq!(cosine.rate(0.4, 0, 50, None), 0.4);
    }
}
