//! `GET /v1/servers` and `POST /v1/servers/<name>/test`: each `[[server]]` of the policy in
//! force, where it is (not started, starting, ready, failed and when it is tried again), its
//! process, tools, confinement and last stderr lines; and a fresh instance of one started as
//! the daemon would, listed and stopped, which is what an operator runs after editing a
//! policy. For root and the daemon's own user only, as a reload is: a server's stderr and
//! command line are the operator's.

use super::HttpState;
use super::responses::{ApiBody, error_response, json_response};
use crate::agent_api::ApiErrorCode;
use crate::generation::PolicyGeneration;
use crate::tools::sources::mcp::ServerStatus;
use hyper::{Response, StatusCode};
use serde::Serialize;

#[derive(Debug, Serialize)]
struct Servers {
    servers: Vec<ServerStatus>,
}

fn refused(peer_uid: u32) -> Response<ApiBody> {
    error_response(
        StatusCode::FORBIDDEN,
        ApiErrorCode::NotPermitted,
        format!("uid {peer_uid} may not see or start the policy's tool servers"),
        Some("only root and the daemon's own user may (`sudo airlock servers`)".into()),
    )
}

pub(super) fn list(
    state: &HttpState,
    peer_uid: u32,
    generation: &PolicyGeneration,
) -> Response<ApiBody> {
    if !state.generations.may_reload(peer_uid) {
        return refused(peer_uid);
    }
    let servers = generation.mcp_servers().map(|s| s.status()).collect();
    json_response(StatusCode::OK, &Servers { servers })
}

pub(super) async fn test(
    state: &HttpState,
    peer_uid: u32,
    generation: &PolicyGeneration,
    name: &str,
) -> Response<ApiBody> {
    if !state.generations.may_reload(peer_uid) {
        return refused(peer_uid);
    }
    let Some(server) = generation.mcp_servers().find(|s| s.config().name == name) else {
        return no_such_server(generation, name);
    };
    json_response(StatusCode::OK, &server.test().await)
}

/// The 404 for a `[[server]]` name the policy in force does not have, listing the ones it has.
pub(super) fn no_such_server(generation: &PolicyGeneration, name: &str) -> Response<ApiBody> {
    let names: Vec<&str> = generation
        .policy
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    error_response(
        StatusCode::NOT_FOUND,
        ApiErrorCode::NotFound,
        format!("the policy in force has no [[server]] named `{name}`"),
        Some(if names.is_empty() {
            "it has no [[server]] at all; add one and `airlock reload`".to_owned()
        } else {
            format!("its servers: {}", names.join(", "))
        }),
    )
}
