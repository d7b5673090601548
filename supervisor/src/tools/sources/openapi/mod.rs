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
//! type says so, else text, at most
//! [`http::MAX_RESPONSE_BYTES`]; a non-2xx status is an `upstream_error` with the status and at
//! most [`MAX_EXCERPT_BYTES`] of the body. The secret values a call used are redacted from
//! whatever comes back by the call pipeline.

mod request_body;

use crate::secrets::store::SecretStore;
use crate::tools::coercion::{self, OutputSchema};
use crate::tools::sources::http::{self, OutboundHttpError};
use crate::tools::sources::mcp::identifiers;
use crate::tools::sources::settings::Settings;
use crate::tools::{
    CallContext, CallGate, IDEMPOTENCY_HEADER, ToolDescriptor, ToolError, ToolErrorCode,
    ToolFuture, ToolSource, ToolsFuture,
};
use airlock_policy::{ApiKeyLocation, OpenApiAuth, OpenApiSource as OpenApiConfig, SettingValue};
use request_body::{BODY, Body, BodyShape};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// How much of a failed answer's body its `ToolError` quotes.
pub const MAX_EXCERPT_BYTES: usize = 1024;
/// The largest document the daemon reads (GitHub's is 13 MB).
const MAX_DOCUMENT_BYTES: u64 = 256 << 20;
/// Nesting limit of one tool's input schema: deeper schemas are hostile or broken, and would
/// strain everything that walks them later (validation, the TypeScript SDK).
const MAX_SCHEMA_DEPTH: usize = 64;
/// Properties of one object schema.
const MAX_PROPERTIES: usize = 1000;
/// JSON values in one tool's input schema, `$defs` included.
const MAX_SCHEMA_NODES: usize = 200_000;
/// Length of a tool's description.
const MAX_DESCRIPTION_CHARS: usize = 4000;

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Why an OpenAPI source could not be loaded. Every message names the document's file.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    #[error("{file}: cannot read the OpenAPI document: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: the OpenAPI document is {size} bytes, more than the {max} bytes allowed")]
    TooLarge { file: String, size: u64, max: u64 },
    #[error("{file}:{line}:{column}: invalid {format} in the OpenAPI document: {message}")]
    Syntax {
        file: String,
        format: &'static str,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: {pointer}: {reason}")]
    Structure {
        file: String,
        /// A JSON pointer into the document (`#/paths/~1pets/get`).
        pointer: String,
        reason: String,
    },
    #[error("{file}: {reason}")]
    BaseUrl { file: String, reason: String },
    #[error("openapi source `{name}`: {source}")]
    Client {
        name: String,
        source: OutboundHttpError,
    },
}

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
    /// The success response's JSON schema, when the document gives one (see [`output_schema`]).
    output_schema: Option<Value>,
    /// It compiled, on the first call that needed it: results that break it trivially are
    /// coerced ([`coercion::mend_result`]).
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
    /// Reads and indexes the document of `config`. Fails (naming the file) when the document
    /// cannot be used at all; a single unusable operation only fails its own tool.
    pub fn load(
        config: OpenApiConfig,
        secrets: Arc<SecretStore>,
    ) -> Result<OpenApiSource, OpenApiError> {
        let file = config.spec.display().to_string();
        let document = read_document(&config.spec)?;
        let structure = |pointer: &str, reason: String| OpenApiError::Structure {
            file: file.clone(),
            pointer: pointer.to_owned(),
            reason,
        };
        let version = document
            .get("openapi")
            .and_then(Value::as_str)
            .ok_or_else(|| match document.get("swagger") {
                Some(_) => structure(
                    "#/swagger",
                    "this is a Swagger 2.0 document; only OpenAPI 3.0 and 3.1 are supported (convert it first)".into(),
                ),
                None => structure("#/openapi", "missing `openapi` version field (not an OpenAPI 3.x document)".into()),
            })?;
        if !(version.starts_with("3.0") || version.starts_with("3.1")) {
            return Err(structure(
                "#/openapi",
                format!(
                    "unsupported OpenAPI version \"{version}\" (3.0.x and 3.1.x are supported)"
                ),
            ));
        }
        let base = base_url(&config, &document).map_err(|reason| OpenApiError::BaseUrl {
            file: file.clone(),
            reason,
        })?;
        let paths = match document.get("paths") {
            None => &Map::new(),
            Some(Value::Object(paths)) => paths,
            Some(_) => return Err(structure("#/paths", "expected an object".into())),
        };

        let api_key_header = match &config.auth {
            Some(OpenApiAuth::ApiKey {
                location: ApiKeyLocation::Header(h),
                ..
            }) => Some(h.to_ascii_lowercase()),
            _ => None,
        };
        let mut raw_names = Vec::new();
        let mut built = Vec::new();
        for (path, item) in paths {
            let item_pointer = format!("#/paths/{}", escape_pointer(path));
            let item = match item.get("$ref").and_then(Value::as_str) {
                Some(reference) => resolve_local(&document, reference).ok_or_else(|| {
                    structure(&item_pointer, format!("unresolved $ref `{reference}`"))
                })?,
                None => item,
            };
            let Some(item) = item.as_object() else {
                return Err(structure(
                    &item_pointer,
                    "expected a path item object".into(),
                ));
            };
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                let pointer = format!("{item_pointer}/{method}");
                let Some(op) = op.as_object() else {
                    return Err(structure(&pointer, "expected an operation object".into()));
                };
                let raw_name = match op.get("operationId").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => id.to_owned(),
                    _ => method_path_name(method, path),
                };
                let operation =
                    build_operation(&document, method, path, item, op, api_key_header.as_deref());
                raw_names.push(raw_name);
                built.push((operation, description(method, path, op)));
            }
        }

        let mut descriptors = Vec::new();
        let mut operations = HashMap::new();
        for (name, (operation, description)) in
            identifiers(raw_names.into_iter()).into_iter().zip(built)
        {
            if !config.offers(&name) {
                continue;
            }
            let description = match &operation.problem {
                Some(problem) => format!("{description}\n\nUnavailable: {problem}"),
                None => description,
            };
            descriptors.push(ToolDescriptor {
                name: name.clone(),
                description,
                input_schema: operation.input_schema.clone(),
                output_schema: operation.output_schema.clone(),
                read_only: reads_only(&operation.method),
            });
            operations.insert(name, operation);
        }
        descriptors.sort_by(|a, b| a.name.cmp(&b.name));
        let client = http::client().map_err(|source| OpenApiError::Client {
            name: config.name.clone(),
            source,
        })?;
        Ok(OpenApiSource {
            gate: CallGate::new(config.max_concurrent_calls, config.call_timeout_ms),
            config,
            base,
            client,
            secrets,
            descriptors: descriptors.into(),
            operations,
        })
    }

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

    async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ToolError> {
        let full = self.full_name(tool);
        let Some(op) = self.operations.get(tool) else {
            return Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!(
                    "openapi source `{}` has no operation named `{tool}`",
                    self.config.name
                ),
            ));
        };
        if let Some(problem) = &op.problem {
            return Err(ToolError::new(
                ToolErrorCode::InvalidSchema,
                format!("{full} cannot be called: {problem}"),
            )
            .with_hint("this is a problem of the OpenAPI document; the operator should fix or exclude the operation"));
        }
        let empty = Map::new();
        let args = args.as_object().unwrap_or(&empty);
        let credentials = self.credentials(ctx)?;
        let value = self.send(&full, op, args, credentials, ctx).await?;
        Ok(coercion::mend_result(
            op.output(),
            value,
            self.config.coerce,
            &ctx.coercions,
        ))
    }

    /// The auth values, secrets read from the store now (so a rotated secret is used at once).
    fn credentials(&self, ctx: &CallContext) -> Result<Option<Credentials>, ToolError> {
        let Some(auth) = &self.config.auth else {
            return Ok(None);
        };
        let settings = Settings {
            kind: "openapi source",
            name: &self.config.name,
            store: &self.secrets,
        };
        let value = |key: &str, setting: &SettingValue| -> Result<String, ToolError> {
            Ok(settings.value("auth", key, setting, &ctx.secrets)?.value)
        };
        Ok(Some(match auth {
            OpenApiAuth::Bearer { token } => Credentials::Bearer(value("token", token)?),
            OpenApiAuth::Basic { username, password } => {
                Credentials::Basic(value("username", username)?, value("password", password)?)
            }
            OpenApiAuth::ApiKey { location, value: v } => {
                let v = value("value", v)?;
                match location {
                    ApiKeyLocation::Header(h) => Credentials::Header(h.clone(), v),
                    ApiKeyLocation::Query(q) => Credentials::Query(q.clone(), v),
                }
            }
        }))
    }

    async fn send(
        &self,
        full: &str,
        op: &Operation,
        args: &Map<String, Value>,
        credentials: Option<Credentials>,
        ctx: &CallContext,
    ) -> Result<Value, ToolError> {
        let invalid = |message: String| ToolError::new(ToolErrorCode::InvalidArguments, message);
        let mut path = String::new();
        for piece in template_pieces(&op.path) {
            match piece {
                Piece::Literal(text) => path.push_str(text),
                Piece::Var(name) => {
                    let param = op
                        .params
                        .iter()
                        .find(|p| p.location == Location::Path && p.name == name);
                    let value = param.and_then(|p| args.get(&p.arg)).ok_or_else(|| {
                        invalid(format!("{full}: the path parameter `{name}` is missing"))
                    })?;
                    let encoded = percent_encode(&simple_string(value, false));
                    // `.` and `..` are not data in a URL path: they would be normalised away,
                    // and the request would go, with the source's credentials, to a path the
                    // operator never exposed. An empty value names another resource too. (No
                    // two other values make a dot segment side by side: each is neither empty
                    // nor dots alone, and every `/` is encoded.)
                    if matches!(encoded.as_str(), "" | "." | "..") {
                        return Err(invalid(format!(
                            "{full}: the path parameter `{name}` may not be {}",
                            if encoded.is_empty() { "empty".to_owned() } else { format!("`{encoded}`") }
                        ))
                        .with_hint(format!("pass the {name} itself; `.`, `..` and empty values would change which path is requested")));
                    }
                    path.push_str(&encoded);
                }
            }
        }
        let mut url = Url::parse(&format!(
            "{}{path}",
            self.base.as_str().trim_end_matches('/')
        ))
        .map_err(|e| invalid(format!("{full}: the request URL is invalid: {e}")))?;
        let mut headers = HeaderMap::new();
        let mut cookies = Vec::new();
        {
            let mut query = url.query_pairs_mut();
            for param in &op.params {
                let Some(value) = args.get(&param.arg).filter(|v| !v.is_null()) else {
                    continue;
                };
                match param.location {
                    Location::Path => {}
                    Location::Query => {
                        for (k, v) in query_pairs(param, value) {
                            query.append_pair(&k, &v);
                        }
                    }
                    Location::Header => {
                        let text = simple_string(value, param.explode);
                        let name = HeaderName::from_bytes(param.name.as_bytes()).map_err(|_| {
                            invalid(format!(
                                "{full}: `{}` is not a valid header name",
                                param.name
                            ))
                        })?;
                        let value = HeaderValue::from_str(&text).map_err(|_| {
                            invalid(format!("{full}: the value of header `{}` contains characters a header cannot carry", param.arg))
                        })?;
                        headers.insert(name, value);
                    }
                    Location::Cookie => {
                        cookies.push(format!(
                            "{}={}",
                            param.name,
                            percent_encode(&simple_string(value, false))
                        ));
                    }
                }
            }
            if let Some(Credentials::Query(name, value)) = &credentials {
                query.append_pair(name, value);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        // The path comes from the document and the base from the policy, so this holds; it is
        // checked anyway because a credential sent to the wrong origin cannot be taken back.
        if !same_origin(&url, &self.base) {
            return Err(ToolError::new(
                ToolErrorCode::Denied,
                format!(
                    "{full}: the request would go to {}, not to the configured base URL's origin; nothing was sent",
                    origin(&url)
                ),
            ));
        }
        if !cookies.is_empty() {
            let value = HeaderValue::from_str(&cookies.join("; "))
                .map_err(|_| invalid(format!("{full}: a cookie value is not valid")))?;
            headers.insert(reqwest::header::COOKIE, value);
        }
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("application/json, */*;q=0.5"),
        );
        if let Some(key) = &ctx.idempotency_key
            && carries_idempotency_key(&op.method)
        {
            let name = HeaderName::from_static(IDEMPOTENCY_HEADER);
            // An `Idempotency-Key` the operation declares as a parameter, set by the program,
            // stays: it is part of the arguments, so a call sent again repeats it as well, and
            // the draft allows one such header per request. (The API key's header is never a
            // parameter; an operator who named it `Idempotency-Key` keeps it too.)
            let api_key_has_it = matches!(&credentials, Some(Credentials::Header(h, _)) if h.eq_ignore_ascii_case(IDEMPOTENCY_HEADER));
            if !headers.contains_key(&name) && !api_key_has_it {
                let value = HeaderValue::from_str(key).map_err(|_| {
                    ToolError::new(
                        ToolErrorCode::Internal,
                        format!("{full}: the call's idempotency key cannot be sent as a header value; nothing was sent"),
                    )
                })?;
                headers.insert(name, value);
            }
        }
        let mut request = self
            .client
            .request(op.method.clone(), url.clone())
            .headers(headers);
        match credentials {
            Some(Credentials::Bearer(token)) => request = request.bearer_auth(token),
            Some(Credentials::Basic(user, password)) => {
                request = request.basic_auth(user, Some(password));
            }
            Some(Credentials::Header(name, value)) => {
                let value = HeaderValue::from_str(&value).map_err(|_| {
                    ToolError::new(
                        ToolErrorCode::ServerUnavailable,
                        format!(
                            "openapi source `{}`: the API key cannot be sent as a header value",
                            self.config.name
                        ),
                    )
                })?;
                let mut value = value;
                value.set_sensitive(true);
                request = request.header(name, value);
            }
            Some(Credentials::Query(..)) | None => {}
        }
        if let Some((kind, body)) = op
            .body
            .as_ref()
            .and_then(|b| Some((&b.kind, b.value(args)?)))
        {
            let body = &body;
            request = match kind {
                BodyKind::Json(content_type) => request
                    .header(reqwest::header::CONTENT_TYPE, content_type)
                    .body(
                        serde_json::to_vec(body)
                            .map_err(|e| invalid(format!("{full}: cannot encode the body: {e}")))?,
                    ),
                BodyKind::Form => {
                    let form = body
                        .as_object()
                        .map(|fields| {
                            fields
                                .iter()
                                .map(|(k, v)| {
                                    format!(
                                        "{}={}",
                                        percent_encode(k),
                                        percent_encode(&simple_string(v, false))
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join("&")
                        })
                        .unwrap_or_default();
                    request
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            "application/x-www-form-urlencoded",
                        )
                        .body(form)
                }
                BodyKind::Text(content_type) => request
                    .header(reqwest::header::CONTENT_TYPE, content_type)
                    .body(simple_string(body, false)),
            };
        }

        let display_url = format!("{} {}{}", op.method, origin(&url), url.path());
        ctx.before_deadline(full, self.exchange(full, &display_url, request))
            .await
    }

    async fn exchange(
        &self,
        full: &str,
        display_url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ToolError> {
        let upstream = |message: String| ToolError::new(ToolErrorCode::UpstreamError, message);
        let mut response = request.send().await.map_err(|e| {
            upstream(format!(
                "{full}: {display_url} failed: {}",
                http::describe(e)
            ))
        })?;
        let status = response.status();
        if status.is_redirection() {
            let target = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(|l| match self.base.join(l) {
                    Ok(u) => format!("redirects to {}", origin(&u)),
                    Err(_) => "redirects to an unparsable location".to_owned(),
                })
                .unwrap_or_else(|| "redirects without a Location".to_owned());
            return Err(upstream(format!(
                "{full}: {display_url} answered HTTP {status} and {target}; redirects are not followed (they could carry credentials elsewhere) and nothing was sent there"
            )));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let body = http::read_limited(&mut response, http::MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| {
                upstream(format!(
                    "{full}: reading the answer of {display_url} failed: {}",
                    http::describe(e)
                ))
            })?;
        // Of an error page, what was read is enough for the excerpt.
        if body.over_limit && status.is_success() {
            return Err(too_large(full));
        }
        let body = body.bytes;
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(upstream(format!(
                "{full}: {display_url} answered HTTP {status}: {}",
                excerpt(&text)
            ))
            .reported_by_tool());
        }
        if body.is_empty() {
            return Ok(Value::Null);
        }
        let media = content_type.split(';').next().unwrap_or_default().trim();
        if (media == "application/json" || media.ends_with("+json"))
            && let Ok(value) = serde_json::from_slice(&body)
        {
            return Ok(value);
        }
        Ok(Value::String(text.into_owned()))
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

/// Whether an operation of `method` only reads: the methods HTTP defines as safe (RFC 9110,
/// 9.2.1). `TRACE` is one of them, and OpenAPI documents can declare it.
fn reads_only(method: &reqwest::Method) -> bool {
    [
        reqwest::Method::GET,
        reqwest::Method::HEAD,
        reqwest::Method::OPTIONS,
        reqwest::Method::TRACE,
    ]
    .contains(method)
}

/// Whether a request of `method` carries the call's idempotency key: the methods that may
/// change something, which the `Idempotency-Key` draft is for. Reads get none: repeating them
/// is harmless, and a service that honours the key could answer a replay's fresh read with
/// the answer it stored the first time.
fn carries_idempotency_key(method: &reqwest::Method) -> bool {
    [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::PATCH,
        reqwest::Method::DELETE,
    ]
    .contains(method)
}

#[derive(Debug)]
enum Credentials {
    Bearer(String),
    Basic(String, String),
    Header(String, String),
    Query(String, String),
}

fn too_large(full: &str) -> ToolError {
    ToolError::new(
        ToolErrorCode::ResultTooLarge,
        format!(
            "{full}: the answer is larger than {} MiB",
            http::MAX_RESPONSE_BYTES >> 20
        ),
    )
}

/// `scheme://host:port`, the part of a URL credentials are bound to.
fn origin(url: &Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// At most [`MAX_EXCERPT_BYTES`] of `text`, cut at a character boundary, and a note of how
/// much was left out.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    if text.len() <= MAX_EXCERPT_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_EXCERPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

// ---- reading the document ---------------------------------------------------------------------

fn read_document(path: &Path) -> Result<Value, OpenApiError> {
    let file = path.display().to_string();
    let read_error = |source| OpenApiError::Read {
        file: file.clone(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read_error)?.len();
    if size > MAX_DOCUMENT_BYTES {
        return Err(OpenApiError::TooLarge {
            file,
            size,
            max: MAX_DOCUMENT_BYTES,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let json = match extension.as_str() {
        "json" => true,
        "yaml" | "yml" => false,
        _ => text.trim_start().starts_with('{'),
    };
    let document: Value = if json {
        serde_json::from_str(&text).map_err(|e| OpenApiError::Syntax {
            file: file.clone(),
            format: "JSON",
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        })?
    } else {
        serde_yaml_ng::from_str(&text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            OpenApiError::Syntax {
                file: file.clone(),
                format: "YAML",
                line,
                column,
                message: strip_position(&e.to_string()),
            }
        })?
    };
    if !document.is_object() {
        return Err(OpenApiError::Structure {
            file,
            pointer: "#".into(),
            reason: "the document is not an object".into(),
        });
    }
    Ok(document)
}

/// The parser's message without its own " at line X column Y" (the error names it first).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The configured base URL, or the document's first server URL with its variables' defaults.
fn base_url(config: &OpenApiConfig, document: &Value) -> Result<Url, String> {
    let text = match &config.base_url {
        Some(url) => url.clone(),
        None => {
            let server = document
                .pointer("/servers/0")
                .ok_or("`base_url` is not set in the policy and the document has no `servers`")?;
            let mut url = server
                .get("url")
                .and_then(Value::as_str)
                .ok_or("`base_url` is not set in the policy and the document's first server has no `url`")?
                .to_owned();
            if let Some(vars) = server.get("variables").and_then(Value::as_object) {
                for (name, var) in vars {
                    if let Some(default) = var.get("default").and_then(Value::as_str) {
                        url = url.replace(&format!("{{{name}}}"), default);
                    }
                }
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "`base_url` is not set in the policy and the document's first server URL \"{url}\" is not an absolute http(s) URL"
                ));
            }
            url
        }
    };
    let url = Url::parse(&text).map_err(|e| format!("base URL \"{text}\" is invalid: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "base URL \"{text}\" is not an http(s) URL with a host"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("the base URL must not carry credentials; use `auth`".into());
    }
    Ok(url)
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The value a local `$ref` (`#/components/...`) points at.
fn resolve_local<'v>(document: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    document.pointer(&percent_decode(pointer))
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Follows `$ref`s of non-schema objects (parameters, request bodies, path items), a few
/// levels at most.
fn deref<'v>(document: &'v Value, mut value: &'v Value) -> Result<&'v Value, String> {
    for _ in 0..8 {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                value = resolve_local(document, reference)
                    .ok_or_else(|| format!("unresolved $ref `{reference}`"))?;
            }
            None => return Ok(value),
        }
    }
    Err("a chain of more than 8 $refs".into())
}

/// `get /pets/{petId}` → `get_pets_petId`.
fn method_path_name(method: &str, path: &str) -> String {
    let mut out = method.to_owned();
    let mut gap = true;
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            if gap {
                out.push('_');
            }
            out.push(c);
            gap = false;
        } else {
            gap = true;
        }
    }
    out
}

fn description(method: &str, path: &str, op: &Map<String, Value>) -> String {
    let mut parts = Vec::new();
    for key in ["summary", "description"] {
        if let Some(text) = op.get(key).and_then(Value::as_str).map(str::trim)
            && !text.is_empty()
            && !parts.contains(&text)
        {
            parts.push(text);
        }
    }
    let mut text = parts.join("\n\n");
    if text.chars().count() > MAX_DESCRIPTION_CHARS {
        text = text.chars().take(MAX_DESCRIPTION_CHARS).collect::<String>() + "…";
    }
    let line = format!("{} {path}", method.to_ascii_uppercase());
    if text.is_empty() {
        line
    } else {
        format!("{text}\n\n{line}")
    }
}

// ---- one operation ----------------------------------------------------------------------------

/// Builds an operation; a problem with its parameters or schemas is recorded in it, so only
/// this tool fails.
fn build_operation(
    document: &Value,
    method: &str,
    path: &str,
    item: &Map<String, Value>,
    op: &Map<String, Value>,
    api_key_header: Option<&str>,
) -> Operation {
    let mut operation = Operation {
        method: reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            .unwrap_or(reqwest::Method::GET),
        path: path.to_owned(),
        params: Vec::new(),
        body: None,
        problem: None,
        input_schema: json!({ "type": "object" }),
        output_schema: output_schema(document, op),
        output: OnceLock::new(),
    };
    match input_schema(document, path, item, op, api_key_header) {
        Ok((schema, params, body)) => {
            operation.input_schema = schema;
            operation.params = params;
            operation.body = body;
        }
        Err(problem) => operation.problem = Some(problem),
    }
    operation
}

/// The JSON Schema of what a successful call resolves to: the schema of the operation's
/// success response (200, else 201, else the first other 2xx, else `2XX`) for a JSON media
/// type (`application/json` or `*+json`), self-contained like an input schema. The program
/// gets that response's parsed body, so the type is what it receives. `None` (the SDK says
/// `unknown`) when the response has no JSON schema, or one this source will not copy (too
/// large, remote or broken `$ref`s): the output type is a help, and never fails the tool.
fn output_schema(document: &Value, op: &Map<String, Value>) -> Option<Value> {
    let responses = op.get("responses")?.as_object()?;
    let mut codes: Vec<&str> = responses
        .keys()
        .map(String::as_str)
        .filter(|c| c.len() == 3 && c.starts_with('2') && c.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    codes.sort_by_key(|c| (!matches!(*c, "200" | "201"), *c));
    let code = codes.first().copied().or_else(|| {
        ["2XX", "2xx"]
            .into_iter()
            .find(|c| responses.contains_key(*c))
    })?;
    let response = deref(document, responses.get(code)?).ok()?;
    let content = response.get("content")?.as_object()?;
    let media = content
        .iter()
        .filter(|(t, _)| {
            let t = t
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            t == "application/json" || t.ends_with("+json")
        })
        .map(|(_, m)| m)
        .next()?;
    let raw = media.get("schema")?;
    let mut builder = SchemaBuilder::new(document);
    let schema = builder.import(raw).ok()?;
    let defs = builder.finish().ok()?;
    let mut schema = match schema {
        Value::Object(obj) => obj,
        // `true`/`false` schemas: nothing to attach `$defs` to, and nothing to type either.
        _ => return None,
    };
    if !defs.is_empty() {
        schema.insert("$defs".into(), Value::Object(defs));
    }
    Some(Value::Object(schema))
}

type Built = (Value, Vec<Param>, Option<Body>);

fn input_schema(
    document: &Value,
    path: &str,
    item: &Map<String, Value>,
    op: &Map<String, Value>,
    api_key_header: Option<&str>,
) -> Result<Built, String> {
    // Operation parameters override path-item ones with the same name and location.
    let mut declared: Vec<(Location, String, &Value)> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")]
        .into_iter()
        .flatten()
    {
        let list = list.as_array().ok_or("`parameters` is not an array")?;
        for param in list {
            let param = deref(document, param)?;
            let name = param
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a parameter has no `name`")?;
            let location = param
                .get("in")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("parameter `{name}` has no `in`"))?;
            let location = Location::parse(location)
                .ok_or_else(|| format!("parameter `{name}` is in unknown location `{location}`"))?;
            declared.retain(|(l, n, _)| !(*l == location && n == name));
            declared.push((location, name.to_owned(), param));
        }
    }
    // Template variables nobody declared are still needed to build the URL.
    let implicit = json!({ "required": true, "schema": { "type": "string" } });
    for piece in template_pieces(path) {
        if let Piece::Var(var) = piece
            && !declared
                .iter()
                .any(|(l, n, _)| *l == Location::Path && n == var)
        {
            declared.push((Location::Path, var.to_owned(), &implicit));
        }
    }
    // Stable: the order path, query, header, cookie decides who keeps a contested name.
    declared.sort_by_key(|(l, _, _)| *l);

    let mut body_kind = None;
    let mut body_schema = None;
    let mut body_required = false;
    if let Some(body) = op.get("requestBody") {
        let body = deref(document, body)?;
        body_required = body
            .get("required")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let content = body.get("content").and_then(Value::as_object);
        let pick = content.and_then(|c| {
            let by = |f: &dyn Fn(&str) -> bool| c.iter().find(|(t, _)| f(&t.to_ascii_lowercase()));
            by(&|t| t.starts_with("application/json") || t.contains("+json"))
                .map(|(t, m)| (BodyKind::Json(t.clone()), m))
                .or_else(|| {
                    by(&|t| t.starts_with("application/x-www-form-urlencoded"))
                        .map(|(_, m)| (BodyKind::Form, m))
                })
                .or_else(|| {
                    by(&|t| t.starts_with("text/")).map(|(t, m)| (BodyKind::Text(t.clone()), m))
                })
                .or_else(|| {
                    by(&|t| t == "*/*").map(|(_, m)| (BodyKind::Json("application/json".into()), m))
                })
        });
        match pick {
            Some((kind, media)) => {
                body_schema = Some(match kind {
                    BodyKind::Text(_) => json!({ "type": "string" }),
                    _ => media.get("schema").cloned().unwrap_or_else(|| json!({})),
                });
                body_kind = Some(kind);
            }
            None if body_required => {
                let types: Vec<&str> = content
                    .map(|c| c.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                return Err(format!(
                    "its request body ({}) is of a type this source cannot send (JSON, form and text are supported)",
                    if types.is_empty() {
                        "no content".to_owned()
                    } else {
                        types.join(", ")
                    }
                ));
            }
            // An optional body of an unsupported type is left out.
            None => {}
        }
    }

    let mut builder = SchemaBuilder::new(document);
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    if body_kind.is_some() {
        taken.insert("body".to_owned());
    }
    for (location, name, param) in &declared {
        if *location == Location::Header {
            let lower = name.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "accept"
                    | "content-type"
                    | "authorization"
                    | "host"
                    | "content-length"
                    | "connection"
                    | "transfer-encoding"
                    | "cookie"
                    | "te"
                    | "upgrade"
            ) || Some(lower.as_str()) == api_key_header
            {
                continue;
            }
        }
        let mut arg = name.clone();
        if taken.contains(&arg) {
            arg = format!("{name}_{}", location.as_str());
            let mut k = 2;
            while taken.contains(&arg) {
                arg = format!("{name}_{}_{k}", location.as_str());
                k += 1;
            }
        }
        taken.insert(arg.clone());
        let raw = param
            .get("schema")
            .or_else(|| {
                param
                    .get("content")
                    .and_then(Value::as_object)
                    .and_then(|c| c.values().next())
                    .and_then(|m| m.get("schema"))
            })
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut schema = builder.import(&raw)?;
        if let (Some(obj), Some(text)) = (
            schema.as_object_mut(),
            param.get("description").and_then(Value::as_str),
        ) && !obj.contains_key("description")
        {
            obj.insert("description".into(), Value::String(text.to_owned()));
        }
        if *location == Location::Path
            || param.get("required").and_then(Value::as_bool) == Some(true)
        {
            required.push(Value::String(arg.clone()));
        }
        properties.insert(arg.clone(), schema);
        let style = param
            .get("style")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // OpenAPI's default: `form` style (query, cookie) explodes, the others do not.
        let explode = param.get("explode").and_then(Value::as_bool).unwrap_or(
            matches!(location, Location::Query | Location::Cookie)
                && style.as_deref().is_none_or(|s| s == "form"),
        );
        params.push(Param {
            arg,
            name: name.clone(),
            location: *location,
            style,
            explode,
        });
    }
    let mut whole = Map::new();
    let body = match (body_kind, body_schema) {
        (Some(kind), Some(raw)) => {
            taken.remove(BODY);
            let shape = match request_body::flatten(document, &raw, &taken)? {
                Some(flat) => {
                    let mut nested = Map::new();
                    let mut nested_required = Vec::new();
                    for (name, raw) in flat.properties {
                        let property = builder.import(raw)?;
                        let needed = body_required && flat.required.contains(name);
                        if flat.colliding.contains(name) {
                            nested.insert(name.clone(), property);
                            if flat.required.contains(name) {
                                nested_required.push(Value::String(name.clone()));
                            }
                        } else {
                            properties.insert(name.clone(), property);
                            if needed {
                                required.push(Value::String(name.clone()));
                            }
                        }
                    }
                    for (key, value) in &flat.whole {
                        whole.insert(key.clone(), builder.import(value)?);
                    }
                    if !nested.is_empty() {
                        let names: Vec<&str> = nested.keys().map(String::as_str).collect();
                        let mut container = Map::new();
                        container.insert("type".into(), json!("object"));
                        container.insert(
                            "description".into(),
                            Value::String(format!(
                                "The request body's {} (named like a parameter, so given here).",
                                names
                                    .iter()
                                    .map(|n| format!("`{n}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                        );
                        container.insert("properties".into(), Value::Object(nested));
                        if !nested_required.is_empty() {
                            container.insert("required".into(), Value::Array(nested_required));
                            if body_required {
                                required.push(Value::String(BODY.into()));
                            }
                        }
                        container.insert("additionalProperties".into(), json!(false));
                        properties.insert(BODY.into(), Value::Object(container));
                    }
                    BodyShape::Flat {
                        properties: flat
                            .properties
                            .keys()
                            .filter(|n| !flat.colliding.contains(*n))
                            .cloned()
                            .collect(),
                        nested: flat.colliding.into_iter().collect(),
                    }
                }
                None => {
                    let mut schema = builder.import(&raw)?;
                    if let Some(obj) = schema.as_object_mut()
                        && !obj.contains_key("description")
                    {
                        obj.insert("description".into(), json!("The whole request body."));
                    }
                    properties.insert(BODY.into(), schema);
                    if body_required {
                        required.push(Value::String(BODY.into()));
                    }
                    BodyShape::Nested
                }
            };
            Some(Body {
                kind,
                required: body_required,
                shape,
            })
        }
        _ => None,
    };
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    // The body's constraints on itself as a whole (`anyOf: [{required: [a]}, …]`): its
    // properties are arguments now.
    schema.extend(whole);
    // Unknown arguments are refused: a misspelt optional parameter would otherwise be dropped
    // silently and the call would do something else than the program meant.
    schema.insert("additionalProperties".into(), json!(false));
    let defs = builder.finish()?;
    if !defs.is_empty() {
        schema.insert("$defs".into(), Value::Object(defs));
    }
    Ok((Value::Object(schema), params, body))
}

/// Copies schemas out of the document into one self-contained input schema.
struct SchemaBuilder<'d> {
    document: &'d Value,
    /// `#/components/schemas/<name>` copied into `$defs` (or queued).
    defs: Map<String, Value>,
    queued: Vec<String>,
    seen: BTreeSet<String>,
    /// Other `$ref`s being inlined right now (a repeat is a cycle).
    inlining: Vec<String>,
    nodes: usize,
}

const SCHEMA_PREFIX: &str = "#/components/schemas/";

impl<'d> SchemaBuilder<'d> {
    fn new(document: &'d Value) -> Self {
        SchemaBuilder {
            document,
            defs: Map::new(),
            queued: Vec::new(),
            seen: BTreeSet::new(),
            inlining: Vec::new(),
            nodes: 0,
        }
    }

    fn import(&mut self, schema: &Value) -> Result<Value, String> {
        self.copy(schema, 0)
    }

    /// Copies every queued component (and what they refer to) into `$defs`.
    fn finish(mut self) -> Result<Map<String, Value>, String> {
        while let Some(name) = self.queued.pop() {
            let target = self
                .document
                .pointer(&format!("/components/schemas/{}", escape_pointer(&name)))
                .ok_or_else(|| {
                    format!("unresolved $ref `{SCHEMA_PREFIX}{}`", escape_pointer(&name))
                })?;
            let copy = self.copy(target, 0)?;
            self.defs.insert(name, copy);
        }
        Ok(self.defs)
    }

    fn copy(&mut self, value: &Value, depth: usize) -> Result<Value, String> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(format!(
                "its schema is nested more than {MAX_SCHEMA_DEPTH} levels deep"
            ));
        }
        self.nodes += 1;
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(format!("its schema has more than {MAX_SCHEMA_NODES} parts"));
        }
        match value {
            Value::Array(items) => items
                .iter()
                .map(|v| self.copy(v, depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    let rewritten = self.reference(reference, depth)?;
                    return Ok(rewritten_ref(map, rewritten));
                }
                if let Some(Value::Object(props)) = map.get("properties")
                    && props.len() > MAX_PROPERTIES
                {
                    return Err(format!(
                        "its schema has an object with {} properties (at most {MAX_PROPERTIES} are accepted)",
                        props.len()
                    ));
                }
                let mut out = Map::new();
                for (k, v) in map {
                    out.insert(k.clone(), self.copy(v, depth + 1)?);
                }
                openapi_30_keywords(&mut out);
                Ok(Value::Object(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// Handles one `$ref`: a new `$ref` string for a component schema (queued for `$defs`),
    /// or the inlined copy of any other local target. Remote references fail the tool.
    fn reference(&mut self, reference: &str, depth: usize) -> Result<Value, String> {
        if let Some(rest) = reference.strip_prefix(SCHEMA_PREFIX) {
            let (name, tail) = match rest.split_once('/') {
                Some((name, tail)) => (name, format!("/{tail}")),
                None => (rest, String::new()),
            };
            let name = percent_decode(name).replace("~1", "/").replace("~0", "~");
            if self.seen.insert(name.clone()) {
                self.queued.push(name.clone());
            }
            return Ok(Value::String(format!(
                "#/$defs/{}{tail}",
                escape_pointer(&name)
            )));
        }
        if !reference.starts_with('#') {
            return Err(format!(
                "its schema has the remote $ref `{reference}`, which is never fetched"
            ));
        }
        if self.inlining.iter().any(|r| r == reference) {
            return Err(format!("its schema has a $ref cycle through `{reference}`"));
        }
        let target = resolve_local(self.document, reference)
            .ok_or_else(|| format!("its schema has the unresolved $ref `{reference}`"))?;
        self.inlining.push(reference.to_owned());
        let copy = self.copy(target, depth + 1);
        self.inlining.pop();
        copy
    }
}

/// The schema object that held a `$ref`, with the reference replaced: a new `$ref` string for
/// a component, or an inlined schema (merged under `allOf` when the object had other keywords).
fn rewritten_ref(map: &Map<String, Value>, replacement: Value) -> Value {
    let mut out = map.clone();
    out.remove("$ref");
    // 3.0 ignores siblings of `$ref`, 3.1 applies them; either way `nullable` must be rewritten.
    openapi_30_keywords(&mut out);
    match replacement {
        Value::String(reference) => {
            out.insert("$ref".into(), Value::String(reference));
            Value::Object(out)
        }
        inlined if out.is_empty() => inlined,
        inlined => {
            out.insert("allOf".into(), json!([inlined]));
            Value::Object(out)
        }
    }
}

/// OpenAPI 3.0's schema dialect in JSON Schema 2020-12 terms: `nullable: true` adds `null` to
/// `type` (and `enum`), and boolean `exclusiveMinimum`/`exclusiveMaximum` move the bound.
fn openapi_30_keywords(schema: &mut Map<String, Value>) {
    if let Some(nullable) = schema.remove("nullable")
        && nullable == Value::Bool(true)
    {
        match schema.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                schema.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(types)) if !types.contains(&json!("null")) => {
                types.push(json!("null"))
            }
            _ => {}
        }
        if let Some(Value::Array(values)) = schema.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
    }
    for (flag, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(exclusive)) = schema.get(flag).cloned() {
            schema.remove(flag);
            if exclusive && let Some(limit) = schema.remove(bound) {
                schema.insert(flag.into(), limit);
            }
        }
    }
}

// ---- building requests ------------------------------------------------------------------------

enum Piece<'a> {
    Literal(&'a str),
    Var(&'a str),
}

/// `/repos/{owner}/{repo}` → literal `/repos/`, var `owner`, literal `/`, var `repo`.
fn template_pieces(path: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        if open > 0 {
            out.push(Piece::Literal(&rest[..open]));
        }
        out.push(Piece::Var(&rest[open + 1..open + close]));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Literal(rest));
    }
    out
}

/// Everything but RFC 3986 unreserved characters percent-encoded, so a path parameter cannot
/// add segments (`/`), a query (`?`) or a fragment (`#`).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A parameter value in OpenAPI's `simple` style: arrays and objects comma-separated (objects
/// as `k=v` pairs when exploded).
fn simple_string(value: &Value, explode: bool) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items
            .iter()
            .map(|v| simple_string(v, false))
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                if explode {
                    format!("{k}={}", simple_string(v, false))
                } else {
                    format!("{k},{}", simple_string(v, false))
                }
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// The query pairs of one parameter (`form` style by default; `spaceDelimited`,
/// `pipeDelimited` and `deepObject` as OpenAPI defines them).
fn query_pairs(param: &Param, value: &Value) -> Vec<(String, String)> {
    let name = &param.name;
    match value {
        Value::Array(items) => {
            let texts: Vec<String> = items.iter().map(|v| simple_string(v, false)).collect();
            match param.style.as_deref() {
                Some("spaceDelimited") => vec![(name.clone(), texts.join(" "))],
                Some("pipeDelimited") => vec![(name.clone(), texts.join("|"))],
                _ if param.explode => texts.into_iter().map(|t| (name.clone(), t)).collect(),
                _ => vec![(name.clone(), texts.join(","))],
            }
        }
        Value::Object(map) => match param.style.as_deref() {
            Some("deepObject") => map
                .iter()
                .map(|(k, v)| (format!("{name}[{k}]"), simple_string(v, false)))
                .collect(),
            _ if param.explode => map
                .iter()
                .map(|(k, v)| (k.clone(), simple_string(v, false)))
                .collect(),
            _ => vec![(name.clone(), simple_string(value, false))],
        },
        other => vec![(name.clone(), simple_string(other, false))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::arguments::ArgumentSchema;

    fn config(spec: &Path) -> OpenApiConfig {
        OpenApiConfig {
            name: "api".into(),
            spec: spec.to_owned(),
            base_url: None,
            auth: None,
            call_timeout_ms: 5_000,
            max_concurrent_calls: 4,
            coerce: Default::default(),
            learn_types: true,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }

    fn load_text(
        file_name: &str,
        text: &str,
    ) -> (tempfile::TempDir, Result<OpenApiSource, OpenApiError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name);
        std::fs::write(&path, text).unwrap();
        let result = OpenApiSource::load(config(&path), Arc::new(SecretStore::empty()));
        (dir, result)
    }

    fn load(document: Value) -> OpenApiSource {
        let (_dir, result) = load_text("api.json", &document.to_string());
        result.unwrap()
    }

    fn tool<'s>(source: &'s OpenApiSource, name: &str) -> &'s ToolDescriptor {
        source
            .descriptors()
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tool {name}: {:?}", names(source)))
    }

    fn names(source: &OpenApiSource) -> Vec<&str> {
        source
            .descriptors()
            .iter()
            .map(|t| t.name.as_str())
            .collect()
    }

    fn pets() -> Value {
        json!({
            "openapi": "3.0.3",
            "info": { "title": "pets", "version": "1" },
            "servers": [{ "url": "https://{region}.example.com/v1", "variables": { "region": { "default": "eu" } } }],
            "paths": {
                "/pets/{petId}": {
                    "parameters": [{ "name": "petId", "in": "path", "required": true, "schema": { "type": "integer" } }],
                    "get": {
                        "operationId": "pets/get",
                        "summary": "One pet",
                        "parameters": [
                            { "name": "fields", "in": "query", "schema": { "type": "array", "items": { "type": "string" } } },
                            { "name": "fields", "in": "header", "schema": { "type": "string" } },
                            { "name": "Accept", "in": "header", "schema": { "type": "string" } },
                            { "$ref": "#/components/parameters/Verbose" }
                        ]
                    },
                    "put": {
                        "requestBody": { "$ref": "#/components/requestBodies/Pet" },
                        "parameters": [{ "name": "body", "in": "query", "schema": { "type": "string" } }]
                    }
                }
            },
            "components": {
                "parameters": { "Verbose": { "name": "verbose", "in": "query", "required": true, "schema": { "type": "boolean" } } },
                "requestBodies": { "Pet": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } } },
                "schemas": {
                    "Pet": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": { "type": "string", "nullable": true },
                            "age": { "type": "integer", "minimum": 0, "exclusiveMinimum": true },
                            "parent": { "$ref": "#/components/schemas/Pet" }
                        }
                    }
                }
            }
        })
    }

    /// 200, else 201, else the first 2xx; JSON media types only; resolved like inputs.
    #[test]
    fn success_responses_become_output_schemas() {
        let pet = json!({ "$ref": "#/components/schemas/Pet" });
        let responses = |r: Value| json!({ "responses": r });
        let json_body = |schema: &Value| json!({ "content": { "application/json; charset=utf-8": { "schema": schema } } });
        let op = |r: Value| responses(r).as_object().cloned().unwrap();
        let doc = pets();
        let out = output_schema(&doc, &op(json!({ "201": json_body(&json!({"type": "string"})), "200": json_body(&pet), "404": json_body(&json!({"type": "number"})) }))).unwrap();
        assert_eq!(out["$ref"], "#/$defs/Pet");
        assert_eq!(
            out["$defs"]["Pet"]["properties"]["name"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            out["$defs"]["Pet"]["properties"]["parent"]["$ref"],
            "#/$defs/Pet"
        );
        let out = output_schema(&doc, &op(json!({ "202": json_body(&json!({"type": "number"})), "201": json_body(&json!({"type": "string"})) }))).unwrap();
        assert_eq!(out, json!({"type": "string"}));
        let out = output_schema(&doc, &op(json!({ "204": {"description": "none"}, "202": json_body(&json!({"type": "number"})) }))).unwrap();
        assert_eq!(out, json!({"type": "number"}), "the first 2xx in order");
        let vendor = json!({ "200": { "content": { "application/vnd.github+json": { "schema": {"type": "boolean"} } } } });
        assert_eq!(
            output_schema(&doc, &op(vendor)),
            Some(json!({"type": "boolean"}))
        );
        for without in [
            json!({ "200": { "content": { "text/plain": { "schema": {"type": "string"} } } } }),
            json!({ "204": { "description": "no content" } }),
            json!({ "404": json_body(&json!({"type": "string"})) }),
            json!({ "200": json_body(&json!({"$ref": "#/components/schemas/Missing"})) }),
        ] {
            assert_eq!(output_schema(&doc, &op(without.clone())), None, "{without}");
        }
        // The descriptor carries it.
        let mut doc = pets();
        doc["paths"]["/pets/{petId}"]["get"]["responses"] = json!({ "200": json_body(&pet) });
        let source = load(doc);
        assert!(tool(&source, "pets_get").output_schema.is_some());
        assert!(tool(&source, "put_pets_petId").output_schema.is_none());
    }

    #[test]
    fn operations_become_tools_with_one_argument_object() {
        let source = load(pets());
        assert_eq!(names(&source), ["pets_get", "put_pets_petId"]);
        assert_eq!(source.base_url(), "https://eu.example.com/v1");

        let get = tool(&source, "pets_get");
        assert!(
            get.description.starts_with("One pet"),
            "{}",
            get.description
        );
        assert!(
            get.description.ends_with("GET /pets/{petId}"),
            "{}",
            get.description
        );
        let schema = &get.input_schema;
        let props = schema["properties"].as_object().unwrap();
        // Path first, then query; the header `fields` yields to the query one; Accept is ignored.
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            ["fields", "fields_header", "petId", "verbose"]
        );
        assert_eq!(schema["required"], json!(["petId", "verbose"]));
        assert_eq!(schema["additionalProperties"], json!(false));

        let put = tool(&source, "put_pets_petId");
        let schema = &put.input_schema;
        // The JSON body's properties are arguments of their own; `name` is required because
        // the body is and the body requires it.
        assert_eq!(schema["required"], json!(["petId", "name"]));
        assert_eq!(
            schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["age", "body_query", "name", "parent", "petId"]
        );
        // The query parameter called `body` yields to the request body.
        assert!(schema["properties"]["body_query"].is_object(), "{schema}");
        // A recursive component is copied once; 3.0 keywords are rewritten.
        let pet = &schema["$defs"]["Pet"];
        assert_eq!(
            pet["properties"]["parent"],
            json!({ "$ref": "#/$defs/Pet" })
        );
        assert_eq!(pet["properties"]["name"]["type"], json!(["string", "null"]));
        assert_eq!(
            pet["properties"]["age"],
            json!({ "type": "integer", "exclusiveMinimum": 0 })
        );
    }

    #[test]
    fn arguments_are_checked_against_the_built_schema() {
        let source = load(pets());
        let op = &source.operations["put_pets_petId"];
        let schema = ArgumentSchema::compile(&op.input_schema);
        schema
            .check(
                "api.put_pets_petId",
                &json!({ "petId": 1, "name": null, "parent": { "name": "x" } }),
            )
            .unwrap();
        let e = schema
            .check("api.put_pets_petId", &json!({ "petId": "one", "name": 1 }))
            .unwrap_err();
        assert_eq!(e.code, "invalid_arguments");
        let e = schema
            .check("api.put_pets_petId", &json!({ "petId": 1 }))
            .unwrap_err();
        assert!(e.message.contains("name"), "{}", e.message);
        let e = schema
            .check(
                "api.put_pets_petId",
                &json!({ "petId": 1, "name": "a", "nmae": 1 }),
            )
            .unwrap_err();
        assert!(e.message.contains("nmae"), "{}", e.message);
        // The old nested shape is an unknown argument now.
        let e = schema
            .check(
                "api.put_pets_petId",
                &json!({ "petId": 1, "body": { "name": "a" } }),
            )
            .unwrap_err();
        assert!(e.message.contains("body"), "{}", e.message);
    }

    fn bodies() -> Value {
        let json_body = |required: bool, schema: Value| json!({ "required": required, "content": { "application/json": { "schema": schema } } });
        json!({
            "openapi": "3.1.0",
            "info": { "title": "bodies", "version": "1" },
            "paths": {
                "/repos/{owner}/{repo}/issues/{issue_number}/comments": { "post": {
                    "operationId": "issues/create-comment",
                    "parameters": [
                        { "name": "owner", "in": "path", "required": true, "schema": { "type": "string" } },
                        { "name": "repo", "in": "path", "required": true, "schema": { "type": "string" } },
                        { "name": "issue_number", "in": "path", "required": true, "schema": { "type": "integer" } }
                    ],
                    "requestBody": json_body(true, json!({ "type": "object", "required": ["body"],
                        "properties": { "body": { "type": "string", "description": "The comment." } } }))
                } },
                "/variables/{name}": { "patch": {
                    "operationId": "update-variable",
                    "parameters": [
                        { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
                        { "name": "dry_run", "in": "query", "schema": { "type": "boolean" } }
                    ],
                    "requestBody": json_body(true, json!({ "type": "object", "required": ["name"],
                        "properties": { "name": { "type": "string" }, "value": { "type": "string" },
                            "dry_run": { "type": "integer" } } }))
                } },
                "/labels": {
                    "put": { "operationId": "set-labels",
                        "requestBody": json_body(true, json!({ "type": "array", "items": { "type": "string" } })) },
                    "post": { "operationId": "add-labels",
                        "requestBody": json_body(false, json!({ "oneOf": [
                            { "type": "string" }, { "type": "array", "items": { "type": "string" } } ] })) },
                    "patch": { "operationId": "free-form",
                        "requestBody": json_body(true, json!({ "type": "object" })) }
                },
                "/optional": { "post": {
                    "operationId": "optional",
                    "requestBody": json_body(false, json!({ "type": "object", "required": ["a"],
                        "properties": { "a": { "type": "string" }, "b": { "type": "string" } },
                        "anyOf": [{ "required": ["a"] }, { "required": ["b"] }] }))
                } }
            }
        })
    }

    /// The issue's shapes: flattened properties, a collision under `body`, bodies that are not
    /// objects under `body` whole, required only when the body is.
    #[test]
    fn object_bodies_are_flattened_into_the_arguments() {
        let source = load_with_base(bodies());
        let comment = &tool(&source, "issues_create_comment").input_schema;
        assert_eq!(
            comment["required"],
            json!(["owner", "repo", "issue_number", "body"])
        );
        assert_eq!(
            comment["properties"]["body"],
            json!({ "type": "string", "description": "The comment." })
        );
        assert_eq!(
            source.operations["issues_create_comment"]
                .body
                .as_ref()
                .unwrap()
                .shape,
            BodyShape::Flat {
                properties: vec!["body".into()],
                nested: vec![]
            }
        );

        // `name` and `dry_run` are parameters too: the body's stay under `body`.
        let variable = &tool(&source, "update_variable").input_schema;
        assert_eq!(variable["required"], json!(["name", "body"]));
        let props = variable["properties"].as_object().unwrap();
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            ["body", "dry_run", "name", "value"]
        );
        assert_eq!(props["dry_run"]["type"], "boolean");
        assert_eq!(props["body"]["required"], json!(["name"]));
        assert_eq!(
            props["body"]["properties"],
            json!({ "dry_run": { "type": "integer" }, "name": { "type": "string" } })
        );
        assert_eq!(props["body"]["additionalProperties"], json!(false));

        // Not objects (or free-form ones): the whole body is `body`.
        let set = &tool(&source, "set_labels").input_schema;
        assert_eq!(set["required"], json!(["body"]));
        assert_eq!(set["properties"]["body"]["type"], "array");
        let add = &tool(&source, "add_labels").input_schema;
        assert!(add.get("required").is_none(), "{add}");
        assert!(add["properties"]["body"]["oneOf"].is_array(), "{add}");
        let free = &tool(&source, "free_form").input_schema;
        assert_eq!(free["properties"]["body"]["type"], "object");
        for name in ["set_labels", "add_labels", "free_form"] {
            assert_eq!(
                source.operations[name].body.as_ref().unwrap().shape,
                BodyShape::Nested,
                "{name}"
            );
        }

        // An optional body's required properties are optional arguments; its constraints on
        // the object as a whole move up with its properties.
        let optional = &tool(&source, "optional").input_schema;
        assert!(optional.get("required").is_none(), "{optional}");
        assert_eq!(
            optional["anyOf"],
            json!([{ "required": ["a"] }, { "required": ["b"] }])
        );
        let schema = ArgumentSchema::compile(optional);
        schema.check("api.optional", &json!({ "b": "x" })).unwrap();
        schema.check("api.optional", &json!({})).unwrap_err();

        let schema = ArgumentSchema::compile(variable);
        schema
            .check(
                "api.update_variable",
                &json!({ "name": "OLD", "value": "v", "body": { "name": "NEW" } }),
            )
            .unwrap();
        let e = schema
            .check(
                "api.update_variable",
                &json!({ "name": "OLD", "value": "v" }),
            )
            .unwrap_err();
        assert!(e.message.contains("body"), "{}", e.message);
    }

    #[test]
    fn hostile_schemas_fail_only_their_own_tool() {
        let many: Map<String, Value> = (0..10_000)
            .map(|i| (format!("p{i}"), json!({ "type": "string" })))
            .collect();
        let mut deep = json!({ "type": "string" });
        // 50 schema levels are 100 JSON levels: under the parser's limit of 128 (a document
        // nested deeper than that fails as a whole, with the line and column).
        for _ in 0..50 {
            deep = json!({ "type": "object", "properties": { "a": deep } });
        }
        let body = |schema: Value| json!({ "requestBody": { "content": { "application/json": { "schema": schema } } } });
        let doc = json!({
            "openapi": "3.1.0",
            "info": { "title": "t", "version": "1" },
            "paths": {
                "/many": { "post": body(json!({ "type": "object", "properties": many })) },
                "/deep": { "post": body(deep) },
                "/remote": { "post": body(json!({ "$ref": "https://evil.example/schema.json" })) },
                "/missing": { "post": body(json!({ "$ref": "#/components/schemas/Nope" })) },
                "/cycle": { "post": body(json!({ "$ref": "#/x/a" })) },
                "/keywords": {
                    "get": {
                        "operationId": "delete",
                        "description": "ends a comment */ and has /* another",
                        "parameters": [
                            { "name": "class", "in": "query", "schema": { "type": "string" } },
                            { "name": "a*/b", "in": "query", "schema": { "type": "string", "description": "*/ evil" } }
                        ]
                    }
                }
            },
            "x": { "a": { "properties": { "b": { "$ref": "#/x/a" } } } }
        });
        let source = load_with_base(doc);
        let problem = |t: &str| {
            source
                .problem(t)
                .unwrap_or_else(|| panic!("{t} should have a problem"))
                .to_owned()
        };
        assert!(
            problem("post_many").contains("10000 properties"),
            "{}",
            problem("post_many")
        );
        assert!(
            problem("post_deep").contains("nested more than"),
            "{}",
            problem("post_deep")
        );
        assert!(
            problem("post_remote").contains("remote $ref"),
            "{}",
            problem("post_remote")
        );
        assert!(
            problem("post_missing").contains("unresolved $ref"),
            "{}",
            problem("post_missing")
        );
        assert!(
            problem("post_cycle").contains("cycle"),
            "{}",
            problem("post_cycle")
        );
        assert!(
            tool(&source, "post_many")
                .description
                .contains("Unavailable:")
        );
        // Keywords and comment terminators are names and text like any other.
        assert_eq!(source.problem("delete"), None);
        let kw = tool(&source, "delete");
        assert!(kw.input_schema["properties"]["class"].is_object());
        assert!(kw.input_schema["properties"]["a*/b"].is_object());
        assert!(kw.description.contains("*/"));

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt
            .block_on(source.call_tool("post_many", json!({}), &CallContext::new("e", "p", 1)))
            .unwrap_err();
        assert_eq!(e.code, "invalid_schema");
        assert!(
            e.message.starts_with("api.post_many cannot be called: "),
            "{}",
            e.message
        );
    }

    fn load_with_base(document: Value) -> OpenApiSource {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.json");
        std::fs::write(&path, document.to_string()).unwrap();
        let mut config = config(&path);
        config.base_url = Some("http://127.0.0.1:9/api/".into());
        OpenApiSource::load(config, Arc::new(SecretStore::empty())).unwrap()
    }

    #[test]
    fn nested_and_self_multiplying_yaml_documents_are_refused_on_a_small_stack() {
        // The YAML parser's recursion and alias-repetition limits, pinned on a runtime
        // thread's 2 MiB stack: a policy drop-in may point at a document someone else wrote.
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("deep.yaml");
        std::fs::write(
            &deep,
            format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)),
        )
        .unwrap();
        let laughs = dir.path().join("laughs.yaml");
        let mut text = String::from("a: &a [x,x,x,x,x,x,x,x,x]\n");
        for (name, previous) in [
            ("b", "a"),
            ("c", "b"),
            ("d", "c"),
            ("e", "d"),
            ("f", "e"),
            ("g", "f"),
            ("h", "g"),
            ("i", "h"),
        ] {
            text.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{previous}"); 9].join(",")
            ));
        }
        std::fs::write(&laughs, text).unwrap();
        let errors = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                [deep, laughs]
                    .iter()
                    .map(|p| read_document(p).unwrap_err().to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .expect("the YAML parser overflowed a 2 MiB stack");
        assert!(
            errors[0].contains("recursion limit exceeded"),
            "{}",
            errors[0]
        );
        assert!(
            errors[1].contains("repetition limit exceeded"),
            "{}",
            errors[1]
        );
    }

    #[test]
    fn malformed_documents_name_the_file_and_position() {
        let (_d, r) = load_text(
            "bad.json",
            "{\n  \"openapi\": \"3.1.0\",\n  \"paths\": {,}\n}",
        );
        let e = r.unwrap_err().to_string();
        assert!(e.contains("/bad.json:3:13: invalid JSON"), "{e}");
        let (_d, r) = load_text("bad.yaml", "openapi: 3.1.0\npaths:\n  /a: [unclosed\n");
        let e = r.unwrap_err().to_string();
        assert!(e.contains("/bad.yaml:"), "{e}");
        assert!(e.contains("invalid YAML"), "{e}");
        let (_d, r) = load_text("swagger.yaml", "swagger: '2.0'\n");
        assert!(r.unwrap_err().to_string().contains("Swagger 2.0"));
        let (_d, r) = load_text(
            "v.json",
            r#"{"openapi": "3.1.0", "servers": [{"url": "http://h"}], "paths": {"/a": 1}}"#,
        );
        let e = r.unwrap_err().to_string();
        assert!(e.contains("#/paths/~1a: expected a path item"), "{e}");
        let (_d, r) = load_text(
            "v.json",
            r#"{"openapi": "3.1.0", "servers": [{"url": "/v1"}]}"#,
        );
        assert!(
            r.unwrap_err()
                .to_string()
                .contains("not an absolute http(s) URL")
        );
        let e = OpenApiSource::load(
            config(Path::new("/nonexistent/x.json")),
            Arc::new(SecretStore::empty()),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("/nonexistent/x.json: cannot read"), "{e}");
    }

    #[test]
    fn yaml_documents_load_and_include_exclude_filter() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.yml");
        std::fs::write(
            &path,
            "openapi: 3.1.0\ninfo: {title: t, version: '1'}\nservers:\n  - url: http://localhost:8080\npaths:\n  /a:\n    get:\n      operationId: getA\n      responses:\n        200:\n          description: ok\n  /b:\n    get:\n      operationId: getB\n    delete:\n      operationId: deleteB\n",
        )
        .unwrap();
        let mut config = config(&path);
        config.include = vec!["get*".into(), "delete*".into()];
        config.exclude = vec!["getB".into()];
        let source = OpenApiSource::load(config, Arc::new(SecretStore::empty())).unwrap();
        assert_eq!(names(&source), ["deleteB", "getA"]);
        assert_eq!(source.base_url(), "http://localhost:8080/");
    }

    /// The safe methods only read; everything else may write.
    #[test]
    fn get_head_options_and_trace_operations_are_read_only() {
        let operations: Map<String, Value> = METHODS
            .iter()
            .map(|m| ((*m).to_owned(), json!({ "operationId": format!("op_{m}") })))
            .collect();
        let doc = json!({
            "openapi": "3.1.0",
            "info": { "title": "t", "version": "1" },
            "paths": { "/things": operations }
        });
        let source = load_with_base(doc);
        let read_only: Vec<&str> = source
            .descriptors()
            .iter()
            .filter(|t| t.read_only)
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(read_only, ["op_get", "op_head", "op_options", "op_trace"]);
        assert!(!tool(&source, "op_post").read_only);
        let source = load(pets());
        assert!(tool(&source, "pets_get").read_only);
        assert!(!tool(&source, "put_pets_petId").read_only);
    }

    #[test]
    fn only_writing_methods_carry_the_idempotency_key() {
        let carries: Vec<&str> = METHODS
            .iter()
            .filter(|m| {
                carries_idempotency_key(
                    &reqwest::Method::from_bytes(m.to_ascii_uppercase().as_bytes()).unwrap(),
                )
            })
            .copied()
            .collect();
        assert_eq!(carries, ["put", "post", "delete", "patch"]);
    }

    #[test]
    fn request_pieces() {
        assert_eq!(
            method_path_name("get", "/pets/{petId}/toys"),
            "get_pets_petId_toys"
        );
        assert_eq!(percent_encode("a/b?c#d e~"), "a%2Fb%3Fc%23d%20e~");
        let pieces: Vec<String> = template_pieces("/r/{owner}/{repo}.git")
            .into_iter()
            .map(|p| match p {
                Piece::Literal(t) => format!("L{t}"),
                Piece::Var(v) => format!("V{v}"),
            })
            .collect();
        assert_eq!(pieces, ["L/r/", "Vowner", "L/", "Vrepo", "L.git"]);
        let param = |style: Option<&str>, explode| Param {
            arg: "q".into(),
            name: "q".into(),
            location: Location::Query,
            style: style.map(str::to_owned),
            explode,
        };
        assert_eq!(
            query_pairs(&param(None, true), &json!([1, 2])),
            [("q".into(), "1".into()), ("q".into(), "2".into())]
        );
        assert_eq!(
            query_pairs(&param(None, false), &json!([1, 2])),
            [("q".to_owned(), "1,2".to_owned())]
        );
        assert_eq!(
            query_pairs(&param(Some("deepObject"), true), &json!({"a": 1})),
            [("q[a]".to_owned(), "1".to_owned())]
        );
        let long = "x".repeat(5000);
        let e = excerpt(&long);
        assert!(e.starts_with(&"x".repeat(MAX_EXCERPT_BYTES)));
        assert!(e.ends_with("… (5000 bytes in all)"), "{e}");
        assert!(e.len() < MAX_EXCERPT_BYTES + 40);
        let a = Url::parse("https://h:443/x").unwrap();
        assert!(same_origin(&a, &Url::parse("https://h/y").unwrap()));
        assert!(!same_origin(&a, &Url::parse("http://h/y").unwrap()));
        assert!(!same_origin(&a, &Url::parse("https://h:8443/y").unwrap()));
    }
}
