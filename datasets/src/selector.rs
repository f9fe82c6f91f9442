//! Suites name a data set as `mnist` (real files) or `mnist:synthetic` (generated twin);
//! this is that string, parsed and checked against the registry.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{info, DataError, DatasetInfo};

/// Where samples come from: the real files, or the deterministic generator of the same shape
/// (the strategy vocabulary's, which the `trials` table stores).
pub use stratlab_strategy_spec::DataSource as Source;

/// A registered data set name plus a source; `FromStr`/`Display`/serde use `name[:synthetic]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DatasetSelector {
    /// Registry name (always a valid one).
    pub name: &'static str,
    /// Real or synthetic.
    pub source: Source,
}

impl DatasetSelector {
    /// Selects the real files of `name`.
    pub fn real(name: &str) -> Result<Self, DataError> {
        Ok(DatasetSelector { name: info(name)?.name, source: Source::Real })
    }

    /// Selects the synthetic twin of `name`.
    pub fn synthetic(name: &str) -> Result<Self, DataError> {
        Ok(DatasetSelector { name: info(name)?.name, source: Source::Synthetic })
    }

    /// The registry entry of the selected data set (an error only if `name` was set by
    /// hand to something unregistered).
    pub fn info(&self) -> Result<&'static DatasetInfo, DataError> {
        info(self.name)
    }
}

impl FromStr for DatasetSelector {
    type Err = DataError;

    fn from_str(text: &str) -> Result<Self, DataError> {
        let (name, source) = match text.split_once(':') {
            None => (text, Source::Real),
            Some((name, "synthetic")) => (name, Source::Synthetic),
            Some((name, "real")) => (name, Source::Real),
            Some((_, other)) => {
                return Err(DataError::BadSelector {
                    text: text.to_string(),
                    reason: format!("unknown source `{other}`: write `name` for real files or `name:synthetic`"),
                })
            }
        };
        Ok(DatasetSelector { name: info(name.trim())?.name, source })
    }
}

impl fmt::Display for DatasetSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::Real => f.write_str(self.name),
            Source::Synthetic => write!(f, "{}:synthetic", self.name),
        }
    }
}

impl Serialize for DatasetSelector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

// Hand-written because `name` is `&'static str` (a registry name), which derived impls
// would try to borrow from the input.
impl<'de> Deserialize<'de> for DatasetSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_and_synthetic_and_round_trips() {
        for text in ["mnist", "mnist:synthetic", "highres:synthetic", "fashion-mnist"] {
            let sel: DatasetSelector = text.parse().unwrap();
            assert_eq!(sel.to_string(), text);
        }
        let sel: DatasetSelector = "cifar10:synthetic".parse().unwrap();
        assert_eq!((sel.name, sel.source), ("cifar10", Source::Synthetic));
        assert_eq!("cifar10:real".parse::<DatasetSelector>().unwrap().to_string(), "cifar10");
    }

    #[test]
    fn rejects_unknown_name_and_source() {
        assert!(matches!("svhn".parse::<DatasetSelector>(), Err(DataError::UnknownDataset { .. })));
        let err = "mnist:fake".parse::<DatasetSelector>().unwrap_err();
        assert!(matches!(err, DataError::BadSelector { .. }));
        assert!(err.to_string().contains("fake"));
    }

    #[test]
    fn serde_uses_the_string_form() {
        let sel: DatasetSelector = "cifar100:synthetic".parse().unwrap();
        let json = serde_json::to_string(&sel).unwrap();
        assert_eq!(json, "\"cifar100:synthetic\"");
        let back: DatasetSelector = serde_json::from_str(&json).unwrap();
        assert_eq!(back, sel);
        assert!(serde_json::from_str::<DatasetSelector>("\"nope\"").is_err());
    }
}
