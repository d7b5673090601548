//! The session store: values a program keeps in its session (`store.set(key, value)`) and
//! reads back in a later execution (`await store.get(key)`), kept in the journal beside the
//! session's calls and deleted with it. Every bound is here, each refusal an error that names
//! it and says what to do.
//!
//! Only the supervisor writes it, for a program's `store.set` (scanned for secrets before it
//! is kept) and reads it, for `store.get` and `GET /v1/sessions/<id>/store`; which value a
//! `get` answers with, live or from the record of an earlier run, is the run loop's business
//! (`crate::execution`), like any recorded call.

use super::store::{SessionRow, StoreError};
use super::{Journal, SessionError};

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Largest value, as JSON text.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Keys one session may keep.
pub const MAX_KEYS: u64 = 1000;
/// Bytes one session's store may keep (keys and values' JSON text).
pub const MAX_BYTES: u64 = 16 << 20;

/// Why `store.set` was refused: a bound. Each names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreBound {
    #[error("store keys are non-empty strings; this one is empty")]
    EmptyKey,
    #[error("the store key is {len} bytes, over the {MAX_KEY_BYTES}-byte limit")]
    KeyTooLong { len: usize },
    #[error(
        "the value of store key `{key}` is {len} bytes of JSON, over the {MAX_VALUE_BYTES}-byte limit of one value"
    )]
    ValueTooLarge { key: String, len: usize },
    #[error("the session keeps {MAX_KEYS} store keys, its limit; `{key}` would be one more")]
    TooManyKeys { key: String },
    #[error(
        "the session's store would keep {would} bytes with `{key}`, over its limit of {MAX_BYTES} bytes"
    )]
    SessionFull { key: String, would: u64 },
}

impl StoreBound {
    /// What the program can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            StoreBound::EmptyKey | StoreBound::KeyTooLong { .. } => {
                "use a short, descriptive key such as \"issues:page1\""
            }
            StoreBound::ValueTooLarge { .. } => {
                "split the value over several keys (\"rows:0\", \"rows:1\", …) and read them one at a time"
            }
            StoreBound::TooManyKeys { .. } | StoreBound::SessionFull { .. } => {
                "overwrite keys you no longer need (store.set(key, null)), keep fewer values, or start a new session (\"session\": \"new\")"
            }
        }
    }
}

/// A key as an error message shows it: at most 64 characters.
pub fn shown_key(key: &str) -> String {
    match key.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &key[..at]),
        None => key.to_owned(),
    }
}

/// Checks a key against its bounds.
pub fn check_key(key: &str) -> Result<(), StoreBound> {
    if key.is_empty() {
        Err(StoreBound::EmptyKey)
    } else if key.len() > MAX_KEY_BYTES {
        Err(StoreBound::KeyTooLong { len: key.len() })
    } else {
        Ok(())
    }
}

impl Journal {
    /// The value `session` keeps under `key`, as JSON text.
    pub fn store_value(&self, session: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.noted_read(self.store.store_value(session, key))
    }

    /// Keeps `value` (JSON text, already scanned) under `key` in `session`, within the bounds.
    pub fn set_store_value(
        &self,
        session: &str,
        key: &str,
        value: &str,
    ) -> Result<Result<(), StoreBound>, StoreError> {
        if let Err(bound) = check_key(key) {
            return Ok(Err(bound));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Ok(Err(StoreBound::ValueTooLarge {
                key: shown_key(key),
                len: value.len(),
            }));
        }
        let now = crate::determinism::now_ms();
        self.noted(self.store.set_store_value(session, key, value, now))
    }

    /// Every value a session of `principal` keeps, by key; another principal's session is
    /// not found, as on every session route.
    pub fn store_values(
        &self,
        id: &str,
        principal: &str,
    ) -> Result<(SessionRow, Vec<(String, String)>), SessionError> {
        let row = self.session(id, principal)?;
        let values = self
            .noted_read(self.store.store_values(id))
            .map_err(SessionError::from)?;
        Ok((row, values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bounded_and_shown_short() {
        assert_eq!(check_key(""), Err(StoreBound::EmptyKey));
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        assert_eq!(
            check_key(&"k".repeat(MAX_KEY_BYTES + 1)),
            Err(StoreBound::KeyTooLong { len: 257 })
        );
        assert_eq!(shown_key(&"x".repeat(100)).chars().count(), 65);
        assert_eq!(shown_key("short"), "short");
    }
}
