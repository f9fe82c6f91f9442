//! What the performance model (`stratlab_perf_model::predict`) needs of a trial that only
//! the network's build tells: how the strategy cuts it into pipeline stages, and the bytes
//! of a sample its data loader holds.

use std::ops::Range;

use stratlab_networks::NetworkSpec;
use stratlab_profile::{stage_seconds, NetworkProfile};
use stratlab_strategy_spec::{check_balance, Balance, PartitionError, Strategy};
use tch::Device;

use crate::pipeline::{plan_shared_stages, shared_partition};

/// For a strategy that pipelines, the network stages each of its stages holds at `batch`
/// samples per pipeline, as the strategy plans them; `None` for one that does not. A `time`
/// balance cuts `profile`'s own seconds (what the strategy would measure again, or the
/// roofline of a device this machine does not have), as the trial cuts what it is handed.
pub fn pipeline_cuts(
    strategy: &Strategy,
    workers: usize,
    batch: usize,
    spec: &NetworkSpec,
    profile: &NetworkProfile,
) -> Option<Result<Vec<Range<usize>>, PartitionError>> {
    strategy.schedule()?;
    let cut = || -> Result<Vec<Range<usize>>, PartitionError> {
        let shares = strategy.stage_shares(workers)?;
        let samples = strategy.stage_samples(batch);
        let balance = strategy.balance();
        if balance == Balance::Time {
            check_balance(profile.stages.len(), &balance, shares.len())?;
            return Ok(shared_partition(&stage_seconds(profile, samples), &shares));
        }
        Ok(plan_shared_stages(spec, &balance, &shares, samples as i64, Device::Cpu)?.ranges)
    };
    Some(cut())
}

/// Bytes of one sample of `spec`'s input as the data loader holds it: its f32 values and
/// an i64 label.
pub fn loader_sample_bytes(spec: &NetworkSpec) -> f64 {
    let values: i64 = spec.input.sample_dims().iter().product();
    (values * std::mem::size_of::<f32>() as i64 + std::mem::size_of::<i64>() as i64) as f64
}
