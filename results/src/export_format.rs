//! File formats a run's tables can be exported to for tools that do not read Parquet.

use std::str::FromStr;

/// Export format for [`super::RunStore::export`]; each table becomes one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExportFormat {
    /// Comma-separated values with a header row; nulls are empty fields.
    Csv,
    /// One JSON array of row objects per table; nulls are `null`.
    Json,
}

impl ExportFormat {
    /// File extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Csv => "csv",
            ExportFormat::Json => "json",
        }
    }
}

impl FromStr for ExportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "csv" => Ok(ExportFormat::Csv),
            "json" => Ok(ExportFormat::Json),
            other => Err(format!("unknown export format {other:?} (csv, json)")),
        }
    }
}
