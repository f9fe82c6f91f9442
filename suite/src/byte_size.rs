//! Byte sizes as the command line takes them (`64M`, `1K`) and as tables show them.

/// Parses a message size: bytes, or with a binary suffix `K`, `M`, `G` (`KiB`, `MiB`, `GiB`
/// too), so `64M` is 64 MiB.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("empty size; give sizes like 4,1K,64M"));
    }
    let digits_end = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(digits_end);
    let number: u64 = number.parse().map_err(|_| format!("`{text}` is not a size (bytes, or with K, M, G)"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "ki" | "kib" => 10,
        "m" | "mi" | "mib" => 20,
        "g" | "gi" | "gib" => 30,
        _ => return Err(format!("`{text}` has an unknown unit `{suffix}` (K, M, G are binary: 1K = 1024 bytes)")),
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("`{text}` is too large"))
}

/// `64 MiB`, `256 KiB`, `4 B`: a size as the tables show it.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale && bytes % scale == 0 {
            return format!("{} {unit}", bytes / scale);
        }
    }
    match UNITS.iter().find(|(_, scale)| bytes >= *scale) {
        Some((unit, scale)) => format!("{:.1} {unit}", bytes as f64 / *scale as f64),
        None => format!("{bytes} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("4"), Ok(4));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("").unwrap_err().contains("empty"));
        assert!(parse_size("1.5M").unwrap_err().contains("unknown unit"));
        assert!(parse_size("M").unwrap_err().contains("not a size"));
    }

    #[test]
    fn default_sizes_are_powers_of_four_from_4_bytes_to_64_mib() {
        let sizes: Vec<u64> = crate::cli::DEFAULT_SIZES.split(',').map(|s| parse_size(s).unwrap()).collect();
        assert_eq!(sizes, (1..=13).map(|power| 4u64.pow(power)).collect::<Vec<_>>());
        assert!(sizes.contains(&(1 << 20)) && sizes.contains(&(64 << 20)));
    }

    #[test]
    fn sizes_are_shown_in_binary_units() {
        assert_eq!(format_size(4), "4 B");
        assert_eq!(format_size(1 << 20), "1 MiB");
        assert_eq!(format_size(64 << 20), "64 MiB");
        assert_eq!(format_size(1536), "1.5 KiB");
    }
}
