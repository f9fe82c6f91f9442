//! How table cells read: three significant digits, "—" for nothing, failures in capitals.

use polars::prelude::AnyValue;
use stratlab_results::Outcome;

/// What a cell with no value shows.
pub const MISSING: &str = "—";

/// `value` to three significant digits (`1.80`, `98.8`, `0.0123`, `12300`); NaN and ±∞
/// spelled out, so a diverged loss stays visible.
pub fn three_significant(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "∞".into() } else { "−∞".into() };
    }
    if value == 0.0 {
        return "0".into();
    }
    let magnitude = |v: f64| v.abs().log10().floor() as i32;
    // Round first, then choose the decimals from the rounded value (9.996 → 10.0, not 10.00).
    let scale = 10f64.powi(magnitude(value) - 2);
    let rounded = (value / scale).round() * scale;
    let decimals = (2 - magnitude(rounded)).max(0) as usize;
    format!("{rounded:.decimals$}")
}

/// An outcome as a table shows it: `ok` as is, failures in capitals (`OOM`).
pub fn outcome_label(outcome: Outcome) -> String {
    match outcome {
        Outcome::Ok => outcome.name().to_owned(),
        failed => failed.name().to_uppercase(),
    }
}

/// One cell as text: floats to three significant digits, integers in full, null as
/// [`MISSING`].
pub(crate) fn cell_text(value: &AnyValue<'_>) -> String {
    match value {
        AnyValue::Null => MISSING.into(),
        AnyValue::Float64(v) => three_significant(*v),
        AnyValue::Float32(v) => three_significant(f64::from(*v)),
        AnyValue::Boolean(b) => if *b { "yes" } else { "no" }.into(),
        AnyValue::String(s) => (*s).to_owned(),
        AnyValue::StringOwned(s) => s.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits() {
        let cases = [
            (1.8, "1.80"),
            (0.75, "0.750"),
            (98.76, "98.8"),
            (9.996, "10.0"),
            (0.012345, "0.0123"),
            (123.4, "123"),
            (12345.0, "12300"),
            (999.6, "1000"),
            (-2.346, "-2.35"),
            (0.0, "0"),
        ];
        for (value, text) in cases {
            assert_eq!(three_significant(value), text, "{value}");
        }
        assert_eq!(three_significant(f64::NAN), "NaN");
        assert_eq!(three_significant(f64::INFINITY), "∞");
    }

    #[test]
    fn failures_are_capitalised() {
        assert_eq!(outcome_label(Outcome::Oom), "OOM");
        assert_eq!(outcome_label(Outcome::Crashed), "CRASHED");
        assert_eq!(outcome_label(Outcome::Ok), "ok");
    }
}
