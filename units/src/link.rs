//! A link between two workers: bandwidth and one-way latency, written with their units
//! (`bandwidth: 100 Gbit/s`, `latency: 5 us`), the one link type of cluster files, the
//! probe, suites and the stored rows (by its name, [`Link::name`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::units::{parse_with_units, unit_names, UnitError};

/// Bandwidth units, as written, and bytes per second for one of each as a fraction
/// (numerator, denominator), so `5 us` is exactly 5 ÷ 10⁶ s, not 5 × 10⁻⁶.
const BANDWIDTH_UNITS: [(&str, f64, f64); 13] = [
    ("bit/s", 1.0, 8.0),
    ("kbit/s", 1e3, 8.0),
    ("Mbit/s", 1e6, 8.0),
    ("Gbit/s", 1e9, 8.0),
    ("Tbit/s", 1e12, 8.0),
    ("B/s", 1.0, 1.0),
    ("kB/s", 1e3, 1.0),
    ("MB/s", 1e6, 1.0),
    ("GB/s", 1e9, 1.0),
    ("TB/s", 1e12, 1.0),
    ("KiB/s", 1024.0, 1.0),
    ("MiB/s", 1048576.0, 1.0),
    ("GiB/s", 1073741824.0, 1.0),
];

/// Latency units, as written, and seconds for one of each (numerator, denominator).
const LATENCY_UNITS: [(&str, f64, f64); 5] =
    [("s", 1.0, 1.0), ("ms", 1.0, 1e3), ("us", 1.0, 1e6), ("µs", 1.0, 1e6), ("ns", 1.0, 1e9)];

/// Link bandwidth, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Bandwidth(pub f64);

impl FromStr for Bandwidth {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let bytes_per_s = parse_with_units(text, "bandwidth", &BANDWIDTH_UNITS)?;
        match bytes_per_s > 0.0 {
            true => Ok(Bandwidth(bytes_per_s)),
            false => {
                Err(UnitError { text: text.to_owned(), what: "bandwidth above 0", valid: unit_names(&BANDWIDTH_UNITS) })
            }
        }
    }
}

impl TryFrom<String> for Bandwidth {
    type Error = UnitError;
    fn try_from(text: String) -> Result<Self, UnitError> {
        text.parse()
    }
}

impl From<Bandwidth> for String {
    fn from(bandwidth: Bandwidth) -> String {
        bandwidth.to_string()
    }
}

impl fmt::Display for Bandwidth {
    /// In Gbit/s, the unit links are sold in.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} Gbit/s", self.0 * 8.0 / 1e9)
    }
}

/// One-way latency, seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Latency(pub f64);

impl FromStr for Latency {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        parse_with_units(text, "latency", &LATENCY_UNITS).map(Latency)
    }
}

impl TryFrom<String> for Latency {
    type Error = UnitError;
    fn try_from(text: String) -> Result<Self, UnitError> {
        text.parse()
    }
}

impl From<Latency> for String {
    fn from(latency: Latency) -> String {
        latency.to_string()
    }
}

impl fmt::Display for Latency {
    /// In microseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} us", self.0 * 1e6)
    }
}

/// A link: what a message of `bytes` costs from send to receipt is `latency + bytes ÷
/// bandwidth` (the α–β model).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Bytes per second once a message flows.
    pub bandwidth: Bandwidth,
    /// One-way latency of a message (default 0).
    #[serde(default = "no_latency")]
    pub latency: Latency,
}

/// Links compare by their bandwidth and latency bits, so a link can key a cell (a link's
/// numbers are finite and positive: its parsers refuse anything else).
impl Eq for Link {}

impl std::hash::Hash for Link {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.bandwidth.0.to_bits(), self.latency.0.to_bits()).hash(state);
    }
}

impl PartialOrd for Link {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Slowest first, then lowest latency.
impl Ord for Link {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.bandwidth.0.total_cmp(&other.bandwidth.0)).then(self.latency.0.total_cmp(&other.latency.0))
    }
}

fn no_latency() -> Latency {
    Latency(0.0)
}

impl Link {
    /// A link of `bandwidth_bytes_per_s` and `latency_s`.
    pub fn new(bandwidth_bytes_per_s: f64, latency_s: f64) -> Link {
        Link { bandwidth: Bandwidth(bandwidth_bytes_per_s), latency: Latency(latency_s) }
    }

    /// How tables, ids and reports name it: `1 Gbit/s`, `100 Mbit/s · 1 ms` (the rate in the
    /// largest unit that keeps a whole number in front, at most three decimals; the
    /// latency only where there is one). The `link` columns store this name, and
    /// [`Link::from_name`] reads it.
    pub fn name(&self) -> String {
        let rate = rate_name(self.bandwidth.0);
        match self.latency.0 > 0.0 {
            true => format!("{rate} · {}", latency_name(self.latency.0)),
            false => rate,
        }
    }

    /// The link a stored name ([`Link::name`]) stands for.
    pub fn from_name(name: &str) -> Result<Link, UnitError> {
        let (rate, latency) = name.split_once(NAME_SEPARATOR).unwrap_or((name, "0 s"));
        Ok(Link { bandwidth: rate.trim().parse()?, latency: latency.trim().parse()? })
    }

    /// This link as a stored row holds it: its name read back, so two links that store
    /// the same name (rates past the name's three decimals apart) are one cell.
    pub fn as_stored(&self) -> Link {
        Link::from_name(&self.name()).expect("a link's name reads back")
    }

    /// Seconds from sending `bytes` to their receipt.
    pub fn transfer_s(&self, bytes: f64) -> f64 {
        self.latency.0 + bytes / self.bandwidth.0
    }

    /// Seconds of a ring all-reduce of `bytes` over `workers` ranks on this link: 2(W − 1)
    /// steps, each sending a 1/W share (the schedule Gloo's and NCCL's rings follow).
    pub fn ring_all_reduce_s(&self, bytes: f64, workers: usize) -> f64 {
        if workers < 2 {
            return 0.0;
        }
        let w = workers as f64;
        2.0 * (w - 1.0) * self.transfer_s(bytes / w)
    }
}

/// What joins a link's rate and latency in its name.
const NAME_SEPARATOR: &str = " · ";

/// Bits per second in the largest unit that keeps a whole number in front.
fn rate_name(bytes_per_s: f64) -> String {
    let bits = bytes_per_s * 8.0;
    let (value, unit) = match bits {
        b if b >= 1e9 => (b / 1e9, "Gbit/s"),
        b if b >= 1e6 => (b / 1e6, "Mbit/s"),
        b if b >= 1e3 => (b / 1e3, "kbit/s"),
        b => (b, "bit/s"),
    };
    format!("{} {unit}", trimmed(value))
}

fn latency_name(seconds: f64) -> String {
    match seconds {
        s if s >= 1.0 => format!("{} s", trimmed(s)),
        s if s >= 1e-3 => format!("{} ms", trimmed(s * 1e3)),
        s => format!("{} us", trimmed(s * 1e6)),
    }
}

/// At most three decimals, none trailing.
fn trimmed(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

// A link column holds the link's name.
stratlab_columns::text_column!(Link);

/// Serde for a stored `Option<Link>` column: the link's name, null where the workers talked
/// over loopback (`#[serde(default, with = "stratlab_units::stored_link")]`).
pub mod stored_link {
    use serde::{de, Deserialize, Deserializer, Serializer};

    use super::Link;

    /// Writes the link's name, or null.
    pub fn serialize<S: Serializer>(link: &Option<Link>, serializer: S) -> Result<S::Ok, S::Error> {
        match link {
            Some(link) => serializer.serialize_some(&link.name()),
            None => serializer.serialize_none(),
        }
    }

    /// Reads a link's name, or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Link>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|name| Link::from_name(&name).map_err(|error| de::Error::custom(format!("link `{name}`: {error}"))))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_and_latencies_read_their_units() {
        assert_eq!("100 Gbit/s".parse::<Bandwidth>().unwrap(), Bandwidth(12.5e9));
        assert_eq!("1Gbit/s".parse::<Bandwidth>().unwrap(), Bandwidth(1.25e8));
        assert_eq!("2 GiB/s".parse::<Bandwidth>().unwrap(), Bandwidth(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!("3.35 TB/s".parse::<Bandwidth>().unwrap(), Bandwidth(3.35e12));
        assert_eq!("1.6 Tbit/s".parse::<Bandwidth>().unwrap(), Bandwidth(2e11));
        assert_eq!("5 us".parse::<Latency>().unwrap(), Latency(5e-6));
        assert_eq!("1.5 ms".parse::<Latency>().unwrap(), Latency(1.5e-3));
        assert_eq!("0 s".parse::<Latency>().unwrap(), Latency(0.0));
    }

    #[test]
    fn a_bad_unit_or_number_names_the_text_and_the_valid_units() {
        let error = "100 Gbps".parse::<Bandwidth>().unwrap_err();
        assert!(error.to_string().contains("`100 Gbps`") && error.valid.contains("Gbit/s"), "{error}");
        let error = "fast".parse::<Latency>().unwrap_err();
        assert!(error.valid.contains("us") && error.valid.contains("ms"), "{error}");
        assert!("-1 ms".parse::<Latency>().is_err());
        assert!("0 Gbit/s".parse::<Bandwidth>().is_err(), "a link moves something");
    }

    #[test]
    fn a_link_s_name_gives_its_rate_and_latency_and_reads_back() {
        let slow = Link::new(100e6 / 8.0, 1e-3);
        assert_eq!(slow.name(), "100 Mbit/s · 1 ms");
        assert_eq!(Link::new(1e9 / 8.0, 0.0).name(), "1 Gbit/s");
        assert_eq!(Link::new(2.5e9 / 8.0, 250e-6).name(), "2.5 Gbit/s · 250 us");
        for link in [slow, Link::new(1e9 / 8.0, 0.0), Link::new(2.5e9 / 8.0, 250e-6)] {
            assert_eq!(Link::from_name(&link.name()).unwrap(), link, "{}", link.name());
        }
        let error = Link::from_name("fast · 1 ms").unwrap_err();
        assert!(error.to_string().contains("`fast`"), "{error}");
    }

    #[test]
    fn links_read_from_yaml_like_maps_and_cost_alpha_plus_bytes_over_beta() {
        let link: Link = serde_json::from_str(r#"{"bandwidth": "8 Gbit/s", "latency": "10 us"}"#).unwrap();
        assert_eq!(link, Link::new(1e9, 10e-6));
        assert!((link.transfer_s(1e6) - (10e-6 + 1e-3)).abs() < 1e-15);
        // A ring over 4 ranks: 6 steps of a quarter each.
        assert!((link.ring_all_reduce_s(4e6, 4) - 6.0 * (10e-6 + 1e-3)).abs() < 1e-12);
        assert_eq!(link.ring_all_reduce_s(4e6, 1), 0.0);
        let error = serde_json::from_str::<Link>(r#"{"bandwidth": "8 Gbit/s", "delay": "1 ms"}"#).unwrap_err();
        assert!(error.to_string().contains("delay"), "{error}");
    }
}
