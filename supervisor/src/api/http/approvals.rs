//! `GET /v1/approvals` and `POST /v1/approvals/<id>`: the calls that wait for a person's
//! decision, and the decision. Who may decide is the policy's (`[approvals] approvers`), by the
//! peer's uid and groups as the kernel gave them; an approver sees every approval that waits,
//! anyone else only those of its own executions. An approver decides the calls of its own
//! executions only where `[approvals] self_approve` says it may.

use super::responses::{ApiBody, error_response, json_body, json_response};
use super::sessions::session_error;
use super::{HttpState, Peer};
use crate::agent_api::{ApiErrorCode, ApprovalRequest};
use crate::execution::{Approver, DecideError};
use crate::generation::PolicyGeneration;
use airlock_policy::Principal;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::sync::Arc;

/// The peer as an approver: its user name as the audit log and a denial name it.
fn approver(peer: &Peer) -> Approver {
    let uid = peer.info.uid;
    let name = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user.name,
        _ => format!("uid {uid}"),
    };
    Approver {
        peer: peer.info,
        groups: peer.groups.clone(),
        name,
    }
}

/// `GET /v1/approvals`.
pub(super) fn list(
    state: &HttpState,
    peer: &Peer,
    principal: &Principal,
    generation: &PolicyGeneration,
) -> Response<ApiBody> {
    match state
        .executions
        .approvals(&approver(peer), principal, generation)
    {
        Ok(approvals) => json_response(
            StatusCode::OK,
            &serde_json::json!({ "approvals": approvals }),
        ),
        Err(e) => session_error(&e),
    }
}

/// `POST /v1/approvals/<id>` with `{ "decision": "approve" | "deny", "reason"? }`.
pub(super) async fn decide(
    state: Arc<HttpState>,
    peer: Arc<Peer>,
    generation: Arc<PolicyGeneration>,
    id: &str,
    req: Request<Incoming>,
) -> Response<ApiBody> {
    let hint = r#"send {"decision": "approve" | "deny", "reason": "..."} (reason optional)"#;
    let request: ApprovalRequest = match json_body(req, 64 * 1024, "a decision", hint).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let decided = state
        .executions
        .decide(
            id,
            request.decision,
            request.reason,
            &approver(&peer),
            generation,
        )
        .await;
    match decided {
        Ok(decided) => json_response(StatusCode::OK, &decided),
        Err(e) => {
            let (status, code) = match &e {
                DecideError::NotApprover(_) | DecideError::OwnExecution { .. } => {
                    (StatusCode::FORBIDDEN, ApiErrorCode::NotPermitted)
                }
                DecideError::NotFound(_) => (StatusCode::NOT_FOUND, ApiErrorCode::NotFound),
                DecideError::AlreadyDecided { .. } => {
                    (StatusCode::CONFLICT, ApiErrorCode::Conflict)
                }
                DecideError::Journal(e) => return session_error(e),
            };
            error_response(status, code, e.to_string(), Some(e.hint()))
        }
    }
}
