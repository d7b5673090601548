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
        case_hint(UNITS, unit)
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

/// The units a size may be written in; a bare number is bytes.
const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
];

/// The units [`format_byte_size`] writes, largest first: binary ones only, so a size echoes
/// the way it is usually written (`"1000B"`, not `"1KB"`).
const FORMATTED_UNITS: &[(&str, u64)] = &[("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];

/// Parses a size string such as `"256MiB"` into bytes.
pub fn parse_byte_size(text: &str) -> Result<u64, ByteSizeError> {
    parse_quantity(text, UNITS).map_err(|error| {
        let text = text.to_owned();
        match error {
            QuantityError::Empty => ByteSizeError::Empty,
            QuantityError::NotANumber => ByteSizeError::NotANumber { text },
            QuantityError::Fraction => ByteSizeError::Fraction { text },
            QuantityError::UnknownUnit(unit) => ByteSizeError::UnknownUnit {
                text,
                unit: unit.to_owned(),
            },
            QuantityError::Overflow => ByteSizeError::Overflow { text },
        }
    })
}

/// Formats `bytes` with the largest binary unit that represents it exactly (`"256MiB"`,
/// `"1536KiB"`, `"1000B"`), so messages echo sizes the way operators write them.
pub fn format_byte_size(bytes: u64) -> String {
    in_largest_exact_unit(bytes, FORMATTED_UNITS).unwrap_or_else(|| format!("{bytes}B"))
}

// ---- quantities: a whole number and a unit, shared with `duration` ----------------------------
//
// Sizes and durations are written the same way (a whole number, one optional space, a
// case-sensitive unit) and fail the same ways; only their units and the words of their errors
// differ, so each module names its own error from a [`QuantityError`].

/// Why a number-and-unit string was rejected, before the caller words it for its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuantityError<'a> {
    /// The string was empty or blank.
    Empty,
    /// It did not start with a whole number.
    NotANumber,
    /// The number had a fractional part.
    Fraction,
    /// The unit as written (`""` for none) is not in the table.
    UnknownUnit(&'a str),
    /// The number times its unit does not fit in 64 bits.
    Overflow,
}

/// Parses a whole number, one optional space and a unit named in `units` (name, multiplier;
/// a `""` entry lets a bare number through) into the number times the unit's multiplier.
pub(crate) fn parse_quantity<'a>(
    text: &'a str,
    units: &[(&str, u64)],
) -> Result<u64, QuantityError<'a>> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(QuantityError::Empty);
    }
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, rest) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(QuantityError::NotANumber);
    }
    if rest.starts_with(['.', ',']) {
        return Err(QuantityError::Fraction);
    }
    let unit = rest.strip_prefix(' ').unwrap_or(rest);
    let Some((_, multiplier)) = units.iter().find(|(name, _)| *name == unit) else {
        return Err(QuantityError::UnknownUnit(unit));
    };
    let number: u64 = digits.parse().map_err(|_| QuantityError::Overflow)?;
    number
        .checked_mul(*multiplier)
        .ok_or(QuantityError::Overflow)
}

/// "; units are case-sensitive, did you mean `MiB`?" for a unit of `units` written in the wrong
/// case; empty otherwise.
pub(crate) fn case_hint(units: &[(&str, u64)], unit: &str) -> String {
    units
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        .map(|(name, _)| format!("; units are case-sensitive, did you mean `{name}`?"))
        .unwrap_or_default()
}

/// `value` in the first of `units` (largest first) that divides it exactly, e.g. `"90m"`;
/// `None` when none does.
pub(crate) fn in_largest_exact_unit(value: u64, units: &[(&str, u64)]) -> Option<String> {
    units
        .iter()
        .find(|(_, multiplier)| value >= *multiplier && value.is_multiple_of(*multiplier))
        .map(|(name, multiplier)| format!("{}{name}", value / multiplier))
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
