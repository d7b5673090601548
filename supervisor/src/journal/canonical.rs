//! RFC 8785 JSON Canonicalization Scheme (JCS): one byte string per JSON value, whatever the
//! order of its keys or the spelling of its numbers, so that the same call made twice gets
//! the same journal key.
//!
//! - object members sorted by their names' UTF-16 code units;
//! - strings as ECMAScript's `JSON.stringify` writes them (`"`, `\` and control characters
//!   escaped, the short forms `\b \t \n \f \r`, others as `\u00xx`; everything else as is);
//! - numbers as ECMAScript's `Number.prototype.toString` writes an IEEE 754 double (integers
//!   past 2^53 lose precision, as I-JSON says they may);
//! - no whitespace.
//!
//! The values come from serde_json, whose parser nests at most 128 levels, so the recursion
//! here is bounded.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// The canonical text of `value`.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// The SHA-256 of the canonical text, as 64 lower-case hex digits.
pub fn hash(value: &Value) -> String {
    hex(&Sha256::digest(canonical(value).as_bytes()))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (name, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, name);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript `Number::toString(x)` for a finite double (JSON has no other kind; a value
/// serde_json could not express as a double is written as `null`, which no real call sends).
fn write_number(out: &mut String, x: f64) {
    if !x.is_finite() {
        out.push_str("null");
        return;
    }
    if x == 0.0 {
        // -0 too.
        out.push('0');
        return;
    }
    if x < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as ECMAScript asks:
    // `d[.ddd]e[-]n`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    // n: the position of the decimal point relative to the digits (x = 0.digits × 10^n).
    let n = exponent.parse::<i64>().unwrap_or(0) + 1;
    if k <= n && n <= 21 {
        // An integer: the digits, then n - k zeros.
        out.push_str(&digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(usize::try_from(n).unwrap_or(0));
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        let _ = write!(out, "{}", (n - 1).abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn number(x: f64) -> String {
        let mut out = String::new();
        write_number(&mut out, x);
        out
    }

    /// The number table of RFC 8785 appendix B (as doubles) and ECMAScript's boundaries.
    #[test]
    fn numbers_are_written_as_ecmascript_writes_them() {
        for (x, text) in [
            (0.0, "0"),
            (-0.0, "0"),
            (5e-324, "5e-324"),
            (-5e-324, "-5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740992.0, "9007199254740992"),
            (-9007199254740992.0, "-9007199254740992"),
            (295147905179352830000.0, "295147905179352830000"),
            (9.999999999999997e22, "9.999999999999997e+22"),
            (1e21, "1e+21"),
            (999999999999999900000.0, "999999999999999900000"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (100.0, "100"),
            (123.456, "123.456"),
            (-1.25e-10, "-1.25e-10"),
            (333333333.3333333, "333333333.3333333"),
        ] {
            assert_eq!(number(x), text, "{x:e}");
        }
    }

    #[test]
    fn keys_sort_by_utf16_and_strings_escape_as_json_stringify() {
        // RFC 8785 3.2.3's example of sorting: by UTF-16 code units, so U+1F600 (a surrogate
        // pair, 0xD83D…) sorts before U+FB33 although its code point is larger.
        let value = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{80}": "Control",
            "\u{f6}": "Latin Small Letter O With Diaeresis"
        });
        assert_eq!(
            canonical(&value),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
        assert_eq!(
            canonical(&json!("a\"b\\c\u{1}\u{1f}\t/é")),
            "\"a\\\"b\\\\c\\u0001\\u001f\\t/é\""
        );
    }

    #[test]
    fn equal_values_hash_equal_whatever_their_spelling() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, 2.0, 3e0], "a": {"y": null, "x": true}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":true,"y":null},"b":[1.0,2,3]}"#).unwrap();
        assert_eq!(canonical(&a), r#"{"a":{"x":true,"y":null},"b":[1,2,3]}"#);
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(hash(&a), hash(&json!({"a": {"x": true}, "b": [1, 2, 3]})));
        assert_eq!(hash(&a).len(), 64);
    }
}
