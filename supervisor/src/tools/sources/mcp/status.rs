//! What `GET /v1/servers` (and `airlock servers`) shows of a server, and a test start of a
//! fresh instance of it (`POST /v1/servers/<name>/test`, `airlock server test`).

use super::McpServer;
use airlock_policy::{ConfineMode, ServerTransport};

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

impl McpServer {
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
    pub(super) fn last_stderr_lines(&self) -> Option<String> {
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

    /// The protocol revision negotiated with the running server (`None` if it is not running).
    pub async fn protocol_version(&self) -> Option<String> {
        let guard = self.connection.lock().await;
        guard.as_ref().map(|c| c.protocol.to_string())
    }
}
