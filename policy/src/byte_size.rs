//! Byte sizes as operators write them: `"256MiB"`, `"1 GiB"`, `"512KB"`, or a plain number of bytes.
//!
//! Binary units: `KiB` = 1024, `MiB` = 1024², `GiB` = 1024³. Decimal units: `KB` = 1000,
//! `MB` = 1000², `GB` = 1000³. `B` or no unit means bytes. Units are case-sensitive (so `mb` is an
//! error rather than a guess), only whole numbers are accepted, and one optional space may separate
//! the number from the unit.

/// Why a size string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByteSizeError {
    /// The string was empty or blank.
    #[error("empty size (write e.g. \"256MiB\")")]
    Empty,
    /// The string did not start with a whole number.
    #[error("invalid size \"{text}\": expected a whole number and a unit, e.g. \"256MiB\"")]
    NotANumber {
        /// The rejected string.
        text: String,
    },
    /// The number had a fractional part.
    #[error(
        "invalid size \"{text}\": fractions are not supported (write e.g. \"1536MiB\" rather than \"1.5GiB\")"
    )]
    Fraction {
        /// The rejected string.
        text: String,
    },
    /// The unit is not one of the accepted ones.
    #[error(
        "invalid size \"{text}\": unknown unit `{unit}` (use B, KiB, MiB, GiB, or the decimal KB, MB, GB){}",
        case_hint(unit)
    )]
    UnknownUnit {
        /// The rejected string.
        text: String,
        /// The unit as written.
        unit: String,
    },
    /// The value does not fit in 64 bits.
    #[error("invalid size \"{text}\": too large")]
    Overflow {
        /// The rejected string.
        text: String,
    },
}

const UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
];

/// Parses a size string such as `"256MiB"` into bytes.
pub fn parse_byte_size(text: &str) -> Result<u64, ByteSizeError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ByteSizeError::Empty);
    }
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, rest) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(ByteSizeError::NotANumber {
            text: text.to_owned(),
        });
    }
    if rest.starts_with(['.', ',']) {
        return Err(ByteSizeError::Fraction {
            text: text.to_owned(),
        });
    }
    let unit = rest.strip_prefix(' ').unwrap_or(rest);
    let multiplier = if unit.is_empty() {
        1
    } else {
        match UNITS.iter().find(|(name, _)| *name == unit) {
            Some((_, multiplier)) => *multiplier,
            None => {
                return Err(ByteSizeError::UnknownUnit {
                    text: text.to_owned(),
                    unit: unit.to_owned(),
                });
            }
        }
    };
    let overflow = || ByteSizeError::Overflow {
        text: text.to_owned(),
    };
    let number: u64 = digits.parse().map_err(|_| overflow())?;
    number.checked_mul(multiplier).ok_or_else(overflow)
}

/// "; units are case-sensitive, did you mean `MiB`?" for a unit written in the wrong case.
fn case_hint(unit: &str) -> String {
    UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        .map(|(name, _)| format!("; units are case-sensitive, did you mean `{name}`?"))
        .unwrap_or_default()
}

/// Formats `bytes` with the largest binary unit that represents it exactly (`"256MiB"`,
/// `"1536KiB"`, `"1000B"`), so messages echo sizes the way operators write them.
pub fn format_byte_size(bytes: u64) -> String {
    for (name, multiplier) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= multiplier && bytes.is_multiple_of(multiplier) {
            return format!("{}{name}", bytes / multiplier);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units() {
        assert_eq!(parse_byte_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_byte_size("1KiB"), Ok(1024));
        assert_eq!(parse_byte_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_byte_size("7B"), Ok(7));
    }

    #[test]
    fn decimal_units() {
        assert_eq!(parse_byte_size("256MB"), Ok(256_000_000));
        assert_eq!(parse_byte_size("4KB"), Ok(4_000));
        assert_eq!(parse_byte_size("1GB"), Ok(1_000_000_000));
    }

    #[test]
    fn plain_numbers_are_bytes_and_one_space_is_allowed() {
        assert_eq!(parse_byte_size("4096"), Ok(4096));
        assert_eq!(parse_byte_size("16 MiB"), Ok(16 << 20));
        assert_eq!(parse_byte_size(" 1MiB "), Ok(1 << 20));
    }

    #[test]
    fn wrong_case_is_rejected_with_a_hint() {
        let err = parse_byte_size("256mib").unwrap_err();
        assert!(matches!(err, ByteSizeError::UnknownUnit { .. }));
        assert!(err.to_string().contains("did you mean `MiB`"), "{err}");
    }

    #[test]
    fn malformed_sizes() {
        assert_eq!(parse_byte_size(""), Err(ByteSizeError::Empty));
        assert!(matches!(
            parse_byte_size("MiB"),
            Err(ByteSizeError::NotANumber { .. })
        ));
        assert!(matches!(
            parse_byte_size("-1MiB"),
            Err(ByteSizeError::NotANumber { .. })
        ));
        assert!(matches!(
            parse_byte_size("1.5GiB"),
            Err(ByteSizeError::Fraction { .. })
        ));
        assert!(matches!(
            parse_byte_size("12XB"),
            Err(ByteSizeError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_byte_size("1  MiB"),
            Err(ByteSizeError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_byte_size("99999999999999999999"),
            Err(ByteSizeError::Overflow { .. })
        ));
        assert!(matches!(
            parse_byte_size("17179869184GiB"),
            Err(ByteSizeError::Overflow { .. })
        ));
    }

    #[test]
    fn formatting_picks_the_largest_exact_unit() {
        assert_eq!(format_byte_size(256 << 20), "256MiB");
        assert_eq!(format_byte_size(1536 << 10), "1536KiB");
        assert_eq!(format_byte_size(1000), "1000B");
        assert_eq!(format_byte_size(0), "0B");
        assert_eq!(format_byte_size(16 << 30), "16GiB");
    }
}
