//! The one way stratlab's YAML files (suites, cluster files, published tables) are read:
//! through `serde_path_to_error`, so an error names the field path (`device.memory`,
//! `rows[2].strategy`) as well as the line and column the YAML parser gives.

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::Deserialize;

/// Parses `text` as a `T`; the error names the field path where one was being read.
pub fn from_yaml<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str::<WithFieldPath<T>>(text).map(|parsed| parsed.0)
}

/// Deserialises a `T` through `serde_path_to_error`; the YAML parser around it adds the
/// line and column.
struct WithFieldPath<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for WithFieldPath<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_path_to_error::deserialize(deserializer).map(WithFieldPath).map_err(|error| {
            let path = error.path().to_string();
            let inner = error.into_inner();
            match path.as_str() {
                // The root, or a key not yet read: no field to name.
                "." | "?" => inner,
                _ => de::Error::custom(format!("{path}: {inner}")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    #[test]
    fn an_error_names_the_field_path() {
        let error = from_yaml::<Outer>("inner:\n  count: many\n").unwrap_err().to_string();
        assert!(error.contains("inner.count"), "{error}");
        assert_eq!(from_yaml::<Outer>("inner: {count: 3}").unwrap().inner.count, 3);
    }
}
