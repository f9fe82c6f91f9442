//! UTC wall-clock timestamps in the two spellings the store uses, without a date crate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A wall-clock instant in UTC, truncated to whole seconds.
///
/// Run folders are named by it (`20261122T214501Z`, sortable and safe in paths) and
/// trial rows carry it as RFC 3339 (`2026-11-22T21:45:01Z`) so any tool can parse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UtcTime {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    unix_s: i64,
}

impl UtcTime {
    /// The current time; a clock set before 1970 reads as the epoch rather than failing.
    pub fn now() -> UtcTime {
        UtcTime::from_system_time(SystemTime::now())
    }

    /// Converts a `SystemTime`, dropping sub-second precision.
    pub fn from_system_time(time: SystemTime) -> UtcTime {
        let unix_s = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_secs() as i64,
            Err(before) => -(before.duration().as_secs() as i64),
        };
        UtcTime { unix_s }
    }

    /// Seconds since the Unix epoch.
    pub fn unix_s(&self) -> i64 {
        self.unix_s
    }

    /// Back to a `SystemTime`.
    pub fn to_system_time(&self) -> SystemTime {
        if self.unix_s >= 0 {
            UNIX_EPOCH + Duration::from_secs(self.unix_s as u64)
        } else {
            UNIX_EPOCH - Duration::from_secs(self.unix_s.unsigned_abs())
        }
    }

    /// `2026-11-22T21:45:01Z`.
    pub fn rfc3339(&self) -> String {
        let (y, mo, d, h, mi, s) = self.fields();
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }

    /// `20261122T214501Z`: the basic ISO 8601 form, used in run ids because it has no colons.
    pub fn compact(&self) -> String {
        let (y, mo, d, h, mi, s) = self.fields();
        format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
    }

    /// Calendar fields (year, month, day, hour, minute, second).
    fn fields(&self) -> (i64, u32, u32, u32, u32, u32) {
        let days = self.unix_s.div_euclid(86_400);
        let secs = self.unix_s.rem_euclid(86_400) as u32;
        let (y, mo, d) = civil_from_days(days);
        (y, mo, d, secs / 3600, secs / 60 % 60, secs % 60)
    }
}

/// Howard Hinnant's `civil_from_days`: proleptic Gregorian date of a day count since 1970.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        // `date -u -d @1795382701 +%Y-%m-%dT%H:%M:%SZ` prints 2026-11-22T21:25:01Z.
        let t = UtcTime { unix_s: 1_795_382_701 };
        assert_eq!(t.rfc3339(), "2026-11-22T21:25:01Z");
        assert_eq!(t.compact(), "20261122T212501Z");
        assert_eq!(UtcTime { unix_s: 0 }.rfc3339(), "1970-01-01T00:00:00Z");
        // A leap day: `date -u -d @951782400` is 2000-02-29T00:00:00Z.
        assert_eq!(UtcTime { unix_s: 951_782_400 }.rfc3339(), "2000-02-29T00:00:00Z");
    }
}
