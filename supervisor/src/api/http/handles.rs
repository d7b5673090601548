//! `GET /v1/executions/<id>` and `GET /v1/executions/<id>/events?after=N`: following an
//! execution by its id. A detached one (`"wait": false`) is followed while it runs from its
//! event log, and afterwards (also after a restart) from the response and events the journal
//! keeps; a waiting one shows the response that said so. Another principal's executions are as
//! absent as missing ones.

use super::HttpState;
use super::responses::{ApiBody, ChannelBody, error_response, json_response};
use super::sessions::session_error;
use crate::agent_api::{ApiErrorCode, ExecutionEvent, ExecutionResponse};
use crate::execution::Tracked;
use crate::execution::registry::numbered_line;
use airlock_policy::Principal;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

/// `GET /v1/executions/<id>`.
pub(super) fn status(state: &HttpState, principal: &Principal, id: &str) -> Response<ApiBody> {
    match state.executions.lookup(id, &principal.name) {
        Ok(Tracked::Detached(log)) => json_response(StatusCode::OK, &log.snapshot(id)),
        Ok(Tracked::Attached) => json_response(
            StatusCode::OK,
            &serde_json::json!({ "id": id, "status": "running" }),
        ),
        Ok(Tracked::Kept { response, .. }) => {
            let mut resp = Response::new(Full::new(Bytes::from(response)).boxed());
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp
        }
        Ok(Tracked::Row(row)) => json_response(StatusCode::OK, &row),
        Err(e) => not_found(id, &e),
    }
}

/// `GET /v1/executions/<id>/events?after=N`: NDJSON, each line an event with its number
/// (`seq`), from the one after `N` (default 0), following a running detached execution to
/// its `result` event (`follow=false`: only the events there now).
pub(super) fn events(
    state: &HttpState,
    principal: &Principal,
    id: &str,
    after: u64,
    follow: bool,
) -> Response<ApiBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    match state.executions.lookup(id, &principal.name) {
        Ok(Tracked::Detached(log)) => {
            tokio::spawn(async move {
                let mut seen = after;
                let mut changed = log.subscribe();
                loop {
                    let (events, done) = log.after(seen);
                    for (seq, event) in &events {
                        seen = *seq;
                        if tx
                            .send(Bytes::from(numbered_line(*seq, event)))
                            .await
                            .is_err()
                        {
                            return;
                        }
                        // The result is the last event.
                        if matches!(event, ExecutionEvent::Result(_)) {
                            return;
                        }
                    }
                    // Complete, and the reader asked for what comes after its end; or the
                    // reader wants only what is there now.
                    if done || !follow {
                        return;
                    }
                    if changed.changed().await.is_err() {
                        return;
                    }
                }
            });
        }
        Ok(Tracked::Kept { response, events }) => {
            let mut lines = String::new();
            let mut last = 0;
            let mut has_result = false;
            for line in events.lines() {
                let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let seq = value
                    .get("seq")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                last = last.max(seq);
                has_result |= value.get("event").and_then(|e| e.as_str()) == Some("result");
                if seq > after {
                    lines.push_str(line);
                    lines.push('\n');
                }
            }
            // A response kept without its events (a waiting one's) is its only event.
            if !has_result
                && let Ok(response) = serde_json::from_str::<ExecutionResponse>(&response)
            {
                let seq = last + 1;
                if seq > after {
                    lines.push_str(&numbered_line(
                        seq,
                        &ExecutionEvent::Result(Box::new(response)),
                    ));
                }
            }
            let _ = tx.try_send(Bytes::from(lines));
        }
        Ok(Tracked::Attached) => {
            return error_response(
                StatusCode::NOT_FOUND,
                ApiErrorCode::NotFound,
                format!("execution `{id}` runs for the client that waits for it; only detached executions keep their events"),
                Some("start it with \"wait\": false to follow it by id, or ask for Accept: application/x-ndjson when you start it".into()),
            );
        }
        Ok(Tracked::Row(row)) => {
            return error_response(
                StatusCode::NOT_FOUND,
                ApiErrorCode::NotFound,
                format!("no events are kept of execution `{id}` ({})", row.status),
                Some(if row.status == "interrupted" {
                    "a restart cut it off: POST /v1/executions/<id>/resume finishes it".into()
                } else {
                    "GET /v1/executions/<id> shows what is known of it".into()
                }),
            );
        }
        Err(e) => return not_found(id, &e),
    }
    let mut resp = Response::new(ChannelBody::new(rx, |bytes| bytes).boxed());
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    resp
}

fn not_found(id: &str, e: &crate::journal::SessionError) -> Response<ApiBody> {
    match e {
        crate::journal::SessionError::NotFound(_) => error_response(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            format!("there is no execution `{id}` of yours that the daemon follows"),
            Some("executions are followed while they run, and kept afterwards when they were detached (\"wait\": false) or waited; GET /v1/executions?status= lists yours".into()),
        ),
        other => session_error(other),
    }
}
