//! The secret values one call handed its source's service, and their redaction from whatever
//! came back. A service may echo what it was given (an error page quoting the request, a
//! server printing its environment); the exact values go before the secret scanner looks for
//! anything else, so the one credential the daemon knows was used never reaches a program.
//!
//! Sources add values through their settings (`sources::settings`) and hand them back with
//! their answer; the pipeline redacts (and the progress reporter, with the values the source
//! names). Nothing else may see the values.

use crate::secrets::store::{SecretValue, redact};
use serde_json::Value;
use std::borrow::Cow;

/// One value a call handed its service, with the secret's name in the policy when known.
#[derive(Debug, Clone)]
struct Used {
    name: Option<String>,
    value: SecretValue,
}

/// The secret values of one call (or of a connection, which every call on it uses).
#[derive(Debug, Clone, Default)]
pub struct SecretsUsed(Vec<Used>);

/// One place a value was redacted: the JSON pointer of the string (`None` in text), and the
/// secret's name in the policy when known (for the audit log; never shown to the agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub pointer: Option<String>,
    pub secret: Option<String>,
}

impl SecretsUsed {
    /// Adds values the call hands its service.
    pub fn add(&mut self, values: impl IntoIterator<Item = SecretValue>) {
        self.0
            .extend(values.into_iter().map(|value| Used { name: None, value }));
    }

    /// Adds the value of the policy's secret `name`.
    pub fn add_named(&mut self, name: &str, value: SecretValue) {
        self.0.push(Used {
            name: Some(name.to_owned()),
            value,
        });
    }

    /// Adds every value `other` holds (a connection's values, to one call on it).
    pub fn add_from(&mut self, other: &SecretsUsed) {
        self.0.extend(other.0.iter().cloned());
    }

    /// `text` with every value replaced by `[redacted]`.
    pub fn redact_text(&self, text: String) -> String {
        self.redact_text_noting(text).0
    }

    /// `text` with every value replaced by `[redacted]`, and which secrets were in it.
    pub fn redact_text_noting(&self, text: String) -> (String, Vec<Redacted>) {
        let (clean, found) = redact_noting(&text, &self.0);
        let found = found
            .into_iter()
            .map(|secret| Redacted {
                pointer: None,
                secret,
            })
            .collect();
        match clean {
            Cow::Borrowed(_) => (text, found),
            Cow::Owned(clean) => (clean, found),
        }
    }

    /// Every string (and key) of `value` redacted in place.
    pub fn redact_value(&self, value: &mut Value) {
        let _ = self.redact_value_noting(value);
    }

    /// Every string (and key) of `value` redacted in place, and where: one entry per string
    /// and secret found in it.
    pub fn redact_value_noting(&self, value: &mut Value) -> Vec<Redacted> {
        let mut found = Vec::new();
        if !self.0.is_empty() {
            redact_json_noting(value, &self.0, &mut String::new(), &mut found);
        }
        found
    }
}

/// `text` with every value replaced, and the name (if any) of each value that was in it.
fn redact_noting<'a>(text: &'a str, used: &[Used]) -> (Cow<'a, str>, Vec<Option<String>>) {
    let mut found = Vec::new();
    let mut out = Cow::Borrowed(text);
    for u in used {
        let one = std::slice::from_ref(&u.value);
        if let Cow::Owned(clean) = redact(&out, one) {
            found.push(u.name.clone());
            out = Cow::Owned(clean);
        }
    }
    (out, found)
}

/// Redacts `value` in place; `pointer` is its JSON pointer. The depth is the value's own,
/// which the JSON parser that made it bounds.
fn redact_json_noting(
    value: &mut Value,
    used: &[Used],
    pointer: &mut String,
    found: &mut Vec<Redacted>,
) {
    let mut note = |pointer: &str, names: Vec<Option<String>>| {
        found.extend(names.into_iter().map(|secret| Redacted {
            pointer: Some(pointer.to_owned()),
            secret,
        }));
    };
    match value {
        Value::String(text) => {
            let (clean, names) = redact_noting(text, used);
            if let Cow::Owned(clean) = clean {
                *text = clean;
                note(pointer, names);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                redact_json_noting(item, used, pointer, found);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            let dirty: Vec<String> = map
                .keys()
                .filter(|k| matches!(redact_noting(k, used).0, Cow::Owned(_)))
                .cloned()
                .collect();
            for key in dirty {
                if let Some(v) = map.remove(&key) {
                    let (clean, names) = redact_noting(&key, used);
                    let clean = clean.into_owned();
                    note(&format!("{pointer}/{}", escape_pointer(&clean)), names);
                    map.insert(clean, v);
                }
            }
            for (key, item) in map.iter_mut() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&escape_pointer(key));
                redact_json_noting(item, used, pointer, found);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// A key as one JSON pointer token (RFC 6901: `~` as `~0`, `/` as `~1`).
fn escape_pointer(key: &str) -> Cow<'_, str> {
    if key.contains(['~', '/']) {
        Cow::Owned(key.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_value_added_is_redacted_from_text_and_json() {
        let mut used = SecretsUsed::default();
        used.add([SecretValue::new("s3cr3t-one".into())]);
        used.add([SecretValue::new("two-s3cr3t".into())]);
        assert_eq!(
            used.redact_text("a s3cr3t-one and two-s3cr3t".into()),
            "a [redacted] and [redacted]"
        );
        let mut value = json!({"k": ["x s3cr3t-one"], "two-s3cr3t": 1});
        used.redact_value(&mut value);
        assert_eq!(value, json!({"k": ["x [redacted]"], "[redacted]": 1}));
        assert_eq!(SecretsUsed::default().redact_text("plain".into()), "plain");
    }

    #[test]
    fn redactions_say_where_and_which_secret() {
        let mut used = SecretsUsed::default();
        used.add_named("gh-token", SecretValue::new("s3cr3t-one".into()));
        used.add([SecretValue::new("two-s3cr3t".into())]);
        let mut value = json!({"a": [1, "x s3cr3t-one"], "b/c": {"d": "two-s3cr3t"}, "e": "clean"});
        let mut found = used.redact_value_noting(&mut value);
        found.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        assert_eq!(
            found,
            [
                Redacted {
                    pointer: Some("/a/1".into()),
                    secret: Some("gh-token".into())
                },
                Redacted {
                    pointer: Some("/b~1c/d".into()),
                    secret: None
                },
            ]
        );
        assert_eq!(value["a"][1], "x [redacted]");
        let (text, found) = used.redact_text_noting("said s3cr3t-one".into());
        assert_eq!(text, "said [redacted]");
        assert_eq!(found[0].secret.as_deref(), Some("gh-token"));
        let mut copy = SecretsUsed::default();
        copy.add_from(&used);
        assert_eq!(copy.redact_text("two-s3cr3t".into()), "[redacted]");
    }
}
