//! UTC wall-clock timestamps in the two spellings the store uses (formatting by chrono).

use chrono::{DateTime, SubsecRound, Utc};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// A wall-clock instant in UTC, truncated to whole seconds.
///
/// Run folders are named by it (`20261122T214501Z`, sortable and safe in paths) and
/// trial rows carry it as RFC 3339 (`2026-11-22T21:45:01Z`) so any tool can parse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UtcTime(DateTime<Utc>);

impl UtcTime {
    /// The current time.
    pub fn now() -> UtcTime {
        UtcTime(Utc::now().trunc_subsecs(0))
    }

    /// The instant `unix_s` seconds after 1970-01-01T00:00:00Z; `None` outside chrono's range.
    pub fn from_unix_s(unix_s: i64) -> Option<UtcTime> {
        DateTime::from_timestamp(unix_s, 0).map(UtcTime)
    }

    /// Seconds since the Unix epoch.
    pub fn unix_s(&self) -> i64 {
        self.0.timestamp()
    }

    /// `2026-11-22T21:45:01Z`.
    pub fn rfc3339(&self) -> String {
        self.0.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    /// `20261122T214501Z`: the basic ISO 8601 form, used in run ids because it has no colons.
    pub fn compact(&self) -> String {
        self.0.format("%Y%m%dT%H%M%SZ").to_string()
    }

    /// The instant an RFC 3339 text names (what rows store), truncated to whole seconds.
    pub fn parse_rfc3339(text: &str) -> Result<UtcTime, chrono::ParseError> {
        Ok(UtcTime(DateTime::parse_from_rfc3339(text)?.with_timezone(&Utc).trunc_subsecs(0)))
    }
}

/// Rows store an instant as RFC 3339 text.
impl Serialize for UtcTime {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.rfc3339())
    }
}

impl<'de> Deserialize<'de> for UtcTime {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        UtcTime::parse_rfc3339(&text).map_err(|error| de::Error::custom(format!("time `{text}`: {error}")))
    }
}

stratlab_columns::text_column!(UtcTime);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        // `date -u -d @1795382701 +%Y-%m-%dT%H:%M:%SZ` prints 2026-11-22T21:25:01Z.
        let t = UtcTime::from_unix_s(1_795_382_701).unwrap();
        assert_eq!(t.rfc3339(), "2026-11-22T21:25:01Z");
        assert_eq!(t.compact(), "20261122T212501Z");
        assert_eq!(UtcTime::from_unix_s(0).unwrap().rfc3339(), "1970-01-01T00:00:00Z");
        // A leap day: `date -u -d @951782400` is 2000-02-29T00:00:00Z.
        assert_eq!(UtcTime::from_unix_s(951_782_400).unwrap().rfc3339(), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn rows_store_rfc3339_and_read_it_back() {
        let t = UtcTime::from_unix_s(1_795_382_701).unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"2026-11-22T21:25:01Z\"");
        assert_eq!(serde_json::from_str::<UtcTime>("\"2026-11-22T21:25:01Z\"").unwrap(), t);
        assert!(serde_json::from_str::<UtcTime>("\"yesterday\"").unwrap_err().to_string().contains("yesterday"));
    }

    #[test]
    fn now_has_whole_seconds() {
        let now = UtcTime::now();
        assert_eq!(UtcTime::from_unix_s(now.unix_s()), Some(now));
    }
}
