//! File formats a run's tables can be exported to for tools that do not read Parquet.

use std::str::FromStr;

use stratlab_strategy_spec::UnknownName;

/// Export format for [`super::RunStore::export`]; each table becomes one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum ExportFormat {
    /// Comma-separated values with a header row; nulls are empty fields.
    Csv,
    /// One JSON array of row objects per table; nulls are `null`.
    Json,
}

impl ExportFormat {
    /// File extension, without the dot; also the name the format parses from.
    pub fn extension(self) -> &'static str {
        self.into()
    }
}

impl FromStr for ExportFormat {
    type Err = UnknownName;

    /// Case-insensitive (`CSV` is `csv`); an error names the text lower-cased.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("export format", &text.to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use strum::VariantArray;

    use super::*;

    #[test]
    fn extensions_parse_back_in_any_case() {
        let extensions: Vec<&str> = ExportFormat::VARIANTS.iter().map(|format| format.extension()).collect();
        assert_eq!(extensions, ["csv", "json"]);
        for &format in ExportFormat::VARIANTS {
            assert_eq!(format.extension().parse::<ExportFormat>(), Ok(format));
            assert_eq!(format.extension().to_uppercase().parse::<ExportFormat>(), Ok(format));
        }
        assert_eq!(
            "Parquet".parse::<ExportFormat>().unwrap_err().to_string(),
            "unknown export format `parquet`; valid: csv, json"
        );
    }
}
