//! Where a cell's samples come from: a data set's real files or its learnable synthetic
//! twin. Suites write it as a suffix (`cifar10:synthetic`), the `trials` table as its own
//! column (`data_source`); real and synthetic runs of one data set are different cells.

use serde::{Deserialize, Serialize};

use crate::UnknownName;

/// Real files, or the deterministic generator of the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum DataSource {
    /// Real files (read from the cache, fetched when possible).
    #[default]
    Real,
    /// Learnable synthetic twin, generated per sample on demand.
    Synthetic,
}

impl DataSource {
    /// The name the `data_source` column stores (`real`, `synthetic`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// A data set's name as suites write it: `cifar10`, or `cifar10:synthetic` for the twin.
    pub fn selector(self, dataset: &str) -> String {
        match self {
            DataSource::Real => dataset.to_owned(),
            DataSource::Synthetic => format!("{dataset}:synthetic"),
        }
    }
}

stratlab_columns::text_column!(DataSource);

impl std::str::FromStr for DataSource {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, UnknownName> {
        UnknownName::parse("data source", name)
    }
}
