//! A running server: the session rmcp keeps with it, what a call takes of it, and what the
//! server sends unasked (progress, tool-list changes), routed to the calls and the list.
//! A connection that fails under a call is dropped, so the next call connects afresh.

use super::schema::Catalogue;
use super::stdio::ServerProcess;
use super::{McpServer, PING_TIMEOUT, stderr};
use crate::tools::SecretsUsed;
use rmcp::ClientHandler;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ClientRequest, Implementation, PingRequest, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, RequestId, ServerNotification, SubscriptionFilterBuilder,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError,
};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{Instrument, debug, info_span, warn};

/// How long a stdio server may take to exit after its stdin closed before it is killed.
pub(super) const EXIT_GRACE: Duration = Duration::from_millis(500);

/// A running server and what we learnt from it.
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, ServerEvents>,
    pub(super) events: ServerEvents,
    pub(super) catalogue: Catalogue,
    /// When `catalogue` was listed: a list older than the contract check's bound is listed
    /// again before an unknown name is refused (a missed `list_changed` must not refuse a
    /// tool the server now has).
    pub(super) listed_at: tokio::time::Instant,
    /// The revision the handshake settled on.
    pub(super) protocol: ProtocolVersion,
    /// Reads a 2026-07-28 server's `subscriptions/listen` stream; stopped with the connection.
    /// Held for its `Drop`.
    pub(super) _listener: Option<AbortOnDrop>,
    /// Tells this connection from the one that replaces it.
    pub(super) generation: u64,
    /// Messages from a stdio server dropped for their size, so far.
    pub(super) oversized: Arc<std::sync::atomic::AtomicU64>,
    /// A stdio server's process (killed on drop).
    pub(super) process: Option<ServerProcess>,
    /// The secret values this connection was given (a stdio server's `env`, an HTTP
    /// server's `headers`): every call on it hands them back with its answer, for redaction;
    /// its stderr has them redacted before it is logged.
    pub(super) secrets: Arc<SecretsUsed>,
}

impl Connection {
    /// Ends the session and, for a stdio server, its process: stdin closes with the session,
    /// a well-behaved server exits; one that does not within [`EXIT_GRACE`] is killed.
    pub(super) async fn close(self) {
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
pub(super) struct Live {
    pub(super) generation: u64,
    pub(super) oversized: Arc<std::sync::atomic::AtomicU64>,
    pub(super) dropped: Arc<tokio::sync::Notify>,
    pub(super) in_flight: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) secrets: Arc<SecretsUsed>,
    pub(super) peer: Peer<RoleClient>,
    pub(super) catalogue: Catalogue,
    pub(super) progress: Arc<ProgressRoutes>,
}

impl Connection {
    pub(super) fn live(&self) -> Live {
        Live {
            generation: self.generation,
            oversized: self.oversized.clone(),
            dropped: self.events.dropped.clone(),
            in_flight: self.events.in_flight.clone(),
            secrets: self.secrets.clone(),
            peer: self.service.peer().clone(),
            catalogue: self.catalogue.clone(),
            progress: self.events.progress.clone(),
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.catalogue.tools.len())
            .field("protocol", &self.protocol)
            .finish()
    }
}

/// A task that must not outlive its owner.
#[derive(Debug)]
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a server sends on its own initiative, received by rmcp's service loop.
#[derive(Debug, Clone)]
pub(super) struct ServerEvents {
    /// Progress notifications, routed to the call that owns the token.
    pub(super) progress: Arc<ProgressRoutes>,
    /// Set by `notifications/tools/list_changed`; the next use lists the tools again.
    pub(super) tools_changed: Arc<AtomicBool>,
    /// Messages dropped for their size (stdio).
    pub(super) oversized: Arc<std::sync::atomic::AtomicU64>,
    /// Signalled when one is dropped.
    pub(super) dropped: Arc<tokio::sync::Notify>,
    /// Calls waiting for an answer on this connection.
    pub(super) in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// The last lines of a stdio server's stderr.
    pub(super) stderr: Arc<stderr::StderrTail>,
}

impl ServerEvents {
    pub(super) fn new() -> Self {
        ServerEvents {
            progress: Arc::new(ProgressRoutes::default()),
            tools_changed: Arc::new(AtomicBool::new(false)),
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
pub(super) struct ProgressRoutes {
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

    pub(super) fn subscribe(
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
pub(super) struct ProgressRoute {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes.lock().routes.remove(&self.token);
    }
}

/// Counts a call as waiting on its connection for as long as it lives.
pub(super) struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    pub(super) fn enter(count: &Arc<std::sync::atomic::AtomicUsize>) -> InFlight {
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
pub(super) struct AbandonedCall {
    pub(super) peer: Option<Peer<RoleClient>>,
    pub(super) id: RequestId,
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
    /// Opens the `subscriptions/listen` stream of a 2026-07-28 server for tool-list changes.
    pub(super) fn listen_for_changes(
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

    /// Drops a connection that failed under a call (an HTTP server that went away does not
    /// always close rmcp's transport), so the next call connects afresh. A newer connection
    /// made meanwhile by another call is kept.
    pub(super) async fn discard(&self, generation: u64) {
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
    pub(super) async fn discard_if_unresponsive(&self, peer: &Peer<RoleClient>, generation: u64) {
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
}
