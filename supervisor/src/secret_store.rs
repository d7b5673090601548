//! The credential store: secrets that policy names (`{ secret = "github-token" }`) and that
//! only the supervisor reads. Values are handed to tool servers (environment, headers) and
//! never to workers or agents.
//!
//! (Skeleton: the backends are being filled in; see the `SecretStore` docs.)

use std::collections::BTreeMap;
use std::path::PathBuf;

/// A secret's value. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: String) -> Self {
        SecretValue(value)
    }

    /// The value itself, for the one place that hands it to a server.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue([hidden])")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret `{name}` is not in the credential store (looked in {searched})")]
    Missing { name: String, searched: String },
}

/// Where the daemon looks for secrets, in order.
#[derive(Debug, Default)]
pub struct SecretStore {
    credentials_dir: Option<PathBuf>,
    fixed: BTreeMap<String, SecretValue>,
}

impl SecretStore {
    /// A store with no secrets.
    pub fn empty() -> Self {
        SecretStore::default()
    }

    /// A store holding exactly these values (tests and embedding).
    pub fn with_values(values: impl IntoIterator<Item = (String, String)>) -> Self {
        SecretStore {
            credentials_dir: None,
            fixed: values
                .into_iter()
                .map(|(k, v)| (k, SecretValue::new(v)))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Result<SecretValue, SecretError> {
        if let Some(value) = self.fixed.get(name) {
            return Ok(value.clone());
        }
        if let Some(dir) = &self.credentials_dir
            && let Ok(text) = std::fs::read_to_string(dir.join(name))
        {
            return Ok(SecretValue::new(text));
        }
        Err(SecretError::Missing {
            name: name.to_owned(),
            searched: "nowhere".into(),
        })
    }
}
