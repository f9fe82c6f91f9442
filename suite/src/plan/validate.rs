//! What a suite must satisfy beyond its types, checked before anything is planned: empty
//! axes, impossible numbers, entries that widen an axis, settings the trainer refuses.

use std::path::Path;

use stratlab_strategies::precision::check_trainable;
use stratlab_strategies::TrainConfig;
use stratlab_strategy_spec::{OptimizerKind, StrategyKind};

use super::reading::{batches_for, field_error, given_sizes};
use crate::suite_error::SuiteError;
use crate::suite_file::{BatchSize, SuiteFile};

/// Checks what serde cannot: empty axes, impossible numbers, parameters that do not apply.
pub(super) fn validate(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    let err = |field: &str, message: String| Err(field_error(path, field, message));
    if suite.networks.is_empty() {
        return err(
            "networks",
            format!("empty axis; give at least one of: {}", stratlab_networks::network_names().join(", ")),
        );
    }
    if suite.datasets.is_empty() {
        return err(
            "datasets",
            format!("empty axis; give at least one of: {}", stratlab_datasets::dataset_names().join(", ")),
        );
    }
    if suite.strategies.is_empty() {
        return err(
            "strategies",
            format!("empty axis; give at least one of: {}", StrategyKind::valid_names().join(", ")),
        );
    }
    if suite.repeats == 0 {
        return err("repeats", "must be at least 1".into());
    }
    if let Some(i) = suite.repeats_of.iter().position(|rule| rule.repeats == 0) {
        return err(&format!("repeats_of[{i}].repeats"), "must be at least 1 (`exclude` drops cells)".into());
    }
    if suite.link.is_empty() {
        return err("link", "empty axis; give `loopback` or links such as {bandwidth: 1 Gbit/s, latency: 1 ms}".into());
    }
    check_nodes(suite, path)?;
    if suite.straggler.is_empty() {
        return err("straggler", "empty axis; give `none` or stragglers such as {ranks: [1], slowdown: 2.0}".into());
    }
    let most_workers = suite.strategies.iter().flat_map(|entry| entry.workers.iter().copied()).max().unwrap_or(1);
    for (i, straggler) in suite.straggler.iter().enumerate().filter_map(|(i, entry)| Some((i, entry.0.as_ref()?))) {
        if let Err(outside) = straggler.fits(most_workers) {
            return err(
                &format!("straggler[{i}].ranks"),
                format!("{outside}: no trial has that rank (ranks count from 0; the most workers any entry has is {most_workers})"),
            );
        }
    }
    if !(suite.timeout_s.is_finite() && suite.timeout_s > 0.0) {
        return err("timeout_s", format!("must be a finite positive number of seconds, got {}", suite.timeout_s));
    }
    if suite.telemetry_interval_ms == 0 {
        return err("telemetry_interval_ms", "must be at least 1".into());
    }
    if let Some(threads) = &suite.threads {
        let counts = threads.counts();
        if counts.is_empty() || counts.contains(&0) {
            return err("threads", "give a thread count or a list of them, each at least 1".into());
        }
    }
    for (name, target) in &suite.targets {
        if let Err(error) = stratlab_datasets::info(name) {
            return err(&format!("targets.{name}"), error.to_string());
        }
        if !(0.0..=1.0).contains(target) {
            return err(&format!("targets.{name}"), format!("an accuracy between 0 and 1, got {target}"));
        }
    }
    check_train_config(suite, path)?;
    check_computes(suite, path)?;
    for (i, entry) in suite.strategies.iter().enumerate() {
        let outside = [
            outside_axis(entry.precision.as_deref(), &suite.precision, "precision"),
            outside_axis(entry.memory_format.as_deref(), &suite.memory_format, "memory_format"),
        ];
        if let Some((name, message)) = outside.into_iter().flatten().next() {
            return err(&format!("strategies[{i}].{name}"), message);
        }
    }
    let batches: Vec<(String, usize)> = suite
        .datasets
        .iter()
        .flat_map(|dataset| {
            let given: Vec<usize> = given_sizes(&batches_for(suite, dataset)).collect();
            given.into_iter().map(move |batch| (dataset.to_string(), batch))
        })
        .collect();
    for (i, strategy) in suite.strategies.iter().enumerate() {
        if let Err(error) = strategy.validate(&batches) {
            return err(&format!("strategies[{i}].{}", error.field), error.message);
        }
    }
    for dataset in &suite.datasets {
        let info = dataset.info().expect("validated while parsing");
        let sizes = batches_for(suite, dataset);
        if sizes.contains(&BatchSize::Largest)
            && suite.memory_limit_mib.is_none()
            && !matches!(suite.device, stratlab_strategies::DeviceChoice::Cuda(_))
        {
            return err(
                "batch_size",
                "`max` is the largest batch under a memory limit, and this suite sets none: give \
                 memory_limit_mib (each worker's tensor storage on a CPU, in MiB), or train on a \
                 `cuda:N` device, whose own memory (or device_memory_limit_mib) is the limit"
                    .into(),
            );
        }
        for batch in given_sizes(&sizes) {
            if batch > info.train_len {
                return err(
                    "batch_size",
                    format!("{batch} exceeds the {} training samples of {dataset}", info.train_len),
                );
            }
        }
    }
    Ok(())
}

/// Checks the `nodes` axis: counts of at least one, each dividing every multi-worker entry's
/// workers (ranks are spread evenly over the nodes).
fn check_nodes(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    if suite.nodes.is_empty() || suite.nodes.contains(&0) {
        return Err(field_error(path, "nodes", "give a node count or a list of them, each at least 1"));
    }
    for (i, entry) in suite.strategies.iter().enumerate() {
        for &workers in entry.workers.iter().filter(|&&workers| workers > 1) {
            if let Some(nodes) = suite.nodes.iter().find(|&&nodes| workers % nodes != 0 || nodes > workers) {
                return Err(field_error(
                    path,
                    "nodes",
                    format!(
                        "{nodes} nodes do not divide strategies[{i}].workers {workers}: a cell's ranks are spread \
                         evenly over its nodes; give worker counts that are multiples of every node count"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks the suite's `precision` and `memory_format` axes: not empty, and each value one
/// this build trains on the suite's device.
fn check_computes(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    if suite.precision.is_empty() {
        return Err(field_error(path, "precision", "empty axis; give at least one of: fp32, bf16, tf32, auto"));
    }
    if suite.memory_format.is_empty() {
        let message = "empty axis; give at least one of: contiguous, channels_last, auto";
        return Err(field_error(path, "memory_format", message));
    }
    for precision in suite.precision.iter().filter_map(|p| p.given()) {
        check_trainable(precision, suite.device)
            .map_err(|refused| field_error(path, "precision", refused.to_string()))?;
    }
    Ok(())
}

/// Why an entry's own list of axis `name` is not a narrowing of the suite's `axis`: the
/// first value it gives that the axis lacks.
fn outside_axis<T: PartialEq + std::fmt::Display>(
    given: Option<&[T]>,
    axis: &[T],
    name: &'static str,
) -> Option<(&'static str, String)> {
    let outside = given?.iter().find(|value| !axis.contains(value))?;
    let axis: Vec<String> = axis.iter().map(ToString::to_string).collect();
    Some((
        name,
        format!("`{outside}` is not on the suite's `{name}` axis ({}); an entry narrows the axis", axis.join(", ")),
    ))
}

/// The suite-wide training settings, checked by the trainer's own validation so the rules
/// live in one place.
fn check_train_config(suite: &SuiteFile, path: &Path) -> Result<(), SuiteError> {
    let kinds = suite.optimizer.name.kinds();
    if kinds.is_empty() {
        return Err(field_error(path, "optimizer.name", "give at least one optimizer (sgd, adam)"));
    }
    for kind in kinds {
        let mut config = TrainConfig {
            budget: suite.budget,
            eval_batch_size: suite.eval.batch_size,
            eval_every_steps: suite.eval.every_steps,
            eval_samples: suite.eval.samples,
            metrics_every_steps: suite.metrics_every_steps,
            loss_scale: suite.loss_scale,
            ..TrainConfig::default()
        };
        suite.optimizer.apply(kind, &mut config);
        config.validate().map_err(|error| match error {
            // Name the field as the suite file spells it.
            stratlab_strategies::TrainError::InvalidConfig { field, reason } => {
                field_error(path, suite_field(field, kind), reason)
            }
            other => field_error(path, "budget", other.to_string()),
        })?;
    }
    Ok(())
}

/// The suite-file spelling of a [`TrainConfig`] field, for a cell training with `kind`.
fn suite_field(field: &'static str, kind: OptimizerKind) -> &'static str {
    match field {
        "lr" if kind == OptimizerKind::Adam => "optimizer.adam.lr",
        "lr" => "optimizer.lr",
        "momentum" => "optimizer.momentum",
        "weight_decay" => "optimizer.weight_decay",
        "adam.betas" => "optimizer.adam.betas",
        "adam.eps" => "optimizer.adam.eps",
        "eval_batch_size" => "eval.batch_size",
        "eval_every_steps" => "eval.every_steps",
        "eval_samples" => "eval.samples",
        other => other,
    }
}
