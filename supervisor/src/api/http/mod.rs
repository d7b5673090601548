//! The agent API: HTTP/1.1 with JSON bodies on a Unix socket.
//!
//! Every connection is identified by the kernel (`SO_PEERCRED`, `SO_PEERGROUPS`), never by
//! anything the client says; the policy's principals decide whether it may talk to us at
//! all. A connection no principal admits gets one clear `403` and is closed.

use crate::agent_api::{
    ApiError, ApiErrorCode, ErrorBody, ExecutionEvent, ExecutionRequest, ExecutionResponse,
    PeerInfo, RequestLanguage,
};
use crate::audit_log::{CodeHash, ExecutionRecord};
use crate::daemon::DaemonState;
use crate::execution::{ExecutionJob, run_execution};
use crate::generation::PolicyGeneration;
use crate::rate_limiter::RateKind;
use crate::secrets::scanner::SecretScanner;
use airlock_policy::Principal;
use airlock_proto::{Language, Limits};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tracing::{debug, warn};

pub type ApiBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

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
    pub fn identify(stream: &UnixStream, state: &DaemonState) -> std::io::Result<Peer> {
        let cred = stream.peer_cred()?;
        let info = PeerInfo {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: cred.pid(),
        };
        let groups = peer_groups(stream).unwrap_or_default();
        let admitted = state.admit(info.uid, info.gid, &groups).is_some();
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
        let mut len = (groups.len() * std::mem::size_of::<u32>()) as libc::socklen_t;
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
    state: Arc<DaemonState>,
    stream: UnixStream,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let peer = match Peer::identify(&stream, &state) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            warn!(error = %e, "cannot read peer credentials; closing connection");
            return;
        }
    };
    if !peer.admitted {
        state.metrics.connection_refused();
        warn!(uid = peer.info.uid, gid = peer.info.gid, pid = ?peer.info.pid, "connection refused: no principal admits this peer");
    }
    let io = hyper_util::rt::TokioIo::new(stream);
    let svc_state = state.clone();
    let svc_peer = peer.clone();
    let service = hyper::service::service_fn(move |req| {
        let state = svc_state.clone();
        let peer = svc_peer.clone();
        async move { Ok::<_, Infallible>(route(state, peer, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(peer.admitted)
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

const ROUTES: &str = "the API has GET /v1/health, GET /metrics, POST /v1/executions, GET /v1/sdk, GET /v1/sdk/<path>, GET /v1/tools, GET /v1/tools/search?q= and POST /v1/reload";

/// One parameter of a query string, percent-decoded (`+` is a space).
fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decoded(&v.replace('+', " ")))
}

fn percent_decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

async fn route(
    state: Arc<DaemonState>,
    peer: Arc<Peer>,
    req: Request<Incoming>,
) -> Response<ApiBody> {
    let generation = state.generation();
    let Some(principal) = generation.admit(peer.info.uid, peer.info.gid, &peer.groups) else {
        return error_response(
            StatusCode::FORBIDDEN,
            ApiErrorCode::NotAdmitted,
            format!(
                "uid {} (gid {}) is not admitted by any principal in the policy ({})",
                peer.info.uid,
                peer.info.gid,
                generation.policy.origin
            ),
            Some("the operator must add this user or one of its groups to a [[principal]] entry in the policy".into()),
        );
    };
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/v1/health") => json_response(StatusCode::OK, &state.health()),
        (&Method::GET, "/metrics") => {
            let mut resp = Response::new(Full::new(Bytes::from(state.metrics_text())).boxed());
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            resp
        }
        (&Method::POST, "/v1/executions") => execute(state, peer, generation, principal, req).await,
        (&Method::POST, "/v1/reload") => {
            if !state.may_reload(peer.info.uid) {
                return error_response(
                    StatusCode::FORBIDDEN,
                    ApiErrorCode::NotPermitted,
                    format!("uid {} may not reload the policy", peer.info.uid),
                    Some("only root and the daemon's own user may reload; they can also send SIGHUP (systemctl reload airlockd)".into()),
                );
            }
            drop(generation);
            let report = state.reload().await;
            let status = if report.ok {
                StatusCode::OK
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            json_response(status, &report)
        }
        (&Method::GET, "/v1/sdk") => {
            let view = generation.catalogue_view(&principal).await;
            let files: Vec<serde_json::Value> = view
                .sdk
                .files
                .tree()
                .into_iter()
                .map(|(path, bytes)| serde_json::json!({ "path": path, "bytes": bytes }))
                .collect();
            json_response(
                StatusCode::OK,
                &serde_json::json!({
                    "files": files,
                    "tools": view.sdk.search.len(),
                    "unavailable": view.unavailable,
                }),
            )
        }
        (&Method::GET, sdk_path) if sdk_path.starts_with("/v1/sdk/") => {
            let file = percent_decoded(&sdk_path["/v1/sdk/".len()..]);
            let view = generation.catalogue_view(&principal).await;
            match view.sdk.files.files.get(&file) {
                Some(text) => {
                    let mut resp = Response::new(Full::new(Bytes::from(text.clone())).boxed());
                    let kind = if file.ends_with(".md") {
                        "text/markdown; charset=utf-8"
                    } else if file.ends_with(".json") {
                        "application/json"
                    } else {
                        "text/plain; charset=utf-8"
                    };
                    resp.headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
                    resp
                }
                None => error_response(
                    StatusCode::NOT_FOUND,
                    ApiErrorCode::NotFound,
                    format!("the SDK has no file `{file}`"),
                    Some("GET /v1/sdk lists the files; start with README.md".into()),
                ),
            }
        }
        (&Method::GET, "/v1/tools") => {
            let view = generation.catalogue_view(&principal).await;
            json_response(
                StatusCode::OK,
                &serde_json::json!({
                    "tools": view.definitions(&principal),
                    "unavailable": view.unavailable,
                }),
            )
        }
        (&Method::GET, "/v1/tools/search") => {
            let query = query_param(req.uri().query(), "q").unwrap_or_default();
            let limit = query_param(req.uri().query(), "limit")
                .and_then(|l| l.parse::<usize>().ok())
                .unwrap_or(10)
                .clamp(1, 100);
            if query.trim().is_empty() {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    ApiErrorCode::BadRequest,
                    "the search needs words: GET /v1/tools/search?q=<words>".into(),
                    Some("for example ?q=create+issue&limit=5".into()),
                );
            }
            let view = generation.catalogue_view(&principal).await;
            let results = view.sdk.search.search(&query, limit);
            json_response(
                StatusCode::OK,
                &serde_json::json!({
                    "query": query,
                    "results": results,
                    "unavailable": view.unavailable,
                }),
            )
        }
        (
            _,
            "/v1/health" | "/v1/executions" | "/metrics" | "/v1/sdk" | "/v1/tools"
            | "/v1/tools/search" | "/v1/reload",
        ) => error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            ApiErrorCode::MethodNotAllowed,
            format!("{} is not supported on {path}", req.method()),
            Some(ROUTES.into()),
        ),
        _ => error_response(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            format!("no route for {} {path}", req.method()),
            Some(ROUTES.into()),
        ),
    }
}

async fn execute(
    state: Arc<DaemonState>,
    peer: Arc<Peer>,
    generation: Arc<PolicyGeneration>,
    principal: Arc<Principal>,
    req: Request<Incoming>,
) -> Response<ApiBody> {
    let limits_policy = &principal.limits;
    let streaming = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    // JSON escaping can double a program's size (and \u escapes grow it further); the exact
    // code-size check follows after parsing.
    let body_limit = (limits_policy.max_code_bytes as usize).saturating_mul(2) + 1024 * 1024;
    let body = match Limited::new(req.into_body(), body_limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return error_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    ApiErrorCode::RequestTooLarge,
                    format!("the request body exceeds {body_limit} bytes"),
                    Some(format!(
                        "programs may be at most {} bytes (limits.max_code)",
                        limits_policy.max_code_bytes
                    )),
                );
            }
            return error_response(
                StatusCode::BAD_REQUEST,
                ApiErrorCode::BadRequest,
                format!("cannot read the request body: {e}"),
                None,
            );
        }
    };
    let request: ExecutionRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                ApiErrorCode::InvalidJson,
                format!("the request body is not a valid execution request: {e}"),
                Some(r#"send {"code": "<program>", "language": "typescript"|"javascript", "timeout_ms": <number>}"#.into()),
            );
        }
    };
    if request.code.len() as u64 > limits_policy.max_code_bytes {
        return error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::ProgramTooLarge,
            format!(
                "the program is {} bytes; the limit is {} bytes",
                request.code.len(),
                limits_policy.max_code_bytes
            ),
            Some("send a smaller program; keep data in tool calls, not in the source".into()),
        );
    }
    let timeout_ms = request.timeout_ms.unwrap_or(limits_policy.timeout_ms);
    if timeout_ms == 0 || timeout_ms > limits_policy.max_timeout_ms {
        return error_response(
            StatusCode::BAD_REQUEST,
            ApiErrorCode::InvalidTimeout,
            format!(
                "timeout_ms must be between 1 and {} (the policy's limits.max_timeout_ms), got {timeout_ms}",
                limits_policy.max_timeout_ms
            ),
            None,
        );
    }
    if let Some(bucket) = state.rates.bucket(
        &principal.name,
        RateKind::Executions,
        principal.rates.executions_per_minute,
    ) && let Err(limited) = bucket.try_take()
    {
        state.metrics.rate_limited();
        let retry_after = limited.retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let mut resp = error_response(
            StatusCode::TOO_MANY_REQUESTS,
            ApiErrorCode::RateLimited,
            format!(
                "principal `{}` may start {} executions per minute and has used them",
                principal.name, limited.per_minute
            ),
            Some(format!(
                "retry in {retry_after} s, or do more per program; the operator sets principal.executions_per_minute"
            )),
        );
        resp.headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from(retry_after));
        return resp;
    }
    let tool_call_rate = state.rates.bucket(
        &principal.name,
        RateKind::ToolCalls,
        principal.rates.tool_calls_per_minute,
    );
    let limits = Limits {
        timeout_ms,
        memory_bytes: limits_policy.memory_bytes,
        stack_bytes: limits_policy.stack_bytes,
        max_tool_calls: limits_policy.max_tool_calls,
        max_output_bytes: limits_policy.max_output_bytes,
    };
    let queued = Instant::now();
    let audit = AuditContext {
        code: CodeHash::of(&request.code),
        accepted: SystemTime::now(),
        scanner: generation.scanner.clone(),
    };
    let Ok(slot) = state.execution_slot().await else {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::ShuttingDown,
            "the daemon is shutting down and accepts no new executions".into(),
            Some("retry once the daemon is back".into()),
        );
    };
    let job = ExecutionJob {
        id: state.next_execution_id(),
        code: request.code,
        language: match request.language {
            RequestLanguage::Typescript => Language::TypeScript,
            RequestLanguage::Javascript => Language::JavaScript,
        },
        limits,
        peer: peer.info,
        principal,
        tool_call_rate,
        queue_wait: queued.elapsed(),
    };
    let env = generation.execution_env();
    if streaming {
        let (tx, rx) = mpsc::channel::<ExecutionEvent>(64);
        tokio::spawn(async move {
            let _slot = slot;
            // The execution runs to its end under the policy it started with.
            let _generation = generation;
            // A client that hangs up is noticed by the execution itself, which stops the
            // program and still returns its record for the audit log.
            let mut response = run_execution(&env, job, Some(tx.clone()), None).await;
            finished(&state, &audit, &mut response);
            let _ = tx.send(ExecutionEvent::Result(Box::new(response))).await;
        });
        let mut resp = Response::new(EventBody { rx }.boxed());
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        );
        resp
    } else {
        // In its own task, so that it ends properly and reaches the audit log even if the
        // client hangs up: hyper then drops this handler, with `_client`, which tells the
        // execution to stop the program.
        let (_client, gone) = tokio::sync::oneshot::channel::<()>();
        let execution = tokio::spawn(async move {
            let mut response = run_execution(&env, job, None, Some(gone)).await;
            drop(slot);
            drop(generation);
            finished(&state, &audit, &mut response);
            response
        });
        match execution.await {
            Ok(response) => json_response(StatusCode::OK, &response),
            Err(e) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                ApiErrorCode::Internal,
                format!("the execution task failed: {e}"),
                Some("this is a daemon problem; the operator should check the airlockd log".into()),
            ),
        }
    }
}

/// What the audit record of an execution needs from its request.
struct AuditContext {
    code: CodeHash,
    accepted: SystemTime,
    /// Redacts the short argument values the audit summary keeps.
    scanner: SecretScanner,
}

/// Counts a finished execution and appends it to the audit trail. Recording never waits; a
/// record the log could not take becomes a warning in the response, so an execution is never
/// held up by a full disk without the agent being told.
fn finished(state: &DaemonState, audit: &AuditContext, response: &mut ExecutionResponse) {
    state.metrics.record(response);
    let scanner = &audit.scanner;
    let redact: &dyn Fn(&str) -> std::borrow::Cow<'_, str> = &|text| scanner.scan_text(text).0;
    let record = ExecutionRecord::from_response(response, audit.code, audit.accepted, redact);
    if let Err(warning) = state.audit.record(record) {
        response.warnings.push(warning.to_string());
    }
}

/// A response body that writes execution events as NDJSON lines as they happen.
struct EventBody {
    rx: mpsc::Receiver<ExecutionEvent>,
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                let mut line = serde_json::to_vec(&event).unwrap_or_else(|_| b"{}".to_vec());
                line.push(b'\n');
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

pub fn json_response<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<ApiBody> {
    let body = match serde_json::to_vec(value) {
        Ok(b) => b,
        Err(e) => {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                ApiErrorCode::Internal,
                format!("cannot serialise the response: {e}"),
                None,
            );
        }
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub fn error_response(
    status: StatusCode,
    code: ApiErrorCode,
    message: String,
    hint: Option<String>,
) -> Response<ApiBody> {
    let body = ErrorBody {
        error: ApiError {
            code,
            message,
            hint,
        },
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
