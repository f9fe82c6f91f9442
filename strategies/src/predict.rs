//! A trial's step predicted from its network's profile: the strategy's own structure
//! (its bucket plan, its pipeline partition and schedule) put to the performance model's
//! simulation (`stratlab_perf_model`). Here, not in the binary, because it reads every
//! strategy's parameters.

use stratlab_networks::NetworkSpec;
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
        StrategyKind::Single => Ok(profile
            .stages
            .iter()
            .map(|stage| {
                let (forward, backward) = stage_time(stage, batch);
                forward + backward
            })
            .sum::<f64>()
            + profile.optimizer_s),
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
