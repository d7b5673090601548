//! The agent API: HTTP/1.1 with JSON bodies on a Unix socket.
//!
//! Every connection is identified by the kernel (`SO_PEERCRED`, `SO_PEERGROUPS`), never by
//! anything the client says; the policy's principals decide whether it may talk to us at
//! all. A connection no principal admits gets one clear `403`, written before anything of it
//! is read, and is closed at once; so does a principal's connection past its share
//! (`connections`: `429`, or `503` past the daemon's), and every connection has deadlines:
//! for a request's head and between requests (`[daemon] idle_timeout`), for its body
//! (`body_timeout`, `responses::timed_body`), and for its reader to take the answer
//! (`write_timeout`).
//!
//! - this file: connections and peers;
//! - `routes`: the routes (health, metrics, reload, the SDK and search, cancel);
//! - `executions`: `POST /v1/executions` (and `/resume`, `/results`, `POST /v1/sdk` for
//!   client tools), plain, streamed or detached, over the execution service; `handles`:
//!   `GET /v1/executions/<id>` and its `/events`; `sessions`: sessions and the journal's
//!   executions;
//! - `approvals`: `GET /v1/approvals` and `POST /v1/approvals/<id>`, decisions on calls that
//!   wait for a person;
//! - `learned`: `GET /v1/sdk/learned` and `DELETE /v1/sdk/learned/<tool>`, the output types
//!   learned from the caller's tools' results;
//! - `responses`: JSON, error and NDJSON bodies; `health`: `GET /v1/health` and `/metrics`;
//! - `local_only`: what every request passes first, `/mcp` included: a local `Host`, no
//!   foreign `Origin`, and JSON in every `POST`;
//! - `/mcp` is handed to the MCP door ([`crate::api::mcp`]) with the caller it admitted.
//!
//! A door only translates between HTTP and the execution service (`crate::execution`) and
//! the generation in force ([`crate::generation`]); it decides nothing itself.

mod approvals;
pub(crate) mod connections;
mod executions;
mod handles;
mod health;
mod learned;
pub(crate) mod local_only;
pub(crate) mod policy;
mod responses;
mod routes;
mod servers;
mod sessions;

#[cfg(any(test, fuzzing))]
pub mod fuzz;

pub use health::{ExecutionCounts, Health};
pub use responses::{ApiBody, error_response, json_response};

use crate::agent_api::ApiErrorCode;
use crate::agent_api::PeerInfo;
use crate::execution::ExecutionService;
use crate::generation::Generations;
use connections::WriteDeadline;
use std::convert::Infallible;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UnixStream;
use tracing::{debug, warn};

/// What the routes serve from.
pub struct HttpState {
    pub generations: Arc<Generations>,
    pub executions: Arc<ExecutionService>,
    /// When the daemon started serving (health's `uptime_s`).
    pub started: Instant,
    /// The MCP door at `/mcp` ([`crate::api::mcp`]).
    pub mcp: McpService,
    /// Where the daemon keeps its state (`GET /v1/policy/explain`).
    pub paths: policy::DaemonPaths,
    /// The open connections, by principal.
    pub connections: Arc<connections::ConnectionCounts>,
    /// Kept event logs being read (`GET /v1/executions/<id>/events`), one copy each.
    pub(crate) kept_events: handles::KeptEventBodies,
}

impl std::fmt::Debug for HttpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpState")
            .field("generations", &self.generations)
            .field("executions", &self.executions)
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

/// The MCP door's Streamable HTTP service.
pub(crate) type McpService = rmcp::transport::streamable_http_server::StreamableHttpService<
    crate::api::mcp::McpDoor,
    rmcp::transport::streamable_http_server::session::never::NeverSessionManager,
>;

/// Who is on the other end of a connection, as the kernel reports it.
#[derive(Debug, Clone)]
pub struct Peer {
    pub info: PeerInfo,
    pub groups: Vec<u32>,
    /// Whether the policy in force when it connected admitted it. Each request is admitted
    /// again under the policy in force then, so a reload applies to open connections too.
    pub admitted: bool,
}

impl Peer {
    pub fn identify(stream: &UnixStream, generations: &Generations) -> std::io::Result<Peer> {
        let cred = stream.peer_cred()?;
        let info = PeerInfo {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: cred.pid(),
        };
        let groups = peer_groups(stream).unwrap_or_default();
        let admitted = generations.admit(info.uid, info.gid, &groups).is_some();
        Ok(Peer {
            info,
            groups,
            admitted,
        })
    }
}

/// Supplementary groups of the peer (`SO_PEERGROUPS`, Linux ≥ 4.13).
fn peer_groups(stream: &UnixStream) -> std::io::Result<Vec<u32>> {
    let mut groups = vec![0u32; 64];
    loop {
        // At most 65,536 groups (below), so the byte length fits.
        let mut len =
            libc::socklen_t::try_from(groups.len() * std::mem::size_of::<u32>()).unwrap_or(0);
        // SAFETY: the buffer is valid for `len` bytes and getsockopt writes at most that.
        let r = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r == 0 {
            groups.truncate(len as usize / std::mem::size_of::<u32>());
            return Ok(groups);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && groups.len() < 65536 {
            let want = (len as usize / std::mem::size_of::<u32>()).max(groups.len() * 2);
            groups.resize(want, 0);
            continue;
        }
        return Err(err);
    }
}

/// Serves one accepted connection until it closes or the daemon shuts down.
pub async fn serve_connection(
    state: Arc<HttpState>,
    stream: UnixStream,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let peer = match Peer::identify(&stream, &state.generations) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            warn!(error = %e, "cannot read peer credentials; closing connection");
            return;
        }
    };
    let generation = state.generations.current();
    let Some(principal) = generation.admit(peer.info.uid, peer.info.gid, &peer.groups) else {
        state.executions.metrics.connection_refused();
        warn!(uid = peer.info.uid, gid = peer.info.gid, pid = ?peer.info.pid, "connection refused: no principal admits this peer");
        let message = format!(
            "uid {} (gid {}) is not admitted by any principal in the policy ({})",
            peer.info.uid, peer.info.gid, generation.policy.origin
        );
        refuse(
            &stream,
            403,
            ApiErrorCode::NotAdmitted,
            &message,
            "the operator must add this user or one of its groups to a [[principal]] entry in the policy",
        )
        .await;
        return;
    };
    let daemon = &generation.policy.daemon;
    let _held = match state.connections.take(
        &principal.name,
        principal.limits.max_connections,
        daemon.max_connections,
    ) {
        Ok(held) => held,
        Err(refusal) => {
            state.executions.metrics.connection_refused();
            debug!(principal = %principal.name, error = %refusal, "connection refused");
            let status = match refusal {
                connections::Refusal::Principal { .. } => 429,
                connections::Refusal::Daemon { .. } => 503,
            };
            refuse(
                &stream,
                status,
                ApiErrorCode::RateLimited,
                &refusal.to_string(),
                refusal.hint(),
            )
            .await;
            return;
        }
    };
    let idle_timeout = Duration::from_millis(daemon.idle_timeout_ms);
    let write_timeout = Duration::from_millis(daemon.write_timeout_ms);
    drop(generation);
    let io = hyper_util::rt::TokioIo::new(WriteDeadline::new(stream, write_timeout));
    let svc_state = state.clone();
    let svc_peer = peer.clone();
    let service = hyper::service::service_fn(move |req| {
        let state = svc_state.clone();
        let peer = svc_peer.clone();
        async move { Ok::<_, Infallible>(routes::route(state, peer, req).await) }
    });
    // The head's deadline runs from the moment hyper waits for a request, so it is also how
    // long a kept connection may stay idle.
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(idle_timeout)
        .keep_alive(true)
        .serve_connection(io, service);
    tokio::pin!(conn);
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = shutdown.changed() => conn.as_mut().graceful_shutdown(),
        }
    }
}

/// Answers a connection that is not served, without reading anything of it; the caller then
/// drops it, which closes it. The answer is a few hundred bytes into a new connection's empty
/// socket buffer, so it is written at once; a connection that cannot take it within
/// [`REFUSAL_WRITE`] is closed without it.
async fn refuse(stream: &UnixStream, status: u16, code: ApiErrorCode, message: &str, hint: &str) {
    let answer = connections::refusal_bytes(status, code.as_str(), message, hint);
    let write = async {
        loop {
            // A new stream's readiness is known only once the reactor has seen it.
            stream.writable().await?;
            match stream.try_write(&answer) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                other => return other,
            }
        }
    };
    match tokio::time::timeout(REFUSAL_WRITE, write).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => debug!(error = %e, "the refusal could not be written"),
        Err(_) => debug!("the refusal could not be written in time"),
    }
}

/// How long a refused connection may take to accept its answer.
const REFUSAL_WRITE: Duration = Duration::from_millis(100);
