//! A synchronous parameter-server step as stratlab runs it: every training rank computes
//! its gradients; the workers send them, flattened, to the server, whose one link takes
//! them one after another; the server averages them, takes the update alone, and sends the
//! new weights back to every worker over the same link. A colocated server also trains
//! (it waits for its own backward before receiving); a dedicated one only serves.

use serde::Serialize;

use crate::{Link, StepBreakdown};

/// A parameter-server round to predict.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterServerRound {
    /// Forward and backward seconds of one training rank at its batch.
    pub compute_s: f64,
    /// Bytes of all the network's gradients (and of its weights).
    pub parameter_bytes: f64,
    /// Ranks whose gradients the server receives over the link (the training ranks other
    /// than itself).
    pub remote_workers: usize,
    /// The server's update of every parameter.
    pub optimizer_s: f64,
    /// Seconds of one whole-model host copy between the parameters (or gradients) and a
    /// flat buffer kept from round to round: what each of the round's copies costs.
    pub copy_s: f64,
    /// The link between each worker and the server.
    pub link: Link,
}

/// A predicted round with its communication split by direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParameterServerStep {
    /// The step split as every strategy's is.
    pub breakdown: StepBreakdown,
    /// Seconds of the gradients' way in.
    pub push_s: f64,
    /// Seconds of the weights' way out.
    pub pull_s: f64,
    /// Seconds of whole-model host copies on the round's critical path.
    pub host_copies_s: f64,
}

impl ParameterServerRound {
    /// One round: compute, the control message, the pushes queued on the server's link,
    /// the update, the pulls queued likewise.
    pub fn predict(&self) -> ParameterServerStep {
        let remote = self.remote_workers as f64;
        let control_s = if self.remote_workers > 0 { self.link.transfer_s(24.0) } else { 0.0 };
        // Messages to one rank share its link: each pays its latency, the bytes queue.
        let queued_s = |bytes: f64| remote * self.link.transfer_s(bytes);
        let push_s = control_s + queued_s(self.parameter_bytes);
        // The weights travel with a one-element stop flag.
        let pull_s = queued_s(self.parameter_bytes + 4.0);
        // The round's whole-model copies, as the implementation makes them one after the
        // other, each in a buffer kept from round to round: the server packs its own
        // gradients (a dedicated server zeroes the sum), adds each worker's in, divides in
        // place, unpacks the mean into its gradients, packs the new weights; a worker
        // unpacks the weights it pulls into its own. (A worker packs its gradients while
        // the server packs its own, so that copy is hidden.)
        let copies = remote + 4.0 + if self.remote_workers > 0 { 1.0 } else { 0.0 };
        let host_copies_s = copies * self.copy_s;
        let exposed_comm_s = push_s + pull_s + host_copies_s;
        ParameterServerStep {
            breakdown: StepBreakdown {
                step_s: self.compute_s + exposed_comm_s + self.optimizer_s,
                compute_s: self.compute_s,
                exposed_comm_s,
                bubble_s: 0.0,
                optimizer_s: self.optimizer_s,
            },
            push_s,
            pull_s,
            host_copies_s,
        }
    }
}

/// A server that answers each worker on its own (asynchronous modes, backup workers): each
/// worker cycles through its compute and one exchange with the server (control, gradients
/// in, the update, weights out); the server handles one exchange at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct PerWorkerServer {
    /// One worker's exchange, as a round with one remote worker (its compute unslowed).
    pub exchange: ParameterServerRound,
    /// Each training rank's compute slowdown (a straggler's factor, 1 for the others).
    pub slowdowns: Vec<f64>,
    /// When the server applies a gradient.
    pub consistency: stratlab_strategy_spec::Consistency,
}

impl PerWorkerServer {
    /// Seconds of one exchange on the server's side: the gradients in, unpacked, the
    /// update, the weights packed and out. Its reciprocal bounds the update rate whatever
    /// the workers do.
    pub fn service_s(&self) -> f64 {
        let step = self.exchange.predict();
        step.push_s + step.pull_s + step.breakdown.optimizer_s + 2.0 * self.exchange.copy_s
    }

    /// Seconds of worker `w`'s cycle, alone with the server: its compute slowed, its
    /// gradients packed and the weights unpacked, and the server's exchange.
    pub fn cycle_s(&self, w: usize) -> f64 {
        self.exchange.compute_s * self.slowdowns[w] + 2.0 * self.exchange.copy_s + self.service_s()
    }

    /// Predicted seconds per server update, the pace the trial reports
    /// (`suite`'s per-worker pace):
    /// - `async`: updates arrive at the sum of the workers' rates, 1 / Σ 1/t_w, no faster
    ///   than the server serves;
    /// - `bounded`: a worker more than k ahead waits, so over a run much longer than k
    ///   updates every worker goes at the slowest one's rate, t_max / N;
    /// - `sync` with b backup workers: a round ends with the (N − b)-th gradient in, the
    ///   (N − b)-th fastest cycle.
    pub fn seconds_per_update(&self) -> f64 {
        use stratlab_strategy_spec::Consistency;
        let mut cycles: Vec<f64> = (0..self.slowdowns.len()).map(|w| self.cycle_s(w)).collect();
        cycles.sort_by(f64::total_cmp);
        let workers = cycles.len().max(1) as f64;
        let pace = match self.consistency {
            Consistency::PerGradient { staleness: None } => 1.0 / cycles.iter().map(|t| 1.0 / t).sum::<f64>(),
            Consistency::PerGradient { staleness: Some(_) } => cycles.last().copied().unwrap_or(0.0) / workers,
            Consistency::Sync { backup_workers } => {
                let kept = cycles.len().saturating_sub(backup_workers).max(1);
                cycles.get(kept - 1).copied().unwrap_or(0.0)
            }
        };
        pace.max(self.service_s())
    }

    /// [`Self::seconds_per_update`] split as every strategy's step is: the slowest cycle's
    /// compute share scaled to the pace, the rest exchange.
    pub fn predict(&self) -> StepBreakdown {
        let step_s = self.seconds_per_update();
        let optimizer_s = self.exchange.optimizer_s.min(step_s);
        let compute_s = (self.exchange.compute_s / self.slowdowns.len().max(1) as f64).min(step_s - optimizer_s);
        StepBreakdown {
            step_s,
            compute_s,
            exposed_comm_s: step_s - compute_s - optimizer_s,
            bubble_s: 0.0,
            optimizer_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratlab_strategy_spec::Consistency;

    fn per_worker(slowdowns: Vec<f64>, consistency: Consistency) -> PerWorkerServer {
        let exchange = ParameterServerRound {
            compute_s: 0.1,
            parameter_bytes: 1e6,
            remote_workers: 1,
            optimizer_s: 0.001,
            copy_s: 0.0,
            link: Link::new(1e9, 0.0),
        };
        PerWorkerServer { exchange, slowdowns, consistency }
    }

    #[test]
    fn asynchronous_updates_add_the_workers_rates_and_bounded_ones_follow_the_slowest() {
        let exchange_s = 2.0 * 1e6 / 1e9 + 4.0 / 1e9 + 24.0 / 1e9 + 0.001;
        let cycle = |slowdown: f64| 0.1 * slowdown + exchange_s;
        let async_even = per_worker(vec![1.0, 1.0], Consistency::PerGradient { staleness: None });
        assert!((async_even.seconds_per_update() - cycle(1.0) / 2.0).abs() < 1e-12);
        let slowed = vec![1.0, 2.0];
        let async_slowed = per_worker(slowed.clone(), Consistency::PerGradient { staleness: None });
        let expected = 1.0 / (1.0 / cycle(1.0) + 1.0 / cycle(2.0));
        assert!((async_slowed.seconds_per_update() - expected).abs() < 1e-12);
        let bounded = per_worker(slowed.clone(), Consistency::PerGradient { staleness: Some(2) });
        assert!((bounded.seconds_per_update() - cycle(2.0) / 2.0).abs() < 1e-12);
        let backup = per_worker(slowed, Consistency::Sync { backup_workers: 1 });
        assert!((backup.seconds_per_update() - cycle(1.0)).abs() < 1e-12, "the fast worker ends each round");
        // However fast the workers, the server takes one exchange at a time.
        let crowded = per_worker(vec![1e-6; 64], Consistency::PerGradient { staleness: None });
        assert!((crowded.seconds_per_update() - crowded.service_s()).abs() < 1e-15);
        let step = async_slowed.predict();
        assert!((step.compute_s + step.exposed_comm_s + step.optimizer_s - step.step_s).abs() < 1e-12);
    }

    #[test]
    fn the_server_link_queues_every_workers_gradients_and_weights() {
        let link = Link::new(1e9, 1e-4);
        let round = ParameterServerRound {
            compute_s: 0.1,
            parameter_bytes: 1e7,
            remote_workers: 3,
            optimizer_s: 0.002,
            copy_s: 0.0,
            link,
        };
        let step = round.predict();
        // Three pushes and three pulls of 10 MB at 1 GB/s, each paying 0.1 ms.
        let push = link.transfer_s(24.0) + 3.0 * (1e-4 + 1e-2);
        let pull = 3.0 * (1e-4 + (1e7 + 4.0) / 1e9);
        assert!((step.push_s - push).abs() < 1e-12 && (step.pull_s - pull).abs() < 1e-12);
        assert!((step.breakdown.step_s - (0.1 + push + pull + 0.002)).abs() < 1e-12);
        // Twice the workers, twice the traffic on the server's link.
        let six = ParameterServerRound { remote_workers: 6, ..round.clone() }.predict();
        assert!(six.pull_s > 1.99 * step.pull_s);
        // Alone, a server only updates.
        let alone = ParameterServerRound { remote_workers: 0, ..round }.predict();
        assert_eq!(alone.breakdown.step_s, 0.1 + 0.002);
    }

    #[test]
    fn every_whole_model_copy_on_the_critical_path_is_charged_once() {
        let link = Link::new(1e9, 0.0);
        let round = |remote_workers| ParameterServerRound {
            compute_s: 0.1,
            parameter_bytes: 1e7,
            remote_workers,
            optimizer_s: 0.0,
            copy_s: 0.01,
            link,
        };
        // One remote worker: the server packs its own gradients, adds the worker's, divides,
        // unpacks the mean into its gradients, packs the weights; the worker unpacks them.
        let one = round(1).predict();
        assert!((one.host_copies_s - 0.06).abs() < 1e-12, "{}", one.host_copies_s);
        assert!((one.breakdown.exposed_comm_s - (one.push_s + one.pull_s + 0.06)).abs() < 1e-12);
        // Each further worker adds its sum.
        assert!((round(3).predict().host_copies_s - 0.08).abs() < 1e-12);
        // A server alone still packs, averages, unpacks and packs the weights.
        assert!((round(0).predict().host_copies_s - 0.04).abs() < 1e-12);
    }
}
