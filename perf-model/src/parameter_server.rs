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

#[cfg(test)]
mod tests {
    use super::*;

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
