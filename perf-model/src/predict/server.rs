//! The parameter server's step as a [`StepQuestion`] asks it: a synchronous round of every
//! training rank, or, where the server answers each worker on its own, the time between its
//! updates.

use stratlab_strategy_spec::{Consistency, ServerPlacement};

use super::{StepQuestion, Unpredictable};
use crate::parameter_server::{ParameterServerRound, PerWorkerServer};
use crate::StepBreakdown;

impl StepQuestion<'_> {
    /// The server's round: the training ranks but itself push to it, it updates, they pull.
    /// A server answering each worker on its own is paced per update instead
    /// ([`PerWorkerServer`]).
    pub(super) fn parameter_server(&self, slowdown: f64) -> Result<StepBreakdown, Unpredictable> {
        let settings = self.strategy.server_settings();
        let training = settings.placement.training_ranks(self.workers);
        // The training ranks compute at once; a dedicated server waits for them.
        let slowdown = slowdown * self.contention(training as f64, self.batch);
        let compute_s = (self.sequential_s(self.batch) - self.profile.optimizer_s) * slowdown;
        let round = ParameterServerRound {
            compute_s: compute_s * self.slowest_rank(),
            parameter_bytes: self.gradient_bytes(0..self.profile.stages.len()) as f64,
            remote_workers: self.remote_workers(),
            optimizer_s: self.profile.optimizer_s * slowdown,
            copy_s: self.profile.whole_model_copy_s * slowdown,
            link: self.link()?,
        };
        if settings.consistency == (Consistency::Sync { backup_workers: 0 }) {
            return Ok(round.predict().breakdown);
        }
        let server = settings.placement.server_rank(self.workers);
        let ranks =
            (0..self.workers).filter(|&rank| settings.placement == ServerPlacement::Colocated || rank != server);
        let slowdowns = ranks
            .map(|rank| {
                self.straggler.filter(|straggler| straggler.slows(rank)).map_or(1.0, |straggler| straggler.slowdown)
            })
            .collect();
        let exchange = ParameterServerRound { compute_s, remote_workers: 1, ..round };
        Ok(PerWorkerServer { exchange, slowdowns, consistency: settings.consistency }.predict())
    }

    /// The parameter server's ranks that push to it and pull from it over the link: the
    /// training ranks but the server itself where it trains too.
    pub(super) fn remote_workers(&self) -> usize {
        let placement = self.strategy.server_placement();
        let training = placement.training_ranks(self.workers);
        match placement {
            ServerPlacement::Colocated => training.saturating_sub(1),
            ServerPlacement::Dedicated => training,
        }
    }
}
