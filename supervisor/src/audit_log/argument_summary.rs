//! What the audit log keeps of a tool call's arguments: never the arguments themselves, only
//! their shape (keys, JSON types, sizes) and short scalar values that went through the caller's
//! redaction, bounded as a whole.
//!
//! Arguments are what a model-written program chose to send, so they may carry anything it read
//! from other tools, secrets included; an audit log that copied them would become the easiest
//! place to steal those from. The shape is enough to answer "which issue did it comment on?"
//! (short identifiers pass) without keeping "what did it write?" (long text does not).

use serde_json::Value;
use std::borrow::Cow;
use std::fmt::Write;

/// The redaction every short value and key goes through before it is stored: returns the text
/// unchanged (`Cow::Borrowed`) or with secret-shaped parts replaced (`Cow::Owned`).
pub type Redact<'r> = &'r dyn Fn(&str) -> Cow<'_, str>;

/// Longest scalar (string, or number as written) whose value is kept, in characters.
pub const MAX_VALUE_CHARS: usize = 64;
/// Longest key kept, in characters; longer keys are cut and marked with `…`.
pub const MAX_KEY_CHARS: usize = 64;
/// Bound on the whole summary, in bytes.
pub const MAX_SUMMARY_BYTES: usize = 1024;

/// The stored summary of one call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentSummary {
    /// E.g. `{owner: string(4) "octo", number: number 5, body: string(2048), labels: array(3)}`.
    pub text: String,
    /// How many keys or values the redaction changed.
    pub redactions: u32,
}

impl ArgumentSummary {
    /// Summarises `arguments`: an object lists its keys (in the order the value holds them),
    /// each with its type, size and, for short scalars, its redacted value; nested arrays and
    /// objects are described by their size only. The result is at most `MAX_SUMMARY_BYTES`.
    pub fn of(arguments: &Value, redact: Redact<'_>) -> ArgumentSummary {
        let mut summary = Summary {
            text: String::new(),
            redactions: 0,
            redact,
        };
        match arguments {
            Value::Object(map) => {
                summary.text.push('{');
                let total = map.len();
                for (written, (key, value)) in map.iter().enumerate() {
                    let mark = summary.text.len();
                    if written > 0 {
                        summary.text.push_str(", ");
                    }
                    summary.key(key);
                    summary.text.push_str(": ");
                    summary.value(value);
                    // Leave room for the closing "… +N more}" marker.
                    if summary.text.len() > MAX_SUMMARY_BYTES - 24 {
                        summary.text.truncate(mark);
                        let _ = write!(summary.text, ", … +{} more", total - written);
                        break;
                    }
                }
                summary.text.push('}');
            }
            other => summary.value(other),
        }
        // A lone scalar or a pathological key can still exceed the bound: cut at a character.
        if summary.text.len() > MAX_SUMMARY_BYTES {
            let mut end = MAX_SUMMARY_BYTES - '…'.len_utf8();
            while !summary.text.is_char_boundary(end) {
                end -= 1;
            }
            summary.text.truncate(end);
            summary.text.push('…');
        }
        ArgumentSummary {
            text: summary.text,
            redactions: summary.redactions,
        }
    }
}

struct Summary<'r> {
    text: String,
    redactions: u32,
    redact: Redact<'r>,
}

impl Summary<'_> {
    fn redacted<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        let clean = (self.redact)(text);
        if matches!(clean, Cow::Owned(_)) && clean != text {
            self.redactions += 1;
            return Cow::Owned(clean.into_owned());
        }
        Cow::Borrowed(text)
    }

    fn key(&mut self, key: &str) {
        let short: String = key.chars().take(MAX_KEY_CHARS).collect();
        let cut = short.len() < key.len();
        // Redact the whole key when it is short enough, so a secret used as a key is caught
        // whole; a cut key is redacted as cut.
        let clean = self.redacted(if cut { &short } else { key }).into_owned();
        let plain = !clean.is_empty()
            && clean
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if plain {
            self.text.push_str(&clean);
        } else {
            // JSON quoting escapes control characters, so a key cannot rewrite the terminal
            // of whoever reads the log.
            self.text.push_str(&json_string(&clean));
        }
        if cut {
            self.text.push('…');
        }
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.text.push_str("null"),
            Value::Bool(b) => {
                let _ = write!(self.text, "boolean {b}");
            }
            Value::Number(n) => {
                let written = n.to_string();
                if written.chars().count() <= MAX_VALUE_CHARS {
                    let clean = self.redacted(&written).into_owned();
                    let _ = write!(self.text, "number {clean}");
                } else {
                    self.text.push_str("number");
                }
            }
            Value::String(s) => {
                let chars = s.chars().count();
                let _ = write!(self.text, "string({chars})");
                if chars <= MAX_VALUE_CHARS {
                    let clean = self.redacted(s).into_owned();
                    self.text.push(' ');
                    self.text.push_str(&json_string(&clean));
                }
            }
            Value::Array(items) => {
                let _ = write!(self.text, "array({})", items.len());
            }
            Value::Object(map) => {
                let _ = write!(self.text, "object({})", map.len());
            }
        }
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"?\"".to_owned())
}

/// The summary's tests, and the redactions the audit log's other tests summarise with.
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// Leaves every text as it is.
    pub(in crate::audit_log) fn no_redaction(text: &str) -> Cow<'_, str> {
        Cow::Borrowed(text)
    }

    /// Hides `s3cr3t` wherever it appears, as the scanner hides a secret it knows.
    pub(in crate::audit_log) fn hide_secret(text: &str) -> Cow<'_, str> {
        if text.contains("s3cr3t") {
            Cow::Owned(text.replace("s3cr3t", "[redacted]"))
        } else {
            Cow::Borrowed(text)
        }
    }

    #[test]
    fn keys_types_sizes_and_short_values() {
        let summary = ArgumentSummary::of(
            &json!({
                "owner": "octo",
                "number": 42,
                "draft": false,
                "labels": ["a", "b", "c"],
                "meta": {"x": 1, "y": 2},
                "none": null,
                "body": "x".repeat(65),
            }),
            &no_redaction,
        );
        // serde_json's map keeps keys sorted.
        assert_eq!(
            summary.text,
            "{body: string(65), draft: boolean false, labels: array(3), meta: object(2), none: null, number: number 42, owner: string(4) \"octo\"}"
        );
        assert_eq!(summary.redactions, 0);
    }

    #[test]
    fn a_value_of_64_characters_is_kept_and_65_is_not() {
        let at_limit = "é".repeat(MAX_VALUE_CHARS);
        let summary = ArgumentSummary::of(&json!({ "v": at_limit }), &no_redaction);
        assert!(summary.text.contains(&at_limit), "{}", summary.text);
        let over = "é".repeat(MAX_VALUE_CHARS + 1);
        let summary = ArgumentSummary::of(&json!({ "v": over }), &no_redaction);
        assert_eq!(summary.text, "{v: string(65)}");
    }

    #[test]
    fn short_values_and_keys_go_through_the_redaction() {
        let summary = ArgumentSummary::of(
            &json!({"token": "Bearer s3cr3t", "s3cr3t": 1, "fine": "ok"}),
            &hide_secret,
        );
        assert!(!summary.text.contains("s3cr3t"), "{}", summary.text);
        assert!(
            summary.text.contains("string(13) \"Bearer [redacted]\""),
            "{}",
            summary.text
        );
        assert!(summary.text.contains("\"[redacted]\": number 1"));
        assert_eq!(summary.redactions, 2);
    }

    /// A long value is never passed to the redaction and never stored, whatever it contains.
    #[test]
    fn long_values_are_never_stored() {
        let long = format!("{}s3cr3t", "a".repeat(100));
        let summary = ArgumentSummary::of(&json!({ "body": long }), &no_redaction);
        assert_eq!(summary.text, "{body: string(106)}");
    }

    #[test]
    fn the_summary_is_bounded() {
        let mut map = serde_json::Map::new();
        for i in 0..500 {
            map.insert(format!("key_{i:03}"), json!("v".repeat(60)));
        }
        let summary = ArgumentSummary::of(&Value::Object(map), &no_redaction);
        assert!(
            summary.text.len() <= MAX_SUMMARY_BYTES,
            "{}",
            summary.text.len()
        );
        assert!(summary.text.starts_with("{key_000: string(60)"));
        assert!(summary.text.ends_with(" more}"), "{}", summary.text);
        // The marker counts what was left out.
        let listed = summary.text.matches("string(60)").count();
        assert!(
            summary
                .text
                .contains(&format!("… +{} more}}", 500 - listed)),
            "{}",
            summary.text
        );

        // One huge key is cut at 64 characters.
        let key = "k".repeat(10_000);
        let summary = ArgumentSummary::of(&json!({ key: 1 }), &no_redaction);
        assert_eq!(
            summary.text,
            format!("{{{}…: number 1}}", "k".repeat(MAX_KEY_CHARS))
        );
    }

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        let summary = ArgumentSummary::of(
            &json!({"\u{1b}[2Jkey": "\u{1b}]0;title\u{7}"}),
            &no_redaction,
        );
        assert!(!summary.text.contains('\u{1b}'), "{}", summary.text);
        assert!(summary.text.contains("\\u001b"), "{}", summary.text);
    }

    #[test]
    fn non_object_arguments() {
        assert_eq!(
            ArgumentSummary::of(&json!("hi"), &no_redaction).text,
            "string(2) \"hi\""
        );
        assert_eq!(
            ArgumentSummary::of(&json!([1, 2]), &no_redaction).text,
            "array(2)"
        );
        assert_eq!(ArgumentSummary::of(&json!({}), &no_redaction).text, "{}");
    }
}
