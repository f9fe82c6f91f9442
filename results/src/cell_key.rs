//! A cell of the matrix as one typed value: what a trial measured, shared by its repeats,
//! and the key every reader groups by (reports' figures and tables, `compare` and
//! `history`, the predicted speedups). Labels are made from it where they are printed or
//! drawn; nothing is parsed back from one.

use std::cmp::Ordering;

use serde::Serialize;
use stratlab_strategy_spec::{
    compute_label, threads_label, ColumnsError, DataSource, MemoryFormat, OptimizerKind, ParameterColumns, Precision,
    Straggler, Strategy, StrategyKind,
};
use stratlab_units::Link;

use crate::TrialRow;

/// What a cell measures: equal keys are the same experiment, in one run or in two.
///
/// How a cell was run (the device, its numerics, the budget, threads where the suite did
/// not sweep them) is not part of it: running the same cell with 1 thread instead of 2 is
/// a change a comparison must show, not a reason to stop matching.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct CellKey {
    /// Network name (`resnet18`, …).
    pub network: String,
    /// Data set name (`cifar10`, …).
    pub dataset: String,
    /// Its real files or their synthetic twin: `cifar10` and `cifar10:synthetic` are
    /// different cells (their accuracy does not compare, and decoding files costs time).
    pub data_source: DataSource,
    /// The strategy and the parameters it was given.
    pub strategy: Strategy,
    /// Workers W.
    pub workers: u32,
    /// Samples per worker per step (per pipeline, for pipelines).
    pub batch_size: u32,
    /// The trial's threads (all its workers together), where its suite swept them.
    pub swept_threads: Option<u32>,
    /// The emulated link the workers talked over (`None`: loopback).
    #[serde(with = "stratlab_units::stored_link")]
    pub link: Option<Link>,
    /// Nodes its ranks spanned (runs stored before the axis: 1).
    pub nodes: u32,
    /// The ranks slowed as stragglers (`None`: every rank at full speed).
    pub straggler: Option<Straggler>,
    /// What it computed in (runs stored before the axis: fp32).
    pub precision: Precision,
    /// How its tensors were laid out (runs stored before the axis: contiguous).
    pub memory_format: MemoryFormat,
    /// The optimizer it trained with (runs stored before the axis: SGD).
    pub optimizer: OptimizerKind,
}

impl CellKey {
    /// The key of `trial`'s cell, or why its strategy columns do not make a strategy.
    pub fn of(trial: &TrialRow) -> Result<CellKey, ColumnsError> {
        let count = |value: i64, column: &str| {
            u32::try_from(value).map_err(|_| ColumnsError {
                trial_id: trial.trial_id.clone(),
                message: format!("{column} {value} is not a count"),
            })
        };
        Ok(CellKey {
            network: trial.network.clone(),
            dataset: trial.dataset.clone(),
            data_source: trial.data_source,
            strategy: trial.strategy()?,
            workers: count(trial.workers, "workers")?,
            batch_size: count(trial.batch_size, "batch_size")?,
            swept_threads: trial.swept_threads.map(|threads| count(threads, "swept_threads")).transpose()?,
            link: trial.link,
            nodes: count(trial.nodes(), "nodes")?,
            straggler: trial.straggler.straggler(&trial.trial_id)?,
            precision: trial.precision(),
            memory_format: trial.memory_format(),
            optimizer: trial.optimizer(),
        })
    }

    /// The strategy's kind: what a figure colours, orders and panels by.
    pub fn kind(&self) -> StrategyKind {
        self.strategy.kind()
    }

    /// The key of the `single` (W = 1) cell this cell's speedup is measured against: the
    /// same network, data set and batch per worker, in the same precision, memory format
    /// and optimizer, with the same threads where the run swept them; single has no link
    /// and no straggler, and runs on one node.
    pub fn baseline(&self) -> CellKey {
        CellKey { strategy: Strategy::Single, workers: 1, link: None, nodes: 1, straggler: None, ..self.clone() }
    }

    /// The same cell with every rank at full speed: what a straggler's slowdown is measured
    /// against.
    pub fn without_straggler(&self) -> CellKey {
        CellKey { straggler: None, ..self.clone() }
    }

    /// Whether it computes in float32 on contiguous tensors with SGD: what every cell did
    /// before those axes, so its labels name none of them.
    pub fn computes_by_default(&self) -> bool {
        self.precision.is_float32() && self.memory_format == MemoryFormat::Contiguous && self.optimizer.is_sgd()
    }

    /// The data set as suites name it: `cifar10`, or `cifar10:synthetic` for the twin.
    pub fn dataset_label(&self) -> String {
        self.data_source.selector(&self.dataset)
    }

    /// How it computed, where that is not the default, as a label joins it:
    /// ` · bf16 · channels_last · adam`, or nothing.
    pub fn compute_label(&self) -> String {
        compute_label(self.precision, self.memory_format) + &self.optimizer.label()
    }

    /// The threads where the run swept them (` · 2 threads`), the link where there was one
    /// (` over 1 Gbit/s`), the nodes where several (` on 2 nodes`) and the straggler (` · straggler rank 1 ×2`), as a label joins them.
    pub fn setting_label(&self) -> String {
        let threads =
            self.swept_threads.map(|threads| format!(" · {}", threads_label(threads.into()))).unwrap_or_default();
        let link = self.link.map(|link| format!(" over {}", link.name())).unwrap_or_default();
        threads + &link + &self.nodes_label() + &self.straggler_label()
    }

    /// ` on 2 nodes` where its ranks spanned several, or nothing.
    pub fn nodes_label(&self) -> String {
        if self.nodes > 1 {
            format!(" on {} nodes", self.nodes)
        } else {
            String::new()
        }
    }

    /// ` · straggler rank 1 ×2`, or nothing without one.
    pub fn straggler_label(&self) -> String {
        self.straggler.as_ref().map(|straggler| format!(" · straggler {straggler}")).unwrap_or_default()
    }

    /// The strategy with its workers, parameters, settings and numerics, without network
    /// and data set: `gpipe ×2 m4 bal time · bf16` (how rankings and comparisons name a cell).
    pub fn strategy_label(&self) -> String {
        let threads =
            self.swept_threads.map(|threads| format!(" {}", threads_label(threads.into()))).unwrap_or_default();
        let link = self.link.map(|link| format!(" over {}", link.name())).unwrap_or_default();
        format!(
            "{}{threads}{link}{}{}{}",
            self.strategy.label_with_workers(self.workers as usize),
            self.nodes_label(),
            self.straggler_label(),
            self.compute_label()
        )
    }

    /// What cells sort by: the columns in the order the `trials` table has them (the
    /// strategy columns determine the strategy, so the order agrees with equality).
    fn order(&self) -> impl Ord + '_ {
        (
            (&self.network, &self.dataset, self.data_source),
            (self.strategy.name(), self.workers, self.nodes, self.batch_size),
            ParameterColumns::from(&self.strategy),
            self.swept_threads,
            self.link,
            (self.precision, self.memory_format, self.optimizer),
            &self.straggler,
        )
    }
}

impl PartialOrd for CellKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CellKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

/// `network · dataset · strategy label · b<batch>`: a cell in one line.
impl std::fmt::Display for CellKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} · {} · {} · b{}", self.network, self.dataset_label(), self.strategy_label(), self.batch_size)
    }
}
