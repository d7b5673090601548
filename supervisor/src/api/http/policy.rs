//! `GET /v1/policy/explain`: what the running daemon's policy decides for a caller and a tool,
//! which rule decided, where the daemon keeps its state, and how each stdio server is
//! confined. What `airlock policy explain` shows by default: the policy in force and the
//! daemon's own paths, not a file and the CLI's environment. For root and the daemon's own
//! user only (it tells about every principal), as a reload is.

use super::HttpState;
use super::responses::{ApiBody, error_response, json_response};
use crate::agent_api::ApiErrorCode;
use crate::generation::PolicyGeneration;
use crate::secrets::store::SecretStore;
use crate::tools::sources::mcp::confinement::{describe_server, server_description};
use airlock_policy::Caller;
use hyper::{Response, StatusCode};
use serde::Serialize;
use std::path::PathBuf;

/// Where the daemon keeps what it keeps, as it resolved them at start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DaemonPaths {
    /// `[daemon] state_directory`, or systemd's or the user's state directory.
    pub state_directory: Option<PathBuf>,
    /// The audit log's directory (`None`: the audit trail is off).
    pub audit: Option<PathBuf>,
    /// The journal's directory (`None`: sessions are off or unavailable).
    pub journal: Option<PathBuf>,
    /// `learned.sqlite` (`None`: learned types are kept in memory).
    pub learned: Option<PathBuf>,
    /// Where each stdio server's scratch directory is made (`<this>/<name>`).
    pub servers: PathBuf,
}

/// The caller being explained, as the daemon resolved it.
#[derive(Debug, Serialize)]
struct Explained {
    policy: String,
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    user: Option<String>,
    tool: String,
    allowed: bool,
    explanation: String,
    paths: DaemonPaths,
    servers: Vec<String>,
}

pub(super) fn explain(
    state: &HttpState,
    peer_uid: u32,
    generation: &PolicyGeneration,
    query: Option<&str>,
) -> Response<ApiBody> {
    if !state.generations.may_reload(peer_uid) {
        return error_response(
            StatusCode::FORBIDDEN,
            ApiErrorCode::NotPermitted,
            format!("uid {peer_uid} may not read the policy's decisions"),
            Some("only root and the daemon's own user may; others can ask their operator, or run `airlock policy explain --config FILE` on a copy of the policy".into()),
        );
    }
    let param = |name: &str| super::routes::query_param(query, name);
    if let Some(name) = param("server") {
        return explain_server(state, generation, &name);
    }
    let (Some(uid), Some(tool)) = (
        param("uid").and_then(|u| u.parse::<u32>().ok()),
        param("tool").filter(|t| !t.is_empty()),
    ) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            ApiErrorCode::BadRequest,
            "explain needs `uid` (a number) and `tool` (server.tool), or `server`".to_owned(),
            Some("for example GET /v1/policy/explain?uid=1000&tool=github.issues_create (and `gid` to override the user's primary group), or ?server=github".into()),
        );
    };
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten();
    let gid = param("gid")
        .and_then(|g| g.parse().ok())
        .or_else(|| user.as_ref().map(|u| u.gid.as_raw()))
        .unwrap_or(uid);
    // The socket reports a connecting process's supplementary groups; for a user's login
    // processes those are its groups in the group database.
    let groups: Vec<u32> = user
        .as_ref()
        .and_then(|u| {
            let name = std::ffi::CString::new(u.name.as_str()).ok()?;
            nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid)).ok()
        })
        .map(|groups| groups.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    let explanation = generation.policy.explain(
        Caller {
            uid,
            gid,
            groups: groups.clone(),
        },
        &tool,
    );
    let store = SecretStore::empty();
    let host = &state.generations.context().host;
    let servers = generation
        .policy
        .servers
        .iter()
        .filter_map(|server| describe_server(server, host, &store))
        .collect();
    json_response(
        StatusCode::OK,
        &Explained {
            policy: generation.policy.origin.clone(),
            uid,
            gid,
            groups,
            user: user.map(|u| u.name),
            allowed: explanation.allowed(),
            explanation: explanation.to_string(),
            tool,
            paths: state.paths.clone(),
            servers,
        },
    )
}

/// One server, explained: how it would be confined, each path it may read with its reason.
#[derive(Debug, Serialize)]
struct ServerExplained {
    policy: String,
    server: String,
    description: String,
}

/// `GET /v1/policy/explain?server=NAME`.
fn explain_server(
    state: &HttpState,
    generation: &PolicyGeneration,
    name: &str,
) -> Response<ApiBody> {
    let Some(server) = generation.policy.servers.iter().find(|s| s.name == name) else {
        return super::servers::no_such_server(generation, name);
    };
    let description = server_description(server, &state.generations.context().host);
    json_response(
        StatusCode::OK,
        &ServerExplained {
            policy: generation.policy.origin.clone(),
            server: name.to_owned(),
            description,
        },
    )
}
