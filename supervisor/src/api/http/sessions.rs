//! `GET /v1/sessions`, `GET|DELETE /v1/sessions/<id>`, `GET /v1/sessions/<id>/store` and
//! `GET /v1/executions?status=`: what the journal holds of the caller's own sessions, their
//! stores and executions. Another principal's are as
//! absent as missing ones (404), so ids reveal nothing.

use super::HttpState;
use super::responses::{ApiBody, error_response, json_response};
use crate::agent_api::ApiErrorCode;
use crate::journal::store::ExecutionState;
use crate::journal::{Journal, SessionError};
use airlock_policy::Principal;
use hyper::{Response, StatusCode};
use serde_json::json;
use std::sync::Arc;

/// The most executions one listing returns.
const LIST_LIMIT: u32 = 1000;

fn journal(state: &HttpState) -> Result<&Arc<Journal>, Box<Response<ApiBody>>> {
    state
        .executions
        .journal
        .journal()
        .map_err(|e| Box::new(session_error(&e)))
}

pub(super) fn session_error(e: &SessionError) -> Response<ApiBody> {
    let (status, code) = match e {
        SessionError::NotFound(_) => (StatusCode::NOT_FOUND, ApiErrorCode::NotFound),
        SessionError::Disabled => (StatusCode::BAD_REQUEST, ApiErrorCode::BadRequest),
        SessionError::Unavailable(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::JournalUnavailable,
        ),
        SessionError::Full(_) => (StatusCode::TOO_MANY_REQUESTS, ApiErrorCode::JournalFull),
    };
    error_response(status, code, e.to_string(), Some(e.hint().into()))
}

fn store_failed(e: &impl std::fmt::Display) -> Response<ApiBody> {
    session_error(&SessionError::Unavailable(e.to_string()))
}

pub(super) fn list(state: &HttpState, principal: &Principal) -> Response<ApiBody> {
    let journal = match journal(state) {
        Ok(j) => j,
        Err(resp) => return *resp,
    };
    match journal.store().sessions(&principal.name) {
        Ok(sessions) => json_response(StatusCode::OK, &json!({ "sessions": sessions })),
        Err(e) => store_failed(&e),
    }
}

pub(super) fn show(state: &HttpState, principal: &Principal, id: &str) -> Response<ApiBody> {
    let journal = match journal(state) {
        Ok(j) => j,
        Err(resp) => return *resp,
    };
    let session = match journal.session(id, &principal.name) {
        Ok(s) => s,
        Err(e) => return session_error(&e),
    };
    let calls = match journal.store().calls(id) {
        Ok(calls) => calls,
        Err(e) => return store_failed(&e),
    };
    let executions: Vec<_> = match journal
        .store()
        .executions(&principal.name, None, LIST_LIMIT)
    {
        Ok(all) => all.into_iter().filter(|e| e.session == id).collect(),
        Err(e) => return store_failed(&e),
    };
    json_response(
        StatusCode::OK,
        &json!({ "session": session, "calls": calls, "executions": executions }),
    )
}

/// The values a session's programs keep (`store.set`), by key, as they were scanned when set.
pub(super) fn store(state: &HttpState, principal: &Principal, id: &str) -> Response<ApiBody> {
    let journal = match journal(state) {
        Ok(j) => j,
        Err(resp) => return *resp,
    };
    match journal.store_values(id, &principal.name) {
        Ok((_, values)) => {
            let bytes: usize = values.iter().map(|(k, v)| k.len() + v.len()).sum();
            let values: serde_json::Map<String, serde_json::Value> = values
                .into_iter()
                .map(|(k, v)| {
                    let value = serde_json::from_str(&v).unwrap_or(serde_json::Value::String(v));
                    (k, value)
                })
                .collect();
            json_response(
                StatusCode::OK,
                &json!({ "session": id, "keys": values.len(), "bytes": bytes, "values": values }),
            )
        }
        Err(e) => session_error(&e),
    }
}

pub(super) fn delete(state: &HttpState, principal: &Principal, id: &str) -> Response<ApiBody> {
    let journal = match journal(state) {
        Ok(j) => j,
        Err(resp) => return *resp,
    };
    if let Err(e) = journal.session(id, &principal.name) {
        return session_error(&e);
    }
    if journal.is_busy(id) {
        return error_response(
            StatusCode::CONFLICT,
            ApiErrorCode::Conflict,
            format!("session `{id}` has an execution running"),
            Some("cancel it (DELETE /v1/executions/<id>) or wait for it to end".into()),
        );
    }
    match journal.delete_session(id, &principal.name) {
        Ok(_) => json_response(StatusCode::OK, &json!({ "id": id, "deleted": true })),
        Err(e) => session_error(&e),
    }
}

pub(super) fn list_executions(
    state: &HttpState,
    principal: &Principal,
    status: Option<&str>,
) -> Response<ApiBody> {
    let status = match status.map(|word| (word, ExecutionState::parse(word))) {
        None => None,
        Some((_, Some(state))) => Some(state),
        Some((word, None)) => {
            let all: Vec<&str> = ExecutionState::ALL.iter().map(|s| s.as_str()).collect();
            return error_response(
                StatusCode::BAD_REQUEST,
                ApiErrorCode::BadRequest,
                format!("`{word}` is not an execution status"),
                Some(format!("use one of {}", all.join(", "))),
            );
        }
    };
    let journal = match journal(state) {
        Ok(j) => j,
        Err(resp) => return *resp,
    };
    match journal
        .store()
        .executions(&principal.name, status, LIST_LIMIT)
    {
        Ok(executions) => json_response(StatusCode::OK, &json!({ "executions": executions })),
        Err(e) => store_failed(&e),
    }
}
