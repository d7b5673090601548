//! Durations as operators write them: `"30s"`, `"15m"`, `"1h"`, `"2d"`, or a plain integer
//! number of seconds.
//!
//! Used by keys whose values span seconds to weeks (how long an approval or a waiting execution
//! may wait), where a count of milliseconds would be unreadable. Units are `s`, `m`, `h` and `d`
//! and are case-sensitive (so `"1H"` is an error with a hint rather than a guess), only whole
//! numbers are accepted, and one optional space may separate the number from the unit, as in
//! sizes. A string needs its unit: `"90"` could mean seconds or milliseconds next to the
//! policy's `_ms` keys, so only the TOML integer `90` means 90 seconds.

use crate::byte_size::{QuantityError, case_hint, in_largest_exact_unit, parse_quantity};

// Milliseconds in each unit, for the modules whose bounds are durations.
pub(crate) const SECOND_MS: u64 = 1_000;
pub(crate) const MINUTE_MS: u64 = 60 * SECOND_MS;
pub(crate) const HOUR_MS: u64 = 60 * MINUTE_MS;
pub(crate) const DAY_MS: u64 = 24 * HOUR_MS;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string was empty or blank.
    #[error("empty duration (write e.g. \"30s\", \"15m\", \"1h\" or \"2d\")")]
    Empty,
    /// The string did not start with a whole number.
    #[error(
        "invalid duration \"{text}\": expected a whole number and a unit, e.g. \"30s\", \"15m\", \"1h\" or \"2d\""
    )]
    NotANumber {
        /// The rejected string.
        text: String,
    },
    /// The number had a fractional part.
    #[error(
        "invalid duration \"{text}\": fractions are not supported (write e.g. \"90m\" rather than \"1.5h\")"
    )]
    Fraction {
        /// The rejected string.
        text: String,
    },
    /// A string without a unit.
    #[error(
        "invalid duration \"{text}\": add a unit (s, m, h or d), e.g. \"{text}s\", or write the number of seconds as a TOML integer without quotes"
    )]
    MissingUnit {
        /// The rejected string.
        text: String,
    },
    /// The unit is not one of the accepted ones.
    #[error(
        "invalid duration \"{text}\": unknown unit `{unit}` (use s, m, h or d, one number and one unit such as \"90m\"){}",
        case_hint(UNITS, unit)
    )]
    UnknownUnit {
        /// The rejected string.
        text: String,
        /// The unit as written.
        unit: String,
    },
    /// The value does not fit in 64 bits of milliseconds.
    #[error("invalid duration \"{text}\": too large")]
    Overflow {
        /// The rejected string.
        text: String,
    },
}

/// The units a duration may be written in, largest first (as [`format_duration_ms`] tries
/// them); none is not one of them.
const UNITS: &[(&str, u64)] = &[
    ("d", DAY_MS),
    ("h", HOUR_MS),
    ("m", MINUTE_MS),
    ("s", SECOND_MS),
];

/// Parses a duration string such as `"15m"` into milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, DurationError> {
    parse_quantity(text, UNITS).map_err(|error| {
        let text = text.to_owned();
        match error {
            QuantityError::Empty => DurationError::Empty,
            QuantityError::NotANumber => DurationError::NotANumber { text },
            QuantityError::Fraction => DurationError::Fraction { text },
            // The message suggests the text with a unit appended, so without blanks around it.
            QuantityError::UnknownUnit("") => DurationError::MissingUnit {
                text: text.trim().to_owned(),
            },
            QuantityError::UnknownUnit(unit) => DurationError::UnknownUnit {
                text,
                unit: unit.to_owned(),
            },
            QuantityError::Overflow => DurationError::Overflow { text },
        }
    })
}

/// Milliseconds in `seconds`, or `None` past what 64 bits hold (an integer duration).
pub fn seconds_to_ms(seconds: u64) -> Option<u64> {
    seconds.checked_mul(SECOND_MS)
}

/// Formats milliseconds with the largest unit that represents them exactly (`"24h"`, `"90m"`,
/// `"1500ms"`), so messages echo durations the way operators write them.
pub fn format_duration_ms(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    in_largest_exact_unit(ms, UNITS).unwrap_or_else(|| format!("{ms}ms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit() {
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("15m"), Ok(900_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        assert_eq!(parse_duration_ms("0s"), Ok(0));
    }

    #[test]
    fn one_space_and_surrounding_blanks_are_allowed() {
        assert_eq!(parse_duration_ms("90 m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms(" 1h "), Ok(3_600_000));
    }

    #[test]
    fn wrong_case_is_rejected_with_a_hint() {
        let err = parse_duration_ms("1H").unwrap_err();
        assert!(matches!(err, DurationError::UnknownUnit { .. }));
        assert!(err.to_string().contains("did you mean `h`"), "{err}");
    }

    #[test]
    fn malformed_durations() {
        assert_eq!(parse_duration_ms(""), Err(DurationError::Empty));
        assert_eq!(parse_duration_ms("  "), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration_ms("h"),
            Err(DurationError::NotANumber { .. })
        ));
        assert!(matches!(
            parse_duration_ms("-1h"),
            Err(DurationError::NotANumber { .. })
        ));
        assert!(matches!(
            parse_duration_ms("1.5h"),
            Err(DurationError::Fraction { .. })
        ));
        assert!(matches!(
            parse_duration_ms("1h30m"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration_ms("10ms"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration_ms("1  h"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration_ms("99999999999999999999s"),
            Err(DurationError::Overflow { .. })
        ));
        assert!(matches!(
            parse_duration_ms("999999999999999d"),
            Err(DurationError::Overflow { .. })
        ));
    }

    #[test]
    fn a_string_without_a_unit_says_how_to_write_it() {
        let err = parse_duration_ms("90").unwrap_err();
        assert_eq!(
            err,
            DurationError::MissingUnit {
                text: "90".to_owned()
            }
        );
        let message = err.to_string();
        assert!(message.contains("\"90s\""), "{message}");
        assert!(message.contains("TOML integer"), "{message}");
    }

    #[test]
    fn seconds_convert_without_wrapping() {
        assert_eq!(seconds_to_ms(90), Some(90_000));
        assert_eq!(seconds_to_ms(u64::MAX), None);
    }

    #[test]
    fn formatting_picks_the_largest_exact_unit() {
        assert_eq!(format_duration_ms(DAY_MS), "1d");
        assert_eq!(format_duration_ms(30 * DAY_MS), "30d");
        assert_eq!(format_duration_ms(24 * HOUR_MS + HOUR_MS), "25h");
        assert_eq!(format_duration_ms(90 * MINUTE_MS), "90m");
        assert_eq!(format_duration_ms(61 * SECOND_MS), "61s");
        assert_eq!(format_duration_ms(1_500), "1500ms");
        assert_eq!(format_duration_ms(0), "0s");
    }
}
