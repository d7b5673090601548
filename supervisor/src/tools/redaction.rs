//! The secret values one call handed its source's service, and their redaction from whatever
//! came back. A service may echo what it was given (an error page quoting the request, a
//! server printing its environment); the exact values go before the secret scanner looks for
//! anything else, so the one credential the daemon knows was used never reaches a program.
//!
//! Sources add values through their settings (`sources::settings`); the pipeline and the
//! progress reporter redact. Nothing else may see the values.

use crate::secrets::store::{SecretValue, redact, redact_json};
use serde_json::Value;
use std::sync::{Arc, Mutex, PoisonError};

/// The secret values of one call (shared by its context's clones and its progress reporter).
#[derive(Debug, Clone, Default)]
pub struct SecretsUsed(Arc<Mutex<Vec<SecretValue>>>);

impl SecretsUsed {
    /// Adds values the call hands its service.
    pub fn add(&self, values: impl IntoIterator<Item = SecretValue>) {
        self.lock().extend(values);
    }

    /// Adds every value `other` holds (a connection's values, to one call on it).
    pub fn add_from(&self, other: &SecretsUsed) {
        let values = other.lock().clone();
        self.add(values);
    }

    /// `text` with every value replaced by `[redacted]`.
    pub fn redact_text(&self, text: String) -> String {
        let values = self.lock();
        match redact(&text, &values) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(clean) => clean,
        }
    }

    /// Every string (and key) of `value` redacted in place.
    pub fn redact_value(&self, value: &mut Value) {
        redact_json(value, &self.lock());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SecretValue>> {
        // A panic elsewhere while holding the lock leaves a list that is still whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_value_added_is_redacted_from_text_and_json() {
        let used = SecretsUsed::default();
        used.add([SecretValue::new("s3cr3t-one".into())]);
        used.clone().add([SecretValue::new("two-s3cr3t".into())]);
        assert_eq!(
            used.redact_text("a s3cr3t-one and two-s3cr3t".into()),
            "a [redacted] and [redacted]"
        );
        let mut value = json!({"k": ["x s3cr3t-one"], "two-s3cr3t": 1});
        used.redact_value(&mut value);
        assert_eq!(value, json!({"k": ["x [redacted]"], "[redacted]": 1}));
        assert_eq!(SecretsUsed::default().redact_text("plain".into()), "plain");
    }
}
