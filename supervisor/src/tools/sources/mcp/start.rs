//! Connecting to a server: on first use (or at start-up), again after it died, and not
//! on every call while it keeps failing to start ([`Backoff`]); the handshake (2026-07-28's
//! `server/discover`, else `initialize`) over stdio ([`super::stdio`]) or Streamable HTTP.

use super::McpServer;
use super::connection::{AbortOnDrop, Connection, Live, ServerEvents};
use super::stdio::{ServerProcess, Spawned, StdioStart};
use crate::tools::sources::http;
use crate::tools::{SecretsUsed, ToolError};
use airlock_policy::{ServerTransport, SettingValue};
use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::{info, warn};

/// How long a server may take to start and answer the handshake and `tools/list`.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a failed start waits for the rest of the server's stderr before quoting it.
const STDERR_WAIT: Duration = Duration::from_millis(500);

/// How long listing a running server's changed tools may take.
const RELIST_TIMEOUT: Duration = Duration::from_secs(30);

/// Start attempts after failures wait 0.5 s, 1 s, 2 s, … up to 30 s, so a server that cannot
/// start does not turn every tool call into a process spawn.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    pub(super) failures: u32,
    pub(super) retry_at: Option<tokio::time::Instant>,
    pub(super) last_error: String,
    /// The last failure's hint (a missing secret says how to provide it), repeated to the
    /// calls that meet the back-off.
    pub(super) last_hint: Option<String>,
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

/// The handshake's outcome and, for a stdio server, its process.
struct Handshake {
    service: Result<RunningService<RoleClient, ServerEvents>, ClientInitializeError>,
    process: Option<ServerProcess>,
    /// The secret values the server was given (its `env` or `headers`).
    secrets: SecretsUsed,
}

impl McpServer {
    /// The running server's peer and tool table, starting the server if needed and listing
    /// its tools again if it said they changed.
    pub(super) async fn connected(&self) -> Result<Live, ToolError> {
        self.connected_listed_within(None).await
    }

    /// [`McpServer::connected`], listing the tools again also when the list is older than
    /// `max_age` and the server announces list changes (a notification may have been missed).
    pub(super) async fn connected_listed_within(
        &self,
        max_age: Option<Duration>,
    ) -> Result<Live, ToolError> {
        let mut guard = self.connection.lock().await;
        if let Some(conn) = guard.as_mut() {
            if !conn.service.is_transport_closed() {
                if max_age.is_some_and(|age| conn.listed_at.elapsed() > age)
                    && self.lists_changes.load(Ordering::Relaxed)
                {
                    conn.events.tools_changed.store(true, Ordering::Release);
                }
                if conn.events.tools_changed.swap(false, Ordering::AcqRel) {
                    let relisted =
                        tokio::time::timeout(RELIST_TIMEOUT, self.list_tools(&conn.service))
                            .await
                            .unwrap_or_else(|_| {
                                Err(self.unavailable(format!(
                                    "tools/list did not finish within {RELIST_TIMEOUT:?}"
                                )))
                            });
                    match relisted {
                        Ok(catalogue) => {
                            info!(server = %self.config.name, tools = catalogue.tools.len(), "MCP server's tool list changed");
                            conn.catalogue = catalogue;
                            conn.listed_at = tokio::time::Instant::now();
                        }
                        Err(e) => {
                            // Keep serving the old list; the next use tries again.
                            conn.events.tools_changed.store(true, Ordering::Release);
                            warn!(server = %self.config.name, error = %e.message, "listing the changed tools failed");
                        }
                    }
                }
                return Ok(conn.live());
            }
            warn!(server = %self.config.name, "MCP server is gone; connecting again");
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
                let mut error = self.unavailable(format!(
                    "it failed to start {} time(s) in a row ({}); next attempt in {} ms",
                    backoff.failures,
                    backoff.last_error,
                    wait.as_millis()
                ));
                if let Some(hint) = &backoff.last_hint {
                    error.hint = Some(hint.clone());
                }
                return Err(error);
            }
        }
        let limit = self.start_timeout;
        let started = tokio::time::timeout(limit, self.start())
            .await
            .map_err(|_| {
                let mut why = format!("it did not finish starting within {limit:?}");
                match self.last_stderr_lines() {
                    Some(said) => why.push_str(&format!("; its stderr ended with: {said}")),
                    None => why.push_str("; it printed nothing on stderr"),
                }
                self.unavailable(why).with_hint("a server that does not answer the MCP handshake is waiting for something (a download, a login, input on a terminal: see its stderr) or does not speak MCP over stdio; the operator can run the command by hand with the same environment, or `airlock server test NAME`")
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
                    // Quoted later inside another "is unavailable" message: the cause alone.
                    let prefix = self.settings().unavailable_prefix();
                    backoff.last_error = e
                        .message
                        .strip_prefix(&prefix)
                        .unwrap_or(&e.message)
                        .to_owned();
                    backoff.last_hint = e.hint.clone();
                    warn!(server = %self.config.name, failures = backoff.failures, error = %e.message, "MCP server failed to start");
                    return Err(e);
                }
            }
        };
        let live = conn.live();
        *guard = Some(conn);
        Ok(live)
    }

    async fn start(&self) -> Result<Connection, ToolError> {
        let name = &self.config.name;
        let events = ServerEvents::new();
        *self
            .last_stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(events.stderr.clone());
        let legacy = self.legacy_only.load(Ordering::Relaxed);
        let first = self.open(&events, lifecycle(legacy)).await?;
        let (service, child, secrets) = match first.service {
            Ok(service) => (service, first.process, first.secrets),
            Err(e) if !legacy && answered_discover_badly(&e) => {
                // A server of the 2025 era must answer an unknown method with an error, which
                // makes rmcp fall back to `initialize` by itself; some answer `{}` instead.
                // Such a server gets `initialize` on a new connection, now and from now on.
                info!(server = %name, error = %e, "the server did not understand server/discover; using initialize");
                self.legacy_only.store(true, Ordering::Relaxed);
                let again = self.open(&events, lifecycle(true)).await?;
                match again.service {
                    Ok(service) => (service, again.process, again.secrets),
                    Err(e) => return Err(self.handshake_failed(&e, &events).await),
                }
            }
            Err(e) => return Err(self.handshake_failed(&e, &events).await),
        };
        let (protocol, lists_changes) = match service.peer().peer_info() {
            Some(info) => (
                info.protocol_version.clone(),
                info.capabilities
                    .tools
                    .as_ref()
                    .is_some_and(|t| t.list_changed == Some(true)),
            ),
            None => (ProtocolVersion::default(), false),
        };
        // From 2026-07-28 on, list changes come only on a stream the client asks for; older
        // servers send them unasked, to `on_tool_list_changed`.
        self.lists_changes.store(lists_changes, Ordering::Relaxed);
        let listener = if lists_changes && !protocol.has_initialize() {
            Some(AbortOnDrop(
                self.listen_for_changes(service.peer().clone(), events.clone()),
            ))
        } else {
            None
        };
        let catalogue = self.list_tools(&service).await?;
        info!(server = %name, tools = catalogue.tools.len(), protocol = %protocol, "MCP server connected");
        let oversized = events.oversized.clone();
        Ok(Connection {
            service,
            events,
            catalogue,
            listed_at: tokio::time::Instant::now(),
            protocol,
            _listener: listener,
            generation: self.generations.fetch_add(1, Ordering::Relaxed) + 1,
            oversized,
            process: child,
            secrets: Arc::new(secrets),
        })
    }

    /// A new connection (a new process for a stdio server) and the handshake on it. The outer
    /// error is a failure to reach the server at all; the inner one the handshake's.
    async fn open(
        &self,
        events: &ServerEvents,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Handshake, ToolError> {
        Ok(match &self.config.transport {
            ServerTransport::Stdio {
                command,
                args,
                cwd,
                env,
                inherit_env,
            } => {
                let started = StdioStart {
                    command,
                    args,
                    cwd: cwd.as_deref(),
                    env,
                    inherit_env,
                };
                let Spawned {
                    transport,
                    mut child,
                    status,
                    secrets,
                } = self.spawn_stdio(&started, events)?;
                let confined = match status {
                    Some(status) => self.confined(status).await,
                    None => Ok(None),
                };
                let egress = match confined {
                    Ok(egress) => egress,
                    Err(e) => {
                        let _ = child.kill().await;
                        return Err(e);
                    }
                };
                let service = events
                    .clone()
                    .serve_with_lifecycle(transport, lifecycle)
                    .await;
                Handshake {
                    service,
                    process: Some(ServerProcess {
                        child,
                        _egress: egress,
                    }),
                    secrets,
                }
            }
            ServerTransport::Http { url, headers } => {
                let mut secrets = SecretsUsed::default();
                let transport = self.http_transport(url, headers, &mut secrets)?;
                let service = events
                    .clone()
                    .serve_with_lifecycle(transport, lifecycle)
                    .await;
                Handshake {
                    service,
                    process: None,
                    secrets,
                }
            }
        })
    }

    /// A Streamable HTTP connection with the policy's headers (secrets resolved now, and added
    /// to `secrets`).
    fn http_transport(
        &self,
        url: &str,
        headers: &[(String, SettingValue)],
        secrets: &mut SecretsUsed,
    ) -> Result<StreamableHttpClientTransport<reqwest::Client>, ToolError> {
        let mut custom = HashMap::new();
        let resolved = self.settings().table("headers", headers, secrets)?;
        for (key, value) in resolved {
            let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                .map_err(|e| self.unavailable(format!("header `{key}` is not valid: {e}")))?;
            let mut value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                // Never quote the value: it may be a secret.
                self.unavailable(format!(
                    "the value of header `{key}` has characters HTTP headers cannot carry"
                ))
            })?;
            value.set_sensitive(true);
            custom.insert(name, value);
        }
        let client =
            http::client().map_err(|e| self.unavailable(format!("cannot set up HTTP: {e}")))?;
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .custom_headers(custom)
            .max_concurrent_requests(self.config.max_concurrent_calls);
        Ok(StreamableHttpClientTransport::with_client(client, config))
    }

    /// The error of a handshake that failed, quoting what a stdio server said last on stderr
    /// (waited for briefly: a server that exited said why just before its stdout closed).
    async fn handshake_failed(
        &self,
        e: &ClientInitializeError,
        events: &ServerEvents,
    ) -> ToolError {
        let said = match &self.config.transport {
            ServerTransport::Stdio { .. } => {
                events.stderr.wait_ended(STDERR_WAIT).await;
                events.stderr.last_lines()
            }
            ServerTransport::Http { .. } => None,
        };
        match said {
            Some(said) => self
                .unavailable(format!("the MCP handshake failed: {e}; its stderr ended with: {said}"))
                .with_hint("the server's own last words above say why it stopped: fix its `command`, `args`, `env` or `read` in the policy and reload (run the command by hand with the same environment to see more)"),
            None => match &self.config.transport {
                ServerTransport::Stdio { command, .. } => self
                    .unavailable(format!("the MCP handshake failed: {e}; it printed nothing on stderr"))
                    .with_hint(format!("check that `{command}` with these `args` is an MCP server speaking stdio (some need an argument such as `stdio`); the operator can run it by hand to see what it does")),
                ServerTransport::Http { url, .. } => self
                    .unavailable(format!("the MCP handshake failed: {e}"))
                    .with_hint(format!("check that {url} is the server's MCP endpoint and that it is up")),
            },
        }
    }
}

/// Try `server/discover` (2026-07-28) first; a server that answers it with an error, or not
/// within rmcp's 10 s probe timeout, gets the `initialize` handshake of the 2025 revisions.
/// `legacy` skips the probe, for servers known to answer it wrongly.
fn lifecycle(legacy: bool) -> ClientLifecycleMode {
    if legacy {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: None,
        }
    }
}

/// Whether a failed discover-first handshake failed on the server's *answer* (so the server
/// is alive and speaks JSON-RPC, but not the 2026 lifecycle), rather than on the connection.
fn answered_discover_badly(e: &ClientInitializeError) -> bool {
    matches!(
        e,
        ClientInitializeError::ExpectedInitResult(_)
            | ClientInitializeError::ExpectedInitResponse(_)
            | ClientInitializeError::UncorrelatedErrorResponse { .. }
            | ClientInitializeError::JsonRpcError(_)
            | ClientInitializeError::NoCompatibleProtocolVersion { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::store::SecretStore;
    use crate::tools::ToolSource;
    use airlock_policy::{StartMode, ToolServer};
    use std::sync::Arc;

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
                    inherit_env: Vec::new(),
                },
                start: StartMode::Lazy,
                call_timeout_ms: 1000,
                max_concurrent_calls: 1,
                coerce: Default::default(),
                learn_types: true,
                dynamic_tools: false,
                confinement: Default::default(),
            },
            Arc::new(SecretStore::empty()),
        );
        let first = server.tools().await.unwrap_err();
        assert_eq!(first.code.as_str(), "server_unavailable");
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
}
