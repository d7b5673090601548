//! The kernel keyring backend of the credential store: secrets that `airlock secret set` put in
//! the **user keyring** (`@u`) of the user it ran as, as `user` keys described
//! `airlock:<name>`.
//!
//! # Which keyring, and why
//!
//! The CLI and the daemon are different processes, usually in different sessions: an operator
//! runs `sudo -u airlock airlock secret set github-token` from a login shell, and the daemon is
//! started later by systemd, whose default `KeyringMode=private` gives every service a fresh
//! anonymous session keyring that is linked to nothing. So the session keyring (`@s`) cannot be
//! the shared place. Two keyrings are reachable from any session of the same uid:
//!
//! - the **user keyring** `@u`: one per uid (per user namespace), reachable through its special
//!   id from any process of that uid whatever its session. Since Linux 5.3 the kernel keeps it
//!   in the user namespace's register (`.user_reg` in `/proc/keys`), so it lives until reboot
//!   even while no process of the uid runs; older kernels drop it with the uid's last process.
//! - the **persistent keyring** (`keyctl_get_persistent`): also per uid, but it *expires*
//!   `/proc/sys/kernel/keys/persistent_keyring_expiry` seconds (3 days by default) after the
//!   last `keyctl_get_persistent` call, and needs `CONFIG_PERSISTENT_KEYRINGS`.
//!
//! We use `@u`: a secret set on Friday must still be there when a daemon that was stopped over
//! the weekend starts again on Monday, and an expiry that depends on who last touched the keyring
//! is a failure that shows up days later.
//!
//! Because a daemon in a private session does not *possess* keys in `@u` (possession comes from
//! being reachable from the process's own thread, process or session keyring), reading them
//! needs the key's **user** permissions, which the kernel sets to "view" only by default. `set`
//! therefore creates the key in this process's own process keyring (where it is possessed),
//! grants the user read and search (`0x3f0b0000`: possessor all; user view, read, search;
//! group and others nothing), and only then links it into `@u`, which also atomically replaces
//! an older key of the same name. This grants nothing new in practice: any process of the same
//! uid can `keyctl link @u @s` and possess everything in `@u` anyway. The uid is the boundary;
//! see docs/secrets.md for what that means for tool servers, which run as the daemon's user.
//!
//! Tested on Linux 6.18 as root and as `nobody`: a key set this way from one session keyring is
//! read from a new anonymous session keyring (what `KeyringMode=private` gives a service) after
//! the setting process exited. `@system-service` in systemd's `SystemCallFilter=` includes
//! `@keyring` (add_key, keyctl, request_key), so the shipped unit allows these calls.
//!
//! # Why `linux-keyutils` and not the `keyring` crate
//!
//! The design names the `keyring` crate. Its 4.x release is a thin wrapper: the default `v1`
//! feature talks to the D-Bus Secret Service on Linux (there is no session bus for a system
//! service), and its keyutils store comes only with the `cli` sample feature, which pulls in
//! every store of every platform. The store itself (`linux-keyutils-keyring-store` with
//! `keyring-core`, the same code as `keyring` 3's `linux-native`) is built on the `linux-keyutils`
//! crate used here, but it fixes the choice of keyring to the session keyring plus the
//! persistent keyring (so the 3-day expiry above applies, and a secret set through `sudo` also
//! lands in the administrator's session keyring), and it has no way to enumerate entries for
//! `airlock secret list`. So this module talks to `linux-keyutils` directly. It avoids two of
//! that crate's helpers, which trust the length the kernel reports more than their buffers:
//! `KeyRing::get_links` sets its vector's length past its capacity when the keyring has more
//! links than asked for, and `Key::metadata` panics on a description over 511 bytes. Listing
//! reads the keyring and describes keys itself, growing its buffers until the answer fits.
//!
//! Kernel keyrings do not survive a reboot. Secrets that must come back after one belong in
//! systemd credentials (`LoadCredential=`, `SetCredentialEncrypted=`), which the store reads
//! first.

use linux_keyutils::{
    Key, KeyError, KeyPermissionsBuilder, KeyRing, KeyRingIdentifier, KeySerialId, Permission,
};
use zeroize::Zeroizing;

/// What every key this store writes is described as, before the secret's name.
pub(crate) const DESCRIPTION_PREFIX: &str = "airlock:";

/// The kernel's limit for the payload of one `user` key.
pub const MAX_VALUE_BYTES: usize = 32_767;

/// Errors of the kernel keyring. Messages never contain a value.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    #[error(
        "the kernel keyring is not available to this process ({0}); container runtimes often block keyctl in their seccomp profile"
    )]
    Unavailable(&'static str),
    #[error(
        "the kernel refused to {action} key `{description}` ({reason}); keys written by `airlock secret set` are readable by their user from any session, keys added by other tools may not be"
    )]
    Denied {
        action: &'static str,
        description: String,
        reason: &'static str,
    },
    #[error(
        "the kernel keyring quota of uid {uid} is full (see /proc/sys/kernel/keys/maxkeys and maxbytes; non-root users get 20000 bytes by default)"
    )]
    QuotaExceeded { uid: u32 },
    #[error("key `{description}` holds {len} bytes, more than a `user` key can")]
    TooLarge { description: String, len: usize },
    #[error("the value is empty, and the kernel keyring cannot hold an empty key")]
    EmptyValue,
    #[error("the value is {len} bytes; a kernel keyring key holds at most {MAX_VALUE_BYTES} bytes")]
    ValueTooLarge { len: usize },
    #[error("`{0}` is not a valid secret name (1 to 128 ASCII letters, digits, `.`, `_` and `-`)")]
    InvalidName(String),
    #[error("key `{description}` does not hold valid UTF-8")]
    NotUtf8 { description: String },
    #[error("keyctl failed to {action} key `{description}`: {reason}")]
    Failed {
        action: &'static str,
        description: String,
        reason: &'static str,
    },
}

/// The user keyring (`@u`) of the effective uid, holding `airlock:<name>` keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelKeyring;

impl KernelKeyring {
    pub fn new() -> KernelKeyring {
        KernelKeyring
    }

    /// The uid whose user keyring this is (the effective uid of this process).
    pub fn uid(&self) -> u32 {
        nix::unistd::Uid::effective().as_raw()
    }

    /// The key description a secret is stored under.
    pub fn description(name: &str) -> String {
        format!("{DESCRIPTION_PREFIX}{name}")
    }

    /// Where a secret would be, for messages: "the kernel keyring of uid 999 (key
    /// `airlock:github-token` in @u)".
    pub fn location(&self, name: &str) -> String {
        format!(
            "the kernel keyring of uid {} (key `{}` in @u)",
            self.uid(),
            Self::description(name)
        )
    }

    /// Whether this process can use its user keyring at all.
    pub fn available(&self) -> Result<(), KeyringError> {
        self.user_keyring().map(|_| ())
    }

    fn user_keyring(&self) -> Result<KeyRing, KeyringError> {
        // `create = true`: on kernels before 5.3 the user keyring may not exist yet.
        KeyRing::from_special_id(KeyRingIdentifier::User, true)
            .map_err(|e| KeyringError::Unavailable(reason(e)))
    }

    /// The user keyring and the key `description` in it, `None` if there is no such key (or
    /// it expired or was revoked).
    fn find(&self, description: &str) -> Result<Option<(KeyRing, Key)>, KeyringError> {
        let ring = self.user_keyring()?;
        match ring.search(description) {
            Ok(key) => Ok(Some((ring, key))),
            Err(KeyError::KeyDoesNotExist | KeyError::KeyExpired | KeyError::KeyRevoked) => {
                Ok(None)
            }
            Err(e) => Err(self.failure("search for", description, e)),
        }
    }

    /// The secret's value, `None` if there is no such key.
    pub fn get(&self, name: &str) -> Result<Option<Zeroizing<String>>, KeyringError> {
        check_name(name)?;
        let description = Self::description(name);
        let Some((_, key)) = self.find(&description)? else {
            return Ok(None);
        };
        // One byte more than a `user` key can hold, so an impossible length is seen, not
        // truncated. A fixed buffer that is never grown leaves no stray copy of the value in
        // freed memory; `Zeroizing` clears it on drop.
        let mut buffer = Zeroizing::new(vec![0u8; MAX_VALUE_BYTES + 1]);
        let len = match key.read(&mut *buffer) {
            Ok(len) => len,
            // Invalidated between the search and the read.
            Err(KeyError::KeyDoesNotExist | KeyError::KeyExpired | KeyError::KeyRevoked) => {
                return Ok(None);
            }
            Err(e) => return Err(self.failure("read", &description, e)),
        };
        if len > MAX_VALUE_BYTES {
            return Err(KeyringError::TooLarge { description, len });
        }
        buffer.truncate(len);
        if std::str::from_utf8(&buffer).is_err() {
            return Err(KeyringError::NotUtf8 { description });
        }
        // Cannot fail: checked just above. The `Vec` moves into the `String` uncopied (the
        // error case of `from_utf8` would own the bytes and drop them unzeroed).
        let text = String::from_utf8(std::mem::take(&mut *buffer)).unwrap_or_default();
        Ok(Some(Zeroizing::new(text)))
    }

    /// Stores (or replaces) a secret in the user keyring, readable by this uid from any
    /// session (see the module docs for the permission choice).
    pub fn set(&self, name: &str, value: &str) -> Result<(), KeyringError> {
        check_name(name)?;
        if value.is_empty() {
            return Err(KeyringError::EmptyValue);
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(KeyringError::ValueTooLarge { len: value.len() });
        }
        let description = Self::description(name);
        let user = self.user_keyring()?;
        // Created where this process possesses it, so it may change the key's permissions
        // whatever session keyring it runs in (under `sudo` that is often not one linked to
        // this uid's `@u`, and a non-possessed new key grants its owner nothing but "view").
        let staging = KeyRing::from_special_id(KeyRingIdentifier::Process, true)
            .map_err(|e| KeyringError::Unavailable(reason(e)))?;
        let key = staging
            .add_key(&description, value.as_bytes())
            .map_err(|e| self.failure("add", &description, e))?;
        let linked = key
            .set_perms(
                KeyPermissionsBuilder::builder()
                    .posessor(Permission::ALL)
                    .user(Permission::VIEW | Permission::READ | Permission::SEARCH)
                    .build(),
            )
            // Linking displaces an existing `airlock:<name>` key in `@u`: an atomic replace.
            .and_then(|()| user.link_key(key))
            .map_err(|e| self.failure("store", &description, e));
        // Whatever happened, the staging link goes; on failure the key then has no link left
        // and the kernel destroys it.
        let _ = staging.unlink_key(key);
        linked
    }

    /// Removes a secret; `false` if there was none.
    pub fn delete(&self, name: &str) -> Result<bool, KeyringError> {
        check_name(name)?;
        let description = Self::description(name);
        let Some((ring, key)) = self.find(&description)? else {
            return Ok(false);
        };
        // Invalidating destroys the key wherever it is linked. A key that some other tool
        // created without user "search" permission cannot be invalidated from a session that
        // does not possess it; unlinking it from `@u` (which needs only write on `@u`) still
        // removes it from this store.
        match key.invalidate() {
            Ok(()) => Ok(true),
            Err(_) => ring
                .unlink_key(key)
                .map(|()| true)
                .map_err(|e| self.failure("delete", &description, e)),
        }
    }

    /// Names of the secrets in the user keyring, sorted. Keys of other programs, and
    /// `airlock:` keys whose rest is not a valid secret name, are skipped.
    pub fn names(&self) -> Result<Vec<String>, KeyringError> {
        self.user_keyring()?;
        let mut names: Vec<String> = linked_ids(KeyRingIdentifier::User as i32)
            .map_err(|e| self.failure("list", "@u", e))?
            .into_iter()
            .filter_map(|id| describe(id).ok())
            .filter_map(|d| {
                let mut fields = d.splitn(5, ';');
                let kind = fields.next()?;
                let description = fields.nth(3)?;
                let name = description.strip_prefix(DESCRIPTION_PREFIX)?;
                (kind == "user" && airlock_policy::sources::server::is_secret_name(name))
                    .then(|| name.to_owned())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn failure(&self, action: &'static str, description: &str, e: KeyError) -> KeyringError {
        let description = description.to_owned();
        match e {
            KeyError::AccessDenied | KeyError::PermissionDenied => KeyringError::Denied {
                action,
                description,
                reason: reason(e),
            },
            KeyError::QuotaExceeded => KeyringError::QuotaExceeded { uid: self.uid() },
            _ => KeyringError::Failed {
                action,
                description,
                reason: reason(e),
            },
        }
    }
}

fn check_name(name: &str) -> Result<(), KeyringError> {
    if airlock_policy::sources::server::is_secret_name(name) {
        Ok(())
    } else {
        Err(KeyringError::InvalidName(name.to_owned()))
    }
}

/// A lower-case explanation of a keyutils error (the crate's own `Display` is its variant
/// name).
fn reason(e: KeyError) -> &'static str {
    match e {
        KeyError::AccessDenied => "permission denied",
        KeyError::PermissionDenied => "operation not permitted",
        KeyError::QuotaExceeded => "quota exceeded",
        KeyError::KeyDoesNotExist => "no such key",
        KeyError::KeyExpired => "the key expired",
        KeyError::KeyRevoked => "the key was revoked",
        KeyError::KeyRejected => "the key was rejected",
        KeyError::KeyringDoesNotExist => "no such keyring",
        KeyError::OutOfMemory => "out of memory",
        KeyError::InvalidArguments => "invalid arguments",
        KeyError::InvalidDescription => "invalid description",
        KeyError::OperationNotSupported => "operation not supported",
        KeyError::Unknown(libc::ENOSYS) => "the kernel has no keyctl system call",
        _ => "unexpected error",
    }
}

/// The ids linked into a keyring (its payload is an array of key serials), read with a buffer
/// that grows until the kernel's answer fits.
fn linked_ids(keyring: i32) -> Result<Vec<i32>, KeyError> {
    let ring = Key::from_id(KeySerialId::new(keyring));
    let mut buffer = vec![0u8; 1024];
    for _ in 0..8 {
        let len = ring.read(&mut buffer)?;
        if len <= buffer.len() {
            buffer.truncate(len);
            return Ok(buffer
                .chunks_exact(4)
                .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect());
        }
        // Links were added since the last read: make room for some more than are there now.
        buffer = vec![0u8; len + 1024];
    }
    Err(KeyError::InvalidArguments)
}

/// `keyctl describe`: "type;uid;gid;perm;description".
fn describe(id: i32) -> Result<String, KeyError> {
    let mut buffer = vec![0u8; 256];
    for _ in 0..4 {
        // SAFETY: KEYCTL_DESCRIBE writes at most `buffer.len()` bytes to `buffer`, which is
        // valid for writes of that many bytes for the duration of the call; it returns the
        // full length of the NUL-terminated description (possibly more than it wrote).
        let len = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                libc::KEYCTL_DESCRIBE as libc::c_long,
                id as libc::c_long,
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        };
        let Ok(len) = usize::try_from(len) else {
            return Err(KeyError::from_errno());
        };
        if len <= buffer.len() {
            buffer.truncate(len);
            // Drop the terminating NUL.
            if buffer.last() == Some(&0) {
                buffer.pop();
            }
            return String::from_utf8(buffer).map_err(|_| KeyError::InvalidDescription);
        }
        buffer = vec![0u8; len];
    }
    Err(KeyError::InvalidDescription)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Names unique to this test run, so parallel tests and real secrets are never touched.
    fn unique(tag: &str) -> String {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        format!("airlock-unit-{tag}-{}-{nanos}-{n}", std::process::id())
    }

    /// The keyring, or `None` (with the skip reported) where keyctl is blocked.
    fn keyring_or_skip(test: &str) -> Option<KernelKeyring> {
        let keyring = KernelKeyring::new();
        match keyring.available() {
            Ok(()) => Some(keyring),
            Err(e) => {
                eprintln!("SKIPPED {test}: {e}");
                None
            }
        }
    }

    /// Deletes the key when the test ends, even when it fails.
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = KernelKeyring::new().delete(&self.0);
        }
    }

    #[test]
    fn set_get_list_replace_delete() {
        let Some(keyring) = keyring_or_skip("set_get_list_replace_delete") else {
            return;
        };
        let name = unique("roundtrip");
        let _cleanup = Cleanup(name.clone());
        assert!(keyring.get(&name).unwrap().is_none());
        keyring.set(&name, "first value").unwrap();
        assert_eq!(keyring.get(&name).unwrap().unwrap().as_str(), "first value");
        assert!(keyring.names().unwrap().contains(&name));
        // Setting again replaces (one key, the new value).
        keyring.set(&name, "second value").unwrap();
        assert_eq!(
            keyring.get(&name).unwrap().unwrap().as_str(),
            "second value"
        );
        assert_eq!(
            keyring
                .names()
                .unwrap()
                .iter()
                .filter(|n| **n == name)
                .count(),
            1
        );
        assert!(keyring.delete(&name).unwrap());
        assert!(keyring.get(&name).unwrap().is_none());
        assert!(!keyring.names().unwrap().contains(&name));
        assert!(!keyring.delete(&name).unwrap());
    }

    /// The permission choice: the key grants its user read and search, so a process whose
    /// session keyring is not linked to `@u` (systemd's `KeyringMode=private`) can read it.
    #[test]
    fn keys_are_readable_by_their_user_from_any_session() {
        let Some(keyring) = keyring_or_skip("keys_are_readable_by_their_user_from_any_session")
        else {
            return;
        };
        let name = unique("perms");
        let _cleanup = Cleanup(name.clone());
        keyring.set(&name, "v").unwrap();
        let key = KeyRing::from_special_id(KeyRingIdentifier::User, false)
            .unwrap()
            .search(&KernelKeyring::description(&name))
            .unwrap();
        let described = describe(key.get_id().as_raw_id()).unwrap();
        let fields: Vec<&str> = described.split(';').collect();
        assert_eq!(fields[0], "user", "{described}");
        assert_eq!(fields[3], "3f0b0000", "{described}");
        assert_eq!(fields[4], KernelKeyring::description(&name));
        // Nothing is left in this process's own keyring (the staging place).
        let process = KeyRing::from_special_id(KeyRingIdentifier::Process, true).unwrap();
        assert!(process.search(&KernelKeyring::description(&name)).is_err());
    }

    #[test]
    fn refuses_bad_names_and_values() {
        let keyring = KernelKeyring::new();
        assert!(matches!(
            keyring.set("a/b", "v"),
            Err(KeyringError::InvalidName(_))
        ));
        assert!(matches!(
            keyring.get(".."),
            Err(KeyringError::InvalidName(_))
        ));
        assert!(matches!(
            keyring.set("fine", ""),
            Err(KeyringError::EmptyValue)
        ));
        let huge = "x".repeat(MAX_VALUE_BYTES + 1);
        let e = keyring.set("fine", &huge).unwrap_err();
        assert!(matches!(e, KeyringError::ValueTooLarge { .. }), "{e}");
        // The message says how big, never what.
        assert!(!e.to_string().contains("xxxx"), "{e}");
    }
}
