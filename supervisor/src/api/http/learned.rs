//! `GET /v1/sdk/learned[?tool=<namespace.tool>]` and `DELETE /v1/sdk/learned/<namespace.tool>`:
//! what the daemon learned of the results of the caller's tools, and forgetting it. Only tools
//! the caller's principal may call are shown or forgotten; any other is as absent as one
//! nothing is learned of.

use super::responses::{ApiBody, error_response, json_response};
use crate::agent_api::ApiErrorCode;
use crate::generation::PolicyGeneration;
use crate::learned_types::LearnedError;
use crate::sdk::schema_types::TypeScriptTypes;
use airlock_policy::Principal;
use hyper::{Response, StatusCode};
use serde_json::json;

fn error(e: &LearnedError) -> Response<ApiBody> {
    let (status, code) = match e {
        LearnedError::NotLearned(_) => (StatusCode::NOT_FOUND, ApiErrorCode::NotFound),
        LearnedError::BadName(_) => (StatusCode::BAD_REQUEST, ApiErrorCode::BadRequest),
        LearnedError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, ApiErrorCode::Internal),
    };
    error_response(status, code, e.to_string(), Some(e.hint().to_owned()))
}

/// `GET /v1/sdk/learned`: every learned type of the caller's tools (or `tool`'s), each with
/// its TypeScript form.
pub(super) async fn list(
    generation: &PolicyGeneration,
    principal: &Principal,
    tool: Option<&str>,
) -> Response<ApiBody> {
    if let Some(name) = tool
        && !name.contains('.')
    {
        return error(&LearnedError::BadName(name.to_owned()));
    }
    let view = generation.catalogue_view(principal).await;
    let reports = view.learned(principal, tool);
    if let Some(name) = tool
        && reports.is_empty()
    {
        return error(&LearnedError::NotLearned(name.to_owned()));
    }
    let learned: Vec<serde_json::Value> = reports
        .into_iter()
        .map(|report| {
            let mut types = TypeScriptTypes::new(&report.schema, "Learned");
            let typescript = types.type_of(&report.schema);
            let mut value = serde_json::to_value(&report).unwrap_or_default();
            value["typescript"] = typescript.into();
            value
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "learned": learned }))
}

/// `DELETE /v1/sdk/learned/<tool>`: drops what is learned of `tool`, at once and in the file.
pub(super) fn forget(
    generation: &PolicyGeneration,
    principal: &Principal,
    tool: &str,
) -> Response<ApiBody> {
    let Some((namespace, name)) = tool.split_once('.') else {
        return error(&LearnedError::BadName(tool.to_owned()));
    };
    let Some(types) = generation.catalogue.learning().types() else {
        return error(&LearnedError::NotLearned(tool.to_owned()));
    };
    if !principal.allows_tool(tool) {
        return error(&LearnedError::NotLearned(tool.to_owned()));
    }
    match types.forget(&principal.name, namespace, name) {
        Ok(true) => json_response(StatusCode::OK, &json!({ "tool": tool, "forgotten": true })),
        Ok(false) => error(&LearnedError::NotLearned(tool.to_owned())),
        Err(e) => error(&e),
    }
}
