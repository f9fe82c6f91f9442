//! The one path from typed rows to polars frames and back.

use std::io::Cursor;
use std::sync::Arc;

use polars::prelude::{AnyValue, Column, DataFrame, DataType, Field, JsonFormat, JsonReader, Schema, SerReader};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use stratlab_columns::{ColumnType, Columns};

use crate::{nonfinite, StoreError};

/// A row type stored as one table of a run, one Parquet part per trial.
///
/// Its schema is derived from its fields (`#[derive(Columns)]`), so the columns a part is
/// written with are the fields serde writes, in their order. The explicit schema is what
/// keeps parts concatenable: a part whose optional column is null in every row still gets
/// that column's real dtype instead of polars' `Null`.
pub trait Table: Serialize + DeserializeOwned + Columns {
    /// Table name, also its folder in the run (`trials`, `epochs`, `steps`, `telemetry`, …).
    const NAME: &'static str;
    /// Whether the table has one part per trial, loaded only once the trial is finished.
    /// Run-level tables (`probes`) are not tied to a trial: every part of theirs loads.
    const PER_TRIAL: bool = true;
    /// Column names and dtypes, in field order.
    fn schema() -> Schema {
        Self::columns().into_iter().map(|column| Field::new(column.name.into(), dtype(&column.column_type))).collect()
    }
    /// The trial the row belongs to, `None` in a run-level table; the store checks every
    /// part of a per-trial table holds only its trial.
    fn trial_id(&self) -> Option<&str>;
}

/// The polars dtype a column type is stored as.
fn dtype(column_type: &ColumnType) -> DataType {
    match column_type {
        ColumnType::Boolean => DataType::Boolean,
        ColumnType::Int32 => DataType::Int32,
        ColumnType::Int64 => DataType::Int64,
        ColumnType::UInt32 => DataType::UInt32,
        ColumnType::UInt64 => DataType::UInt64,
        ColumnType::Float64 => DataType::Float64,
        ColumnType::Text => DataType::String,
        ColumnType::List(item) => DataType::List(Box::new(dtype(item))),
    }
}

/// Turns rows into a frame with exactly `T::schema()`.
///
/// Rows go through serde to JSON and back in through polars' JSON reader with the schema
/// given, so no column is formatted by hand and any serde type works. JSON has no NaN or
/// infinity, so fields that can hold them serialise them as text (`crate::nonfinite`); those cells are read as null and then set to their value in the frame, so
/// a diverged loss is stored as NaN or infinity, distinct from a missing value (null).
pub fn to_frame<T: Table>(rows: &[T]) -> Result<DataFrame, StoreError> {
    let schema = T::schema();
    if rows.is_empty() {
        return Ok(DataFrame::empty_with_schema(&schema));
    }
    let encode = |source| StoreError::Encode { table: T::NAME, source };
    let mut values = match serde_json::to_value(rows).map_err(encode)? {
        Value::Array(values) => values,
        _ => unreachable!("a slice serialises as an array"),
    };
    let float_columns: Vec<&str> =
        schema.iter().filter(|(_, dtype)| **dtype == DataType::Float64).map(|(name, _)| name.as_str()).collect();
    // (column, row, value) of every non-finite cell.
    let mut non_finite: Vec<(&str, usize, f64)> = Vec::new();
    for (index, row) in values.iter_mut().enumerate() {
        let Value::Object(fields) = row else { continue };
        for &column in &float_columns {
            if let Some(Value::String(text)) = fields.get(column) {
                if let Some(value) = nonfinite::parse_text(text) {
                    non_finite.push((column, index, value));
                    fields.insert(column.to_owned(), Value::Null);
                }
            }
        }
    }
    let json = serde_json::to_vec(&values).map_err(encode)?;
    let mut frame = JsonReader::new(Cursor::new(json))
        .with_json_format(JsonFormat::Json)
        .with_schema(Arc::new(schema.clone()))
        .finish()
        .map_err(|source| StoreError::Frame { table: T::NAME, source })?;
    for &column in &float_columns {
        let cells: Vec<(usize, f64)> =
            non_finite.iter().filter(|(name, ..)| *name == column).map(|&(_, row, value)| (row, value)).collect();
        if cells.is_empty() {
            continue;
        }
        let frame_error = |source| StoreError::Frame { table: T::NAME, source };
        let mut patched: Vec<Option<f64>> =
            frame.column(column).map_err(frame_error)?.f64().map_err(frame_error)?.to_vec();
        for (row, value) in cells {
            patched[row] = Some(value);
        }
        frame.replace(column, Column::new(column.into(), patched)).map_err(frame_error)?;
    }
    Ok(frame)
}

/// Turns a frame of `T::schema()` back into rows.
///
/// Each cell goes through polars' `AnyValue` into a `serde_json::Value` and the rows then
/// through serde, so floats come back bit-exact (polars' JSON writer rounds the last digit).
pub fn from_frame<T: Table>(frame: &DataFrame) -> Result<Vec<T>, StoreError> {
    decode_rows(frame, T::NAME)
}

/// Like [`from_frame`], into any serde type that reads some of the columns of `table`
/// (`TrialRow`'s strategy columns, say): columns the type does not name are ignored.
pub fn decode_rows<T: DeserializeOwned>(frame: &DataFrame, table: &'static str) -> Result<Vec<T>, StoreError> {
    let columns = frame.columns();
    let mut rows = Vec::with_capacity(frame.height());
    for i in 0..frame.height() {
        let mut row = serde_json::Map::with_capacity(columns.len());
        for column in columns {
            let cell = column.get(i).map_err(|source| StoreError::Frame { table, source })?;
            row.insert(column.name().to_string(), json_value(table, column.name(), cell)?);
        }
        rows.push(Value::Object(row));
    }
    serde_json::from_value(Value::Array(rows)).map_err(|source| StoreError::Decode { table, source })
}

/// One cell as JSON; the dtypes are those a [`Table`] schema may use.
fn json_value(table: &'static str, column: &str, cell: AnyValue<'_>) -> Result<Value, StoreError> {
    Ok(match cell {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => Value::Bool(b),
        AnyValue::String(s) => Value::String(s.to_owned()),
        AnyValue::StringOwned(s) => Value::String(s.to_string()),
        AnyValue::Int64(v) => Value::from(v),
        AnyValue::UInt64(v) => Value::from(v),
        AnyValue::UInt32(v) => Value::from(v),
        AnyValue::Int32(v) => Value::from(v),
        // NaN and infinity have no JSON number form: they go back as the text the row's
        // non-finite-aware fields read (see `to_frame`).
        AnyValue::Float64(v) => match serde_json::Number::from_f64(v) {
            Some(number) => Value::Number(number),
            None => Value::String(nonfinite::text_of(v).unwrap_or("NaN").to_owned()),
        },
        AnyValue::List(series) => {
            let mut items = Vec::with_capacity(series.len());
            for item in series.iter() {
                items.push(json_value(table, column, item)?);
            }
            Value::Array(items)
        }
        other => {
            return Err(StoreError::UnsupportedDtype {
                table,
                column: column.to_owned(),
                dtype: other.dtype().to_string(),
            })
        }
    })
}

/// `frame` with each list column (a straggler's ranks) as text, its cells' JSON arrays
/// (`[1,3]`): CSV has no nested values, and a spreadsheet reads this as written.
pub(crate) fn lists_as_text(frame: &DataFrame, table: &'static str) -> Result<DataFrame, StoreError> {
    let mut flat = frame.clone();
    for column in frame.columns() {
        if !matches!(column.dtype(), DataType::List(_)) {
            continue;
        }
        let mut texts: Vec<Option<String>> = Vec::with_capacity(column.len());
        for i in 0..column.len() {
            let cell = column.get(i).map_err(|source| StoreError::Frame { table, source })?;
            texts.push(match json_value(table, column.name(), cell)? {
                Value::Null => None,
                value => Some(value.to_string()),
            });
        }
        flat.with_column(Column::new(column.name().clone(), texts))
            .map_err(|source| StoreError::Frame { table, source })?;
    }
    Ok(flat)
}

/// Writes `rows` as CSV to `path`, whole or not at all (written beside it, then renamed).
pub fn write_csv<T: Table>(rows: &[T], path: &std::path::Path) -> Result<(), StoreError> {
    use polars::prelude::SerWriter;
    let mut frame = lists_as_text(&to_frame(rows)?, T::NAME)?;
    let mut bytes = Vec::new();
    polars::prelude::CsvWriter::new(&mut bytes)
        .finish(&mut frame)
        .map_err(|source| StoreError::Polars { path: path.to_path_buf(), source })?;
    crate::write_file_atomically(path, &bytes)
}
