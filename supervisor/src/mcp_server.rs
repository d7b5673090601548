//! A tool source backed by one MCP server (`[[server]]` in the policy), reached over stdio
//! with the official Rust SDK (`rmcp`).
//!
//! The daemon spawns the server itself (with only the environment the policy gives it), on
//! first use unless the policy says `start = "eager"`, logs its stderr under its name, caches
//! its tool list, and starts it again on the next call after it died. Every call has the
//! server's timeout and waits for one of its concurrency permits.

use crate::argument_schema::ArgumentSchema;
use crate::secret_store::SecretStore;
use crate::tool_source::{
    CallContext, ToolDescriptor, ToolError, ToolFuture, ToolSource, ToolsFuture,
};
use airlock_policy::{ServerTransport, SettingValue, StartMode, ToolServer};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Mutex, Semaphore};
use tracing::{Instrument, info, info_span, warn};

/// How long a server may take to start and answer `initialize` and `tools/list`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One configured MCP server.
#[derive(Debug)]
pub struct McpServer {
    config: ToolServer,
    /// Where `{ secret = "…" }` values in `env` and `headers` come from, read at each start.
    secrets: Arc<SecretStore>,
    connection: Mutex<Option<Connection>>,
    permits: Semaphore,
    /// Failed starts in a row, and when the next attempt is allowed.
    backoff: std::sync::Mutex<Backoff>,
}

/// Start attempts after failures wait 0.5 s, 1 s, 2 s, … up to 30 s, so a server that cannot
/// start does not turn every tool call into a process spawn.
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
    retry_at: Option<tokio::time::Instant>,
    last_error: String,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(30);

    fn delay(failures: u32) -> Duration {
        Self::FIRST
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(Self::MAX)
    }
}

/// A running server and what we learnt from it.
struct Connection {
    service: RunningService<RoleClient, ()>,
    catalogue: Catalogue,
}

/// A running server's tools; cloning it is cheap, so calls need not hold the connection lock.
#[derive(Debug, Clone)]
struct Catalogue {
    tools: Arc<[ServerTool]>,
    /// The same tools as programs see them, for `ToolSource::tools`.
    descriptors: Arc<[ToolDescriptor]>,
}

/// One tool of a running server.
#[derive(Debug, Clone)]
struct ServerTool {
    /// As programs see it (sanitised identifier).
    descriptor: ToolDescriptor,
    /// The server's own name, which is what is sent.
    original: String,
    /// Its `inputSchema`, compiled once per server start.
    schema: Arc<ArgumentSchema>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.catalogue.tools.len())
            .finish()
    }
}

impl McpServer {
    pub fn new(config: ToolServer, secrets: Arc<SecretStore>) -> McpServer {
        let permits = Semaphore::new(config.max_concurrent_calls);
        McpServer {
            config,
            secrets,
            connection: Mutex::new(None),
            permits,
            backoff: std::sync::Mutex::new(Backoff::default()),
        }
    }

    pub fn config(&self) -> &ToolServer {
        &self.config
    }

    /// The running server's peer and tool table, starting the server if needed.
    async fn connected(&self) -> Result<(Peer<RoleClient>, Catalogue), ToolError> {
        let mut guard = self.connection.lock().await;
        if let Some(conn) = guard.as_ref() {
            if !conn.service.is_transport_closed() {
                return Ok((conn.service.peer().clone(), conn.catalogue.clone()));
            }
            warn!(server = %self.config.name, "MCP server is gone; starting it again");
            *guard = None;
        }
        {
            let backoff = self
                .backoff
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(at) = backoff
                .retry_at
                .filter(|at| *at > tokio::time::Instant::now())
            {
                let wait = at - tokio::time::Instant::now();
                return Err(self.unavailable(format!(
                    "it failed to start {} time(s) in a row ({}); next attempt in {} ms",
                    backoff.failures,
                    backoff.last_error,
                    wait.as_millis()
                )));
            }
        }
        let started = tokio::time::timeout(START_TIMEOUT, self.start())
            .await
            .map_err(|_| {
                self.unavailable(format!(
                    "it did not finish starting within {START_TIMEOUT:?}"
                ))
            })
            .and_then(|r| r);
        let conn = {
            let mut backoff = self
                .backoff
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match started {
                Ok(conn) => {
                    *backoff = Backoff::default();
                    conn
                }
                Err(e) => {
                    backoff.failures += 1;
                    backoff.retry_at =
                        Some(tokio::time::Instant::now() + Backoff::delay(backoff.failures));
                    backoff.last_error = e.message.clone();
                    warn!(server = %self.config.name, failures = backoff.failures, error = %e.message, "MCP server failed to start");
                    return Err(e);
                }
            }
        };
        let answer = (conn.service.peer().clone(), conn.catalogue.clone());
        *guard = Some(conn);
        Ok(answer)
    }

    async fn start(&self) -> Result<Connection, ToolError> {
        let name = &self.config.name;
        let ServerTransport::Stdio {
            command,
            args,
            cwd,
            env,
        } = &self.config.transport
        else {
            return Err(self.unavailable("Streamable HTTP servers are being wired in".into()));
        };
        let env = self.resolve("env", env)?;
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            // Never leave a server running without the daemon that talks to it.
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        // SAFETY: runs in the child between fork and exec and makes one async-signal-safe
        // call. The signal fires when the forking *thread* exits: servers are started from
        // runtime worker threads, which live as long as the daemon.
        unsafe {
            cmd.pre_exec(|| {
                // A server must not outlive a daemon that was killed without its shutdown.
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) == -1
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (transport, stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.unavailable(format!("cannot start `{command}`: {e}")))?;
        if let Some(stderr) = stderr {
            let span = info_span!("mcp_server", server = %name);
            tokio::spawn(
                async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        info!(target: "airlock::mcp_server::stderr", "{line}");
                    }
                }
                .instrument(span),
            );
        }
        let service = ()
            .serve(transport)
            .await
            .map_err(|e| self.unavailable(format!("the MCP handshake failed: {e}")))?;
        let listed = service
            .list_all_tools()
            .await
            .map_err(|e| self.unavailable(format!("tools/list failed: {e}")))?;
        let tools = identifiers(listed.iter().map(|t| t.name.to_string()))
            .into_iter()
            .zip(listed)
            .map(|(id, tool)| {
                let input_schema = Value::Object((*tool.input_schema).clone());
                ServerTool {
                    schema: Arc::new(ArgumentSchema::compile(&input_schema)),
                    descriptor: ToolDescriptor {
                        name: id,
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema,
                    },
                    original: tool.name.to_string(),
                }
            })
            .collect::<Vec<_>>();
        info!(server = %name, tools = tools.len(), "MCP server started");
        let descriptors = tools.iter().map(|t| t.descriptor.clone()).collect();
        Ok(Connection {
            service,
            catalogue: Catalogue {
                tools: tools.into(),
                descriptors,
            },
        })
    }

    /// The values of `env` or `headers`, secrets read from the store now (so a secret set or
    /// rotated while the daemon runs is used at the next start). A missing secret fails this
    /// server only, and the error names the secret and the key, never a value.
    fn resolve(
        &self,
        table: &str,
        settings: &[(String, SettingValue)],
    ) -> Result<Vec<(String, String)>, ToolError> {
        settings
            .iter()
            .map(|(key, value)| match value {
                SettingValue::Literal(text) => Ok((key.clone(), text.clone())),
                SettingValue::Secret(name) => match self.secrets.get(name) {
                    Ok(secret) => Ok((key.clone(), secret.expose().to_owned())),
                    Err(e) => Err(self
                        .unavailable(format!("{table}.{key} needs a secret: {e}"))
                        .with_hint(format!(
                            "the operator provides it with `airlock secret set {name}` (value on stdin) or as the systemd credential `{name}`"
                        ))),
                },
            })
            .collect()
    }

    fn unavailable(&self, why: String) -> ToolError {
        ToolError::new(
            "server_unavailable",
            format!("tool server `{}` is unavailable: {why}", self.config.name),
        )
        .with_hint("this is a problem of the daemon's configuration or the server, not of the program; the operator should check the airlockd log")
    }

    /// Stops the server, if it runs.
    pub async fn shutdown(&self) {
        if let Some(conn) = self.connection.lock().await.take() {
            let _ = conn.service.cancel().await;
        }
    }

    async fn call_tool(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| self.unavailable("the daemon is shutting down".into()))?;
        let (peer, catalogue) = self.connected().await?;
        let Some(found) = catalogue.tools.iter().find(|t| t.descriptor.name == tool) else {
            return Err(ToolError::new(
                "unknown_tool",
                format!("server `{}` has no tool named `{tool}`", self.config.name),
            ));
        };
        // Nothing reaches the server for a call that cannot be valid.
        found
            .schema
            .check(&format!("{}.{tool}", self.config.name), &args)?;
        let Value::Object(arguments) = args else {
            return Err(ToolError::new(
                "invalid_arguments",
                "arguments must be an object",
            ));
        };
        let params = CallToolRequestParams::new(found.original.clone()).with_arguments(arguments);
        let timeout = Duration::from_millis(self.config.call_timeout_ms);
        let result = tokio::time::timeout(timeout, peer.call_tool(params))
            .await
            .map_err(|_| {
                ToolError::new(
                    "timeout",
                    format!(
                        "{}.{tool} did not answer within {} ms",
                        self.config.name, self.config.call_timeout_ms
                    ),
                )
                .with_hint("the server's call_timeout_ms is set in the policy")
            })?
            .map_err(|e| {
                ToolError::new(
                    "upstream_error",
                    format!("calling {}.{tool} failed: {e}", self.config.name),
                )
            })?;
        to_value(&self.config.name, tool, result)
    }
}

impl ToolSource for McpServer {
    fn namespace(&self) -> &str {
        &self.config.name
    }

    fn tools(&self) -> ToolsFuture<'_> {
        Box::pin(async move {
            let (_, catalogue) = self.connected().await?;
            Ok(catalogue.descriptors)
        })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, _ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(self.call_tool(tool, args))
    }

    fn starts_eagerly(&self) -> bool {
        self.config.start == StartMode::Eager
    }

    fn shutdown(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(McpServer::shutdown(self))
    }
}

/// Maps an MCP tool result to the value the program receives:
/// - `isError: true` → a `ToolError` carrying the server's text;
/// - `structuredContent` when present;
/// - otherwise one text block → its JSON value if it is JSON, else the string;
/// - otherwise (several blocks, images, resources) → an array of the content blocks as MCP
///   defines them (`{type: "text", text}`, `{type: "image", data, mimeType}`, …).
fn to_value(server: &str, tool: &str, result: CallToolResult) -> Result<Value, ToolError> {
    let texts = || -> String {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if result.is_error == Some(true) {
        let message = texts();
        return Err(ToolError::new(
            "upstream_error",
            format!(
                "{server}.{tool} failed: {}",
                if message.is_empty() {
                    "the server reported an error without a message"
                } else {
                    &message
                }
            ),
        ));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    match result.content.as_slice() {
        [] => Ok(Value::Null),
        [ContentBlock::Text(text)] => {
            Ok(serde_json::from_str(&text.text)
                .unwrap_or_else(|_| Value::String(text.text.clone())))
        }
        blocks => serde_json::to_value(blocks).map_err(|e| {
            ToolError::new(
                "upstream_error",
                format!("cannot represent the result of {server}.{tool}: {e}"),
            )
        }),
    }
}

/// Program-facing identifiers for a server's tool names, in the same order: characters that
/// cannot appear in a JavaScript identifier become `_`, a leading digit gets a `_` prefix, and
/// names that collide after that get `_2`, `_3`, … in the order of their original names (so
/// the result does not depend on the order the server lists them in). A name that already is
/// an identifier keeps it.
pub fn identifiers(names: impl Iterator<Item = String>) -> Vec<String> {
    let names: Vec<String> = names.collect();
    let base: Vec<String> = names.iter().map(|n| sanitize(n)).collect();
    // Originals that are valid identifiers own their name; others queue up in sorted order.
    let mut taken: HashMap<String, ()> = names
        .iter()
        .filter(|n| sanitize(n) == **n)
        .map(|n| (n.clone(), ()))
        .collect();
    let mut order: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        order.insert(n.as_str(), i);
    }
    let mut out = base.clone();
    for (original, &i) in &order {
        if sanitize(original) == *original {
            continue;
        }
        let mut candidate = base[i].clone();
        let mut k = 2;
        while taken.contains_key(&candidate) {
            candidate = format!("{}_{k}", base[i]);
            k += 1;
        }
        taken.insert(candidate.clone(), ());
        out[i] = candidate;
    }
    out
}

fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        identifiers(names.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn backoff_doubles_up_to_a_cap() {
        assert_eq!(Backoff::delay(1), Duration::from_millis(500));
        assert_eq!(Backoff::delay(2), Duration::from_secs(1));
        assert_eq!(Backoff::delay(4), Duration::from_secs(4));
        assert_eq!(Backoff::delay(10), Duration::from_secs(30));
        assert_eq!(Backoff::delay(u32::MAX), Duration::from_secs(30));
    }

    /// A server that cannot start is not spawned again on every call.
    #[tokio::test]
    async fn a_server_that_cannot_start_backs_off() {
        let server = McpServer::new(
            ToolServer {
                name: "broken".into(),
                transport: ServerTransport::Stdio {
                    command: "/bin/false".into(),
                    args: Vec::new(),
                    cwd: None,
                    env: Vec::new(),
                },
                start: StartMode::Lazy,
                call_timeout_ms: 1000,
                max_concurrent_calls: 1,
            },
            Arc::new(SecretStore::empty()),
        );
        let first = server.tools().await.unwrap_err();
        assert_eq!(first.code, "server_unavailable");
        assert!(first.message.contains("`broken`"), "{}", first.message);
        let second = server.tools().await.unwrap_err();
        assert!(
            second
                .message
                .contains("failed to start 1 time(s) in a row"),
            "{}",
            second.message
        );
        assert!(
            second.message.contains("next attempt in"),
            "{}",
            second.message
        );
    }

    #[test]
    fn identifiers_are_sanitised_deterministically() {
        assert_eq!(
            ids(&["echo", "get-sum", "a.b", "9lives"]),
            ["echo", "get_sum", "a_b", "_9lives"]
        );
        // A valid name keeps its identifier; colliding sanitised names are numbered in the
        // order of their original names, whatever order the server lists them in.
        // ("get-x" sorts before "get.x": '-' is 0x2d, '.' is 0x2e.)
        assert_eq!(
            ids(&["get_x", "get-x", "get.x"]),
            ["get_x", "get_x_2", "get_x_3"]
        );
        assert_eq!(
            ids(&["get.x", "get-x", "get_x"]),
            ["get_x_3", "get_x_2", "get_x"]
        );
    }

    #[test]
    fn results_map_predictably() {
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        assert_eq!(
            to_value("s", "t", text("{\"a\":1}")).unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            to_value("s", "t", text("plain words")).unwrap(),
            serde_json::json!("plain words")
        );
        let mut structured = text("ignored");
        structured.structured_content = Some(serde_json::json!({"n": 2}));
        assert_eq!(
            to_value("s", "t", structured).unwrap(),
            serde_json::json!({"n": 2})
        );
        let err = to_value(
            "s",
            "t",
            CallToolResult::error(vec![ContentBlock::text("boom")]),
        )
        .unwrap_err();
        assert_eq!(err.code, "upstream_error");
        assert!(err.message.contains("s.t failed: boom"), "{}", err.message);
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(
            to_value("s", "t", two).unwrap(),
            serde_json::json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        );
    }
}
