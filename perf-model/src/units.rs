//! Quantities written with their units (`80 GiB`, `67 TFLOP/s`), so a cluster file or a
//! suite reads like the datasheet it was copied from and a mistyped unit is an error
//! naming the units accepted, never a silent factor of 8 or 1000.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Byte-size units, as written, and bytes for one of each (numerator, denominator).
const BYTE_UNITS: [(&str, f64, f64); 9] = [
    ("B", 1.0, 1.0),
    ("kB", 1e3, 1.0),
    ("MB", 1e6, 1.0),
    ("GB", 1e9, 1.0),
    ("TB", 1e12, 1.0),
    ("KiB", 1024.0, 1.0),
    ("MiB", 1048576.0, 1.0),
    ("GiB", 1073741824.0, 1.0),
    ("TiB", 1099511627776.0, 1.0),
];

/// FLOP-rate units, as written, and floating-point operations per second for one of each.
const FLOP_RATE_UNITS: [(&str, f64, f64); 4] =
    [("FLOP/s", 1.0, 1.0), ("GFLOP/s", 1e9, 1.0), ("TFLOP/s", 1e12, 1.0), ("PFLOP/s", 1e15, 1.0)];

/// Why a quantity with a unit could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {what}: write a non-negative number and one of the units {valid}")]
pub struct UnitError {
    /// What was read.
    pub text: String,
    /// What it should have been (`bandwidth`, `latency`, `byte size`, `FLOP rate`).
    pub what: &'static str,
    /// The units accepted, comma-separated.
    pub valid: String,
}

/// The units of `units`, comma-separated, for error messages.
pub(crate) fn unit_names(units: &[(&str, f64, f64)]) -> String {
    units.iter().map(|(unit, ..)| *unit).collect::<Vec<_>>().join(", ")
}

/// Parses `<number><space?><unit>` against `units` (name, numerator, denominator): the
/// value is `number × numerator ÷ denominator`, so `5 us` is exactly 5 ÷ 10⁶ s, not
/// 5 × 10⁻⁶.
pub(crate) fn parse_with_units(text: &str, what: &'static str, units: &[(&str, f64, f64)]) -> Result<f64, UnitError> {
    let error = || UnitError { text: text.to_owned(), what, valid: unit_names(units) };
    let trimmed = text.trim();
    let split =
        trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'));
    let (number, unit) = trimmed.split_at(split.ok_or_else(error)?);
    let number: f64 = number.trim().parse().map_err(|_| error())?;
    let (_, numerator, denominator) = units.iter().find(|(name, ..)| *name == unit.trim()).ok_or_else(error)?;
    (number.is_finite() && number >= 0.0).then_some(number * numerator / denominator).ok_or_else(error)
}

/// A size in bytes (device memory, a message), read as `80 GiB` or `16 GB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let bytes = parse_with_units(text, "byte size", &BYTE_UNITS)?;
        // `1.5 kB` is a whole number of bytes; anything finer cannot be allocated anyway.
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl TryFrom<String> for ByteSize {
    type Error = UnitError;
    fn try_from(text: String) -> Result<Self, UnitError> {
        text.parse()
    }
}

impl From<ByteSize> for String {
    fn from(size: ByteSize) -> String {
        size.to_string()
    }
}

impl fmt::Display for ByteSize {
    /// In GiB, the unit device memory is reported in, unless smaller than one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 >= 1 << 30 {
            true => write!(f, "{} GiB", self.0 as f64 / 1073741824.0),
            false => write!(f, "{} B", self.0),
        }
    }
}

/// A rate of floating-point operations per second, read as `67 TFLOP/s`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FlopRate(pub f64);

impl FromStr for FlopRate {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let flops = parse_with_units(text, "FLOP rate", &FLOP_RATE_UNITS)?;
        // A device that computes nothing would make every prediction infinite.
        match flops > 0.0 {
            true => Ok(FlopRate(flops)),
            false => {
                Err(UnitError { text: text.to_owned(), what: "FLOP rate above 0", valid: unit_names(&FLOP_RATE_UNITS) })
            }
        }
    }
}

impl TryFrom<String> for FlopRate {
    type Error = UnitError;
    fn try_from(text: String) -> Result<Self, UnitError> {
        text.parse()
    }
}

impl From<FlopRate> for String {
    fn from(rate: FlopRate) -> String {
        rate.to_string()
    }
}

impl fmt::Display for FlopRate {
    /// In TFLOP/s, the unit accelerators are sold in.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} TFLOP/s", self.0 / 1e12)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_read_decimal_and_binary_units() {
        assert_eq!("80 GiB".parse::<ByteSize>().unwrap(), ByteSize(80 << 30));
        assert_eq!("16GB".parse::<ByteSize>().unwrap(), ByteSize(16_000_000_000));
        assert_eq!("1.5 kB".parse::<ByteSize>().unwrap(), ByteSize(1500));
        assert_eq!("2 TiB".parse::<ByteSize>().unwrap(), ByteSize(2 << 40));
        assert_eq!("0 B".parse::<ByteSize>().unwrap(), ByteSize(0));
        assert_eq!("80 GiB".parse::<ByteSize>().unwrap().to_string(), "80 GiB");
    }

    #[test]
    fn flop_rates_read_their_units() {
        assert_eq!("67 TFLOP/s".parse::<FlopRate>().unwrap(), FlopRate(67e12));
        assert_eq!("1.5 PFLOP/s".parse::<FlopRate>().unwrap(), FlopRate(1.5e15));
        assert_eq!("500GFLOP/s".parse::<FlopRate>().unwrap(), FlopRate(5e11));
        assert!("0 TFLOP/s".parse::<FlopRate>().is_err(), "a device computes something");
    }

    #[test]
    fn a_bad_unit_names_the_text_and_the_valid_units() {
        let error = "80 gigs".parse::<ByteSize>().unwrap_err();
        assert!(error.to_string().contains("`80 gigs`") && error.valid.contains("GiB"), "{error}");
        let error = "67 TFLOPS".parse::<FlopRate>().unwrap_err();
        assert!(error.valid.contains("TFLOP/s"), "{error}");
        assert!("-1 GB".parse::<ByteSize>().is_err());
        assert!("GB".parse::<ByteSize>().is_err());
    }
}
