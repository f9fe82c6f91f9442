//! A trial's step predicted from its network's profile: the strategy's own structure
//! (its bucket plan, its pipeline partition and schedule) put to the performance model's
//! simulation (`stratlab_perf_model`). Here, not in the binary, because it reads every
//! strategy's parameters.

use stratlab_networks::NetworkSpec;
use stratlab_perf_model::closed_forms::{thesis_data_parallel_s, thesis_gpipe_comm_s, thesis_gpipe_compute_s};
use stratlab_perf_model::data_parallel::{data_parallel_step, StageWork};
use stratlab_perf_model::pipeline::{simulate, Pipeline, StageCost};
use stratlab_perf_model::{CostCurve, Link};
use stratlab_strategy_spec::{Strategy, StrategyKind};
use tch::Device;

use crate::pipeline::plan_stages;
use crate::profile::{NetworkProfile, StageProfile};

/// Samples one stage runs at once under `strategy` with a per-worker (per-pipeline) batch
/// of `batch`: the batch, or a pipeline's micro-batch.
pub fn stage_samples(strategy: &Strategy, batch: usize) -> usize {
    match strategy.schedule() {
        Some(_) => (batch / strategy.micro_batches()).max(1),
        None => batch,
    }
}

/// Every sample count a stage is profiled at for `strategy` with `workers` workers and a
/// per-worker batch of `batch`: [`stage_samples`] for the model, and for data parallelism
/// also the global batch, the sequential time the thesis's eq. 5.1 starts from.
pub fn profiled_samples(strategy: &Strategy, workers: usize, batch: usize) -> Vec<usize> {
    let mut sizes = vec![stage_samples(strategy, batch)];
    if strategy.kind() == StrategyKind::DataParallel {
        sizes.push(batch * workers);
    }
    sizes
}

/// Seconds of a forward and backward of the whole network on `samples` samples, and the
/// update: one sequential step.
fn sequential_s(profile: &NetworkProfile, samples: usize) -> f64 {
    profile
        .stages
        .iter()
        .map(|stage| curve(&stage.forward_s).at(samples) + curve(&stage.backward_s).at(samples))
        .sum::<f64>()
        + profile.optimizer_s
}

/// The thesis's closed forms for the same step, from the same profile and link: eq. 5.1
/// for data parallelism (from the sequential time of the global batch), eq. 6.1 + 6.2 for
/// model-parallel, gpipe and 1f1b (sequential time of the micro-batches, the largest
/// activation crossing the strategy's own cuts), the sequential time for single; the
/// baseline the model is judged against. `Err` where the thesis has no form.
pub fn thesis_step(
    strategy: &Strategy,
    workers: usize,
    batch: usize,
    spec: &NetworkSpec,
    profile: &NetworkProfile,
    link: Option<&Link>,
) -> Result<f64, String> {
    let need_link = || link.copied().ok_or_else(|| "needs a link".to_string());
    match strategy.kind() {
        StrategyKind::Single => Ok(sequential_s(profile, batch)),
        StrategyKind::DataParallel => {
            let gradient_bytes: u64 = profile.stages.iter().flat_map(|stage| &stage.parameter_bytes).sum();
            Ok(thesis_data_parallel_s(
                sequential_s(profile, batch * workers),
                workers,
                gradient_bytes as f64,
                strategy.fusion_threshold_bytes() as f64,
                &need_link()?,
            ))
        }
        StrategyKind::ModelParallel | StrategyKind::Gpipe | StrategyKind::OneFOneB => {
            let (stages, _) = strategy.pipeline_shape(workers).map_err(|error| error.to_string())?;
            let samples = stage_samples(strategy, batch);
            let m = strategy.schedule().map_or(1, |schedule| schedule.micro_batches(strategy.micro_batches()));
            let plan = plan_stages(spec, &strategy.balance(), stages, samples as i64, Device::Cpu)
                .map_err(|error| error.to_string())?;
            let activation_bytes = plan.ranges[..plan.ranges.len().saturating_sub(1)]
                .iter()
                .map(|range| profile.stages[range.end - 1].output_bytes_per_sample * samples as u64)
                .max()
                .unwrap_or(0);
            let t_seq = m as f64 * (sequential_s(profile, samples) - profile.optimizer_s);
            Ok(thesis_gpipe_compute_s(t_seq, stages, m)
                + thesis_gpipe_comm_s(stages, m, activation_bytes as f64, &need_link()?)
                + profile.optimizer_s)
        }
        _ => Err("the thesis has no closed form for it".into()),
    }
}

/// The cost curve of measured `(samples, seconds)` points.
fn curve(points: &[(usize, f64)]) -> CostCurve {
    CostCurve::new(points.to_vec()).unwrap_or_else(|_| CostCurve::proportional(0.0))
}

/// Predicted seconds per step of `workers` workers training `spec` under `strategy` with a
/// per-worker batch of `batch`, from `profile` (which holds the sizes
/// [`stage_samples`] names) and, for multi-worker strategies, `link`; or why there is none.
/// A `time` balance profiles the network again to partition it, as the strategy does.
pub fn predict_step(
    strategy: &Strategy,
    workers: usize,
    batch: usize,
    spec: &NetworkSpec,
    profile: &NetworkProfile,
    link: Option<&Link>,
) -> Result<f64, String> {
    let need_link = || link.copied().ok_or_else(|| "needs a link: give --probe <a stratlab probe run>".to_string());
    let stage_time = |stage: &StageProfile, samples: usize| {
        (curve(&stage.forward_s).at(samples), curve(&stage.backward_s).at(samples))
    };
    match strategy.kind() {
        StrategyKind::Single => Ok(sequential_s(profile, batch)),
        StrategyKind::DataParallel => {
            let stages: Vec<StageWork> = profile
                .stages
                .iter()
                .map(|stage| {
                    let (forward_s, backward_s) = stage_time(stage, batch);
                    StageWork { forward_s, backward_s, parameter_bytes: stage.parameter_bytes.clone() }
                })
                .collect();
            let step = data_parallel_step(
                &stages,
                workers,
                &need_link()?,
                strategy.fusion_threshold_bytes(),
                profile.optimizer_s,
            );
            Ok(step.step_s)
        }
        StrategyKind::ParameterServer => Err("parameter-server is not modelled yet".into()),
        _ => predict_pipeline(strategy, workers, batch, spec, profile, &need_link()?),
    }
}

/// A pipeline: its partition as the strategy plans it, each part's costs summed from the
/// profile, and the schedule simulated.
fn predict_pipeline(
    strategy: &Strategy,
    workers: usize,
    batch: usize,
    spec: &NetworkSpec,
    profile: &NetworkProfile,
    link: &Link,
) -> Result<f64, String> {
    let schedule = strategy.schedule().ok_or("not a pipeline")?;
    let (stages, replicas) = strategy.pipeline_shape(workers).map_err(|error| error.to_string())?;
    let samples = stage_samples(strategy, batch);
    let plan = plan_stages(spec, &strategy.balance(), stages, samples as i64, Device::Cpu)
        .map_err(|error| error.to_string())?;
    let total_parameters: u64 = profile.stages.iter().flat_map(|stage| &stage.parameter_bytes).sum();
    let costs: Vec<StageCost> = plan
        .ranges
        .iter()
        .map(|range| {
            let parts = &profile.stages[range.clone()];
            let gradient_bytes: u64 = parts.iter().flat_map(|stage| &stage.parameter_bytes).sum();
            StageCost {
                forward_s: parts.iter().map(|stage| curve(&stage.forward_s).at(samples)).sum(),
                backward_s: parts.iter().map(|stage| curve(&stage.backward_s).at(samples)).sum(),
                output_bytes: parts.last().map_or(0, |stage| stage.output_bytes_per_sample) as f64 * samples as f64,
                gradient_bytes: gradient_bytes as f64,
                optimizer_s: profile.optimizer_s * gradient_bytes as f64 / total_parameters.max(1) as f64,
            }
        })
        .collect();
    let pipeline = Pipeline {
        schedule,
        micro_batches: strategy.micro_batches(),
        checkpoint: strategy.checkpoint(),
        stages: &costs,
        link: *link,
        replicas,
    };
    simulate(&pipeline).map(|step| step.step_s).map_err(|error| error.to_string())
}
