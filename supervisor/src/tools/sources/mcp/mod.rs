//! A tool source backed by one MCP server (`[[server]]` in the policy), reached with the
//! official Rust SDK (`rmcp`) over stdio (a child process the daemon runs) or Streamable HTTP.
//!
//! The daemon spawns a stdio server itself (with a service's base environment and what the
//! policy adds, [`environment`]), on first use unless the policy says `start = "eager"`, logs
//! its stderr under its name and quotes its last lines in the errors about it ([`stderr`]), caches
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

pub mod confinement;
pub mod egress;
pub mod environment;
mod stderr;

pub use confinement::ServerHost;

use crate::secrets::store::SecretStore;
use crate::tools::coercion::{CoercionLog, OutputSchema};
use crate::tools::sources::http;
use crate::tools::sources::settings::Settings;
use crate::tools::{
    CallContext, CallDeadline, CallGate, IDEMPOTENCY_META_KEY, SecretsUsed, ToolDescriptor,
    ToolError, ToolErrorCode, ToolFuture, ToolProgress, ToolSource, ToolsFuture,
};
use airlock_policy::{
    ConfineMode, ServerNetwork, ServerTransport, SettingValue, StartMode, ToolServer,
};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientRequest, ContentBlock,
    Implementation, PaginatedRequestParams, PingRequest, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, RequestId, RequestMetaObject, ServerNotification, ServerResult,
    SubscriptionFilterBuilder,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer,
    PeerRequestOptions, RoleClient, RunningService, ServiceError,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, mpsc};
use tracing::{Instrument, debug, info, info_span, warn};

/// How long a server may take to start and answer the handshake and `tools/list`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a failed start waits for the rest of the server's stderr before quoting it.
const STDERR_WAIT: Duration = Duration::from_millis(500);

/// The largest message read from a stdio server: a bit over the worker's 32 MiB frame, so
/// every result that could reach a program arrives (rmcp's default, 16 MiB, would drop
/// results between 16 and 32 MiB). Longer lines are dropped unread, which bounds the daemon's
/// memory; [`LineMeter`] notices them, so the call that waited for one fails as
/// `result_too_large` rather than as a plain timeout.
const MAX_STDIO_MESSAGE: usize = 33 << 20;

/// How long a stdio server may take to exit after its stdin closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How long a call that ended short of its announced progress total waits for the updates
/// still on their way.
const PROGRESS_GRACE: Duration = Duration::from_millis(200);

/// Pages of one `tools/list`: a server that keeps sending `nextCursor` is not listed forever.
const MAX_LIST_PAGES: usize = 100;

/// Tools of one server: more would only make an SDK no model can read, and each costs the
/// daemon memory.
const MAX_TOOLS: usize = 10_000;

/// How long listing a running server's changed tools may take.
const RELIST_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// How long a start may take ([`START_TIMEOUT`] unless an embedder says otherwise).
    start_timeout: Duration,
}

/// What `GET /v1/servers` (and `airlock servers`) shows of one `[[server]]`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The command line of a stdio server, the URL of an HTTP one.
    pub target: String,
    pub state: ServerState,
    /// Failed starts in a row.
    pub failures: u32,
    /// When the next start may be tried, after failures (milliseconds from now).
    pub next_retry_ms: Option<u64>,
    /// Why the last start failed, and what to do.
    pub last_error: Option<String>,
    pub hint: Option<String>,
    /// The process the daemon started (the confinement launcher, which waits for the server).
    pub pid: Option<u32>,
    pub tools: Option<usize>,
    /// The protocol revision negotiated.
    pub protocol: Option<String>,
    /// `every layer`, `best effort`, `off` (stdio), or `-` (http); with the network.
    pub confinement: String,
    /// The last lines of its stderr (stdio; redacted).
    pub stderr: Option<String>,
}

/// Where a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Not started yet (servers start on first use unless `start = "eager"`).
    NotStarted,
    /// Starting now (or busy being listed).
    Starting,
    Ready,
    /// The last start failed; see `last_error` and `next_retry_ms`.
    Failed,
}

/// What `POST /v1/servers/<name>/test` (and `airlock server test`) found: a fresh instance
/// of the server started as the daemon starts it, listed, and stopped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerTest {
    pub name: String,
    pub ok: bool,
    /// From the start until its tools were listed.
    pub ready_ms: u64,
    pub tools: Vec<String>,
    pub protocol: Option<String>,
    pub error: Option<String>,
    pub hint: Option<String>,
    /// The last lines of its stderr (stdio; redacted).
    pub stderr: Option<String>,
}

/// What a stdio server is started as (its `[[server]]` entry's stdio keys).
#[derive(Debug, Clone, Copy)]
struct StdioStart<'a> {
    command: &'a str,
    args: &'a [String],
    cwd: Option<&'a std::path::Path>,
    env: &'a [(String, SettingValue)],
    inherit_env: &'a [String],
}

/// Start attempts after failures wait 0.5 s, 1 s, 2 s, … up to 30 s, so a server that cannot
/// start does not turn every tool call into a process spawn.
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
    retry_at: Option<tokio::time::Instant>,
    last_error: String,
    /// The last failure's hint (a missing secret says how to provide it), repeated to the
    /// calls that meet the back-off.
    last_hint: Option<String>,
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

/// What a stdio server is reached through.
type StdioTransport = AsyncRwTransport<RoleClient, LineMeter, tokio::process::ChildStdin>;

/// A stdio server's stdout, counting the lines longer than [`MAX_STDIO_MESSAGE`] (which rmcp
/// drops without a word).
#[derive(Debug)]
struct LineMeter {
    inner: tokio::process::ChildStdout,
    line: usize,
    oversized: Arc<std::sync::atomic::AtomicU64>,
    /// Wakes the calls waiting on this server when a message is dropped.
    dropped: Arc<tokio::sync::Notify>,
}

impl tokio::io::AsyncRead for LineMeter {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if polled.is_ready() {
            let this = &mut *self;
            for &byte in &buf.filled()[before..] {
                if byte == b'\n' {
                    this.line = 0;
                } else {
                    this.line += 1;
                    if this.line == MAX_STDIO_MESSAGE + 1 {
                        this.oversized.fetch_add(1, Ordering::Relaxed);
                        this.dropped.notify_waiters();
                    }
                }
            }
        }
        polled
    }
}

/// The handshake's outcome and, for a stdio server, its process.
type Handshake = (
    Result<RunningService<RoleClient, ServerEvents>, ClientInitializeError>,
    Option<ServerProcess>,
);

/// A stdio server's process (killed on drop) and, for a server with a `network` list, its
/// egress proxy, which ends with it.
#[derive(Debug)]
struct ServerProcess {
    child: tokio::process::Child,
    _egress: Option<AbortOnDrop>,
}

/// A running server and what we learnt from it.
struct Connection {
    service: RunningService<RoleClient, ServerEvents>,
    events: ServerEvents,
    catalogue: Catalogue,
    /// The revision the handshake settled on.
    protocol: ProtocolVersion,
    /// Reads a 2026-07-28 server's `subscriptions/listen` stream; stopped with the connection.
    /// Held for its `Drop`.
    _listener: Option<AbortOnDrop>,
    /// Tells this connection from the one that replaces it.
    generation: u64,
    /// Messages from a stdio server dropped for their size, so far.
    oversized: Arc<std::sync::atomic::AtomicU64>,
    /// A stdio server's process (killed on drop).
    process: Option<ServerProcess>,
}

impl Connection {
    /// Ends the session and, for a stdio server, its process: stdin closes with the session,
    /// a well-behaved server exits; one that does not within [`EXIT_GRACE`] is killed.
    async fn close(self) {
        let Connection {
            service,
            mut process,
            ..
        } = self;
        let _ = service.cancel().await;
        if let Some(child) = process.as_mut().map(|p| &mut p.child)
            && tokio::time::timeout(EXIT_GRACE, child.wait())
                .await
                .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// What a call needs of the connection, taken out so the lock is not held during calls.
struct Live {
    generation: u64,
    oversized: Arc<std::sync::atomic::AtomicU64>,
    dropped: Arc<tokio::sync::Notify>,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    secrets: SecretsUsed,
    peer: Peer<RoleClient>,
    catalogue: Catalogue,
    progress: Arc<ProgressRoutes>,
}

impl Connection {
    fn live(&self) -> Live {
        Live {
            generation: self.generation,
            oversized: self.oversized.clone(),
            dropped: self.events.dropped.clone(),
            in_flight: self.events.in_flight.clone(),
            secrets: self.events.secrets.clone(),
            peer: self.service.peer().clone(),
            catalogue: self.catalogue.clone(),
            progress: self.events.progress.clone(),
        }
    }
}

/// A task that must not outlive its owner.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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
    /// Its `outputSchema`, compiled once per listing, when it has one that compiles: results
    /// are checked against it, so the SDK's output type is what a program receives.
    output: Option<Arc<OutputSchema>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.catalogue.tools.len())
            .field("protocol", &self.protocol)
            .finish()
    }
}

/// What a server sends on its own initiative, received by rmcp's service loop.
#[derive(Debug, Clone)]
struct ServerEvents {
    /// Progress notifications, routed to the call that owns the token.
    progress: Arc<ProgressRoutes>,
    /// Set by `notifications/tools/list_changed`; the next use lists the tools again.
    tools_changed: Arc<AtomicBool>,
    /// The secret values this connection was given: every call on it hands them to the
    /// pipeline for redaction, and its stderr has them redacted before it is logged.
    secrets: SecretsUsed,
    /// Messages dropped for their size (stdio).
    oversized: Arc<std::sync::atomic::AtomicU64>,
    /// Signalled when one is dropped.
    dropped: Arc<tokio::sync::Notify>,
    /// Calls waiting for an answer on this connection.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// The last lines of a stdio server's stderr.
    stderr: Arc<stderr::StderrTail>,
}

impl ServerEvents {
    fn new() -> Self {
        ServerEvents {
            progress: Arc::new(ProgressRoutes::default()),
            tools_changed: Arc::new(AtomicBool::new(false)),
            secrets: SecretsUsed::default(),
            oversized: Arc::default(),
            dropped: Arc::default(),
            in_flight: Arc::default(),
            stderr: Arc::default(),
        }
    }

    fn tool_list_changed(&self) {
        debug!("the server's tool list changed; it is listed again on next use");
        self.tools_changed.store(true, Ordering::Release);
    }
}

impl ClientHandler for ServerEvents {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.progress.deliver(params);
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tool_list_changed();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        // The version offered in `initialize`, when the handshake is the 2025 one; the 2026
        // revision, which has no `initialize`, is offered through `server/discover`.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("airlock", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Progress notifications by token. rmcp gives a request its token only as it sends it, so a
/// notification can in principle arrive before its call has subscribed; those wait in a small
/// buffer instead of being lost. Delivery never blocks rmcp's service loop (which also
/// carries every other call's answers): a call whose queue is full loses that update.
#[derive(Debug, Default)]
struct ProgressRoutes {
    inner: std::sync::Mutex<ProgressInner>,
}

#[derive(Debug, Default)]
struct ProgressInner {
    routes: HashMap<ProgressToken, mpsc::Sender<ProgressNotificationParam>>,
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    const EARLY: usize = 64;
    const PER_CALL: usize = 256;

    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn deliver(&self, params: ProgressNotificationParam) {
        let mut inner = self.lock();
        match inner.routes.get(&params.progress_token) {
            Some(route) => {
                if route.try_send(params).is_err() {
                    debug!("a call's progress queue is full; an update was dropped");
                }
            }
            None => {
                if inner.early.len() == Self::EARLY {
                    inner.early.pop_front();
                }
                inner.early.push_back(params);
            }
        }
    }

    fn subscribe(
        self: &Arc<Self>,
        token: ProgressToken,
    ) -> (mpsc::Receiver<ProgressNotificationParam>, ProgressRoute) {
        let (tx, rx) = mpsc::channel(Self::PER_CALL);
        let mut inner = self.lock();
        let early = std::mem::take(&mut inner.early);
        for params in early {
            if params.progress_token == token {
                let _ = tx.try_send(params);
            } else {
                inner.early.push_back(params);
            }
        }
        inner.routes.insert(token.clone(), tx);
        let route = ProgressRoute {
            routes: Arc::clone(self),
            token,
        };
        (rx, route)
    }
}

/// Unsubscribes its token when the call ends, however it ends.
struct ProgressRoute {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes.lock().routes.remove(&self.token);
    }
}

/// Counts a call as waiting on its connection for as long as it lives.
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn enter(count: &Arc<std::sync::atomic::AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::Relaxed);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Tells the server a call was abandoned (the program finished or was cancelled before the
/// answer came), so it can stop working on it. Disarmed once the answer arrived.
struct AbandonedCall {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for AbandonedCall {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let id = self.id.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let notice = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some("the program no longer waits for this call".into()),
                ));
                let _ = peer.send_notification(notice.into()).await;
            });
        }
    }
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
            start_timeout: START_TIMEOUT,
        }
    }

    /// The same server, given `limit` (instead of 30 s) to start, answer the handshake and
    /// list its tools.
    pub fn with_start_timeout(mut self, limit: Duration) -> McpServer {
        self.start_timeout = limit;
        self
    }

    /// Where the server is, without waiting for a start under way.
    pub fn status(&self) -> ServerStatus {
        let (failures, next_retry_ms, last_error, hint) = {
            let backoff = self
                .backoff
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = tokio::time::Instant::now();
            (
                backoff.failures,
                backoff.retry_at.map(|at| {
                    u64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX)
                }),
                (backoff.failures > 0).then(|| backoff.last_error.clone()),
                if backoff.failures > 0 {
                    backoff.last_hint.clone()
                } else {
                    None
                },
            )
        };
        let (state, pid, tools, protocol) = match self.connection.try_lock() {
            Err(_) => (ServerState::Starting, None, None, None),
            Ok(guard) => match guard.as_ref() {
                Some(conn) => (
                    ServerState::Ready,
                    conn.process.as_ref().and_then(|p| p.child.id()),
                    Some(conn.catalogue.tools.len()),
                    Some(conn.protocol.to_string()),
                ),
                None if failures > 0 => (ServerState::Failed, None, None, None),
                None => (ServerState::NotStarted, None, None, None),
            },
        };
        let (transport, target, confinement) = match &self.config.transport {
            ServerTransport::Stdio { command, args, .. } => {
                let mut line = command.clone();
                for arg in args {
                    line.push(' ');
                    line.push_str(arg);
                }
                let c = &self.config.confinement;
                let mode = match c.mode {
                    ConfineMode::Strict => "every layer",
                    ConfineMode::BestEffort => "best effort",
                    ConfineMode::Off => "off",
                };
                let network = c.network.describe();
                ("stdio", line, format!("{mode}, network {network}"))
            }
            ServerTransport::Http { url, .. } => ("http", url.clone(), "-".to_owned()),
        };
        let stderr = self.last_stderr_lines();
        ServerStatus {
            name: self.config.name.clone(),
            transport,
            target,
            state,
            failures,
            next_retry_ms,
            last_error,
            hint,
            pid,
            tools,
            protocol,
            confinement,
            stderr,
        }
    }

    /// The last lines the last process started printed on stderr (redacted), if any.
    fn last_stderr_lines(&self) -> Option<String> {
        self.last_stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .and_then(|tail| tail.last_lines())
    }

    /// Starts a fresh instance of this server's entry as the daemon would (its own process,
    /// its secrets, its confinement), lists its tools and stops it. The running instance, if
    /// any, is not touched (they share the scratch directory).
    pub async fn test(&self) -> ServerTest {
        let fresh =
            McpServer::new(self.config.clone(), self.secrets.clone()).with_host(self.host.clone());
        let started = std::time::Instant::now();
        let listed = fresh.connected().await;
        let ready_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let protocol = fresh.protocol_version().await;
        let stderr = fresh.last_stderr_lines();
        let test = match listed {
            Ok(live) => ServerTest {
                name: self.config.name.clone(),
                ok: true,
                ready_ms,
                tools: live
                    .catalogue
                    .tools
                    .iter()
                    .map(|t| t.original.clone())
                    .collect(),
                protocol,
                error: None,
                hint: None,
                stderr,
            },
            Err(e) => ServerTest {
                name: self.config.name.clone(),
                ok: false,
                ready_ms,
                tools: Vec::new(),
                protocol,
                error: Some(e.message),
                hint: e.hint,
                stderr,
            },
        };
        fresh.shutdown().await;
        test
    }

    /// The same server, confined with the daemon's launcher and state directory.
    pub fn with_host(mut self, host: ServerHost) -> McpServer {
        self.host = host;
        self
    }

    pub fn config(&self) -> &ToolServer {
        &self.config
    }

    /// The protocol revision negotiated with the running server (`None` if it is not running).
    pub async fn protocol_version(&self) -> Option<String> {
        let guard = self.connection.lock().await;
        guard.as_ref().map(|c| c.protocol.to_string())
    }

    /// The running server's peer and tool table, starting the server if needed and listing
    /// its tools again if it said they changed.
    async fn connected(&self) -> Result<Live, ToolError> {
        let mut guard = self.connection.lock().await;
        if let Some(conn) = guard.as_mut() {
            if !conn.service.is_transport_closed() {
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
        let (service, child) = match self.open(&events, lifecycle(legacy)).await? {
            (Ok(service), child) => (service, child),
            (Err(e), _) if !legacy && answered_discover_badly(&e) => {
                // A server of the 2025 era must answer an unknown method with an error, which
                // makes rmcp fall back to `initialize` by itself; some answer `{}` instead.
                // Such a server gets `initialize` on a new connection, now and from now on.
                info!(server = %name, error = %e, "the server did not understand server/discover; using initialize");
                self.legacy_only.store(true, Ordering::Relaxed);
                let (service, child) = self.open(&events, lifecycle(true)).await?;
                match service {
                    Ok(service) => (service, child),
                    Err(e) => return Err(self.handshake_failed(&e, &events).await),
                }
            }
            (Err(e), _) => return Err(self.handshake_failed(&e, &events).await),
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
            protocol,
            _listener: listener,
            generation: self.generations.fetch_add(1, Ordering::Relaxed) + 1,
            oversized,
            process: child,
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
                let (transport, mut child, status) = self.spawn_stdio(&started, events)?;
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
                (
                    service,
                    Some(ServerProcess {
                        child,
                        _egress: egress,
                    }),
                )
            }
            ServerTransport::Http { url, headers } => {
                let transport = self.http_transport(url, headers, &events.secrets)?;
                let service = events
                    .clone()
                    .serve_with_lifecycle(transport, lifecycle)
                    .await;
                (service, None)
            }
        })
    }

    /// Spawns a stdio server with the base environment and what the policy adds to it
    /// ([`environment::compose`]).
    fn spawn_stdio(
        &self,
        started: &StdioStart<'_>,
        events: &ServerEvents,
    ) -> Result<
        (
            StdioTransport,
            tokio::process::Child,
            Option<std::os::unix::net::UnixStream>,
        ),
        ToolError,
    > {
        let StdioStart {
            command,
            args,
            cwd,
            env,
            inherit_env,
        } = *started;
        let secrets = &events.secrets;
        let given = self.settings().table("env", env, secrets)?;
        let scratch = self.host.scratch_root.join(&self.config.name);
        let mut env =
            environment::compose(&scratch, inherit_env, environment::daemon_variable, given);
        let confinement = &self.config.confinement;
        if matches!(confinement.network, ServerNetwork::Allow(_)) {
            env = environment::overridden(env, environment::proxy_variables());
        }
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or("", |(_, v)| v.as_str());
        if confinement::resolve(command, Some(path)).is_none() {
            return Err(self
                .unavailable(format!("`{command}` was not found on its PATH ({path})"))
                .with_hint(format!("give `command` as an absolute path, or set `PATH` in the server's `env` (or name it in `inherit_env`) so that it contains `{command}`")));
        }
        let confined = confinement.mode != ConfineMode::Off;
        let mut cmd = if confined {
            let started = confinement::ServerCommand {
                command,
                args,
                cwd,
                path_env: Some(path),
            };
            let profile = confinement::profile(
                &self.config.name,
                confinement,
                &started,
                &self.host,
                &self.settings(),
            )?;
            confinement::make_scratch(
                &profile.scratch,
                &self.host,
                profile.run_as.as_ref(),
                &self.settings(),
            )?;
            if !self.host.launcher.is_file() {
                return Err(self.unavailable(format!(
                    "it is to be confined, and the launcher {} is missing",
                    self.host.launcher.display()
                )));
            }
            let mut cmd = tokio::process::Command::new(&self.host.launcher);
            cmd.arg("--profile")
                .arg(profile.to_json())
                .arg("--")
                .arg(command)
                .args(args);
            cmd
        } else {
            // Its home and temporary directory, as a confined server's.
            confinement::make_scratch(&scratch, &self.host, None, &self.settings())?;
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            cmd
        };
        cmd.env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            // Never leave a server running without the daemon that talks to it.
            .kill_on_drop(true);
        // The launcher reports a layer it could not apply on fd 3, and closes it at exec.
        let (status_read, status_write) = if confined {
            let (read, write) = std::os::unix::net::UnixStream::pair().map_err(|e| {
                self.unavailable(format!("cannot make the launcher's status pipe: {e}"))
            })?;
            (Some(read), Some(write))
        } else {
            (None, None)
        };
        let status_fd = status_write.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        // SAFETY: runs in the child between fork and exec and makes only async-signal-safe
        // calls (dup2, prctl, close_range). `status_fd` stays open in the parent until after the spawn.
        // The parent-death signal fires when the forking *thread* exits: servers are started
        // from runtime worker threads, which live as long as the daemon.
        unsafe {
            cmd.pre_exec(move || {
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
                if let Some(fd) = status_fd
                    && libc::dup2(fd, airlock_confine::STATUS_FD) == -1
                {
                    return Err(std::io::Error::last_os_error());
                }
                // Whatever the daemon holds, or inherited from whoever started it, without
                // close-on-exec stays out of the server: from fd 3 up (the status socket
                // excepted) closed at exec. Close-on-exec, not closed: the standard library
                // reports a failed exec on a descriptor of its own.
                let first = status_fd.map_or(3, |_| airlock_confine::STATUS_FD + 1);
                if libc::close_range(
                    first.cast_unsigned(),
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC.cast_signed(),
                ) == -1
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let program = cmd.as_std().get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|e| {
            let error = self.unavailable(format!("cannot start `{program}`: {e}"));
            match e.kind() {
                std::io::ErrorKind::PermissionDenied => error.with_hint(format!("the daemon's user may not execute it: check its mode and the directories above it (`ls -l {program}`)")),
                _ => error,
            }
        })?;
        // Only the launcher may hold the write end now, so its exec (or exit) ends the pipe.
        drop(status_write);
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(self.unavailable("the server's stdin or stdout is missing".into()));
        };
        let stdout = LineMeter {
            inner: stdout,
            line: 0,
            oversized: events.oversized.clone(),
            dropped: events.dropped.clone(),
        };
        let transport =
            AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_STDIO_MESSAGE);
        if let Some(stderr) = child.stderr.take() {
            let span = info_span!("mcp_server", server = %self.config.name);
            let secrets = secrets.clone();
            let tail = events.stderr.clone();
            tokio::spawn(async move { tail.read(stderr, secrets).await }.instrument(span));
        }
        Ok((transport, child, status_read))
    }

    /// What the launcher of a confined server said before it exec'd the server (or gave up):
    /// `Ok` once the socket ends without an `error:` line, with the proxy's listener for a
    /// server with a `network` list; warnings of best-effort mode are logged.
    async fn confinement_status(
        &self,
        pipe: std::os::unix::net::UnixStream,
    ) -> Result<Option<std::net::TcpListener>, ToolError> {
        let unavailable = |why: String| self.unavailable(why);
        let (said, listener) = tokio::time::timeout(START_TIMEOUT, confinement::read_status(pipe))
            .await
            .map_err(|_| unavailable("its launcher did not finish confining it".into()))?
            .map_err(|e| unavailable(format!("the launcher's status socket: {e}")))?;
        let text = String::from_utf8_lossy(&said);
        for line in text.lines() {
            if let Some(warning) = line.strip_prefix("warning: ") {
                warn!(server = %self.config.name, "confined without a layer (confine = \"best-effort\"): {warning}");
            }
        }
        if let Some(error) = text.lines().find_map(|l| l.strip_prefix("error: ")) {
            return Err(self.launcher_failed(error));
        }
        let wants_proxy = matches!(self.config.confinement.network, ServerNetwork::Allow(_));
        match (wants_proxy, listener) {
            (true, None) => Err(unavailable(
                "its launcher did not hand over the network namespace's proxy socket".into(),
            )),
            (_, listener) => Ok(listener.filter(|_| wants_proxy)),
        }
    }

    /// A confined server once its launcher is done: its egress proxy running, if it has a
    /// `network` list.
    async fn confined(
        &self,
        status: std::os::unix::net::UnixStream,
    ) -> Result<Option<AbortOnDrop>, ToolError> {
        self.confinement_status(status)
            .await?
            .map(|listener| self.serve_egress(listener))
            .transpose()
    }

    /// The egress proxy of this server (see [`egress`]) on the listener its launcher made.
    fn serve_egress(&self, listener: std::net::TcpListener) -> Result<AbortOnDrop, ToolError> {
        let proxy = egress::Egress {
            server: self.config.name.clone(),
            network: Arc::new(self.config.confinement.network.clone()),
            resolver: egress::system_resolver(),
        };
        egress::serve(listener, proxy)
            .map(AbortOnDrop)
            .map_err(|e| self.unavailable(format!("cannot run its egress proxy: {e}")))
    }

    /// The error for what the launcher of a confined server reported: the exec of the
    /// server failed (after every layer was in place), or a layer could not be applied.
    fn launcher_failed(&self, error: &str) -> ToolError {
        let name = &self.config.name;
        // A root daemon's server runs as another account, whose rights (not the daemon's)
        // decide what it can enter and run.
        let account = confinement::account(&self.config.confinement, &self.host)
            .filter(|_| airlock_policy::account::effective_uid() == 0);
        if let Some(account) = account
            && error.ends_with("(os error 13)")
        {
            return self
                .unavailable(format!("it was confined to run as user \"{account}\" and then {error}"))
                .with_hint(format!("user \"{account}\" (its `user`, else `[daemon] server_user`) may not reach that path: every directory above it must let that account pass (mode o+x), which a home such as /root does not; install the server where that account can reach it (/opt, /usr/local), or name another account in `user`"));
        }
        if error.starts_with("cannot start ") {
            let error_text = self.unavailable(format!("it was confined and then {error}"));
            if error.ends_with("(os error 13)") {
                return error_text.with_hint(format!("the confinement denied something the command needs to start: a `#!` line's interpreter, or the Python a virtualenv's `bin/python` links to (its `pyvenv.cfg` `home`); `airlock policy explain` lists what server `{name}` may read: add the missing directory to its `read`"));
            }
            if error.ends_with("(os error 2)") {
                return error_text.with_hint("the command or its `#!` interpreter does not exist where it was looked for: give `command` as an absolute path, or set `PATH` in the server's `env`");
            }
            return error_text;
        }
        if error.starts_with("cannot enter ") {
            return self
                .unavailable(format!("it cannot be confined: {error}"))
                .with_hint("its `cwd` must be a directory the daemon's user can enter");
        }
        self.unavailable(format!("it cannot be confined: {error}"))
            .with_hint("the kernel lacks this layer: the operator can set confine = \"best-effort\" for this server to run it with the layers there are (or confine = false, not advised)")
    }

    /// A Streamable HTTP connection with the policy's headers (secrets resolved now).
    fn http_transport(
        &self,
        url: &str,
        headers: &[(String, SettingValue)],
        secrets: &SecretsUsed,
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

    /// Opens the `subscriptions/listen` stream of a 2026-07-28 server for tool-list changes.
    fn listen_for_changes(
        &self,
        peer: Peer<RoleClient>,
        events: ServerEvents,
    ) -> tokio::task::JoinHandle<()> {
        let span = info_span!("mcp_server", server = %self.config.name);
        tokio::spawn(
            async move {
                let filter = SubscriptionFilterBuilder::default()
                    .tools_list_changed()
                    .build();
                let mut subscription = match peer.listen(filter).await {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(error = %e, "the server advertises tool-list changes but refused to stream them; its list is cached until it restarts");
                        return;
                    }
                };
                while let Ok(Some(notification)) = subscription.next().await {
                    if let ServerNotification::ToolListChangedNotification(_) = notification {
                        events.tool_list_changed();
                    }
                }
                debug!("the tool-list subscription ended");
            }
            .instrument(span),
        )
    }

    /// `tools/list`, every page (at most [`MAX_LIST_PAGES`] of them and [`MAX_TOOLS`] tools),
    /// with each tool's output schema compiled.
    async fn list_tools(
        &self,
        service: &RunningService<RoleClient, ServerEvents>,
    ) -> Result<Catalogue, ToolError> {
        let mut listed = Vec::new();
        let mut cursor = None;
        for page in 1.. {
            if page > MAX_LIST_PAGES {
                return Err(self.unavailable(format!(
                    "tools/list did not end after {MAX_LIST_PAGES} pages"
                )));
            }
            let result = service
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .map_err(|e| self.unavailable(format!("tools/list failed: {e}")))?;
            listed.extend(result.tools);
            if listed.len() > MAX_TOOLS {
                return Err(self.unavailable(format!("it lists more than {MAX_TOOLS} tools")));
            }
            cursor = result.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        let tools = identifiers(listed.iter().map(|t| t.name.to_string()))
            .into_iter()
            .zip(listed)
            .map(|(id, tool)| {
                let input_schema = Value::Object((*tool.input_schema).clone());
                // An output schema that does not compile is ignored (the result is typed
                // `unknown` and not checked) rather than failing the tool.
                let output_schema = tool
                    .output_schema
                    .as_ref()
                    .map(|s| Value::Object((**s).clone()));
                let output = match &output_schema {
                    Some(schema) => match OutputSchema::compile(schema) {
                        Ok(v) => Some(Arc::new(v)),
                        Err(e) => {
                            warn!(server = %self.config.name, tool = %tool.name, error = %e, "the tool's outputSchema is not valid JSON Schema; its results are typed unknown");
                            None
                        }
                    },
                    None => None,
                };
                ServerTool {
                    descriptor: ToolDescriptor {
                        name: id,
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema,
                        output_schema: output.as_ref().and(output_schema),
                        read_only: read_only(&tool),
                    },
                    output,
                    original: tool.name.to_string(),
                }
            })
            .collect::<Vec<_>>();
        let descriptors = tools.iter().map(|t| t.descriptor.clone()).collect();
        Ok(Catalogue {
            tools: tools.into(),
            descriptors,
        })
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

    /// Stops the server, if it runs.
    pub async fn shutdown(&self) {
        let conn = self.connection.lock().await.take();
        if let Some(conn) = conn {
            conn.close().await;
        }
    }

    /// One call on the running server (started if needed).
    async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ToolError> {
        let Live {
            generation,
            oversized,
            dropped,
            in_flight,
            secrets,
            peer,
            catalogue,
            progress: routes,
        } = self.connected().await?;
        // Whatever this server says may echo what it was started with.
        ctx.secrets.add_from(&secrets);
        let oversized_before = oversized.load(Ordering::Relaxed);
        let Some(found) = catalogue.tools.iter().find(|t| t.descriptor.name == tool) else {
            return Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("server `{}` has no tool named `{tool}`", self.config.name),
            ));
        };
        let Value::Object(arguments) = args else {
            return Err(ToolError::new(
                ToolErrorCode::InvalidArguments,
                "arguments must be an object",
            ));
        };
        let mut params =
            CallToolRequestParams::new(found.original.clone()).with_arguments(arguments);
        if let Some(key) = &ctx.idempotency_key {
            // In the request's own `_meta`: rmcp adds its progress token (and, for 2026-07-28
            // servers, the client context) beside it when it sends the request.
            let mut meta = RequestMetaObject::new();
            meta.insert(IDEMPOTENCY_META_KEY.to_owned(), Value::String(key.clone()));
            params.meta = Some(meta);
        }
        // The pipeline's deadline (a direct call without one gets the server's own timeout).
        let deadline = ctx.deadline.unwrap_or(CallDeadline {
            at: tokio::time::Instant::now() + self.gate.timeout(),
            after: self.gate.timeout(),
        });
        let timeout = deadline.remaining();
        // rmcp sends `notifications/cancelled` itself when this timeout passes.
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                PeerRequestOptions::with_timeout(timeout),
            )
            .await
            .map_err(|e| self.call_failed(tool, &e))?;
        let mut abandoned = AbandonedCall {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let (mut progress, _route) = routes.subscribe(handle.progress_token.clone());
        let response = handle.await_response();
        tokio::pin!(response);
        let _waiting = InFlight::enter(&in_flight);
        let mut last_progress: Option<(f64, Option<f64>)> = None;
        let answer = loop {
            let notified = dropped.notified();
            tokio::pin!(notified);
            tokio::select! {
                answer = &mut response => break answer,
                Some(update) = progress.recv() => {
                    last_progress = Some((update.progress, update.total));
                    forward(&ctx.progress, update).await;
                }
                () = &mut notified => {
                    // A message was too big to read. With no other call waiting it can only
                    // have been this call's answer; otherwise each waiting call learns of it
                    // when its timeout passes (below).
                    if in_flight.load(Ordering::Relaxed) == 1 {
                        // (The abandoned-call guard tells the server to stop.)
                        return Err(self.too_large(tool));
                    }
                }
            }
        };
        abandoned.peer = None;
        // Updates that arrived just before the answer still reach the agent, in order.
        let mut last = last_progress;
        while let Ok(update) = progress.try_recv() {
            last = Some((update.progress, update.total));
            forward(&ctx.progress, update).await;
        }
        // rmcp hands notifications to the handler on their own tasks, so the last updates can
        // land just after the answer. When the last one seen was short of its total, give
        // the rest a moment.
        if let Some((done, Some(total))) = last
            && done < total
        {
            let grace = tokio::time::sleep(PROGRESS_GRACE);
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    Some(update) = progress.recv() => {
                        let finished = update.total.is_some_and(|t| update.progress >= t);
                        forward(&ctx.progress, update).await;
                        if finished {
                            break;
                        }
                    }
                    () = &mut grace => break,
                }
            }
        }
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(ServerResult::InputRequiredResult(_)) => {
                return Err(ToolError::new(
                    ToolErrorCode::UpstreamError,
                    format!(
                        "{}.{tool} asked for input from a user, which a sandboxed program cannot give",
                        self.config.name
                    ),
                ));
            }
            Ok(ServerResult::CreateTaskResult(_)) => {
                return Err(ToolError::new(
                    ToolErrorCode::UpstreamError,
                    format!(
                        "{}.{tool} answered with a long-running task, which Airlock does not follow yet",
                        self.config.name
                    ),
                ));
            }
            Ok(_) => {
                return Err(self.call_failed(tool, &ServiceError::UnexpectedResponse));
            }
            Err(ServiceError::Timeout { .. })
                if oversized.load(Ordering::Relaxed) > oversized_before =>
            {
                return Err(self.too_large(tool));
            }
            Err(ServiceError::Timeout { .. }) => {
                self.discard_if_unresponsive(&peer, generation).await;
                return Err(deadline.error(&format!("{}.{tool}", self.config.name)));
            }
            Err(e) => {
                if matches!(
                    e,
                    ServiceError::TransportSend(_) | ServiceError::TransportClosed
                ) {
                    self.discard(generation).await;
                }
                return Err(self.call_failed(tool, &e));
            }
        };
        let coercions = self.config.coerce.is_safe().then_some(&ctx.coercions);
        to_value(
            &self.config.name,
            tool,
            result,
            found.output.as_deref(),
            coercions,
            Some(&ctx.withheld),
        )
    }

    /// Drops a connection that failed under a call (an HTTP server that went away does not
    /// always close rmcp's transport), so the next call connects afresh. A newer connection
    /// made meanwhile by another call is kept.
    async fn discard(&self, generation: u64) {
        let stale = {
            let mut guard = self.connection.lock().await;
            if guard.as_ref().is_some_and(|c| c.generation == generation) {
                guard.take()
            } else {
                None
            }
        };
        // Closed outside the lock: other calls need not wait for the old server to exit.
        if let Some(conn) = stale {
            warn!(server = %self.config.name, "the connection to the MCP server failed; connecting again on the next call");
            conn.close().await;
        }
    }

    /// After a call timed out: is the connection itself still answering? Some failures never
    /// reach the caller as errors (server-everything answers an unknown HTTP session with a
    /// 400 whose JSON-RPC error has no id, which rmcp cannot match to the request), so a
    /// `ping` decides whether the next call needs a new connection.
    async fn discard_if_unresponsive(&self, peer: &Peer<RoleClient>, generation: u64) {
        let ping = ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        // Any answer means the connection works, an error included: the 2026-07-28 revision
        // has no `ping`, and its servers answer "method not found".
        let answered = match peer
            .send_request_with_option(ping, PeerRequestOptions::with_timeout(PING_TIMEOUT))
            .await
        {
            Ok(handle) => matches!(
                handle.await_response().await,
                Ok(_) | Err(ServiceError::McpError(_))
            ),
            Err(_) => false,
        };
        if !answered {
            self.discard(generation).await;
        }
    }

    fn too_large(&self, tool: &str) -> ToolError {
        ToolError::new(ToolErrorCode::ResultTooLarge,
            format!(
                "{}.{tool}: the server sent a message of over {} MiB, which was dropped unread; the result cannot reach the program",
                self.config.name,
                MAX_STDIO_MESSAGE >> 20
            ),
        )
        .with_hint("ask the tool for less at a time (pagination, filters, a smaller range)")
    }

    fn call_failed(&self, tool: &str, e: &ServiceError) -> ToolError {
        let detail = match e {
            ServiceError::TransportClosed => {
                "the connection to the server closed before it answered (the server may have crashed; it is started again on the next call)".to_owned()
            }
            ServiceError::McpError(error) => format!("the server answered with an error: {}", error.message),
            ServiceError::TransportSend(e) => {
                // rmcp's message starts with the transport's Rust type name, which tells a
                // program nothing.
                let text = e.to_string();
                let reason = text.split_once("] error: ").map_or(text.as_str(), |(_, r)| r);
                format!("the request could not be delivered: {reason}")
            }
            other => other.to_string(),
        };
        ToolError::new(
            ToolErrorCode::UpstreamError,
            format!("calling {}.{tool} failed: {detail}", self.config.name),
        )
    }
}

/// Try `server/discover` (2026-07-28) first; a server that answers it with an error, or not
/// within rmcp's 10 s probe timeout, gets the `initialize` handshake of the 2025 revisions.
/// `legacy` skips the probe, for servers known to answer it wrongly.
/// Whether a listed tool only reads: its server says so with `annotations.readOnlyHint: true`.
/// Without the hint the MCP default holds (the tool may write). The hint is the server's word,
/// and the server is untrusted: a false `true` only lets a replay call that server's own tool
/// again, which the server could do to itself anyway.
fn read_only(tool: &rmcp::model::Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

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

async fn forward(progress: &ToolProgress, update: ProgressNotificationParam) {
    progress
        .report(update.progress, update.total, update.message)
        .await;
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
        self.lists_changes.load(Ordering::Relaxed)
    }

    fn shutdown(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(McpServer::shutdown(self))
    }
}

/// Maps an MCP tool result to the value the program receives:
/// - `isError: true` → a `ToolError` carrying the server's text;
/// - for a tool with an `outputSchema` (`output`): `structuredContent`, or, from a server
///   that sends only the serialised copy MCP asks for alongside it, its one text block
///   parsed as JSON; the value must satisfy the schema, else the call fails with
///   `upstream_error` (MCP says clients should check, and the SDK types the result by the
///   schema, so a program never gets a value of another shape), unless it breaks it only
///   trivially and `coercions` (the server's `coerce = "safe"`) takes the coercions that make
///   it fit ([`crate::tools::coercion`]); a value withheld so goes to `withheld`, for the
///   pipeline to count as drift;
/// - otherwise `structuredContent` when present;
/// - otherwise one text block → its JSON value if it is JSON, else the string;
/// - otherwise (several blocks, images, resources) → an array of the content blocks as MCP
///   defines them (`{type: "text", text}`, `{type: "image", data, mimeType}`, …).
fn to_value(
    server: &str,
    tool: &str,
    result: CallToolResult,
    output: Option<&OutputSchema>,
    coercions: Option<&CoercionLog>,
    withheld: Option<&crate::tools::WithheldResult>,
) -> Result<Value, ToolError> {
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
            ToolErrorCode::UpstreamError,
            format!(
                "{server}.{tool} failed: {}",
                if message.is_empty() {
                    "the server reported an error without a message"
                } else {
                    &message
                }
            ),
        )
        .reported_by_tool());
    }
    if let Some(output) = output {
        let broken = |why: String| {
            ToolError::new(ToolErrorCode::UpstreamError,
                format!("{server}.{tool} answered with a result that breaks its own outputSchema: {why}"),
            )
            .with_hint("this is a problem of the tool server; the result was withheld because the program's types promise that shape")
        };
        let value = match (result.structured_content, result.content.as_slice()) {
            (Some(structured), _) => structured,
            (None, [ContentBlock::Text(text)]) => serde_json::from_str(&text.text)
                .map_err(|_| broken("no structuredContent, and its text is not JSON".into()))?,
            (None, _) => return Err(broken("no structuredContent".into())),
        };
        let first_error = output
            .validator
            .iter_errors(&value)
            .next()
            .map(|error| (error.instance_path().to_string(), error.to_string()));
        if let Some((at, mut why)) = first_error {
            if let Some(log) = coercions
                && let Some((coerced, made)) = output.coerce(&value)
            {
                log.add(made);
                return Ok(coerced);
            }
            // The validator's message quotes the offending value, which may be large.
            if why.chars().count() > 300 {
                why = format!("{}…", why.chars().take(300).collect::<String>());
            }
            let error = broken(format!(
                "at `{}`: {why}",
                if at.is_empty() { "/" } else { &at }
            ));
            // Withheld from the program, but the pipeline counts it as drift.
            if let Some(withheld) = withheld {
                withheld.set(value);
            }
            return Err(error);
        }
        return Ok(value);
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
                ToolErrorCode::UpstreamError,
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
                    inherit_env: Vec::new(),
                },
                start: StartMode::Lazy,
                call_timeout_ms: 1000,
                max_concurrent_calls: 1,
                coerce: Default::default(),
                learn_types: true,
                confinement: Default::default(),
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

    /// `readOnlyHint: true` marks a tool read-only; no hint, no annotations or `false` do not
    /// (the tools as a server lists them, so the wire names are checked too).
    #[test]
    fn read_only_follows_the_read_only_hint() {
        let listed = |extra: serde_json::Value| {
            let mut tool = serde_json::json!({"name": "t", "inputSchema": {"type": "object"}});
            if let (Some(tool), Some(extra)) = (tool.as_object_mut(), extra.as_object()) {
                tool.extend(extra.clone());
            }
            read_only(&serde_json::from_value::<rmcp::model::Tool>(tool).unwrap())
        };
        assert!(listed(
            serde_json::json!({"annotations": {"readOnlyHint": true}})
        ));
        assert!(listed(
            serde_json::json!({"annotations": {"readOnlyHint": true, "destructiveHint": false}})
        ));
        assert!(!listed(
            serde_json::json!({"annotations": {"readOnlyHint": false}})
        ));
        assert!(!listed(
            serde_json::json!({"annotations": {"idempotentHint": true}})
        ));
        assert!(!listed(serde_json::json!({"annotations": {}})));
        assert!(!listed(serde_json::json!({})));
    }

    #[test]
    fn results_map_predictably() {
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        assert_eq!(
            to_value("s", "t", text("{\"a\":1}"), None, None, None).unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            to_value("s", "t", text("plain words"), None, None, None).unwrap(),
            serde_json::json!("plain words")
        );
        let mut structured = text("ignored");
        structured.structured_content = Some(serde_json::json!({"n": 2}));
        assert_eq!(
            to_value("s", "t", structured, None, None, None).unwrap(),
            serde_json::json!({"n": 2})
        );
        let err = to_value(
            "s",
            "t",
            CallToolResult::error(vec![ContentBlock::text("boom")]),
            None,
            None,
            None,
        )
        .unwrap_err();
        assert_eq!(err.code, "upstream_error");
        assert!(err.message.contains("s.t failed: boom"), "{}", err.message);
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(
            to_value("s", "t", two, None, None, None).unwrap(),
            serde_json::json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        );
    }

    /// A tool with an `outputSchema` gives the program a value of that shape or an error:
    /// before, a server that sent only text (or broke its schema) handed the program a
    /// string or an object of another shape where the SDK promised the schema's type.
    #[test]
    fn results_of_tools_with_an_output_schema_have_its_shape() {
        let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
        let validator = OutputSchema::compile(&schema).unwrap();
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        let mut structured = text("{\"n\": 1}");
        structured.structured_content = Some(serde_json::json!({"n": 2}));
        assert_eq!(
            to_value("s", "t", structured, Some(&validator), None, None).unwrap(),
            serde_json::json!({"n": 2})
        );
        // Only the serialised copy: parsed, checked, used.
        assert_eq!(
            to_value("s", "t", text("{\"n\": 3}"), Some(&validator), None, None).unwrap(),
            serde_json::json!({"n": 3})
        );
        for broken in [
            text("plain words"),
            text("{\"n\": \"3\"}"),
            CallToolResult::success(vec![]),
        ] {
            let err = to_value("s", "t", broken, Some(&validator), None, None).unwrap_err();
            assert_eq!(err.code, "upstream_error");
            assert!(
                err.message.contains("breaks its own outputSchema"),
                "{}",
                err.message
            );
            assert!(err.hint.is_some());
        }
        // With coercion allowed, a trivial break is mended and the mend recorded.
        let log = CoercionLog::default();
        assert_eq!(
            to_value(
                "s",
                "t",
                text("{\"n\": \"3\"}"),
                Some(&validator),
                Some(&log),
                None
            )
            .unwrap(),
            serde_json::json!({"n": 3})
        );
        let made = log.take();
        assert_eq!(made.len(), 1);
        assert_eq!(
            (made[0].pointer.as_str(), &made[0].from),
            ("/n", &serde_json::json!("3"))
        );
        assert_eq!(made[0].place, crate::agent_api::CoercionPlace::Result);
        // Not a near miss: still an error, and the value is kept for the drift count.
        let withheld = crate::tools::WithheldResult::default();
        let err = to_value(
            "s",
            "t",
            text("{\"n\": \"three\"}"),
            Some(&validator),
            Some(&log),
            Some(&withheld),
        )
        .unwrap_err();
        assert_eq!(withheld.take(), Some(serde_json::json!({"n": "three"})));
        assert!(
            err.message.contains("breaks its own outputSchema"),
            "{}",
            err.message
        );
        assert!(log.take().is_empty());
        let mut wrong = text("{}");
        wrong.structured_content = Some(serde_json::json!({"m": 1}));
        let err = to_value("s", "t", wrong, Some(&validator), None, None).unwrap_err();
        assert!(err.message.contains("at `/`"), "{}", err.message);
        // A large wrong value is not quoted whole.
        let mut huge = text("{}");
        huge.structured_content = Some(serde_json::json!({"n": "x".repeat(100_000)}));
        let err = to_value("s", "t", huge, Some(&validator), None, None).unwrap_err();
        assert!(err.message.contains("at `/n`"), "{}", &err.message[..200]);
        assert!(err.message.len() < 1_000, "{} bytes", err.message.len());
    }
}
