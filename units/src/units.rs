//! Quantities written with their units (`80 GiB`, `67 TFLOP/s`), so a cluster file or a
//! suite reads like the datasheet it was copied from and a mistyped unit is an error
//! naming the units accepted, never a silent factor of 8 or 1000.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Byte-size units, as written, and bytes for one of each (numerator, denominator): SI
/// units are powers of 1000 and IEC units powers of 1024, each meaning what it says.
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

/// The byte units' names, for error messages.
pub fn byte_unit_names() -> String {
    unit_names(&BYTE_UNITS)
}

/// Short binary forms, in any case, as GNU tools and the probe's `--sizes` have always read
/// them (`64M` is 64 MiB, `1k` 1 KiB; `64mib` too), and a bare number of bytes.
const SHORT_BYTE_UNITS: [(&str, f64, f64); 14] = [
    ("", 1.0, 1.0),
    ("b", 1.0, 1.0),
    ("k", 1024.0, 1.0),
    ("ki", 1024.0, 1.0),
    ("m", 1048576.0, 1.0),
    ("mi", 1048576.0, 1.0),
    ("g", 1073741824.0, 1.0),
    ("gi", 1073741824.0, 1.0),
    ("t", 1099511627776.0, 1.0),
    ("ti", 1099511627776.0, 1.0),
    ("kib", 1024.0, 1.0),
    ("mib", 1048576.0, 1.0),
    ("gib", 1073741824.0, 1.0),
    ("tib", 1099511627776.0, 1.0),
];

/// The byte-size grammar, for help texts and errors.
pub const BYTE_SIZE_GRAMMAR: &str = "a number of bytes, optionally with a unit: SI kB, MB, GB, TB \
    (powers of 1000) or IEC KiB, MiB, GiB, TiB (powers of 1024); the short forms K, M, G, T \
    (any case) are binary, so 64M = 64 MiB";

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

/// A size in bytes (device memory, a message), read as `80 GiB`, `16 GB` or `64M` (see
/// [`BYTE_SIZE_GRAMMAR`]): the one reader of sizes for cluster files and the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let error = || UnitError {
            text: text.to_owned(),
            what: "byte size",
            valid: format!("{} (or K, M, G, T for KiB, MiB, GiB, TiB)", unit_names(&BYTE_UNITS)),
        };
        let trimmed = text.trim();
        let unit_at = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
        let unit = trimmed[unit_at..].trim();
        let short = SHORT_BYTE_UNITS.iter().find(|(name, ..)| name.eq_ignore_ascii_case(unit));
        let bytes = match short {
            Some(&(_, numerator, denominator)) => {
                let number: f64 = trimmed[..unit_at].trim().parse().map_err(|_| error())?;
                number * numerator / denominator
            }
            None => parse_with_units(trimmed, "byte size", &BYTE_UNITS).map_err(|_| error())?,
        };
        // `1.5 kB` is a whole number of bytes; anything finer cannot be allocated anyway.
        match bytes.is_finite() && bytes < u64::MAX as f64 {
            true => Ok(ByteSize(bytes.round() as u64)),
            false => Err(error()),
        }
    }
}

impl ByteSize {
    /// `64 MiB`, `1.5 KiB`, `4 B`: the size in the largest binary unit it reaches, to one
    /// decimal where it is not a whole number of them (for tables, not for reading back).
    pub fn approximate(self) -> String {
        const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        let bytes = self.0;
        match UNITS.iter().find(|(_, scale)| bytes >= *scale) {
            Some((unit, scale)) if bytes.is_multiple_of(*scale) => format!("{} {unit}", bytes / scale),
            Some((unit, scale)) => format!("{:.1} {unit}", bytes as f64 / *scale as f64),
            None => format!("{bytes} B"),
        }
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
    fn byte_sizes_read_one_grammar_for_cluster_files_and_the_command_line() {
        let bytes = |text: &str| text.parse::<ByteSize>().map(|size| size.0);
        // The command line's forms, as it read them before: binary short units, any case.
        assert_eq!(bytes("4"), Ok(4));
        assert_eq!(bytes("1K"), Ok(1024));
        assert_eq!(bytes("64M"), Ok(64 << 20));
        assert_eq!(bytes("64MiB"), Ok(64 << 20));
        assert_eq!(bytes("2g"), Ok(2 << 30));
        assert_eq!(bytes("64mib"), Ok(64 << 20));
        // Cluster files' forms: SI means powers of 1000, IEC powers of 1024.
        assert_eq!(bytes("64MB"), Ok(64_000_000));
        assert_eq!(bytes("64 MB"), Ok(64_000_000));
        assert_eq!(bytes("80 GiB"), Ok(80 << 30));
        assert_eq!(bytes("1.5M"), Ok(3 << 19));
        for bad in ["", "M", "64 megs", "-1M", "64mb", "1e400GB", "1.2.3K"] {
            assert!(bytes(bad).is_err(), "`{bad}` read as {:?}", bytes(bad));
        }
        let error = "64 megs".parse::<ByteSize>().unwrap_err();
        assert!(error.to_string().contains("`64 megs`") && error.valid.contains("MiB, GiB"), "{error}");
    }

    #[test]
    fn sizes_are_shown_in_binary_units() {
        assert_eq!(ByteSize(4).approximate(), "4 B");
        assert_eq!(ByteSize(1 << 20).approximate(), "1 MiB");
        assert_eq!(ByteSize(64 << 20).approximate(), "64 MiB");
        assert_eq!(ByteSize(1536).approximate(), "1.5 KiB");
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
