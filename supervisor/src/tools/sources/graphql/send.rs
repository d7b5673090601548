//! One call: the document (a field tool's, or the program's own, checked first), the
//! policy's headers and the call's idempotency key on a mutation, and the answer's `data`
//! or its GraphQL errors.

use super::load::parse_error;
use super::{GraphQlApi, Operation, ToolKind};
use crate::agent_api::Coercion;
use crate::tools::coercion;
use crate::tools::sources::http;
use crate::tools::{
    CallContext, IDEMPOTENCY_HEADER, SecretsUsed, SourceAnswer, ToolError, ToolErrorCode,
};
use graphql_parser::query as gq;
use serde_json::{Value, json};

/// Largest response body read from the endpoint.
const MAX_RESPONSE_BYTES: usize = 32 << 20;

/// How many GraphQL error messages one `ToolError` lists.
const MAX_REPORTED_ERRORS: usize = 3;

impl GraphQlApi {
    /// The document a field tool sends for these arguments (for tests and diagnostics), or
    /// `None` for unknown tools and the custom-document tools.
    pub fn document_for(&self, tool: &str, args: &Value) -> Option<String> {
        let tool = &self.tools[*self.by_name.get(tool)?];
        match &tool.kind {
            ToolKind::Field {
                operation,
                field,
                args: declared,
                selection,
            } => Some(field_document(*operation, field, declared, selection, args)),
            ToolKind::Custom(_) => None,
        }
    }

    /// One call. The answer carries the secret values the policy's headers hold, whatever
    /// the outcome (an error may quote the request).
    pub(super) async fn perform(&self, tool: &str, args: Value, ctx: &CallContext) -> SourceAnswer {
        let mut secrets = SecretsUsed::default();
        let result = self.tool_result(tool, args, ctx, &mut secrets).await;
        SourceAnswer::mended(result, secrets)
    }

    /// The value of one call of `tool` (a field tool's mended to its output schema where the
    /// policy allows it, with the coercions); the headers' secret values go to `secrets`.
    async fn tool_result(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
        secrets: &mut SecretsUsed,
    ) -> Result<(Value, Vec<Coercion>), ToolError> {
        let Some(&index) = self.by_name.get(tool) else {
            return Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!(
                    "GraphQL source `{}` has no tool named `{tool}`",
                    self.config.name
                ),
            ));
        };
        let entry = &self.tools[index];
        let label = format!("{}.{tool}", self.config.name);
        match &entry.kind {
            ToolKind::Field {
                operation,
                field,
                args: declared,
                selection,
            } => {
                let query = field_document(*operation, field, declared, selection, &args);
                let mutates = *operation == Operation::Mutation;
                let mut data = self
                    .post(
                        &label,
                        json!({"query": query, "variables": args}),
                        mutates,
                        ctx,
                        secrets,
                    )
                    .await?;
                let value = data
                    .as_object_mut()
                    .and_then(|d| d.remove(field.as_str()))
                    .unwrap_or(Value::Null);
                Ok(coercion::mend_result(
                    entry.output(),
                    value,
                    self.config.coerce,
                ))
            }
            ToolKind::Custom(allowed) => {
                let query = args
                    .get("query")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let mutates = check_custom_document(&label, query, *allowed)?;
                let mut body = json!({ "query": query });
                for key in ["variables", "operationName"] {
                    if let Some(v) = args.get(key) {
                        body[key] = v.clone();
                    }
                }
                let data = self.post(&label, body, mutates, ctx, secrets).await?;
                Ok((data, Vec::new()))
            }
        }
    }

    /// Sends one request and returns its `data`, or the GraphQL errors as a `ToolError`.
    /// `mutates`: the document has a mutation, so the call's idempotency key goes with it.
    /// The headers' secret values go to `secrets`.
    async fn post(
        &self,
        label: &str,
        body: Value,
        mutates: bool,
        ctx: &CallContext,
        secrets: &mut SecretsUsed,
    ) -> Result<Value, ToolError> {
        let mut headers = self.headers(secrets)?;
        if let Some(key) = &ctx.idempotency_key
            && mutates
        {
            let name = reqwest::header::HeaderName::from_static(IDEMPOTENCY_HEADER);
            // An `Idempotency-Key` the policy sets stays the only one: the operator chose it
            // for this endpoint, and the draft allows one such header per request.
            if !headers.contains_key(&name) {
                let value = reqwest::header::HeaderValue::from_str(key).map_err(|_| {
                    ToolError::new(
                        ToolErrorCode::Internal,
                        format!("{label}: the call's idempotency key cannot be sent as a header value; nothing was sent"),
                    )
                })?;
                headers.insert(name, value);
            }
        }
        let body = serde_json::to_vec(&body).map_err(|e| {
            ToolError::new(
                ToolErrorCode::Internal,
                format!("cannot encode the request: {e}"),
            )
        })?;
        let exchange = async {
            let mut response = self
                .client
                .post(&self.config.endpoint)
                .headers(headers)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(
                    reqwest::header::ACCEPT,
                    "application/graphql-response+json, application/json",
                )
                .body(body)
                .send()
                .await
                .map_err(|e| {
                    ToolError::new(
                        ToolErrorCode::UpstreamError,
                        format!(
                            "{label} failed: cannot reach the GraphQL endpoint: {}",
                            http::describe(e)
                        ),
                    )
                })?;
            let status = response.status();
            let body = http::read_limited(&mut response, MAX_RESPONSE_BYTES)
                .await
                .map_err(|e| {
                    ToolError::new(
                        ToolErrorCode::UpstreamError,
                        format!(
                            "{label} failed while reading the answer: {}",
                            http::describe(e)
                        ),
                    )
                })?;
            if body.over_limit {
                return Err(ToolError::new(
                    ToolErrorCode::ResultTooLarge,
                    format!("{label}: the GraphQL answer is over {MAX_RESPONSE_BYTES} bytes"),
                )
                .with_hint("select fewer fields or ask for a smaller page (first: N)"));
            }
            Ok::<_, ToolError>((status, body.bytes))
        };
        let (status, bytes) = ctx.before_deadline(label, exchange).await?;
        interpret(label, status, &bytes)
    }

    /// The policy's headers, secrets read now (and added to `secrets`).
    fn headers(&self, secrets: &mut SecretsUsed) -> Result<reqwest::header::HeaderMap, ToolError> {
        let settings = self.settings();
        let mut map = reqwest::header::HeaderMap::new();
        for (key, value) in &self.config.headers {
            let resolved = settings.value("headers", key, value, secrets)?;
            let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| settings.unavailable(format!("`{key}` is not a valid header name")))?;
            let mut header =
                reqwest::header::HeaderValue::from_str(&resolved.value).map_err(|_| {
                    settings.unavailable(format!(
                        "the value of header `{key}` has characters HTTP headers cannot carry"
                    ))
                })?;
            header.set_sensitive(resolved.secret);
            map.append(name, header);
        }
        Ok(map)
    }
}

/// A GraphQL response → its `data`, or a `ToolError` with the `errors` messages.
pub(super) fn interpret(
    label: &str,
    status: reqwest::StatusCode,
    bytes: &[u8],
) -> Result<Value, ToolError> {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let Some(Value::Object(mut response)) = parsed else {
        let text = String::from_utf8_lossy(bytes);
        let snippet: String = text.chars().take(200).collect();
        let failed = ToolError::new(
            ToolErrorCode::UpstreamError,
            format!(
                "{label} failed: the endpoint answered HTTP {status} with a body that is not a GraphQL response: {snippet}"
            ),
        );
        // An error status is the endpoint's answer; a success that is not GraphQL is not.
        return Err(if status.is_success() {
            failed
        } else {
            failed.reported_by_tool()
        });
    };
    if let Some(Value::Array(errors)) = response.get("errors")
        && !errors.is_empty()
    {
        let messages: Vec<String> = errors
            .iter()
            .take(MAX_REPORTED_ERRORS)
            .map(|e| {
                let message = e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error without a message");
                match e.get("path").and_then(Value::as_array) {
                    Some(path) if !path.is_empty() => {
                        let path: Vec<String> = path
                            .iter()
                            .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                            .collect();
                        format!("{message} (at {})", path.join("."))
                    }
                    _ => message.to_owned(),
                }
            })
            .collect();
        let more = if errors.len() > MAX_REPORTED_ERRORS {
            format!("; and {} more", errors.len() - MAX_REPORTED_ERRORS)
        } else {
            String::new()
        };
        return Err(ToolError::new(
            ToolErrorCode::UpstreamError,
            format!("{label} failed: {}{more}", messages.join("; ")),
        )
        .reported_by_tool());
    }
    if !status.is_success() {
        return Err(ToolError::new(
            ToolErrorCode::UpstreamError,
            format!("{label} failed: the endpoint answered HTTP {status}"),
        )
        .reported_by_tool());
    }
    Ok(response.remove("data").unwrap_or(Value::Null))
}

/// `query airlock_repository($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { … } }`,
/// declaring only the variables the caller gave, so that omitted arguments take the server's
/// defaults.
pub(super) fn field_document(
    operation: Operation,
    field: &str,
    declared: &[(String, String)],
    selection: &str,
    args: &Value,
) -> String {
    let given: Vec<&(String, String)> = declared
        .iter()
        .filter(|(name, _)| args.get(name).is_some())
        .collect();
    let mut doc = format!("{} airlock_{field}", operation.keyword());
    if !given.is_empty() {
        let vars: Vec<String> = given.iter().map(|(n, t)| format!("${n}: {t}")).collect();
        doc.push_str(&format!("({})", vars.join(", ")));
    }
    doc.push_str(" { ");
    doc.push_str(field);
    if !given.is_empty() {
        let pass: Vec<String> = given.iter().map(|(n, _)| format!("{n}: ${n}")).collect();
        doc.push_str(&format!("({})", pass.join(", ")));
    }
    if !selection.is_empty() {
        doc.push(' ');
        doc.push_str(selection);
    }
    doc.push_str(" }");
    doc
}

/// Parses a program's document before it is sent: a syntax error is the program's, and
/// `query` must not smuggle in a mutation. Answers whether the document has a mutation.
pub(super) fn check_custom_document(
    label: &str,
    query: &str,
    allowed: Operation,
) -> Result<bool, ToolError> {
    let document = gq::parse_query::<&str>(query).map_err(|e| {
        let (line, column, message) = parse_error(&e.to_string());
        ToolError::new(ToolErrorCode::InvalidArguments,
            format!("invalid arguments for {label}: the GraphQL document does not parse at {line}:{column}: {message}"),
        )
    })?;
    let mut mutates = false;
    for definition in &document.definitions {
        let kind = match definition {
            gq::Definition::Operation(gq::OperationDefinition::Mutation(_)) => "mutation",
            gq::Definition::Operation(gq::OperationDefinition::Subscription(_)) => "subscription",
            _ => continue,
        };
        if kind == "subscription" || allowed == Operation::Query {
            let hint = if kind == "mutation" {
                format!(
                    "{} runs documents with mutations",
                    label.replace(".query", ".mutate")
                )
            } else {
                "subscriptions need a long-lived connection, which tools do not have".to_owned()
            };
            return Err(ToolError::new(ToolErrorCode::InvalidArguments,
                format!("invalid arguments for {label}: the document contains a {kind}, which this tool does not run"),
            )
            .with_hint(hint));
        }
        mutates = true;
    }
    Ok(mutates)
}

/// Why a text is not an executable GraphQL document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// The parser's message, with the line and column.
    #[error("{0}")]
    Syntax(String),
}

/// Whether `text` parses as an executable GraphQL document (used by tests to check generated
/// selection sets with the same parser that reads schemas).
pub fn parses_as_document(text: &str) -> Result<(), DocumentError> {
    gq::parse_query::<&str>(text)
        .map(|_| ())
        .map_err(|e| DocumentError::Syntax(e.to_string()))
}
