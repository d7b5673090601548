//! A source's settings from the policy (`env`, `headers`, `auth`), turned into the values its
//! service gets: literals as written, secrets read from the store at the moment they are used
//! (so a secret set or rotated while the daemon runs counts at once). Every secret value read
//! is added to the call's [`SecretsUsed`], which the source hands back with its answer, so the
//! pipeline redacts it.
//!
//! This is the one place a source turns a secret's name into its value; a missing secret
//! fails the source's calls, never the daemon, and the error names the secret and the key,
//! never a value.

use crate::secrets::store::SecretStore;
use crate::tools::{SecretsUsed, ToolError, ToolErrorCode};
use airlock_policy::SettingValue;

/// The settings of one source, for errors that name it.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// What the source is, as errors name it (`tool server`, `openapi source`, …).
    pub kind: &'static str,
    /// Its name in the policy.
    pub name: &'a str,
    pub store: &'a SecretStore,
}

/// One setting's value.
#[derive(Debug)]
pub struct Resolved {
    pub value: String,
    /// It came from the secret store (an HTTP header carrying it is marked sensitive).
    pub secret: bool,
}

impl Settings<'_> {
    /// The value of `key` in `table` (`env`, `headers`, `auth`).
    pub fn value(
        &self,
        table: &str,
        key: &str,
        setting: &SettingValue,
        used: &mut SecretsUsed,
    ) -> Result<Resolved, ToolError> {
        match setting {
            SettingValue::Literal(text) => Ok(Resolved {
                value: text.clone(),
                secret: false,
            }),
            SettingValue::Secret(name) => match self.store.get(name) {
                Ok(secret) => {
                    let value = secret.expose().to_owned();
                    used.add_named(name, secret);
                    Ok(Resolved {
                        value,
                        secret: true,
                    })
                }
                Err(e) => Err(self
                    .unavailable(format!("{table}.{key} needs secret `{name}`: {e}"))
                    .with_hint(format!(
                        "the operator provides it with `airlock secret set {name}` (value on stdin) or as the systemd credential `{name}`"
                    ))),
            },
        }
    }

    /// Every `(key, value)` of `table`.
    pub fn table(
        &self,
        table: &str,
        settings: &[(String, SettingValue)],
        used: &mut SecretsUsed,
    ) -> Result<Vec<(String, String)>, ToolError> {
        settings
            .iter()
            .map(|(key, setting)| Ok((key.clone(), self.value(table, key, setting, used)?.value)))
            .collect()
    }

    /// The error of a call this source cannot serve, for `why`.
    pub fn unavailable(&self, why: String) -> ToolError {
        ToolError::new(
            ToolErrorCode::ServerUnavailable,
            format!("{}{why}", self.unavailable_prefix()),
        )
        .with_hint("this is a problem of the daemon's configuration or the server, not of the program; the operator should check the airlockd log")
    }

    /// How every [`Settings::unavailable`] message begins (so a cause quoted inside another
    /// is not prefixed twice).
    pub fn unavailable_prefix(&self) -> String {
        format!("{} `{}` is unavailable: ", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::store::SecretStore;

    #[test]
    fn literals_pass_secrets_are_noted_and_missing_ones_named() {
        let store = SecretStore::empty();
        let settings = Settings {
            kind: "tool server",
            name: "gh",
            store: &store,
        };
        let mut used = SecretsUsed::default();
        let literal = settings
            .value(
                "env",
                "MODE",
                &SettingValue::Literal("fast".into()),
                &mut used,
            )
            .unwrap();
        assert_eq!((literal.value.as_str(), literal.secret), ("fast", false));
        let e = settings
            .value(
                "env",
                "TOKEN",
                &SettingValue::Secret("gh-token".into()),
                &mut used,
            )
            .unwrap_err();
        assert_eq!(e.code, ToolErrorCode::ServerUnavailable);
        assert!(
            e.message
                .starts_with("tool server `gh` is unavailable: env.TOKEN needs secret `gh-token`"),
            "{}",
            e.message
        );
        assert!(e.hint.unwrap().contains("airlock secret set gh-token"));
    }
}
