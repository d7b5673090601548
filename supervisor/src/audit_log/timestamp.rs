//! Times in the audit log: stored as milliseconds since the Unix epoch (UTC), shown as RFC 3339
//! in UTC (`2026-11-22T10:00:00.123Z`), and the `--since` forms an operator types (`90s`, `15m`,
//! `1h`, `2d`, `1w`, `2026-11-22`, `2026-11-22T10:00:00Z`).
//!
//! Only UTC is accepted: a log read on another machine, or after a daylight-saving change, must
//! mean the same instant.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a `--since` value was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read the time \"{0}\": write a duration such as 90s, 15m, 1h, 2d, 1w, or a UTC time such as 2026-11-22 or 2026-11-22T10:00:00Z"
)]
pub struct TimeError(pub String);

/// Milliseconds since the epoch; times before it count as the epoch.
pub fn unix_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `2026-11-22T10:00:00.123Z`.
pub fn format_utc(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// The instant `text` names, relative to `now` for durations (`1h` = one hour before `now`).
pub fn parse_since(text: &str, now: SystemTime) -> Result<SystemTime, TimeError> {
    let error = || TimeError(text.to_owned());
    let text = text.trim();
    if let Some(unit_at) = text.find(|c: char| !c.is_ascii_digit())
        && unit_at > 0
        && !text.contains('-')
    {
        let amount: u64 = text[..unit_at].parse().map_err(|_| error())?;
        let unit_seconds = match &text[unit_at..] {
            "s" => 1,
            "m" | "min" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(error()),
        };
        let back = amount
            .checked_mul(unit_seconds)
            .map(Duration::from_secs)
            .ok_or_else(error)?;
        return Ok(now
            .checked_sub(back)
            .filter(|t| *t >= UNIX_EPOCH)
            .unwrap_or(UNIX_EPOCH));
    }
    let ms = parse_utc(text).ok_or_else(error)?;
    let ms = u64::try_from(ms).map_err(|_| error())?;
    Ok(UNIX_EPOCH + Duration::from_millis(ms))
}

/// `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM:SS[.fff]Z` (`t`, `z` and a space for `T` accepted).
fn parse_utc(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    if bytes.len() == 10 {
        return Some(ms);
    }
    if !matches!(bytes[10], b'T' | b't' | b' ') || bytes.len() < 20 {
        return None;
    }
    if bytes[13] != b':' || bytes[16] != b':' {
        return None;
    }
    let (h, m, s) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    ms += (h * 3600 + m * 60 + s) * 1000;
    let rest = &text[19..];
    let rest = match rest.strip_prefix('.') {
        Some(fraction) => {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            // Milliseconds: pad or cut the fraction to three digits.
            let millis: String = fraction[..digits]
                .chars()
                .chain("000".chars())
                .take(3)
                .collect();
            ms += millis.parse::<i64>().ok()?;
            &fraction[digits..]
        }
        None => rest,
    };
    matches!(rest, "Z" | "z").then_some(ms)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00.000Z");
        // `date -u -d 2026-11-22T10:00:00Z +%s` → 1795341600.
        assert_eq!(format_utc(1_795_341_600_123), "2026-11-22T10:00:00.123Z");
        // 2024-02-29 (leap day), `date -u -d 2024-02-29T23:59:59Z +%s` → 1709251199.
        assert_eq!(format_utc(1_709_251_199_000), "2024-02-29T23:59:59.000Z");
    }

    #[test]
    fn parses_what_it_formats() {
        for ms in [0, 1_709_251_199_000, 1_795_341_600_123, 4_102_444_800_000] {
            let text = format_utc(ms);
            assert_eq!(parse_utc(&text), Some(ms), "{text}");
        }
        assert_eq!(parse_utc("2026-11-22T10:00:00Z"), Some(1_795_341_600_000));
        assert_eq!(parse_utc("2026-11-22"), Some(1_795_305_600_000));
        assert_eq!(parse_utc("2026-11-22T10:00:00.5Z"), Some(1_795_341_600_500));
    }

    #[test]
    fn refuses_what_is_not_a_utc_time() {
        for bad in [
            "2026-11-22T10:00:00",
            "2026-11-22T10:00:00+01:00",
            "2026-02-30",
            "2026-13-01",
            "2026-11-22T24:00:00Z",
            "22/11/2026",
            "2026-11-22T10:00Z",
            "+026-11-22",
            "",
        ] {
            assert!(parse_since(bad, SystemTime::now()).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_count_back_from_now() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ago = |text| {
            now.duration_since(parse_since(text, now).unwrap())
                .unwrap()
                .as_secs()
        };
        assert_eq!(ago("90s"), 90);
        assert_eq!(ago("15m"), 900);
        assert_eq!(ago("1h"), 3600);
        assert_eq!(ago("2d"), 172_800);
        assert_eq!(ago("1w"), 604_800);
        // Further back than the epoch clamps to it.
        assert_eq!(parse_since("100w", now).unwrap(), UNIX_EPOCH);
        for bad in ["1y", "h", "1.5h", "-1h", "99999999999999999999s"] {
            let error = parse_since(bad, now).unwrap_err();
            assert!(error.to_string().contains(bad), "{error}");
        }
    }
}
