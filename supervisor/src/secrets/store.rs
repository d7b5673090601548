//! The credential store: secrets that the policy names (`{ secret = "github-token" }` in a
//! `[[server]]`'s `env` or `headers`) and that only the supervisor reads. Values are handed to
//! tool servers (their environment, their HTTP headers) and never to workers, agents, log
//! lines or error messages (ARCHITECTURE.md, invariant 5).
//!
//! A [`SecretStore`] looks in its backends in this order and the first that has the name wins:
//!
//! 1. **systemd credentials**: the file `$CREDENTIALS_DIRECTORY/<name>`, which systemd fills
//!    from `LoadCredential=`, `LoadCredentialEncrypted=` or `SetCredentialEncrypted=` and which
//!    only the service can read. First because it is the operator's explicit, per-service,
//!    reboot-proof configuration.
//! 2. **the kernel keyring**: the user keyring of the daemon's uid, written by
//!    `airlock secret set` ([`kernel_keyring`] explains the choice of keyring and its limits:
//!    it does not survive a reboot).
//! 3. **environment variables, for development only**: `AIRLOCK_SECRET_<NAME>` (the name
//!    upper-cased, `.` and `-` turned into `_`), and only when airlockd was started with
//!    `--dev-secrets-from-env`. A process's environment is readable in `/proc/<pid>/environ` by
//!    its user and is easily inherited or logged by whatever starts it, so this exists to try a
//!    policy on a workstation, not to run one.
//!
//! A secret is read when a server starts (not once at daemon start), so a secret that is set or
//! rotated while the daemon runs is used the next time the server starts. A missing secret fails
//! only the servers that need it; errors name the secret and where the store looked, never a
//! value.
//!
//! Every value is held in a [`SecretValue`], whose `Debug` and `Display` print `[hidden]` and
//! whose memory is zeroed when dropped. Files and keys are read into fixed, zeroed-on-drop
//! buffers, so no partial copy is left behind in freed memory by a growing buffer.

pub mod kernel_keyring;

pub use kernel_keyring::{KernelKeyring, KeyringError};

use airlock_policy::sources::server::is_secret_name;
use airlock_policy::{ServerTransport, SettingValue, ToolServer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use zeroize::{Zeroize, Zeroizing};

/// The largest systemd credential file read as a secret (its trailing newline included).
/// Tokens, keys and certificates are far smaller; a larger file is more likely the wrong file
/// than a secret.
pub(crate) const MAX_CREDENTIAL_BYTES: usize = 64 * 1024;

/// Environment variables of the development backend start with this.
pub(crate) const ENV_PREFIX: &str = "AIRLOCK_SECRET_";

/// A secret's value. Its `Debug` and `Display` never show it, and its memory is zeroed when it
/// is dropped.
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

impl Drop for SecretValue {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl zeroize::ZeroizeOnDrop for SecretValue {}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue([hidden])")
    }
}

impl std::fmt::Display for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// Where a secret came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretBackend {
    /// Values given to [`SecretStore::with_values`] (tests, embedding).
    Fixed,
    /// `$CREDENTIALS_DIRECTORY/<name>`.
    SystemdCredential,
    /// The user keyring of the daemon's uid.
    KernelKeyring,
    /// `AIRLOCK_SECRET_<NAME>`, development only.
    Environment,
}

impl SecretBackend {
    /// A short label for listings.
    pub fn label(self) -> &'static str {
        match self {
            SecretBackend::Fixed => "fixed",
            SecretBackend::SystemdCredential => "systemd-credential",
            SecretBackend::KernelKeyring => "kernel-keyring",
            SecretBackend::Environment => "environment (development only)",
        }
    }
}

impl std::fmt::Display for SecretBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Errors of the store. Every message names the secret and the place, never the value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "`{name}` is not a valid secret name (1 to 128 ASCII letters, digits, `.`, `_` and `-`)"
    )]
    InvalidName { name: String },
    #[error("secret `{name}` is not in the credential store (looked in {searched})")]
    Missing { name: String, searched: String },
    #[error("secret `{name}` in {location} is larger than the limit of {limit} bytes")]
    TooLarge {
        name: String,
        location: String,
        limit: usize,
    },
    #[error("secret `{name}` in {location} is empty")]
    Empty { name: String, location: String },
    #[error("secret `{name}` in {location} is not valid UTF-8")]
    NotUtf8 { name: String, location: String },
    #[error(
        "secret `{name}` in {location} contains a NUL byte, which no environment variable or header can carry"
    )]
    ContainsNul { name: String, location: String },
    #[error("cannot read secret `{name}` from {location}: {cause}")]
    Unreadable {
        name: String,
        location: String,
        cause: std::io::Error,
    },
    #[error("cannot read secret `{name}` from {location}: {cause}")]
    Keyring {
        name: String,
        location: String,
        cause: KeyringError,
    },
    #[error("cannot list {location}: {cause}")]
    Listing { location: String, cause: String },
}

/// One secret a listing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSecret {
    /// The name the policy uses; for the environment backend, the variable's suffix
    /// (`GITHUB_TOKEN` for `AIRLOCK_SECRET_GITHUB_TOKEN`), which policy names map onto.
    pub name: String,
    pub backend: SecretBackend,
}

/// What [`SecretStore::names`] found, and the backends it could not read.
#[derive(Debug, Default)]
pub struct SecretNames {
    /// Sorted by name, then in lookup order (the first of a name is the one in use).
    pub found: Vec<ListedSecret>,
    pub problems: Vec<SecretError>,
}

/// A secret a server needs that the store cannot give, found at start-up.
#[derive(Debug)]
pub struct ServerSecretProblem {
    pub server: String,
    /// `env.GITHUB_TOKEN` or `headers.Authorization`.
    pub setting: String,
    pub secret: String,
    pub error: SecretError,
}

impl std::fmt::Display for ServerSecretProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "server `{}`: {} needs secret `{}`, so the server will fail until it is provided: {}",
            self.server, self.setting, self.secret, self.error
        )
    }
}

/// Where the daemon looks for secrets, in order (see the module docs).
#[derive(Debug, Default)]
pub struct SecretStore {
    fixed: BTreeMap<String, SecretValue>,
    credentials_dir: Option<PathBuf>,
    kernel_keyring: Option<KernelKeyring>,
    environment: Option<Environment>,
}

/// The variables the development backend reads.
#[derive(Debug)]
enum Environment {
    /// This process's environment, read at each lookup.
    Process,
    /// Given variables, so unit tests need not call `setenv` in a multi-threaded process.
    #[cfg(test)]
    Given(BTreeMap<String, String>),
}

impl Environment {
    fn var(&self, name: &str) -> Option<std::ffi::OsString> {
        match self {
            Environment::Process => std::env::var_os(name),
            #[cfg(test)]
            Environment::Given(vars) => vars.get(name).map(Into::into),
        }
    }

    fn names(&self) -> Vec<String> {
        let strip = |var: &str| {
            var.strip_prefix(ENV_PREFIX)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
        };
        match self {
            Environment::Process => std::env::vars_os()
                .filter_map(|(var, _)| var.to_str().and_then(strip))
                .collect(),
            #[cfg(test)]
            Environment::Given(vars) => vars.keys().filter_map(|v| strip(v)).collect(),
        }
    }
}

impl SecretStore {
    /// A store with no secrets.
    pub fn empty() -> Self {
        SecretStore::default()
    }

    /// A store holding exactly these values (tests and embedding).
    pub fn with_values(values: impl IntoIterator<Item = (String, String)>) -> Self {
        SecretStore {
            fixed: values
                .into_iter()
                .map(|(k, v)| (k, SecretValue::new(v)))
                .collect(),
            ..SecretStore::default()
        }
    }

    /// The store `airlockd` and `airlock secret list` use: systemd credentials if
    /// `$CREDENTIALS_DIRECTORY` is set, the kernel keyring, and, only if
    /// `dev_secrets_from_env`, `AIRLOCK_SECRET_*` environment variables.
    pub fn from_environment(dev_secrets_from_env: bool) -> Self {
        let mut store = SecretStore::empty().kernel_keyring(KernelKeyring::new());
        // systemd always sets an absolute path; anything else is not its credentials.
        if let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute())
        {
            store = store.credentials_directory(dir);
        }
        if dev_secrets_from_env {
            store = store.environment_for_development();
        }
        store
    }

    /// Reads `<dir>/<name>` files (systemd's `$CREDENTIALS_DIRECTORY`).
    pub fn credentials_directory(mut self, dir: impl Into<PathBuf>) -> Self {
        self.credentials_dir = Some(dir.into());
        self
    }

    /// Reads the user keyring of this process's uid.
    pub fn kernel_keyring(mut self, keyring: KernelKeyring) -> Self {
        self.kernel_keyring = Some(keyring);
        self
    }

    /// Reads `AIRLOCK_SECRET_<NAME>` environment variables. Development only.
    pub fn environment_for_development(mut self) -> Self {
        self.environment = Some(Environment::Process);
        self
    }

    #[cfg(test)]
    fn given_environment(mut self, vars: &[(&str, &str)]) -> Self {
        let vars = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.environment = Some(Environment::Given(vars));
        self
    }

    /// Whether the development-only environment backend is on.
    pub fn reads_environment(&self) -> bool {
        self.environment.is_some()
    }

    /// The backends in lookup order, for the start-up log.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.fixed.is_empty() {
            parts.push(format!("{} fixed value(s)", self.fixed.len()));
        }
        if let Some(dir) = &self.credentials_dir {
            parts.push(format!("systemd credentials in {}", dir.display()));
        }
        if let Some(keyring) = &self.kernel_keyring {
            parts.push(format!("the kernel keyring of uid {}", keyring.uid()));
        }
        if self.environment.is_some() {
            parts.push(format!(
                "environment variables {ENV_PREFIX}* (development only)"
            ));
        }
        if parts.is_empty() {
            "nothing (no backend is configured)".to_owned()
        } else {
            parts.join(", then ")
        }
    }

    /// The secret's value from the first backend that has it. A secret that is present but
    /// unusable (too large, empty, unreadable) is an error, not a reason to look further: the
    /// operator put it there and should hear that it is broken rather than get another value.
    pub fn get(&self, name: &str) -> Result<SecretValue, SecretError> {
        if !is_secret_name(name) {
            return Err(SecretError::InvalidName {
                name: name.to_owned(),
            });
        }
        let mut searched = Vec::new();
        if !self.fixed.is_empty() {
            if let Some(value) = self.fixed.get(name) {
                return Ok(value.clone());
            }
            searched.push("the fixed values".to_owned());
        }
        if let Some(dir) = &self.credentials_dir {
            if let Some(value) = read_credential(dir, name)? {
                return Ok(value);
            }
            searched.push(format!(
                "systemd credentials ({})",
                dir.join(name).display()
            ));
        }
        if let Some(keyring) = &self.kernel_keyring {
            let location = keyring.location(name);
            match keyring.get(name) {
                Ok(Some(text)) => return checked(name, &location, text),
                Ok(None) => searched.push(location),
                // A keyring this process cannot use holds nothing for it; say so in the
                // "missing" message rather than failing a secret another backend may have.
                Err(KeyringError::Unavailable(why)) => {
                    searched.push(format!("{location}, which is unavailable: {why}"));
                }
                Err(cause) => {
                    return Err(SecretError::Keyring {
                        name: name.to_owned(),
                        location,
                        cause,
                    });
                }
            }
        }
        if let Some(environment) = &self.environment {
            let var = env_var_name(name);
            let location = format!("environment variable {var}");
            match environment.var(&var) {
                Some(value) => {
                    let Ok(text) = value.into_string() else {
                        return Err(SecretError::NotUtf8 {
                            name: name.to_owned(),
                            location,
                        });
                    };
                    return checked(name, &location, Zeroizing::new(text));
                }
                None => searched.push(location),
            }
        }
        Err(SecretError::Missing {
            name: name.to_owned(),
            searched: if searched.is_empty() {
                "nothing: no backend is configured".to_owned()
            } else {
                searched.join(", ")
            },
        })
    }

    /// Every secret name the backends hold, with the backend it is in (never a value).
    pub fn names(&self) -> SecretNames {
        let mut out = SecretNames::default();
        let mut push = |name: String, backend| out.found.push(ListedSecret { name, backend });
        for name in self.fixed.keys() {
            push(name.clone(), SecretBackend::Fixed);
        }
        if let Some(dir) = &self.credentials_dir {
            match credential_names(dir) {
                Ok(names) => names
                    .into_iter()
                    .for_each(|n| push(n, SecretBackend::SystemdCredential)),
                Err(e) => out.problems.push(SecretError::Listing {
                    location: format!("systemd credentials in {}", dir.display()),
                    cause: e.to_string(),
                }),
            }
        }
        if let Some(keyring) = &self.kernel_keyring {
            match keyring.names() {
                Ok(names) => names
                    .into_iter()
                    .for_each(|n| push(n, SecretBackend::KernelKeyring)),
                Err(e) => out.problems.push(SecretError::Listing {
                    location: format!("the kernel keyring of uid {}", keyring.uid()),
                    cause: e.to_string(),
                }),
            }
        }
        if let Some(environment) = &self.environment {
            for name in environment.names() {
                push(name, SecretBackend::Environment);
            }
        }
        // Stable sort: backends of one name stay in lookup order.
        out.found.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The secrets `server` needs that the store cannot give now, for start-up warnings.
    /// Each is read once and dropped (zeroed) straight away.
    pub fn check_server(&self, server: &ToolServer) -> Vec<ServerSecretProblem> {
        let (table, settings) = match &server.transport {
            ServerTransport::Stdio { env, .. } => ("env", env),
            ServerTransport::Http { headers, .. } => ("headers", headers),
        };
        settings
            .iter()
            .filter_map(|(key, value)| match value {
                SettingValue::Secret(secret) => {
                    self.get(secret).err().map(|error| ServerSecretProblem {
                        server: server.name.clone(),
                        setting: format!("{table}.{key}"),
                        secret: secret.clone(),
                        error,
                    })
                }
                SettingValue::Literal(_) => None,
            })
            .collect()
    }
}

/// `AIRLOCK_SECRET_<NAME>`: the name upper-cased, `.` and `-` turned into `_` (so `a.b`, `a-b`
/// and `a_b` share one variable).
pub fn env_var_name(name: &str) -> String {
    let suffix: String = name
        .chars()
        .map(|c| match c {
            '.' | '-' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    format!("{ENV_PREFIX}{suffix}")
}

/// `text` with every occurrence of any of `secrets` replaced by `[redacted]`, for text that
/// comes from a process holding secrets (a server's stderr, its error messages) before it is
/// logged or shown. Borrowed when nothing matched.
pub fn redact<'a>(text: &'a str, secrets: &[SecretValue]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for secret in secrets {
        let value = secret.expose();
        if !value.is_empty() && out.contains(value) {
            out = Cow::Owned(out.replace(value, "[redacted]"));
        }
    }
    out
}

/// The checks every backend's value goes through.
fn checked(
    name: &str,
    location: &str,
    mut text: Zeroizing<String>,
) -> Result<SecretValue, SecretError> {
    let (name, location) = (name.to_owned(), location.to_owned());
    if text.is_empty() {
        return Err(SecretError::Empty { name, location });
    }
    if text.contains('\0') {
        return Err(SecretError::ContainsNul { name, location });
    }
    // Moved out of the `Zeroizing` wrapper without a copy; `SecretValue` zeroes it from now on.
    Ok(SecretValue::new(std::mem::take(&mut *text)))
}

/// `<dir>/<name>`, `None` if there is no such file.
fn read_credential(dir: &Path, name: &str) -> Result<Option<SecretValue>, SecretError> {
    let path = dir.join(name);
    let location = format!("systemd credential {}", path.display());
    let unreadable = |cause| SecretError::Unreadable {
        name: name.to_owned(),
        location: location.clone(),
        cause,
    };
    // O_NONBLOCK: a FIFO put there by mistake fails the read instead of hanging the server's
    // start; it changes nothing for a regular file.
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    };
    let metadata = file.metadata().map_err(unreadable)?;
    if !metadata.is_file() {
        return Err(unreadable(std::io::Error::other("not a regular file")));
    }
    let too_large = || SecretError::TooLarge {
        name: name.to_owned(),
        location: location.clone(),
        limit: MAX_CREDENTIAL_BYTES,
    };
    if metadata.len() > MAX_CREDENTIAL_BYTES as u64 {
        return Err(too_large());
    }
    // Room for one byte over the limit, allocated once: `read_to_end` into a `Vec` with spare
    // capacity never reallocates, so no copy of the value is left in freed memory.
    let mut buffer = Zeroizing::new(Vec::with_capacity(MAX_CREDENTIAL_BYTES + 1));
    (&mut file)
        .take(MAX_CREDENTIAL_BYTES as u64 + 1)
        .read_to_end(&mut buffer)
        .map_err(unreadable)?;
    if buffer.len() > MAX_CREDENTIAL_BYTES {
        return Err(too_large());
    }
    // Exactly one trailing newline is dropped: `echo token > file` and editors add one, and
    // `systemd-creds encrypt` keeps whatever the input file had, while no token ends in one.
    // Only one, so a value that deliberately ends in whitespace keeps the rest.
    if buffer.last() == Some(&b'\n') {
        buffer.pop();
    }
    if std::str::from_utf8(&buffer).is_err() {
        return Err(SecretError::NotUtf8 {
            name: name.to_owned(),
            location,
        });
    }
    // Cannot fail (checked above); moves the bytes without copying them.
    let text = Zeroizing::new(String::from_utf8(std::mem::take(&mut *buffer)).unwrap_or_default());
    checked(name, &location, text).map(Some)
}

/// The secret names in a credentials directory: regular files whose names are secret names.
fn credential_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if is_secret_name(&name) && std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use airlock_policy::StartMode;

    fn server(env: Vec<(&str, SettingValue)>) -> ToolServer {
        ToolServer {
            name: "github".into(),
            transport: ServerTransport::Stdio {
                command: "x".into(),
                args: Vec::new(),
                cwd: None,
                env: env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                inherit_env: Vec::new(),
            },
            start: StartMode::Lazy,
            call_timeout_ms: 1000,
            max_concurrent_calls: 1,
            coerce: Default::default(),
            learn_types: true,
            dynamic_tools: false,
            confinement: Default::default(),
        }
    }

    #[test]
    fn values_never_show_in_debug_or_display() {
        let v = SecretValue::new("hunter2-canary".into());
        assert_eq!(format!("{v:?}"), "SecretValue([hidden])");
        assert_eq!(format!("{v}"), "[hidden]");
        assert_eq!(format!("{:?}", Some(&v)), "Some(SecretValue([hidden]))");
        assert_eq!(v.expose(), "hunter2-canary");
    }

    #[test]
    fn redact_replaces_every_value() {
        let secrets = [
            SecretValue::new("s3cr3t".into()),
            SecretValue::new(String::new()),
        ];
        assert_eq!(
            redact("token s3cr3t and s3cr3t again", &secrets),
            "token [redacted] and [redacted] again"
        );
        assert!(matches!(redact("nothing here", &secrets), Cow::Borrowed(_)));
    }

    #[test]
    fn credentials_directory_backend() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::empty().credentials_directory(dir.path());
        std::fs::write(dir.path().join("plain"), "abc").unwrap();
        std::fs::write(dir.path().join("echoed"), "abc\n").unwrap();
        std::fs::write(dir.path().join("two-newlines"), "abc\n\n").unwrap();
        std::fs::write(dir.path().join("crlf"), "abc\r\n").unwrap();
        assert_eq!(store.get("plain").unwrap().expose(), "abc");
        // Exactly one trailing newline goes.
        assert_eq!(store.get("echoed").unwrap().expose(), "abc");
        assert_eq!(store.get("two-newlines").unwrap().expose(), "abc\n");
        assert_eq!(store.get("crlf").unwrap().expose(), "abc\r");

        let e = store.get("absent").unwrap_err();
        assert!(matches!(e, SecretError::Missing { .. }), "{e}");
        let message = e.to_string();
        assert!(message.contains("secret `absent`"), "{message}");
        assert!(
            message.contains(&dir.path().join("absent").display().to_string()),
            "{message}"
        );

        // Names that are not secret names never become paths.
        for bad in ["../plain", "a/b", "", ".."] {
            let e = store.get(bad).unwrap_err();
            assert!(matches!(e, SecretError::InvalidName { .. }), "{bad}: {e}");
        }

        std::fs::write(dir.path().join("empty"), "\n").unwrap();
        let e = store.get("empty").unwrap_err();
        assert!(matches!(e, SecretError::Empty { .. }), "{e}");

        let big = "B".repeat(MAX_CREDENTIAL_BYTES + 1);
        std::fs::write(dir.path().join("big"), &big).unwrap();
        let e = store.get("big").unwrap_err();
        assert!(matches!(e, SecretError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("65536 bytes"), "{e}");
        assert!(!e.to_string().contains("BBBB"), "{e}");
        // A file of exactly the limit is fine (the limit is on the file, newline included).
        std::fs::write(
            dir.path().join("at-limit"),
            format!("{}\n", &big[..MAX_CREDENTIAL_BYTES - 1]),
        )
        .unwrap();
        assert_eq!(
            store.get("at-limit").unwrap().expose().len(),
            MAX_CREDENTIAL_BYTES - 1
        );

        std::fs::write(dir.path().join("binary"), [0xff, 0xfe, b'x']).unwrap();
        let e = store.get("binary").unwrap_err();
        assert!(matches!(e, SecretError::NotUtf8 { .. }), "{e}");
        std::fs::write(dir.path().join("nul"), "a\0b").unwrap();
        let e = store.get("nul").unwrap_err();
        assert!(matches!(e, SecretError::ContainsNul { .. }), "{e}");

        std::fs::create_dir(dir.path().join("a-dir")).unwrap();
        let e = store.get("a-dir").unwrap_err();
        assert!(matches!(e, SecretError::Unreadable { .. }), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");

        // A FIFO neither hangs the lookup nor counts as a secret.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(store.get("fifo").is_err());

        let names = store.names();
        assert!(names.problems.is_empty(), "{:?}", names.problems);
        let listed: Vec<&str> = names.found.iter().map(|s| s.name.as_str()).collect();
        assert!(
            listed.contains(&"plain") && listed.contains(&"echoed"),
            "{listed:?}"
        );
        assert!(
            !listed.contains(&"a-dir") && !listed.contains(&"fifo"),
            "{listed:?}"
        );
        assert!(
            names
                .found
                .iter()
                .all(|s| s.backend == SecretBackend::SystemdCredential)
        );
    }

    /// The environment backend is consulted only when enabled, and maps names predictably.
    /// (The end-to-end tests cover reading the real process environment.)
    #[test]
    fn environment_backend_only_when_enabled() {
        assert_eq!(
            env_var_name("github-token.v2"),
            "AIRLOCK_SECRET_GITHUB_TOKEN_V2"
        );
        let vars = [("AIRLOCK_SECRET_GITHUB_TOKEN", "from-env"), ("OTHER", "x")];
        let off = SecretStore::empty();
        assert!(!off.reads_environment());
        let e = off.get("github-token").unwrap_err();
        assert!(matches!(e, SecretError::Missing { .. }), "{e}");
        assert!(!e.to_string().contains("AIRLOCK_SECRET_"), "{e}");

        let on = SecretStore::empty().given_environment(&vars);
        assert!(on.reads_environment());
        assert_eq!(on.get("github-token").unwrap().expose(), "from-env");
        assert_eq!(on.get("GITHUB.TOKEN").unwrap().expose(), "from-env");
        assert_eq!(
            on.names().found,
            [ListedSecret {
                name: "GITHUB_TOKEN".into(),
                backend: SecretBackend::Environment
            }]
        );
        let e = on.get("gitlab-token").unwrap_err();
        assert!(
            e.to_string()
                .contains("environment variable AIRLOCK_SECRET_GITLAB_TOKEN"),
            "{e}"
        );
        let empty = SecretStore::empty().given_environment(&[("AIRLOCK_SECRET_E", "")]);
        assert!(matches!(empty.get("e"), Err(SecretError::Empty { .. })));
        assert!(
            SecretStore::empty()
                .environment_for_development()
                .describe()
                .contains("development only")
        );
    }

    #[test]
    fn kernel_keyring_backend() {
        let keyring = KernelKeyring::new();
        if let Err(e) = keyring.available() {
            eprintln!("SKIPPED kernel_keyring_backend: {e}");
            return;
        }
        let name = format!("airlock-unit-store-{}", std::process::id());
        let store = SecretStore::empty().kernel_keyring(keyring);
        let e = store.get(&name).unwrap_err();
        assert!(
            e.to_string().contains(&format!("`airlock:{name}` in @u")),
            "{e}"
        );
        keyring.set(&name, "from-keyring").unwrap();
        let got = store.get(&name);
        let listed = store.names();
        keyring.delete(&name).unwrap();
        assert_eq!(got.unwrap().expose(), "from-keyring");
        assert!(
            listed
                .found
                .iter()
                .any(|s| s.name == name && s.backend == SecretBackend::KernelKeyring),
            "{listed:?}"
        );
        assert!(store.get(&name).is_err());
    }

    /// Credentials come before the keyring, the keyring before the environment.
    #[test]
    fn backends_are_searched_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("airlock-unit-order-{}", std::process::id());
        let var = env_var_name(&name);
        let keyring = KernelKeyring::new();
        let with_keyring = keyring.available().is_ok();
        /// Deletes the key even when an assertion fails.
        struct Cleanup<'a>(&'a str);
        impl Drop for Cleanup<'_> {
            fn drop(&mut self) {
                let _ = KernelKeyring::new().delete(self.0);
            }
        }
        let _cleanup = Cleanup(&name);
        let mut store = SecretStore::empty()
            .credentials_directory(dir.path())
            .given_environment(&[(&var, "from-env")]);
        if with_keyring {
            store = store.kernel_keyring(keyring);
        }
        assert_eq!(store.get(&name).unwrap().expose(), "from-env");
        if with_keyring {
            keyring.set(&name, "from-keyring").unwrap();
            assert_eq!(store.get(&name).unwrap().expose(), "from-keyring");
        }
        std::fs::write(dir.path().join(&name), "from-credentials\n").unwrap();
        assert_eq!(store.get(&name).unwrap().expose(), "from-credentials");
        let listed = store.names().found;
        let order: Vec<SecretBackend> = listed
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.backend)
            .collect();
        if with_keyring {
            assert_eq!(
                order,
                [
                    SecretBackend::SystemdCredential,
                    SecretBackend::KernelKeyring
                ]
            );
        }
        // The environment lists its variables' (upper-case) suffixes.
        let suffix = var.trim_start_matches(ENV_PREFIX);
        assert!(
            listed
                .iter()
                .any(|s| s.name == suffix && s.backend == SecretBackend::Environment),
            "{listed:?}"
        );
        // A present but broken credential is an error, not a reason to use the keyring's.
        std::fs::write(dir.path().join(&name), "").unwrap();
        assert!(matches!(store.get(&name), Err(SecretError::Empty { .. })));
    }

    #[test]
    fn missing_secrets_name_server_setting_and_secret() {
        let store = SecretStore::with_values([("present".to_owned(), "v".to_owned())]);
        let problems = store.check_server(&server(vec![
            ("PATH", SettingValue::Literal("/usr/bin".into())),
            ("OK", SettingValue::Secret("present".into())),
            ("GITHUB_TOKEN", SettingValue::Secret("github-token".into())),
        ]));
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(
            (p.server.as_str(), p.setting.as_str(), p.secret.as_str()),
            ("github", "env.GITHUB_TOKEN", "github-token")
        );
        let text = p.to_string();
        assert!(text.contains("server `github`"), "{text}");
        assert!(text.contains("env.GITHUB_TOKEN"), "{text}");
        assert!(text.contains("secret `github-token`"), "{text}");
        assert_eq!(store.get("present").unwrap().expose(), "v");
    }

    #[test]
    fn an_empty_store_says_where_it_looked() {
        let e = SecretStore::empty().get("x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "secret `x` is not in the credential store (looked in nothing: no backend is configured)"
        );
        assert_eq!(
            SecretStore::empty().describe(),
            "nothing (no backend is configured)"
        );
    }
}
