//! The routes of the agent API, each answered from the generation in force or handed to the
//! execution service.

use super::responses::{ApiBody, error_response, json_response};
use super::{
    HttpState, Peer, approvals, executions, handles, health, learned, local_only, policy, servers,
    sessions,
};
use crate::agent_api::ApiErrorCode;
use crate::generation::PolicyGeneration;
use crate::sdk::{Language, UnknownLanguage};
use crate::tools::builtin;
use airlock_policy::Principal;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;

const ROUTES: &str = "the API has GET /v1/health, GET /metrics, POST /v1/executions, GET /v1/executions?status=, GET /v1/executions/<id>, GET /v1/executions/<id>/events?after=N, DELETE /v1/executions/<id>, POST /v1/executions/<id>/resume, POST /v1/executions/<id>/results, GET /v1/approvals, POST /v1/approvals/<id>, GET /v1/sessions, GET /v1/sessions/<id>, GET /v1/sessions/<id>/store, DELETE /v1/sessions/<id>, GET /v1/sdk, POST /v1/sdk (with client_tools), GET /v1/sdk/<path>, GET /v1/sdk/learned?tool=, DELETE /v1/sdk/learned/<tool>, GET /v1/tools, GET /v1/tools/search?q=, POST /v1/reload, GET /v1/policy/explain?uid=&tool=, GET /v1/servers, POST /v1/servers/<name>/test and /mcp (MCP, Streamable HTTP)";

/// One parameter of a query string, percent-decoded (`+` is a space).
pub(super) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
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

/// Who asked, once admitted: the daemon, the peer, the generation in force and the principal
/// that admitted the peer under it.
struct Caller {
    state: Arc<HttpState>,
    peer: Arc<Peer>,
    generation: Arc<PolicyGeneration>,
    principal: Arc<Principal>,
}

/// What a group of routes answers: a response, or the method back when none of its routes
/// is the request's.
type Routed = Result<Response<ApiBody>, Method>;

pub(super) async fn route(
    state: Arc<HttpState>,
    peer: Arc<Peer>,
    req: Request<Incoming>,
) -> Response<ApiBody> {
    if let Some(refused) = local_only::refusal(req.method(), req.headers()) {
        return refused;
    }
    let generation = state.generations.current();
    let mut req = req;
    req.extensions_mut().insert(super::responses::BodyTimeout(
        std::time::Duration::from_millis(generation.policy.daemon.body_timeout_ms),
    ));
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
    if path == "/mcp" {
        // The MCP door finds the daemon and its caller, admitted above, in the request's
        // extensions.
        // Its body is read here, under `body_timeout` and the door's size bound as every
        // other route's is, and handed to rmcp whole.
        let (parts, body) = req.into_parts();
        let timeout = std::time::Duration::from_millis(generation.policy.daemon.body_timeout_ms);
        let body = match super::responses::whole_body(
            super::responses::TimedBody::new(body, timeout),
            crate::api::mcp::MAX_REQUEST_BODY_BYTES,
            "an MCP request",
            "send one JSON-RPC message per POST, whole",
        )
        .await
        {
            Ok(body) => http_body_util::Full::new(body),
            Err(refused) => return refused,
        };
        let mut req = Request::from_parts(parts, body);
        req.extensions_mut().insert(crate::api::mcp::Admitted {
            state: state.clone(),
            peer,
            generation,
            principal,
        });
        return state.mcp.handle(req).await;
    }
    let caller = Caller {
        state,
        peer,
        generation,
        principal,
    };
    let routed = if path.starts_with("/v1/executions") {
        execution_routes(caller, req, &path).await
    } else if path.starts_with("/v1/sessions") || path.starts_with("/v1/approvals") {
        journal_routes(caller, req, &path).await
    } else if path.starts_with("/v1/sdk") || path.starts_with("/v1/tools") {
        catalogue_routes(caller, req, &path).await
    } else {
        daemon_routes(caller, req, &path).await
    };
    routed.unwrap_or_else(|method| no_route(&method, &path))
}

/// `/v1/executions` and everything under it.
async fn execution_routes(caller: Caller, req: Request<Incoming>, path: &str) -> Routed {
    let Caller {
        state,
        peer,
        generation,
        principal,
    } = caller;
    let response = match (req.method(), path) {
        (&Method::POST, resume)
            if resume.starts_with("/v1/executions/") && resume.ends_with("/resume") =>
        {
            let id =
                percent_decoded(&resume["/v1/executions/".len()..resume.len() - "/resume".len()]);
            let streaming = executions::wants_events(&req);
            executions::resume(state, peer, generation, principal, &id, streaming).await
        }
        (&Method::POST, results)
            if results.starts_with("/v1/executions/") && results.ends_with("/results") =>
        {
            let id = percent_decoded(
                &results["/v1/executions/".len()..results.len() - "/results".len()],
            );
            executions::results(state, peer, generation, principal, &id, req).await
        }
        (&Method::GET, events)
            if events.starts_with("/v1/executions/") && events.ends_with("/events") =>
        {
            let id =
                percent_decoded(&events["/v1/executions/".len()..events.len() - "/events".len()]);
            let after = query_param(req.uri().query(), "after")
                .and_then(|a| a.parse::<u64>().ok())
                .unwrap_or(0);
            let follow = query_param(req.uri().query(), "follow").as_deref() != Some("false");
            handles::events(&state, &principal, &id, after, follow)
        }
        (&Method::GET, execution) if execution.starts_with("/v1/executions/") => {
            let id = percent_decoded(&execution["/v1/executions/".len()..]);
            handles::status(&state, &principal, &id)
        }
        (&Method::GET, "/v1/executions") => {
            let status = query_param(req.uri().query(), "status");
            sessions::list_executions(&state, &principal, status.as_deref())
        }
        (&Method::DELETE, execution) if execution.starts_with("/v1/executions/") => {
            let id = percent_decoded(&execution["/v1/executions/".len()..]);
            cancel(&state, &principal, &id)
        }
        (&Method::POST, "/v1/executions") => {
            executions::execute(state, peer, generation, principal, req).await
        }
        (method, _) => return Err(method.clone()),
    };
    Ok(response)
}

/// `DELETE /v1/executions/<id>`.
fn cancel(state: &HttpState, principal: &Principal, id: &str) -> Response<ApiBody> {
    match state.executions.cancel(id, &principal.name) {
        Ok(status) => json_response(
            StatusCode::ACCEPTED,
            &serde_json::json!({ "id": id, "status": status.as_str() }),
        ),
        Err(e) => error_response(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            e.to_string(),
            Some("the id is the `id` of a running or waiting execution you started (the first event of a stream, or `airlock exec --json`); finished executions cannot be cancelled".into()),
        ),
    }
}

/// Sessions and approvals: what the journal holds of the caller's.
async fn journal_routes(caller: Caller, req: Request<Incoming>, path: &str) -> Routed {
    let Caller {
        state,
        peer,
        generation,
        principal,
    } = caller;
    let response = match (req.method(), path) {
        (&Method::GET, "/v1/sessions") => sessions::list(&state, &principal),
        (&Method::GET, "/v1/approvals") => approvals::list(&state, &peer, &principal, &generation),
        (&Method::POST, approval) if approval.starts_with("/v1/approvals/") => {
            let id = percent_decoded(&approval["/v1/approvals/".len()..]);
            approvals::decide(state, peer, generation, &id, req).await
        }
        (&Method::GET, store)
            if store.starts_with("/v1/sessions/") && store.ends_with("/store") =>
        {
            let id = &store["/v1/sessions/".len()..store.len() - "/store".len()];
            sessions::store(&state, &principal, &percent_decoded(id))
        }
        (&Method::GET, session) if session.starts_with("/v1/sessions/") => sessions::show(
            &state,
            &principal,
            &percent_decoded(&session["/v1/sessions/".len()..]),
        ),
        (&Method::DELETE, session) if session.starts_with("/v1/sessions/") => sessions::delete(
            &state,
            &principal,
            &percent_decoded(&session["/v1/sessions/".len()..]),
        ),
        (method, _) => return Err(method.clone()),
    };
    Ok(response)
}

/// The SDK, the tools and their search, and the learned types: the caller's catalogue.
async fn catalogue_routes(caller: Caller, req: Request<Incoming>, path: &str) -> Routed {
    let Caller {
        generation,
        principal,
        ..
    } = caller;
    let response = match (req.method(), path) {
        (&Method::GET, "/v1/sdk") => match sdk_language(req.uri().query()) {
            Ok(language) => {
                let view = generation.catalogue_view(&principal).await;
                json_response(StatusCode::OK, &view.tree_in(language))
            }
            Err(e) => refused_language(&e),
        },
        (&Method::POST, "/v1/sdk") => match sdk_language(req.uri().query()) {
            Ok(language) => executions::client_sdk(generation, principal, req, language).await,
            Err(e) => refused_language(&e),
        },
        (&Method::GET, "/v1/sdk/learned") => {
            let tool = query_param(req.uri().query(), "tool").filter(|t| !t.is_empty());
            learned::list(&generation, &principal, tool.as_deref()).await
        }
        (&Method::DELETE, forget) if forget.starts_with("/v1/sdk/learned/") => {
            let tool = percent_decoded(&forget["/v1/sdk/learned/".len()..]);
            learned::forget(&generation, &principal, &tool)
        }
        (&Method::GET, sdk_path) if sdk_path.starts_with("/v1/sdk/") => {
            let file = percent_decoded(&sdk_path["/v1/sdk/".len()..]);
            let asked = query_param(req.uri().query(), "language").filter(|l| !l.is_empty());
            match sdk_language(req.uri().query()) {
                Ok(language) => {
                    let language = builtin::file_language(&file, asked.is_some(), language);
                    sdk_file(&generation, &principal, &file, language).await
                }
                Err(e) => refused_language(&e),
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
            search_tools(&generation, &principal, req.uri().query()).await
        }
        (method, _) => return Err(method.clone()),
    };
    Ok(response)
}

/// `?language=`: TypeScript when left out; a name that is neither is a bad request naming
/// the accepted ones.
fn sdk_language(query: Option<&str>) -> Result<Language, UnknownLanguage> {
    Language::parse_optional(query_param(query, "language").as_deref())
}

/// The answer to an unknown `?language=`.
fn refused_language(e: &UnknownLanguage) -> Response<ApiBody> {
    error_response(
        StatusCode::BAD_REQUEST,
        ApiErrorCode::BadRequest,
        e.to_string(),
        Some("leave language out for TypeScript, or send ?language=python".into()),
    )
}

/// `GET /v1/sdk/<file>`: one file of the caller's SDK (of the Python tree with
/// `?language=python`, or for a `.pyi` path).
async fn sdk_file(
    generation: &PolicyGeneration,
    principal: &Principal,
    file: &str,
    language: Language,
) -> Response<ApiBody> {
    let view = generation.catalogue_view(principal).await;
    match view.sdk.files_in(language).files.get(file) {
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
        None => {
            let lister = match language {
                Language::TypeScript => "GET /v1/sdk",
                Language::Python => "GET /v1/sdk?language=python",
            };
            let hint = builtin::missing_file_hint(&view, file, lister, language);
            error_response(
                StatusCode::NOT_FOUND,
                ApiErrorCode::NotFound,
                format!("the SDK has no file `{file}`"),
                Some(hint),
            )
        }
    }
}

/// `GET /v1/tools/search?q=&limit=`.
async fn search_tools(
    generation: &PolicyGeneration,
    principal: &Principal,
    query: Option<&str>,
) -> Response<ApiBody> {
    let words = query_param(query, "q").unwrap_or_default();
    let limit = query_param(query, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(10)
        .clamp(1, 100);
    if words.trim().is_empty() {
        return error_response(
            StatusCode::BAD_REQUEST,
            ApiErrorCode::BadRequest,
            "the search needs words: GET /v1/tools/search?q=<words>".into(),
            Some("for example ?q=create+issue&limit=5".into()),
        );
    }
    let language = match sdk_language(query) {
        Ok(language) => language,
        Err(e) => return refused_language(&e),
    };
    let view = generation.catalogue_view(principal).await;
    json_response(StatusCode::OK, &view.search_in(&words, limit, language))
}

/// The daemon itself: health, metrics, reload, the tool servers, the policy explained.
async fn daemon_routes(caller: Caller, req: Request<Incoming>, path: &str) -> Routed {
    let Caller {
        state,
        peer,
        generation,
        ..
    } = caller;
    let response = match (req.method(), path) {
        (&Method::GET, "/v1/health") => {
            let operator = state.generations.may_reload(peer.info.uid);
            json_response(StatusCode::OK, &health::health(&state, operator))
        }
        (&Method::GET, "/metrics") => metrics(&state, &peer),
        (&Method::POST, "/v1/reload") => {
            if !state.generations.may_reload(peer.info.uid) {
                return Ok(error_response(
                    StatusCode::FORBIDDEN,
                    ApiErrorCode::NotPermitted,
                    format!("uid {} may not reload the policy", peer.info.uid),
                    Some("only root and the daemon's own user may reload; they can also send SIGHUP (systemctl reload airlockd)".into()),
                ));
            }
            drop(generation);
            let report = state.generations.reload().await;
            let status = if report.ok {
                StatusCode::OK
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            json_response(status, &report)
        }
        (&Method::GET, "/v1/servers") => servers::list(&state, peer.info.uid, &generation),
        (&Method::POST, test) if test.starts_with("/v1/servers/") && test.ends_with("/test") => {
            let name = percent_decoded(&test["/v1/servers/".len()..test.len() - "/test".len()]);
            servers::test(&state, peer.info.uid, &generation, &name).await
        }
        (&Method::GET, "/v1/policy/explain") => {
            policy::explain(&state, peer.info.uid, &generation, req.uri().query())
        }
        (method, _) => return Err(method.clone()),
    };
    Ok(response)
}

/// `GET /metrics`, for the operator: the counts are every principal's (executions, tools,
/// approvals, drift per tool), as the tool servers' states are.
fn metrics(state: &HttpState, peer: &Peer) -> Response<ApiBody> {
    if !state.generations.may_reload(peer.info.uid) {
        return error_response(
            StatusCode::FORBIDDEN,
            ApiErrorCode::NotPermitted,
            format!("uid {} may not read the daemon's metrics", peer.info.uid),
            Some("only root and the daemon's own user may: they count every principal's executions and tool calls; scrape /metrics as one of them, or see your own executions with GET /v1/executions".into()),
        );
    }
    let mut resp = Response::new(Full::new(Bytes::from(health::metrics_text(state))).boxed());
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    resp
}

/// No route answers `method` on `path`: `405` on a path that has routes, `404` otherwise.
fn no_route(method: &Method, path: &str) -> Response<ApiBody> {
    match path {
        "/v1/health" | "/v1/executions" | "/metrics" | "/v1/sdk" | "/v1/tools"
        | "/v1/tools/search" | "/v1/reload" | "/v1/sessions" | "/v1/sdk/learned"
        | "/v1/servers" => error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            ApiErrorCode::MethodNotAllowed,
            format!("{method} is not supported on {path}"),
            Some(ROUTES.into()),
        ),
        _ => error_response(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            format!("no route for {method} {path}"),
            Some(ROUTES.into()),
        ),
    }
}
