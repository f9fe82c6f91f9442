//! Typed access to the columns of a run's tables, every error naming the table and column,
//! and the (network, data set, strategy, W, batch) key that identifies a cell of the matrix.

use polars::prelude::{
    BooleanChunked, ChunkCompareEq, Column, DataFrame, DataType, Float64Chunked, Int64Chunked, PolarsError,
    StringChunked,
};

use stratlab_strategy_spec::{compute_label, stored_compute, threads_label, MemoryFormat, OptimizerKind, Precision};

use crate::ReportError;

/// The trials-table columns that identify one cell of the matrix; repeats share them.
pub(crate) const KEY_COLUMNS: [&str; 10] = [
    "network",
    "dataset",
    "strategy",
    "workers",
    "batch_size",
    "swept_threads",
    "link",
    "precision",
    "memory_format",
    "optimizer",
];

/// A cell's strategy as the report names it: the strategy's label, the threads where the
/// run swept them (` · 2 threads`), the emulated link where there was one (` over 1 Gbit/s`),
/// what it computed in where that was not float32 on contiguous tensors (` · bf16`), and
/// the optimizer where it was not SGD (` · adam`).
/// The one place the name is composed: a baseline is found from the typed fields, never by
/// taking a name apart (a link's own label holds ` · `).
pub(crate) fn cell_strategy_label(
    strategy: &str,
    swept_threads: Option<i64>,
    link: Option<&str>,
    (precision, memory_format): (Precision, MemoryFormat),
    optimizer: OptimizerKind,
) -> String {
    let threads = swept_threads.map(|threads| format!(" · {}", threads_label(threads))).unwrap_or_default();
    let link = link.map(|link| format!(" over {link}")).unwrap_or_default();
    format!("{strategy}{threads}{link}{}{}", compute_label(precision, memory_format), optimizer.label())
}

/// One cell of the benchmark matrix: what was trained, how, on how many workers, with how
/// many samples per worker. Repeats of a trial share their key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellKey {
    /// Network name (`resnet18`, …).
    pub network: String,
    /// Data set name (`cifar10`, …).
    pub dataset: String,
    /// Strategy name (`single`, `data-parallel`, …).
    pub strategy: String,
    /// Worker count W.
    pub workers: u32,
    /// Samples per worker per step.
    pub batch_size: u32,
    /// The trial's threads, where the run swept them.
    pub swept_threads: Option<i64>,
    /// The emulated link the workers talked over (`None`: loopback).
    pub link: Option<String>,
    /// What it computed in (runs stored before the axis: fp32).
    pub precision: Precision,
    /// How its tensors were laid out (runs stored before the axis: contiguous).
    pub memory_format: MemoryFormat,
    /// The optimizer it trained with (runs stored before the axis: SGD).
    pub optimizer: OptimizerKind,
}

impl CellKey {
    /// The key of the `single` (W = 1) cell this cell's speedup is measured against: same
    /// network, data set and batch per worker, in the same precision, memory format and
    /// optimizer, and
    /// the same threads where the run swept them; single has no link to talk over.
    pub fn baseline(&self) -> CellKey {
        CellKey {
            strategy: cell_strategy_label(
                "single",
                self.swept_threads,
                None,
                (self.precision, self.memory_format),
                self.optimizer,
            ),
            workers: 1,
            link: None,
            ..self.clone()
        }
    }
}

/// A frame of one table, read column by column.
pub(crate) struct Frame<'a> {
    /// The table's name, for errors.
    pub(crate) table: &'a str,
    /// The frame.
    pub(crate) frame: &'a DataFrame,
}

impl<'a> Frame<'a> {
    pub(crate) fn new(table: &'a str, frame: &'a DataFrame) -> Self {
        Frame { table, frame }
    }

    /// A closure turning a Polars error on `column` into a [`ReportError::Column`].
    pub(crate) fn error(&self, column: &str) -> impl Fn(PolarsError) -> ReportError + '_ {
        let column = column.to_owned();
        move |source| ReportError::Column { table: self.table.to_owned(), column: column.clone(), source }
    }

    pub(crate) fn column(&self, name: &str) -> Result<&'a Column, ReportError> {
        self.frame.column(name).map_err(self.error(name))
    }

    pub(crate) fn str(&self, name: &str) -> Result<&'a StringChunked, ReportError> {
        self.column(name)?.str().map_err(self.error(name))
    }

    pub(crate) fn i64(&self, name: &str) -> Result<&'a Int64Chunked, ReportError> {
        self.column(name)?.i64().map_err(self.error(name))
    }

    pub(crate) fn bool(&self, name: &str) -> Result<&'a BooleanChunked, ReportError> {
        self.column(name)?.bool().map_err(self.error(name))
    }

    /// A numeric column as `f64` (UInt64 byte counts included).
    pub(crate) fn f64(&self, name: &str) -> Result<Float64Chunked, ReportError> {
        let column = self.column(name)?.cast(&DataType::Float64).map_err(self.error(name))?;
        Ok(column.f64().map_err(self.error(name))?.clone())
    }

    /// Rows whose `outcome` is `ok`: the only ones that are measurements.
    pub(crate) fn ok_rows(&self) -> Result<DataFrame, ReportError> {
        let ok = self.str("outcome")?.equal(stratlab_results::Outcome::Ok.name());
        self.frame.filter(&ok).map_err(self.error("outcome"))
    }

    /// A reader of the key columns.
    pub(crate) fn keys(&self) -> Result<KeyReader<'a>, ReportError> {
        Ok(KeyReader {
            table: self.table.to_owned(),
            network: self.str("network")?,
            dataset: self.str("dataset")?,
            strategy: self.str("strategy")?,
            workers: self.i64("workers")?,
            batch_size: self.i64("batch_size")?,
            swept_threads: self.i64("swept_threads")?,
            link: self.str("link")?,
            precision: self.str("precision")?,
            memory_format: self.str("memory_format")?,
            optimizer: self.str("optimizer")?,
        })
    }
}

/// Reads the [`CellKey`] of row `i` of a frame holding the key columns.
pub(crate) struct KeyReader<'a> {
    table: String,
    network: &'a StringChunked,
    dataset: &'a StringChunked,
    strategy: &'a StringChunked,
    workers: &'a Int64Chunked,
    batch_size: &'a Int64Chunked,
    swept_threads: &'a Int64Chunked,
    link: &'a StringChunked,
    precision: &'a StringChunked,
    memory_format: &'a StringChunked,
    optimizer: &'a StringChunked,
}

impl KeyReader<'_> {
    pub(crate) fn key(&self, i: usize) -> Result<CellKey, ReportError> {
        let text = |column: &StringChunked, name: &str| {
            column.get(i).map(str::to_owned).ok_or_else(|| self.invalid(name, "null", "a trial names it"))
        };
        let count = |column: &Int64Chunked, name: &str| {
            let value = column.get(i);
            value
                .and_then(|v| u32::try_from(v).ok())
                .filter(|v| *v > 0)
                .ok_or_else(|| self.invalid(name, &format!("{value:?}"), "a positive count"))
        };
        // Runs stored before the axes hold nulls: they computed in the defaults.
        let (precision, memory_format) =
            stored_compute(&format!("{} row {i}", self.table), self.precision.get(i), self.memory_format.get(i))?;
        let optimizer = OptimizerKind::stored(&format!("{} row {i}", self.table), self.optimizer.get(i))?;
        Ok(CellKey {
            network: text(self.network, "network")?,
            dataset: text(self.dataset, "dataset")?,
            strategy: text(self.strategy, "strategy")?,
            workers: count(self.workers, "workers")?,
            batch_size: count(self.batch_size, "batch_size")?,
            swept_threads: self.swept_threads.get(i),
            link: self.link.get(i).map(str::to_owned),
            precision,
            memory_format,
            optimizer,
        })
    }

    fn invalid(&self, column: &str, value: &str, why: &'static str) -> ReportError {
        ReportError::InvalidInput {
            figure: "aggregate",
            field: format!("{}.{column}", self.table),
            value: value.to_owned(),
            why,
        }
    }
}
