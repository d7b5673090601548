//! Tool servers (`[[server]]`): the MCP servers whose tools programs call as
//! `tools.<name>.<tool>()`. A server is either a child process speaking MCP over stdio
//! (`command`), which the daemon starts and supervises, or a Streamable HTTP endpoint (`url`).
//! Environment variables and HTTP headers may name a secret (`{ secret = "github-token" }`)
//! instead of giving a value; the daemon resolves it from its credential store when it
//! connects, so the value never appears in the policy.

use std::path::PathBuf;

use toml::de::DeValue;

use crate::document::{Field, TableReader};
use crate::error::PolicyError;
pub use crate::sources::network::ServerNetwork;

/// One `[[server]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolServer {
    /// The namespace programs use (`tools.<name>`): a JavaScript identifier, unique.
    pub name: String,
    pub transport: ServerTransport,
    /// When the daemon starts the server.
    pub start: StartMode,
    /// How long one tool call may take before it fails with a timeout.
    pub call_timeout_ms: u64,
    /// Calls in flight to this server at once, over all executions; more wait.
    pub max_concurrent_calls: usize,
    /// `coerce`: whether trivial mismatches with the tools' schemas are coerced (`safe`, the
    /// default) or refused (`off`).
    pub coerce: crate::sources::CoercePolicy,
    /// Learn the output types of its tools from their results (`learn_types`, default
    /// true); `false` keeps no shape of its results and shows none in the SDK.
    pub learn_types: bool,
    /// `dynamic_tools`: the server really adds tools while a program runs, so a call of a
    /// tool missing from its list is let run (with a warning) instead of refused before the
    /// program starts. Default false: only a server that announces `tools.listChanged` can
    /// add tools at all, and most that announce it never do.
    pub dynamic_tools: bool,
    /// What a stdio server may reach (`confine`, `network`, `read`, `write`, `memory`,
    /// `open_files`, `processes`); not used for `url` servers.
    pub confinement: Confinement,
}

/// How a stdio server is confined (docs/sandbox.md, "Tool servers").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    pub mode: ConfineMode,
    pub network: ServerNetwork,
    /// Directories (or files) it may read, besides the system and its own install prefix.
    pub read: Vec<PathBuf>,
    /// Directories (or files) it may write.
    pub write: Vec<PathBuf>,
    /// `RLIMIT_AS` of its processes.
    pub memory_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC` (counted per user by the kernel: for a dedicated user).
    pub processes: Option<u64>,
    /// `user`: the account it runs as when the daemon runs as root (a name or a uid); `None`
    /// takes `[daemon] server_user`.
    pub user: Option<String>,
}

/// `confine = true | false | "best-effort"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConfineMode {
    /// Every layer, or the server does not start (`true`, the default).
    #[default]
    Strict,
    /// The layers the kernel has; each missing one is logged (`"best-effort"`).
    BestEffort,
    /// None: the server can reach everything the daemon's user can (`false`).
    Off,
}

/// How the daemon reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerTransport {
    /// A child process speaking MCP on stdin/stdout (stderr goes to the daemon's log).
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: Option<PathBuf>,
        /// Variables set on top of the base environment ([`BASE_PATH`], `HOME` and `TMPDIR`
        /// its scratch directory, `LANG=C.UTF-8`) and of `inherit_env`; a name given here
        /// overrides both.
        env: Vec<(String, SettingValue)>,
        /// Names of variables the server takes from the daemon's own environment (those the
        /// daemon has), over the base environment: the operator's choice, for `NODE_OPTIONS`,
        /// proxies and the like. Secrets belong in `env` as `{ secret = "…" }`.
        inherit_env: Vec<String>,
    },
    /// A Streamable HTTP endpoint (MCP 2025-03-26 and later).
    Http {
        /// `http://` or `https://` URL of the MCP endpoint, for example `https://host/mcp`.
        url: String,
        /// Sent with every request, in file order.
        headers: Vec<(String, SettingValue)>,
    },
}

/// The `PATH` a stdio server starts with unless `env` or `inherit_env` gives one: systemd's
/// default for services, so `#!/usr/bin/env node`, `npx` and `uvx` find what they would in a
/// shell.
pub const BASE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The value of an environment variable or header: written in the policy, or the name of a
/// secret in the daemon's credential store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingValue {
    Literal(String),
    Secret(String),
}

impl SettingValue {
    /// The secret this value needs, if any.
    pub fn secret(&self) -> Option<&str> {
        match self {
            SettingValue::Secret(name) => Some(name),
            SettingValue::Literal(_) => None,
        }
    }
}

impl ServerTransport {
    /// Every secret the server needs to start, in policy order (may repeat).
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        let values = match self {
            ServerTransport::Stdio { env, .. } => env,
            ServerTransport::Http { headers, .. } => headers,
        };
        values.iter().filter_map(|(_, v)| v.secret())
    }
}

/// Whether `name` can name a secret: 1 to 128 of ASCII letters, digits, `.`, `_` and `-`, so
/// it is also a valid systemd credential name and a file name.
pub fn is_secret_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// On the first call (or listing) of one of its tools.
    Lazy,
    /// When the daemon starts.
    Eager,
}

impl ToolServer {
    pub(crate) const KEYS: &'static [&'static str] = &[
        "name",
        "command",
        "url",
        "headers",
        "args",
        "cwd",
        "env",
        "inherit_env",
        "start",
        "call_timeout_ms",
        "max_concurrent_calls",
        "coerce",
        "learn_types",
        "trust",
        "sink",
        "dynamic_tools",
        "confine",
        "network",
        "read",
        "write",
        "memory",
        "open_files",
        "processes",
        "user",
    ];

    /// Keys that apply to stdio servers only.
    const CONFINEMENT_KEYS: &'static [&'static str] = &[
        "confine",
        "network",
        "read",
        "write",
        "memory",
        "open_files",
        "processes",
        "user",
    ];

    pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
    pub const MAX_CALL_TIMEOUT_MS: u64 = 3_600_000;
    pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 16;
    pub const MAX_CONCURRENT_CALLS: usize = 1024;

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let name_field = table.require("name")?;
        let name = name_field.string("a string")?;
        if !is_identifier(name) {
            return Err(name_field.invalid(format!(
                "invalid server name \"{name}\": programs call `tools.{name}.<tool>()`, so use a JavaScript identifier (letters, digits, `_` and `$`, not starting with a digit)"
            )));
        }
        crate::sources::check_not_reserved(&name_field, name)?;
        let transport = match (table.get("command"), table.get("url")) {
            (Some(_), Some(url)) => {
                return Err(url.invalid(
                    "a server has either `command` (stdio) or `url` (Streamable HTTP), not both",
                ));
            }
            (None, None) => {
                return Err(table
                    .require("command")
                    .err()
                    .unwrap_or_else(|| name_field.invalid("a server needs `command` or `url`")));
            }
            (Some(command), None) => {
                if let Some(headers) = table.get("headers") {
                    return Err(headers.invalid(
                        "`headers` applies to `url` servers; a stdio server takes `env`",
                    ));
                }
                Self::read_stdio(table, command)?
            }
            (None, Some(url)) => {
                for key in ["args", "cwd", "env", "inherit_env"]
                    .iter()
                    .chain(Self::CONFINEMENT_KEYS)
                {
                    if let Some(field) = table.get(key) {
                        return Err(field.invalid(format!(
                            "`{key}` applies to `command` servers; a `url` server takes `headers`"
                        )));
                    }
                }
                Self::read_http(table, url)?
            }
        };
        let start = match table.get("start") {
            None => StartMode::Lazy,
            Some(field) => match field.string("\"lazy\" or \"eager\"")? {
                "lazy" => StartMode::Lazy,
                "eager" => StartMode::Eager,
                other => {
                    return Err(field.invalid(format!(
                        "unknown start mode \"{other}\" (expected \"lazy\" or \"eager\")"
                    )));
                }
            },
        };
        let call_timeout_ms = match table.get("call_timeout_ms") {
            Some(field) => field.u64_in(1..=Self::MAX_CALL_TIMEOUT_MS)?,
            None => Self::DEFAULT_CALL_TIMEOUT_MS,
        };
        let max_concurrent_calls = match table.get("max_concurrent_calls") {
            Some(field) => field.usize_in(1..=Self::MAX_CONCURRENT_CALLS)?,
            None => Self::DEFAULT_MAX_CONCURRENT_CALLS,
        };
        let learn_types = match table.get("learn_types") {
            Some(field) => field.boolean()?,
            None => true,
        };
        let dynamic_tools = match table.get("dynamic_tools") {
            Some(field) => field.boolean()?,
            None => false,
        };
        Ok(ToolServer {
            name: name.to_owned(),
            transport,
            start,
            call_timeout_ms,
            max_concurrent_calls,
            coerce: crate::sources::CoercePolicy::read(table)?,
            learn_types,
            dynamic_tools,
            confinement: Confinement::read(table)?,
        })
    }
    fn read_stdio(
        table: &TableReader<'_>,
        command_field: Field<'_>,
    ) -> Result<ServerTransport, PolicyError> {
        let command = command_field.string("a string (the server's executable)")?;
        if command.is_empty() {
            return Err(command_field.invalid("the command is empty"));
        }
        let mut args = Vec::new();
        if let Some(field) = table.get("args") {
            for arg in field.array("an array of strings")? {
                args.push(arg.string("a string")?.to_owned());
            }
        }
        let cwd = match table.get("cwd") {
            Some(field) => {
                let dir = field.string("a string (a directory)")?;
                if !dir.starts_with('/') {
                    return Err(field.invalid(format!("\"{dir}\" is not an absolute path")));
                }
                Some(PathBuf::from(dir))
            }
            None => None,
        };
        let env = match table.get("env") {
            Some(field) => read_settings(field, "a table of environment variables", |key| {
                !key.is_empty() && !key.contains('=') && !key.contains('\0')
            })?,
            None => Vec::new(),
        };
        let mut inherit_env: Vec<String> = Vec::new();
        if let Some(field) = table.get("inherit_env") {
            for item in field.array("an array of environment variable names")? {
                let name = item.string("a string (an environment variable's name)")?;
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(
                        item.invalid(format!("\"{name}\" is not an environment variable's name"))
                    );
                }
                // The daemon's development secrets: a server gets its own secrets through
                // `{ secret = "…" }` (and has them redacted from what it says), never the
                // daemon's store.
                if name.starts_with("AIRLOCK_SECRET_") {
                    return Err(item.invalid(format!(
                        "\"{name}\" is one of the daemon's secrets: give the server its secret with `env = {{ NAME = {{ secret = \"…\" }} }}` instead"
                    )));
                }
                if !inherit_env.iter().any(|n| n == name) {
                    inherit_env.push(name.to_owned());
                }
            }
        }
        Ok(ServerTransport::Stdio {
            command: command.to_owned(),
            args,
            cwd,
            env,
            inherit_env,
        })
    }

    fn read_http(
        table: &TableReader<'_>,
        url_field: Field<'_>,
    ) -> Result<ServerTransport, PolicyError> {
        let url = url_field.string("a string (an http:// or https:// URL)")?;
        check_http_url(&url_field, url, "Streamable HTTP servers", "headers")?;
        let headers = match table.get("headers") {
            Some(field) => read_settings(field, "a table of HTTP headers", is_header_name)?,
            None => Vec::new(),
        };
        Ok(ServerTransport::Http {
            url: url.to_owned(),
            headers,
        })
    }
}

impl Confinement {
    /// Largest `memory` (1 TiB) and `open_files`/`processes` (2^20) accepted.
    const MAX_MEMORY: u64 = 1 << 40;
    const MAX_COUNT: u64 = 1 << 20;

    fn read(table: &TableReader<'_>) -> Result<Confinement, PolicyError> {
        let mode = match table.get("confine") {
            None => ConfineMode::Strict,
            Some(field) => match field.value() {
                DeValue::Boolean(true) => ConfineMode::Strict,
                DeValue::Boolean(false) => ConfineMode::Off,
                DeValue::String(s) if s == "best-effort" => ConfineMode::BestEffort,
                _ => return Err(field.wrong_type("true, false or \"best-effort\"")),
            },
        };
        let network = crate::sources::network::read(table.get("network"))?;
        // The network is cut by the confinement's namespace: without it a "none" or a list
        // would be the host's network, silently.
        if mode == ConfineMode::Off
            && network != ServerNetwork::Host
            && let Some(field) = table.get("network")
        {
            return Err(field.invalid(
                "a network other than \"host\" is enforced by the confinement: remove `confine = false` (or the `network` key)",
            ));
        }
        let paths = |key: &str| -> Result<Vec<PathBuf>, PolicyError> {
            let Some(field) = table.get(key) else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for item in field.array("an array of absolute paths")? {
                let path = item.string("a string (an absolute path)")?;
                if !path.starts_with('/') || path.split('/').any(|part| part == "..") {
                    return Err(
                        item.invalid(format!("\"{path}\" is not an absolute path without `..`"))
                    );
                }
                out.push(PathBuf::from(path));
            }
            Ok(out)
        };
        let memory_bytes = table
            .get("memory")
            .map(|f| f.byte_size_in(16 << 20..=Self::MAX_MEMORY))
            .transpose()?;
        let count = |key: &str| {
            table
                .get(key)
                .map(|f| f.u64_in(1..=Self::MAX_COUNT))
                .transpose()
        };
        Ok(Confinement {
            mode,
            network,
            read: paths("read")?,
            write: paths("write")?,
            memory_bytes,
            open_files: count("open_files")?,
            processes: count("processes")?,
            user: table
                .get("user")
                .map(|f| crate::daemon_settings::account(&f))
                .transpose()?,
        })
    }
}

/// An `http`/`https` URL with a host and no credentials in it (they would be logged and
/// shown). `what` names the users of the URL in the scheme error, `secrets_key` where
/// credentials belong instead.
pub(crate) fn check_http_url(
    field: &Field<'_>,
    url: &str,
    what: &str,
    secrets_key: &str,
) -> Result<(), PolicyError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(field.invalid(format!(
            "\"{url}\" is not a URL (expected http://host[:port]/path or https://…)"
        )));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(field.invalid(format!(
            "unsupported scheme \"{scheme}\" ({what} use http or https)"
        )));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(field.invalid(format!("\"{url}\" has no host")));
    }
    if authority.contains('@') {
        return Err(field.invalid(format!(
            "credentials in the URL would be logged and shown; put them in `{secrets_key}` with a secret reference"
        )));
    }
    Ok(())
}

/// Reads a table of names to values, each a string or `{ secret = "name" }`, in file order
/// (`env`, and the `headers` of `[[server]]` and `[[graphql]]`).
pub(crate) fn read_settings(
    field: Field<'_>,
    expected: &'static str,
    valid_name: impl Fn(&str) -> bool,
) -> Result<Vec<(String, SettingValue)>, PolicyError> {
    let mut out = Vec::new();
    for (key, value) in field.entries(expected)? {
        if !valid_name(&key) {
            return Err(value.invalid(format!("\"{key}\" is not a valid name here")));
        }
        out.push((key, setting_value(&value)?));
    }
    Ok(out)
}

/// One value written as a string or `{ secret = "name" }` (also used by `[[openapi]]` auth).
pub(crate) fn setting_value(value: &Field<'_>) -> Result<SettingValue, PolicyError> {
    Ok(match value.value() {
        DeValue::String(text) => SettingValue::Literal(text.to_string()),
        DeValue::Table(_) => {
            let entries = value.entries("{ secret = \"name\" }")?;
            let [(k, secret)] = entries.as_slice() else {
                return Err(value.invalid(
                    "a secret reference is written { secret = \"name\" } and has no other keys",
                ));
            };
            if k != "secret" {
                return Err(secret.invalid(format!(
                    "unknown key \"{k}\" (a secret reference is written {{ secret = \"name\" }})"
                )));
            }
            let name = secret.string("a string (the secret's name)")?;
            if !is_secret_name(name) {
                return Err(secret.invalid(format!(
                    "invalid secret name \"{name}\" (use 1 to 128 ASCII letters, digits, `.`, `_` and `-`)"
                )));
            }
            SettingValue::Secret(name.to_owned())
        }
        _ => return Err(value.wrong_type("a string or { secret = \"name\" }")),
    })
}

/// An HTTP header name (RFC 9110 token characters).
pub(crate) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A JavaScript identifier as `tools.<name>` needs it (ASCII only, to keep names unambiguous).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && name.len() <= 64
}

#[cfg(test)]
mod tests {
    use crate::sources::server::{ServerTransport, SettingValue, StartMode};

    use crate::sources::test_support::{assert_refused, parse};

    #[test]
    fn stdio_servers_are_confined_unless_the_policy_says_otherwise() {
        use crate::sources::server::{ConfineMode, ServerNetwork};
        let p = parse(
            r#"
[[server]]
name = "plain"
command = "node"

[[server]]
name = "files"
command = "node"
confine = "best-effort"
network = "none"
read = ["/srv/docs"]
write = ["/srv/out"]
memory = "4GiB"
open_files = 1024
processes = 64

[[server]]
name = "trusted"
command = "node"
confine = false
"#,
        )
        .unwrap();
        let plain = &p.servers[0].confinement;
        assert_eq!(plain.mode, ConfineMode::Strict);
        assert_eq!(plain.network, ServerNetwork::Host);
        assert!(plain.read.is_empty() && plain.write.is_empty());
        let files = &p.servers[1].confinement;
        assert_eq!(files.mode, ConfineMode::BestEffort);
        assert_eq!(files.network, ServerNetwork::None);
        assert_eq!(files.read, [std::path::PathBuf::from("/srv/docs")]);
        assert_eq!(files.write, [std::path::PathBuf::from("/srv/out")]);
        assert_eq!(files.memory_bytes, Some(4 << 30));
        assert_eq!((files.open_files, files.processes), (Some(1024), Some(64)));
        assert_eq!(p.servers[2].confinement.mode, ConfineMode::Off);
        // An unconfined server is worth a warning, at its name.
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        let warning = p.warnings[0].to_string();
        assert!(
            warning.contains("policy.toml:18:") && warning.contains("\"trusted\" runs unconfined"),
            "{warning}"
        );
    }

    #[test]
    fn confinement_settings_are_checked() {
        let server = |extra: &str| {
            parse(&format!(
                "[[server]]\nname = \"s\"\ncommand = \"node\"\n{extra}\n"
            ))
            .unwrap_err()
        };
        assert!(server("confine = \"sometimes\"").contains("true, false or \"best-effort\""));
        assert!(server("network = \"lan\"").contains("unknown network \"lan\""));
        assert!(server("network = 443").contains("\"host\", \"none\" or a list"));
        assert!(server("network = [\"api.github.com\"]").contains("needs a port"));
        assert!(server("network = [\"169.254.169.254:80\"]").contains("a link-local address"));
        // Without the confinement's namespace a "none" would be the host's network.
        let open = server("network = \"none\"\nconfine = false");
        assert!(
            open.contains("server[0].network") && open.contains("remove `confine = false`"),
            "{open}"
        );
        assert!(
            server("network = [\"a.example:443\"]\nconfine = false").contains("confine = false")
        );
        assert!(server("read = [\"relative/dir\"]").contains("not an absolute path"));
        assert!(server("write = [\"/srv/../etc\"]").contains("without `..`"));
        assert!(server("memory = \"1KiB\"").contains("memory"));
        let http = parse(
            "[[server]]\nname = \"h\"\nurl = \"https://x.example/mcp\"\nnetwork = \"none\"\n",
        )
        .unwrap_err();
        assert!(
            http.contains("`network` applies to `command` servers"),
            "{http}"
        );
    }

    #[test]
    fn a_network_list_names_hosts_and_ports() {
        use crate::sources::server::ServerNetwork;
        let p = parse(
            "[[server]]\nname = \"gh\"\ncommand = \"node\"\nnetwork = [\"api.github.com:443\", \"*.githubusercontent.com:443\"]\n\n[[server]]\nname = \"quiet\"\ncommand = \"node\"\nnetwork = []\n",
        )
        .unwrap();
        let gh = &p.servers[0].confinement.network;
        assert!(matches!(gh, ServerNetwork::Allow(rules) if rules.len() == 2));
        assert_eq!(
            gh.allows("raw.githubusercontent.com", 443)
                .map(|r| r.text.as_str()),
            Some("*.githubusercontent.com:443")
        );
        assert!(gh.allows("api.github.com", 80).is_none());
        assert!(gh.allows("github.com", 443).is_none());
        // An empty list: the proxy refuses (and logs) every connection.
        assert_eq!(
            p.servers[1].confinement.network,
            ServerNetwork::Allow(Vec::new())
        );
        assert!(
            p.servers[1]
                .confinement
                .network
                .allows("a.example", 443)
                .is_none()
        );
    }

    #[test]
    fn user_names_an_account() {
        let p = parse(
            "[daemon]\nserver_user = \"airlock-servers\"\n[[server]]\nname = \"a\"\ncommand = \"x\"\nuser = \"65534\"\n[[server]]\nname = \"b\"\ncommand = \"x\"\n",
        )
        .unwrap();
        assert_eq!(p.daemon.server_user.as_deref(), Some("airlock-servers"));
        assert_eq!(p.servers[0].confinement.user.as_deref(), Some("65534"));
        assert_eq!(p.servers[1].confinement.user, None);
        for bad in ["\"\"", "\"-x\"", "\"a b\"", "\"99999999999\"", "1"] {
            let e = parse(&format!(
                "[[server]]\nname = \"a\"\ncommand = \"x\"\nuser = {bad}\n"
            ))
            .unwrap_err();
            assert!(e.contains("server[0].user"), "{bad}: {e}");
        }
        let http =
            parse("[[server]]\nname = \"h\"\nurl = \"https://x.example/mcp\"\nuser = \"nobody\"\n")
                .unwrap_err();
        assert!(
            http.contains("`user` applies to `command` servers"),
            "{http}"
        );
    }

    /// `inherit_env` names variables; a `url` server has no environment to take them into.
    #[test]
    fn inherit_env_takes_names_for_stdio_servers_only() {
        let bad = parse("[[server]]\nname = \"a\"\ncommand = \"x\"\ninherit_env = [\"A=B\"]\n")
            .unwrap_err();
        assert!(
            bad.contains("server[0].inherit_env")
                && bad.contains("is not an environment variable's name"),
            "{bad}"
        );
        let not_list = parse("[[server]]\nname = \"a\"\ncommand = \"x\"\ninherit_env = \"PATH\"\n")
            .unwrap_err();
        assert!(
            not_list.contains("an array of environment variable names"),
            "{not_list}"
        );
        let secret = parse(
            "[[server]]\nname = \"a\"\ncommand = \"x\"\ninherit_env = [\"AIRLOCK_SECRET_GITHUB_TOKEN\"]\n",
        )
        .unwrap_err();
        assert!(
            secret.contains("is one of the daemon's secrets") && secret.contains("secret = "),
            "{secret}"
        );
        let http = parse(
            "[[server]]\nname = \"h\"\nurl = \"https://x.example/mcp\"\ninherit_env = [\"PATH\"]\n",
        )
        .unwrap_err();
        assert!(
            http.contains("`inherit_env` applies to `command` servers"),
            "{http}"
        );
    }

    /// `dynamic_tools` is off unless a server turns it on, and only a boolean turns it on.
    #[test]
    fn dynamic_tools_is_off_unless_a_server_says_so() {
        let p = parse(
            "[[server]]\nname = \"a\"\ncommand = \"x\"\n\n[[server]]\nname = \"b\"\ncommand = \"x\"\ndynamic_tools = true\n",
        )
        .unwrap();
        assert!(!p.servers[0].dynamic_tools);
        assert!(p.servers[1].dynamic_tools);
        let wrong = parse("[[server]]\nname = \"a\"\ncommand = \"x\"\ndynamic_tools = \"yes\"\n")
            .unwrap_err();
        assert!(
            wrong.contains("dynamic_tools") && wrong.contains("true or false"),
            "{wrong}"
        );
    }

    /// `learn_types` is on unless a source turns it off, and only a boolean turns it off.
    #[test]
    fn learn_types_is_a_per_source_switch() {
        let p = parse(
            "[[server]]\nname = \"a\"\ncommand = \"x\"\n\n[[server]]\nname = \"b\"\ncommand = \"x\"\nlearn_types = false\n\n[[openapi]]\nname = \"o\"\nspec = \"/x.json\"\nlearn_types = false\n\n[[graphql]]\nname = \"g\"\nschema = \"/s.graphql\"\nendpoint = \"https://x.example/graphql\"\nlearn_types = false\n",
        )
        .unwrap();
        assert!(p.servers[0].learn_types);
        assert!(!p.servers[1].learn_types);
        assert!(!p.openapi[0].learn_types && !p.graphql[0].learn_types);
        let wrong =
            parse("[[server]]\nname = \"a\"\ncommand = \"x\"\nlearn_types = \"no\"\n").unwrap_err();
        assert!(
            wrong.contains("learn_types") && wrong.contains("true or false"),
            "{wrong}"
        );
    }

    #[test]
    fn reads_a_stdio_server() {
        let p = parse(
            r#"
[[server]]
name = "everything"
command = "node"
args = ["dist/index.js", "stdio"]
cwd = "/srv/mcp"
env = { B = "2", A = "1" }
inherit_env = ["NODE_OPTIONS", "HTTPS_PROXY", "NODE_OPTIONS"]
start = "eager"
call_timeout_ms = 5000
max_concurrent_calls = 4
"#,
        )
        .unwrap();
        let s = &p.servers[0];
        assert_eq!(s.name, "everything");
        assert_eq!(s.start, StartMode::Eager);
        assert_eq!(s.call_timeout_ms, 5000);
        assert_eq!(s.max_concurrent_calls, 4);
        let ServerTransport::Stdio {
            command,
            args,
            cwd,
            env,
            inherit_env,
        } = &s.transport
        else {
            panic!("not stdio: {:?}", s.transport);
        };
        assert_eq!(command, "node");
        // Named once each, in file order.
        assert_eq!(inherit_env, &["NODE_OPTIONS", "HTTPS_PROXY"]);
        assert_eq!(args, &["dist/index.js", "stdio"]);
        assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/srv/mcp")));
        // File order, not sorted.
        assert_eq!(
            env,
            &[
                ("B".into(), SettingValue::Literal("2".into())),
                ("A".into(), SettingValue::Literal("1".into()))
            ]
        );
    }

    #[test]
    fn reads_secret_references_and_an_http_server() {
        let p = parse(
            r#"
[[server]]
name = "github"
command = "github-mcp"
env = { PATH = "/usr/bin", GITHUB_TOKEN = { secret = "github-token" } }

[[server]]
name = "remote"
url = "https://mcp.example.com/mcp"
headers = { Authorization = { secret = "remote.auth" }, "X-Team" = "blue" }
"#,
        )
        .unwrap();
        let ServerTransport::Stdio { env, .. } = &p.servers[0].transport else {
            panic!("not stdio");
        };
        assert_eq!(env[1].1, SettingValue::Secret("github-token".into()));
        assert_eq!(
            p.servers[0].transport.secrets().collect::<Vec<_>>(),
            ["github-token"]
        );
        let ServerTransport::Http { url, headers } = &p.servers[1].transport else {
            panic!("not http");
        };
        assert_eq!(url, "https://mcp.example.com/mcp");
        assert_eq!(
            headers,
            &[
                (
                    "Authorization".into(),
                    SettingValue::Secret("remote.auth".into())
                ),
                ("X-Team".into(), SettingValue::Literal("blue".into()))
            ]
        );
    }

    #[test]
    fn bad_http_servers_and_secret_references_are_located() {
        let cases = [
            (
                "url = \"ftp://x/mcp\"",
                "server[0].url",
                "unsupported scheme",
            ),
            (
                "url = \"https://u:p@x/mcp\"",
                "server[0].url",
                "credentials in the URL",
            ),
            ("url = \"https:///mcp\"", "server[0].url", "has no host"),
            (
                "command = \"x\"\nurl = \"http://x/\"",
                "server[0].url",
                "not both",
            ),
            (
                "url = \"http://x/\"\nenv = { A = \"b\" }",
                "server[0].env",
                "`headers`",
            ),
            (
                "command = \"x\"\nheaders = { A = \"b\" }",
                "server[0].headers",
                "takes `env`",
            ),
            (
                "url = \"http://x/\"\nheaders = { \"A B\" = \"b\" }",
                "server[0].headers.A B",
                "not a valid name",
            ),
            (
                "command = \"x\"\nenv = { T = { secret = \"a/b\" } }",
                "server[0].env.T.secret",
                "invalid secret name",
            ),
            (
                "command = \"x\"\nenv = { T = { secrte = \"a\" } }",
                "server[0].env.T.secrte",
                "unknown key",
            ),
            (
                "command = \"x\"\nenv = { T = { secret = \"a\", b = 1 } }",
                "server[0].env.T",
                "no other keys",
            ),
            (
                "command = \"x\"\nenv = { T = 1 }",
                "server[0].env.T",
                "{ secret",
            ),
        ];
        assert_refused("[[server]]\nname = \"a\"\n", &cases);
        let e = parse("[[server]]\nname = \"a\"\n").unwrap_err();
        assert!(e.contains("server[0].command"), "{e}");
    }

    #[test]
    fn defaults() {
        let p = parse("[[server]]\nname = \"t\"\ncommand = \"x\"\n").unwrap();
        assert_eq!(p.servers[0].start, StartMode::Lazy);
        assert_eq!(p.servers[0].call_timeout_ms, 60_000);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = parse("[[server]]\nname = \"my-server\"\ncommand = \"x\"\n").unwrap_err();
        assert!(e.starts_with("/etc/airlock/policy.toml:2:"), "{e}");
        assert!(e.contains("server[0].name"), "{e}");
        assert!(e.contains("JavaScript identifier"), "{e}");

        let e = parse("[[server]]\nname = \"a\"\n").unwrap_err();
        assert!(e.contains("server[0].command"), "{e}");

        let e = parse("[[server]]\nname = \"a\"\ncommand = \"x\"\nstart = \"now\"\n").unwrap_err();
        assert!(e.contains("server[0].start"), "{e}");

        let e = parse("[[server]]\nname = \"a\"\ncommand = \"x\"\n[[server]]\nname = \"a\"\ncommand = \"y\"\n")
            .unwrap_err();
        assert!(e.contains("duplicate server name"), "{e}");
        assert!(e.starts_with("/etc/airlock/policy.toml:5:"), "{e}");

        let e = parse("[[server]]\nname = \"a\"\ncommand = \"x\"\ncomand = \"y\"\n").unwrap_err();
        assert!(e.contains("comand"), "{e}");
    }
}
