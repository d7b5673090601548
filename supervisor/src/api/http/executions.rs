//! `POST /v1/executions`: the body read with a size limit, the request parsed, and the
//! program handed to the execution service; the answer is one JSON response, or NDJSON events
//! as they happen for `Accept: application/x-ndjson`.

use super::responses::{ApiBody, error_response, event_body, json_body, json_response};
use super::{HttpState, Peer};
use crate::agent_api::{ApiErrorCode, ClientResults, ExecutionEvent, ExecutionRequest};
use crate::execution::{Started, Submission, SubmitError};
use crate::generation::PolicyGeneration;
use crate::journal::SessionError;
use airlock_policy::Principal;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use std::sync::Arc;
use tokio::sync::mpsc;

pub(super) async fn execute(
    state: Arc<HttpState>,
    peer: Arc<Peer>,
    generation: Arc<PolicyGeneration>,
    principal: Arc<Principal>,
    req: Request<Incoming>,
) -> Response<ApiBody> {
    let limits_policy = &principal.limits;
    let streaming = wants_events(&req);
    let respond_async = req
        .headers()
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim().eq_ignore_ascii_case("respond-async"));
    // JSON escaping can double a program's size (and \u escapes grow it further); the exact
    // code-size check follows after parsing.
    let body_limit = usize::try_from(limits_policy.max_code_bytes)
        .unwrap_or(usize::MAX)
        .saturating_mul(2)
        .saturating_add(1024 * 1024);
    let body = match Limited::new(super::responses::timed_body(req), body_limit)
        .collect()
        .await
    {
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
    let mut request: ExecutionRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return invalid_execution_request(&e),
    };
    if respond_async && request.wait.is_none() {
        request.wait = Some(false);
    }
    let detached = request.wait == Some(false);
    let (events, rx) = event_channel(streaming && !detached);
    let submission = Submission {
        request,
        peer: peer.info,
        principal,
        generation,
        events,
        resumed_from: None,
    };
    let started = state.executions.submit(submission).await;
    if detached {
        return accepted(started);
    }
    answer(started, rx).await
}

/// `400 invalid_json` for a body of `POST /v1/executions` that is not an execution request.
pub(super) fn invalid_execution_request(e: &serde_json::Error) -> Response<ApiBody> {
    error_response(
        StatusCode::BAD_REQUEST,
        ApiErrorCode::InvalidJson,
        format!("the request body is not a valid execution request: {e}"),
        Some(r#"send {"code": "<program>", "language": "typescript"|"javascript"|"python", "timeout_ms": <number>, "session": "new"|"<id>", "replay": "all"|"writes"|"none", "client_tools": [{"name", "description", "input_schema"}], "client_results": [{"id", "ok"}|{"id", "error": {"message"}}], "determinism": {"clock_ms", "seed"}} (all but code optional)"#.into()),
    )
}

/// `202 Accepted` for a detached execution: its id and where to follow it.
fn accepted(started: Result<Started, SubmitError>) -> Response<ApiBody> {
    let started = match started {
        Ok(started) => started,
        Err(e) => return refused(&e),
    };
    let location = format!("/v1/executions/{}", started.id);
    let mut resp = json_response(
        StatusCode::ACCEPTED,
        &serde_json::json!({
            "id": started.id,
            "status": "queued",
            "location": location,
            "events": format!("{location}/events"),
        }),
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(hyper::header::LOCATION, value);
    }
    // The execution's task runs on without anyone waiting for it.
    drop(started);
    resp
}

/// `POST /v1/executions/<id>/resume`: an interrupted execution run again in its session, every
/// recorded call replayed; answered like `POST /v1/executions`.
pub(super) async fn resume(
    state: Arc<HttpState>,
    peer: Arc<Peer>,
    generation: Arc<PolicyGeneration>,
    principal: Arc<Principal>,
    id: &str,
    streaming: bool,
) -> Response<ApiBody> {
    let (events, rx) = event_channel(streaming);
    let started = state
        .executions
        .resume(id, peer.info, principal, generation, events)
        .await;
    answer(started, rx).await
}

/// `POST /v1/executions/<id>/results`: the agent's answers to a waiting execution's client
/// tool calls; the execution runs on and is answered like `POST /v1/executions`.
pub(super) async fn results(
    state: Arc<HttpState>,
    peer: Arc<Peer>,
    generation: Arc<PolicyGeneration>,
    principal: Arc<Principal>,
    id: &str,
    req: Request<Incoming>,
) -> Response<ApiBody> {
    let streaming = wants_events(&req);
    let answers: ClientResults = match json_body(
        req,
        MAX_RESULTS_BODY,
        "a list of client tool results",
        r#"send {"results": [{"id": <pending call id>, "ok": <value>} | {"id": <id>, "error": {"message": "..."}}]}; answer fewer calls per request if it is too large (partial answers are allowed)"#,
    )
    .await
    {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let (events, rx) = event_channel(streaming);
    let started = state
        .executions
        .answer_waiting(
            id,
            answers.results,
            peer.info,
            principal,
            generation,
            events,
        )
        .await;
    answer(started, rx).await
}

/// The body of `POST /v1/sdk`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientSdkRequest {
    pub(super) client_tools: Vec<crate::agent_api::ClientToolSpec>,
}

/// `POST /v1/sdk` with `{ "client_tools": [...] }`: the SDK files that change for a request
/// declaring these client tools (`tools.d.ts`, `README.md`, `servers/client/*`; with
/// `?language=python` `tools.pyi`, `README.md`, `servers/client/*.pyi`), so the agent can type
/// its program against `tools.client.<name>` before it sends it.
pub(super) async fn client_sdk(
    generation: Arc<PolicyGeneration>,
    principal: Arc<Principal>,
    req: Request<Incoming>,
    language: crate::sdk::Language,
) -> Response<ApiBody> {
    let hint = r#"send {"client_tools": [{"name", "description", "input_schema"}]} as in POST /v1/executions"#;
    let tools =
        match json_body::<ClientSdkRequest>(req, 4 * 1024 * 1024, "a list of client tools", hint)
            .await
        {
            Ok(b) => b.client_tools,
            Err(resp) => return resp,
        };
    let tools = match crate::tools::client::ClientTools::new(tools) {
        Ok(t) => t,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                ApiErrorCode::BadRequest,
                e.to_string(),
                Some(e.hint().into()),
            );
        }
    };
    let view = generation.catalogue_view(&principal).await;
    let files = view.with_client_tools_in(&principal, &tools.sdk_tools(), language);
    json_response(
        StatusCode::OK,
        &serde_json::json!({ "files": files, "unavailable": view.unavailable }),
    )
}

/// Largest body of `POST /v1/executions/<id>/results`: one result may fill a frame to the
/// worker (16 MiB); a few more for the rest of the batch.
const MAX_RESULTS_BODY: usize = 32 * 1024 * 1024;

/// Whether the client asked for NDJSON events (`Accept: application/x-ndjson`).
pub(super) fn wants_events(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"))
}

type Events = (
    Option<mpsc::Sender<ExecutionEvent>>,
    Option<mpsc::Receiver<ExecutionEvent>>,
);

fn event_channel(streaming: bool) -> Events {
    if streaming {
        let (tx, rx) = mpsc::channel::<ExecutionEvent>(64);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    }
}

/// The events as they happen, or the whole response at the end.
async fn answer(
    started: Result<Started, SubmitError>,
    rx: Option<mpsc::Receiver<ExecutionEvent>>,
) -> Response<ApiBody> {
    let started = match started {
        Ok(started) => started,
        Err(e) => return refused(&e),
    };
    if let Some(rx) = rx {
        // The execution sends its result as the last event; a client that hangs up is
        // noticed by the execution itself.
        drop(started);
        let mut resp = Response::new(event_body(rx).boxed());
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        );
        return resp;
    }
    // If the client hangs up, hyper drops this handler and `started` with it, which tells
    // the execution to stop the program; it still ends properly and reaches the audit log.
    match started.response().await {
        Ok(response) => json_response(StatusCode::OK, &response),
        Err(e) => refused(&e),
    }
}

/// The answer to a program the service did not start.
fn refused(e: &SubmitError) -> Response<ApiBody> {
    let (status, code) = match e {
        SubmitError::ProgramTooLarge { .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, ApiErrorCode::ProgramTooLarge)
        }
        SubmitError::InvalidTimeout { .. } => {
            (StatusCode::BAD_REQUEST, ApiErrorCode::InvalidTimeout)
        }
        SubmitError::InvalidOutputBudget { .. } => {
            (StatusCode::BAD_REQUEST, ApiErrorCode::InvalidOutputBudget)
        }
        SubmitError::RateLimited { .. } | SubmitError::QueueFull { .. } => {
            (StatusCode::TOO_MANY_REQUESTS, ApiErrorCode::RateLimited)
        }
        SubmitError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, ApiErrorCode::ShuttingDown),
        SubmitError::Session(SessionError::NotFound(_)) | SubmitError::UnknownExecution(_) => {
            (StatusCode::NOT_FOUND, ApiErrorCode::NotFound)
        }
        SubmitError::Session(SessionError::Disabled) => {
            (StatusCode::BAD_REQUEST, ApiErrorCode::BadRequest)
        }
        SubmitError::Session(SessionError::Unavailable(_)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::JournalUnavailable,
        ),
        SubmitError::Session(SessionError::Full(_)) => {
            (StatusCode::TOO_MANY_REQUESTS, ApiErrorCode::JournalFull)
        }
        SubmitError::NotInterrupted { .. } | SubmitError::NotWaiting { .. } => {
            (StatusCode::CONFLICT, ApiErrorCode::Conflict)
        }
        SubmitError::ClientTools(_) => (StatusCode::BAD_REQUEST, ApiErrorCode::BadRequest),
        SubmitError::TooManyWaiting { .. } => {
            (StatusCode::TOO_MANY_REQUESTS, ApiErrorCode::TooManyWaiting)
        }
        SubmitError::UnknownWaiting(_) => (StatusCode::NOT_FOUND, ApiErrorCode::NotFound),
        SubmitError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, ApiErrorCode::Internal),
        SubmitError::NeedsJournal { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::JournalUnavailable,
        ),
        SubmitError::SecretInCode { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, ApiErrorCode::SecretInCode)
        }
    };
    let mut resp = error_response(status, code, e.to_string(), Some(e.hint()));
    let retry_after_s = match e {
        SubmitError::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
        SubmitError::QueueFull { .. } => Some(crate::execution::service::QUEUE_FULL_RETRY_S),
        _ => None,
    };
    if let Some(seconds) = retry_after_s {
        resp.headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    resp
}
