//! The pace of a parameter server that answers each worker on its own (asynchronous modes,
//! backup workers): no round makes a fast worker wait for the slowest, so the trial's step
//! is the server's update, not the slowest rank's step.

use stratlab_strategies::TrainReport;
use stratlab_strategy_spec::{Consistency, ServerSettings};

/// The lead report of a per-worker trial and the batch shards each of its steps stands
/// for: rank 0's report with its `index`-th step's times replaced by the time per server
/// update at that point of every worker's run, and the server's own evaluations where it
/// made them (a dedicated server evaluates the weights no worker holds).
///
/// - Per-gradient modes apply every gradient: updates arrive at the sum of the workers'
///   rates, so a step is `1 / Σ 1/t_w` and trains one worker's batch.
/// - `sync` with b backup workers applies a round when the first N − b gradients are in:
///   a step is the (N − b)-th fastest worker's and trains N − b batches.
///
/// `None` where the server keeps lockstep rounds (the slowest rank paces those).
pub(super) fn per_worker_pace(
    settings: ServerSettings,
    training: &[&TrainReport],
    server: Option<&TrainReport>,
) -> Option<(TrainReport, f64)> {
    let first = training.first()?;
    // How many of the workers' steps at one index an update waits for: all of them
    // (summed rates), or the first `kept` to finish.
    let kept = match settings.consistency {
        Consistency::Sync { backup_workers: 0 } => return None,
        Consistency::Sync { backup_workers } => Some(training.len().saturating_sub(backup_workers).max(1)),
        Consistency::PerGradient { .. } => None,
    };
    let mut lead = (*first).clone();
    for (index, step) in lead.steps.iter_mut().enumerate() {
        let mut times: Vec<f64> =
            training.iter().filter_map(|report| report.steps.get(index)).map(|step| step.step_time_s).collect();
        step.step_time_s = match kept {
            None => 1.0 / times.iter().map(|t| 1.0 / t).sum::<f64>(),
            Some(kept) => {
                times.sort_by(f64::total_cmp);
                times[kept.min(times.len()) - 1]
            }
        };
    }
    let shards = kept.unwrap_or(1);
    if let Some(server) = server.filter(|server| !server.evaluations.is_empty()) {
        (lead.evaluations, lead.time_to_accuracy_s) = (server.evaluations.clone(), server.time_to_accuracy_s);
    }
    Some((lead, shards as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratlab_strategy_spec::ServerPlacement;

    fn report(step_times: &[f64]) -> TrainReport {
        let steps = step_times
            .iter()
            .enumerate()
            .map(|(step, &step_time_s)| {
                serde_json::json!({
                    "epoch": 0, "step": step, "loss": 1.0, "step_time_s": step_time_s, "data_wait_s": 0.0,
                    "h2d_s": 0.0, "samples": 8, "lr": 0.1, "warmup": false
                })
            })
            .collect::<Vec<_>>();
        serde_json::from_value(serde_json::json!({
            "outcome": "completed", "reason": null, "device": "cpu", "threads": 1,
            "numerics": {"cudnn_benchmark": false, "matmul_precision": "highest", "cudnn_tf32": false},
            "steps_per_epoch": 10, "steps": steps, "epochs": [], "evaluations": [],
            "time_to_accuracy_s": null, "target_accuracy": 0.9, "wall_time_s": 1.0
        }))
        .unwrap()
    }

    #[test]
    fn asynchronous_updates_arrive_at_the_sum_of_the_workers_rates_and_backups_at_the_kept_ones() {
        let (fast, slow) = (report(&[0.1, 0.1]), report(&[0.3, 0.3]));
        let settings =
            |consistency| ServerSettings { placement: ServerPlacement::Dedicated, consistency, lr_per_update: None };
        let (lead, shards) =
            per_worker_pace(settings(Consistency::PerGradient { staleness: None }), &[&fast, &slow], None).unwrap();
        assert_eq!(shards, 1.0);
        assert!((lead.steps[0].step_time_s - 0.075).abs() < 1e-12, "1 / (1/0.1 + 1/0.3)");
        let (lead, shards) =
            per_worker_pace(settings(Consistency::Sync { backup_workers: 1 }), &[&slow, &fast], None).unwrap();
        assert_eq!((lead.steps[1].step_time_s, shards), (0.1, 1.0), "the round ends with the first gradient");
        assert!(per_worker_pace(settings(Consistency::Sync { backup_workers: 0 }), &[&fast, &slow], None).is_none());
    }
}
