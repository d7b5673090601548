//! A tool source backed by one MCP server (`[[server]]` in the policy), reached with the
//! official Rust SDK (`rmcp`) over stdio (a child process the daemon runs) or Streamable HTTP.
//!
//! The daemon spawns a stdio server itself (with a service's base environment and what the
//! policy adds, `environment`), on first use unless the policy says `start = "eager"`, logs
//! its stderr under its name and quotes its last lines in the errors about it (`stderr`), caches
//! its tool list (refreshed when the server says `notifications/tools/list_changed`), and
//! connects again on the next call after the server died or the connection broke. A call ends
//! at the deadline the call pipeline gives it (the server's `call_timeout_ms`), with
//! `notifications/cancelled` to the server; progress notifications of a call are forwarded to
//! the agent. A tool is read-only when the server annotates it `readOnlyHint: true`; a call's
//! idempotency key goes in the `tools/call` request's `_meta` under
//! [`IDEMPOTENCY_META_KEY`](crate::tools::IDEMPOTENCY_META_KEY).
//!
//! Protocol revisions: rmcp negotiates. Servers of the 2025 revisions get `initialize`; servers
//! that speak 2026-07-28 get `server/discover`, and their list changes arrive on a
//! `subscriptions/listen` stream, which is opened when they advertise `tools.listChanged`.
//!
//! The rooms: `start` connects (a stdio server's process is `stdio`'s, with its
//! confinement), `connection` is a running server and what it sends unasked (progress,
//! list changes), `schema` lists its tools as descriptors, `send` makes one call and
//! reads its answer, `status` is what `GET /v1/servers` and a test start show.

pub mod confinement;
mod connection;
pub(crate) mod egress;
pub(crate) mod environment;
mod schema;
mod send;
mod start;
mod status;
mod stderr;
mod stdio;

pub use confinement::ServerHost;
pub use schema::identifiers;
pub use status::{ServerState, ServerStatus, ServerTest};

use crate::secrets::store::SecretStore;
use crate::tools::sources::settings::Settings;
use crate::tools::{CallContext, CallGate, ToolError, ToolFuture, ToolSource, ToolsFuture};
use airlock_policy::{StartMode, ToolServer};
use connection::Connection;
use serde_json::Value;
use start::Backoff;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;

/// How long a server may take to answer the `ping` that follows a timed-out call.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// One configured MCP server.
#[derive(Debug)]
pub struct McpServer {
    config: ToolServer,
    /// Where `{ secret = "…" }` values in `env` and `headers` come from, read at each start.
    secrets: Arc<SecretStore>,
    connection: Mutex<Option<Connection>>,
    gate: CallGate,
    /// Where a confined stdio server's launcher and scratch directory are.
    host: ServerHost,
    /// Failed starts in a row, and when the next attempt is allowed.
    backoff: std::sync::Mutex<Backoff>,
    /// Connections made so far.
    generations: std::sync::atomic::AtomicU64,
    /// The server answered `server/discover` with something that is neither a discover
    /// result nor an error; it gets `initialize` directly.
    legacy_only: AtomicBool,
    /// The running server advertises `tools.listChanged`.
    lists_changes: AtomicBool,
    /// The stderr of the last process started (running or failed), for `GET /v1/servers`.
    last_stderr: std::sync::Mutex<Option<Arc<stderr::StderrTail>>>,
    /// How long a start may take ([`start::START_TIMEOUT`] unless an embedder says otherwise).
    start_timeout: Duration,
}

impl McpServer {
    pub fn new(config: ToolServer, secrets: Arc<SecretStore>) -> McpServer {
        // After a missed deadline the call asks the server whether it is alive (`ping`).
        let gate = CallGate::new(config.max_concurrent_calls, config.call_timeout_ms)
            .with_grace(PING_TIMEOUT + Duration::from_millis(500));
        McpServer {
            config,
            secrets,
            connection: Mutex::new(None),
            gate,
            host: ServerHost::discover(),
            backoff: std::sync::Mutex::new(Backoff::default()),
            generations: std::sync::atomic::AtomicU64::new(0),
            legacy_only: AtomicBool::new(false),
            lists_changes: AtomicBool::new(false),
            last_stderr: std::sync::Mutex::new(None),
            start_timeout: start::START_TIMEOUT,
        }
    }

    /// The same server, given `limit` (instead of 30 s) to start, answer the handshake and
    /// list its tools.
    pub fn with_start_timeout(mut self, limit: Duration) -> McpServer {
        self.start_timeout = limit;
        self
    }

    /// The same server, confined with the daemon's launcher and state directory.
    pub fn with_host(mut self, host: ServerHost) -> McpServer {
        self.host = host;
        self
    }

    pub fn config(&self) -> &ToolServer {
        &self.config
    }

    fn settings(&self) -> Settings<'_> {
        Settings {
            kind: "tool server",
            name: &self.config.name,
            store: &self.secrets,
        }
    }

    fn unavailable(&self, why: String) -> ToolError {
        self.settings().unavailable(why)
    }

    /// Stops the server, if it runs.
    pub async fn shutdown(&self) {
        let conn = self.connection.lock().await.take();
        if let Some(conn) = conn {
            conn.close().await;
        }
    }
}

impl ToolSource for McpServer {
    fn namespace(&self) -> &str {
        &self.config.name
    }

    fn tools(&self) -> ToolsFuture<'_> {
        Box::pin(async move { Ok(self.connected().await?.catalogue.descriptors) })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(self.call_tool(tool, args, ctx))
    }

    fn gate(&self) -> Option<&CallGate> {
        Some(&self.gate)
    }

    fn coerce(&self) -> airlock_policy::CoercePolicy {
        self.config.coerce
    }

    fn starts_eagerly(&self) -> bool {
        self.config.start == StartMode::Eager
    }

    fn tools_may_change(&self) -> bool {
        self.config.dynamic_tools && self.lists_changes.load(Ordering::Relaxed)
    }

    fn tools_listed_within(&self, max_age: Duration) -> ToolsFuture<'_> {
        Box::pin(async move {
            Ok(self
                .connected_listed_within(Some(max_age))
                .await?
                .catalogue
                .descriptors)
        })
    }

    fn shutdown(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(McpServer::shutdown(self))
    }
}
