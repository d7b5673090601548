//! The `[secret_scanning]` table: what the supervisor does when a tool result carries a secret.
//! By default the secret is replaced by a marker naming the rule (`[REDACTED:github-token]`)
//! and the call succeeds; sources listed in `fail` have such calls fail instead, for operators
//! who would rather a program never see a redacted answer than see a partial one.

use crate::document::TableReader;
use crate::error::PolicyError;

/// `[secret_scanning]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretScanning {
    /// Sources (by name) whose calls fail when their result carries a secret.
    pub fail: Vec<String>,
}

/// What happens to a tool result that carries a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretAction {
    /// Replace it with a marker naming the rule; the call succeeds.
    Redact,
    /// Fail the call (the program gets a `ToolError` naming the rule, never the value).
    Fail,
}

impl SecretScanning {
    /// Keys accepted in `[secret_scanning]`.
    pub(crate) const KEYS: &'static [&'static str] = &["fail"];

    /// What to do for a result of source `source`.
    pub fn action(&self, source: &str) -> SecretAction {
        if self.fail.iter().any(|s| s == source) {
            SecretAction::Fail
        } else {
            SecretAction::Redact
        }
    }

    /// Reads the table; `known` says whether a source name exists (checked after every file
    /// is read, since sources may be defined in drop-ins).
    pub(crate) fn read(
        table: &TableReader<'_>,
        known: &dyn Fn(&str) -> bool,
    ) -> Result<Self, PolicyError> {
        let mut fail = Vec::new();
        if let Some(field) = table.get("fail") {
            for entry in field.array("an array of source names")? {
                let name = entry
                    .string("a source name (a [[server]], [[openapi]] or [[graphql]] name)")?;
                if !known(name) {
                    return Err(entry.invalid(format!(
                        "no tool source is named \"{name}\": list names of [[server]], [[openapi]] or [[graphql]] entries"
                    )));
                }
                if !fail.iter().any(|f| f == name) {
                    fail.push(name.to_owned());
                }
            }
        }
        Ok(SecretScanning { fail })
    }
}
