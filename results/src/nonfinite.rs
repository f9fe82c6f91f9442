//! Serde helpers that keep NaN and ±infinity through JSON, which has no spelling for them.
//!
//! A diverged loss is a measurement: NaN (or infinity) must stay distinct from "not
//! measured" (null) on the way from a worker to the runner and into the results store.
//! Finite values stay JSON numbers; non-finite ones become the strings `"NaN"`, `"inf"` and
//! `"-inf"` (the spellings Python, numpy and polars print).

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;
use std::fmt;

/// The text for a non-finite value, `None` for a finite one.
pub fn text_of(value: f64) -> Option<&'static str> {
    if value.is_nan() {
        Some("NaN")
    } else if value == f64::INFINITY {
        Some("inf")
    } else if value == f64::NEG_INFINITY {
        Some("-inf")
    } else {
        None
    }
}

/// The value of a non-finite spelling (`NaN`, `nan`, `inf`, `+inf`, `-inf`, `infinity`, …).
pub fn parse_text(text: &str) -> Option<f64> {
    match text.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// A float that may be NaN or infinite: `#[serde(with = "nonfinite::float")]`.
pub mod float {
    use super::*;

    /// Writes a number, or the text of a non-finite value.
    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        match text_of(*value) {
            Some(text) => serializer.serialize_str(text),
            None => serializer.serialize_f64(*value),
        }
    }

    /// Reads a number or a non-finite text; `null` (how older files stored NaN) reads as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(super::option::deserialize(deserializer)?.unwrap_or(f64::NAN))
    }
}

/// An optional float that may be NaN or infinite: `#[serde(with = "nonfinite::option")]`.
/// `None` (not measured) stays `null`; a measured NaN is `"NaN"`.
pub mod option {
    use super::*;

    /// Writes `null`, a number, or the text of a non-finite value.
    pub fn serialize<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(value) => super::float::serialize(value, serializer),
        }
    }

    /// Reads `null`, a number, or a non-finite text.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
        deserializer.deserialize_any(OptionalFloat)
    }

    struct OptionalFloat;

    impl<'de> Visitor<'de> for OptionalFloat {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number, null, or one of \"NaN\", \"inf\", \"-inf\"")
        }
        fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
            Ok(Some(value))
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
            Ok(Some(value as f64))
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
            Ok(Some(value as f64))
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            parse_text(text).map(Some).ok_or_else(|| E::invalid_value(de::Unexpected::Str(text), &self))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_any(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Row {
        #[serde(with = "super::float")]
        loss: f64,
        #[serde(with = "super::option")]
        final_loss: Option<f64>,
    }

    #[test]
    fn nan_infinity_and_missing_stay_distinct_through_json() {
        for (loss, final_loss, json) in [
            (f64::NAN, None, r#"{"loss":"NaN","final_loss":null}"#),
            (f64::INFINITY, Some(f64::NEG_INFINITY), r#"{"loss":"inf","final_loss":"-inf"}"#),
            (0.25, Some(1.5), r#"{"loss":0.25,"final_loss":1.5}"#),
        ] {
            let text = serde_json::to_string(&Row { loss, final_loss }).unwrap();
            assert_eq!(text, json);
            let back: Row = serde_json::from_str(&text).unwrap();
            assert_eq!(back.loss.to_bits(), loss.to_bits());
            assert_eq!(back.final_loss.map(f64::to_bits), final_loss.map(f64::to_bits));
        }
        // Files written before this change stored a NaN loss as null.
        let old: Row = serde_json::from_str(r#"{"loss":null,"final_loss":null}"#).unwrap();
        assert!(old.loss.is_nan() && old.final_loss.is_none());
    }
}
