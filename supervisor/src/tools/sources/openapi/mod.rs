//! A tool source backed by an OpenAPI 3.0/3.1 document (`[[openapi]]` in the policy): every
//! operation becomes a tool, and the supervisor performs the HTTP call itself.
//!
//! Loading (once, at startup): the document is read as JSON or YAML (by extension, else by its
//! first character); a syntax error names the file, line and column, a structural one the file
//! and the JSON pointer. Each operation under `paths` becomes a tool named by its sanitised
//! `operationId` (`repos/get` → `repos_get`, see [`crate::tools::sources::mcp::identifiers`]), or by
//! method and path (`get /pets/{id}` → `get_pets_id`) when it has none.
//!
//! Arguments: one object. Path, query, header and cookie parameters are properties under their
//! own names; the JSON (or form, or text) request body is the property `body`, required when
//! the `requestBody` is. When two parameters share a name (or a parameter is called `body`
//! while there is a request body) the first in the order path, query, header, cookie keeps the
//! name and a later one gets its location as a suffix (`page_header`), then `_2`, `_3`, ….
//! Header parameters named `Accept`, `Content-Type` or `Authorization` are ignored, as OpenAPI
//! says; so are hop-by-hop headers and the configured API-key header.
//!
//! Schemas: each tool's input schema is built when the document loads. Local `$ref`s to
//! `#/components/schemas/*` are copied into the schema's `$defs` (so recursive schemas stay
//! finite and cycles are harmless); other local `$ref`s are inlined with a cycle check. 3.0's
//! `nullable` and boolean `exclusiveMinimum`/`exclusiveMaximum` are rewritten to their JSON
//! Schema 2020-12 forms. A schema that is too deep, too large, refers to something missing or
//! remote, or cannot be compiled fails only its own tool (every call gets `invalid_schema`
//! naming the reason); the rest of the document works. The call pipeline compiles a tool's
//! input schema on its first call, so a large document loads quickly.
//!
//! Calls: the URL is `base_url` + the path template with percent-encoded path parameters, plus
//! query parameters. Credentials (`auth`) are added only when the request's scheme, host and
//! port equal the base URL's. Redirects are never followed (a 3xx answer becomes a `ToolError`
//! naming the target host, and nothing is sent there), so credentials cannot follow one to
//! another host. A call with an idempotency key ([`CallContext::idempotency_key`]) sends it as
//! `Idempotency-Key` on `POST`, `PUT`, `PATCH` and `DELETE` requests, unless the request has
//! that header already (an operation parameter of that name). Answers: JSON when the content
//! type says so, else text, at most `MAX_RESPONSE_BYTES` (of the shared HTTP helpers); a
//! non-2xx status is an `upstream_error` with the status and at most [`MAX_EXCERPT_BYTES`] of
//! the body. The secret values a call used are redacted from whatever comes back by the call
//! pipeline.
//!
//! The rooms: `load` reads the document and indexes its operations, `schema` turns an
//! operation into its tool's input and output schemas, `send` makes a call and reads its
//! answer; `request_body` is how a request body becomes arguments.

mod load;
mod request_body;
mod schema;
mod send;

pub use load::{BaseUrlError, OpenApiError};
pub use send::MAX_EXCERPT_BYTES;

use crate::secrets::store::SecretStore;
use crate::tools::coercion::OutputSchema;
use crate::tools::{CallContext, CallGate, ToolDescriptor, ToolFuture, ToolSource, ToolsFuture};
use airlock_policy::OpenApiSource as OpenApiConfig;
use request_body::Body;
use reqwest::Url;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// One `[[openapi]]` source, loaded.
#[derive(Debug)]
pub struct OpenApiSource {
    config: OpenApiConfig,
    base: Url,
    client: reqwest::Client,
    secrets: Arc<SecretStore>,
    gate: CallGate,
    descriptors: Arc<[ToolDescriptor]>,
    operations: HashMap<String, Operation>,
}

/// One operation, ready to be called.
#[derive(Debug)]
struct Operation {
    method: reqwest::Method,
    /// The path template as the document writes it (`/repos/{owner}/{repo}`).
    path: String,
    params: Vec<Param>,
    body: Option<Body>,
    /// Why the tool cannot be called (its schema is unusable), if it cannot.
    problem: Option<String>,
    /// The input schema (the call pipeline checks arguments against it).
    input_schema: Value,
    /// The success response's JSON schema, when the document gives one (see
    /// [`schema::output_schema`]).
    output_schema: Option<Value>,
    /// It compiled, on the first call that needed it: results that break it trivially are
    /// coerced ([`crate::tools::coercion::mend_result`]).
    output: OnceLock<Option<OutputSchema>>,
}

impl Operation {
    fn output(&self) -> Option<&OutputSchema> {
        self.output
            .get_or_init(|| {
                self.output_schema
                    .as_ref()
                    .and_then(|s| OutputSchema::compile(s).ok())
            })
            .as_ref()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Location {
    Path,
    Query,
    Header,
    Cookie,
}

impl Location {
    fn parse(s: &str) -> Option<Location> {
        Some(match s {
            "path" => Location::Path,
            "query" => Location::Query,
            "header" => Location::Header,
            "cookie" => Location::Cookie,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Location::Path => "path",
            Location::Query => "query",
            Location::Header => "header",
            Location::Cookie => "cookie",
        }
    }
}

#[derive(Debug)]
struct Param {
    /// The property in the arguments object.
    arg: String,
    /// The name the API knows.
    name: String,
    location: Location,
    style: Option<String>,
    explode: bool,
}

#[derive(Debug, Clone)]
enum BodyKind {
    Json(String),
    Form,
    Text(String),
}

impl OpenApiSource {
    pub fn config(&self) -> &OpenApiConfig {
        &self.config
    }

    /// Where calls go.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// The tools, sorted by name.
    pub fn descriptors(&self) -> &[ToolDescriptor] {
        &self.descriptors
    }

    /// Why `tool` cannot be called, if its schema is unusable.
    pub fn problem(&self, tool: &str) -> Option<&str> {
        self.operations.get(tool)?.problem.as_deref()
    }

    fn full_name(&self, tool: &str) -> String {
        format!("{}.{tool}", self.config.name)
    }
}

impl ToolSource for OpenApiSource {
    fn namespace(&self) -> &str {
        &self.config.name
    }

    fn tools(&self) -> ToolsFuture<'_> {
        let tools = self.descriptors.clone();
        Box::pin(async move { Ok(tools) })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(self.call_tool(tool, args, ctx))
    }

    fn gate(&self) -> Option<&CallGate> {
        Some(&self.gate)
    }

    fn coerce(&self) -> airlock_policy::CoercePolicy {
        self.config.coerce
    }
}

#[cfg(test)]
mod tests;
