//! Tool servers (`[[server]]`): the MCP servers whose tools programs call as
//! `tools.<name>.<tool>()`. Only stdio servers exist so far; the daemon starts and supervises
//! them.

use std::path::PathBuf;

use toml::de::DeValue;

use crate::document::TableReader;
use crate::policy_file::PolicyError;

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
}

/// How the daemon reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerTransport {
    /// A child process speaking MCP on stdin/stdout (stderr goes to the daemon's log).
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: Option<PathBuf>,
        /// The server's whole environment (nothing is inherited from the daemon).
        env: Vec<(String, String)>,
    },
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
        "args",
        "cwd",
        "env",
        "start",
        "call_timeout_ms",
        "max_concurrent_calls",
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
        let command = table
            .require("command")?
            .string("a string (the server's executable)")?;
        if command.is_empty() {
            return Err(table.require("command")?.invalid("the command is empty"));
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
        let mut env = Vec::new();
        if let Some(field) = table.get("env") {
            for (key, value) in field.entries("a table of environment variables")? {
                match value.value() {
                    DeValue::String(text) => env.push((key, text.to_string())),
                    DeValue::Table(_) => {
                        return Err(value.invalid(
                            "secret references are not supported yet (they arrive with the credential store); give a string",
                        ));
                    }
                    _ => return Err(value.wrong_type("a string")),
                }
            }
        }
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
            Some(field) => field.u64_in(1..=Self::MAX_CONCURRENT_CALLS as u64)? as usize,
            None => Self::DEFAULT_MAX_CONCURRENT_CALLS,
        };
        Ok(ToolServer {
            name: name.to_owned(),
            transport: ServerTransport::Stdio {
                command: command.to_owned(),
                args,
                cwd,
                env,
            },
            start,
            call_timeout_ms,
            max_concurrent_calls,
        })
    }
}

/// A JavaScript identifier as `tools.<name>` needs it (ASCII only, to keep names unambiguous).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && name.len() <= 64
}

#[cfg(test)]
mod tests {
    use crate::Policy;
    use crate::tool_server::{ServerTransport, StartMode};

    fn parse(text: &str) -> Result<Policy, String> {
        Policy::parse(text, "/etc/airlock/policy.toml").map_err(|e| e.to_string())
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
        } = &s.transport;
        assert_eq!(command, "node");
        assert_eq!(args, &["dist/index.js", "stdio"]);
        assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/srv/mcp")));
        // File order, not sorted.
        assert_eq!(env, &[("B".into(), "2".into()), ("A".into(), "1".into())]);
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

        let e =
            parse("[[server]]\nname = \"a\"\ncommand = \"x\"\nenv = { T = { secret = \"t\" } }\n")
                .unwrap_err();
        assert!(e.contains("server[0].env.T"), "{e}");
        assert!(e.contains("secret references"), "{e}");

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
