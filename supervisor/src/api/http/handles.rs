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
use crate::journal::store::ExecutionState;
use airlock_policy::Principal;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
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
                    let (events, done) = log.after(seen, EVENTS_PER_READ);
                    let more = events.len() == EVENTS_PER_READ;
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
                    if more {
                        continue;
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
            // One copy of the body for all its readers at once, however slowly each reads.
            let body = state
                .kept_events
                .body(&principal.name, id, || KeptBody::of(&response, &events));
            drop((response, events));
            tokio::spawn(async move {
                let mut from = body.start_after(after);
                while from < body.bytes.len() {
                    let to = body.bytes.len().min(from + CHUNK_BYTES);
                    if tx.send(body.bytes.slice(from..to)).await.is_err() {
                        return;
                    }
                    from = to;
                }
            });
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
                Some(if row.status == ExecutionState::Interrupted {
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

/// Most events of a running execution's log a reader copies at once.
const EVENTS_PER_READ: usize = 32;
/// The pieces a kept log's body is sent in.
const CHUNK_BYTES: usize = 64 * 1024;

/// The bodies of kept event logs being sent, by principal and execution: however many
/// readers follow one kept execution at once, its body is in memory once (a reader holds
/// it while it sends; the last one to finish frees it).
#[derive(Debug, Default)]
pub(crate) struct KeptEventBodies {
    sending: Mutex<HashMap<(String, String), Weak<KeptBody>>>,
}

impl KeptEventBodies {
    /// The body being sent of `principal`'s execution `id`, or the one `build` makes.
    fn body(&self, principal: &str, id: &str, build: impl FnOnce() -> KeptBody) -> Arc<KeptBody> {
        let key = (principal.to_owned(), id.to_owned());
        if let Some(body) = self.lock().get(&key).and_then(Weak::upgrade) {
            return body;
        }
        // Built outside the lock: another execution's readers need not wait for it.
        let built = Arc::new(build());
        let mut sending = self.lock();
        if let Some(body) = sending.get(&key).and_then(Weak::upgrade) {
            return body;
        }
        sending.retain(|_, body| body.strong_count() > 0);
        sending.insert(key, Arc::downgrade(&built));
        built
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Weak<KeptBody>>> {
        self.sending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A kept execution's events as NDJSON, each line with its number, ending with its result.
#[derive(Debug)]
struct KeptBody {
    bytes: Bytes,
    /// Each line's number and where it starts in `bytes`, in order.
    lines: Vec<(u64, usize)>,
}

impl KeptBody {
    /// From the journal's `response` and `events` (NDJSON lines with their numbers).
    fn of(response: &str, events: &str) -> KeptBody {
        let mut text = String::new();
        let mut lines = Vec::new();
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
            lines.push((seq, text.len()));
            text.push_str(line);
            text.push('\n');
        }
        // A response kept without its events (a waiting one's) is its only event.
        if !has_result && let Ok(response) = serde_json::from_str::<ExecutionResponse>(response) {
            let seq = last + 1;
            lines.push((seq, text.len()));
            text.push_str(&numbered_line(
                seq,
                &ExecutionEvent::Result(Box::new(response)),
            ));
        }
        KeptBody {
            bytes: Bytes::from(text),
            lines,
        }
    }

    /// Where the first line numbered after `after` starts (the end if there is none).
    fn start_after(&self, after: u64) -> usize {
        self.lines
            .iter()
            .find(|(seq, _)| *seq > after)
            .map_or(self.bytes.len(), |(_, start)| *start)
    }
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
