//! Where a predicted step's time goes, the same four parts for every strategy, so cells of
//! different strategies compare and `recommend` can say why one loses to another.

use serde::Serialize;

/// A predicted step, split. The parts add up to `step_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepBreakdown {
    /// Seconds per step.
    pub step_s: f64,
    /// Forward and backward passes (recompute included) of the busiest worker.
    pub compute_s: f64,
    /// Communication the busiest worker waits for: not hidden behind its compute.
    pub exposed_comm_s: f64,
    /// Idle time of a pipeline's busiest stage: waiting for its neighbours.
    pub bubble_s: f64,
    /// The update (the server's, for a parameter server).
    pub optimizer_s: f64,
}

impl StepBreakdown {
    /// The part of the step that is not compute, largest first, as a share of the step:
    /// what a strategy that loses to another loses on.
    pub fn largest_overhead(&self) -> (&'static str, f64) {
        let parts = [
            ("exposed communication", self.exposed_comm_s),
            ("pipeline bubble", self.bubble_s),
            ("optimizer", self.optimizer_s),
        ];
        let (name, seconds) =
            parts.into_iter().fold(("none", 0.0), |best, part| if part.1 > best.1 { part } else { best });
        (name, if self.step_s > 0.0 { seconds / self.step_s } else { 0.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_overhead_is_named_with_its_share_of_the_step() {
        let step =
            StepBreakdown { step_s: 1.0, compute_s: 0.5, exposed_comm_s: 0.41, bubble_s: 0.0, optimizer_s: 0.09 };
        assert_eq!(step.largest_overhead(), ("exposed communication", 0.41));
        let compute_only =
            StepBreakdown { step_s: 1.0, compute_s: 1.0, exposed_comm_s: 0.0, bubble_s: 0.0, optimizer_s: 0.0 };
        assert_eq!(compute_only.largest_overhead().0, "none");
    }
}
