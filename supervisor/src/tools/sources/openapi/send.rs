//! One call: the URL from the path template and the arguments, query, header and cookie
//! parameters, the body, the credentials (only to the base URL's origin), the call's
//! idempotency key on writing methods; the answer read within bounds, redirects refused.

use super::{BodyKind, Location, OpenApiSource, Operation, Param};
use crate::agent_api::Coercion;
use crate::tools::coercion;
use crate::tools::sources::http;
use crate::tools::sources::settings::Settings;
use crate::tools::{
    CallContext, IDEMPOTENCY_HEADER, SecretsUsed, SourceAnswer, ToolError, ToolErrorCode,
};
use airlock_policy::{ApiKeyLocation, OpenApiAuth, SettingValue};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// How much of a failed answer's body its `ToolError` quotes.
pub const MAX_EXCERPT_BYTES: usize = 1024;

impl OpenApiSource {
    /// One call. The answer carries the secret values its credentials hold, whatever the
    /// outcome (an error page may quote the request).
    pub(super) async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
    ) -> SourceAnswer {
        let mut secrets = SecretsUsed::default();
        let result = self.operation_result(tool, args, ctx, &mut secrets).await;
        SourceAnswer::mended(result, secrets)
    }

    /// The value of one call of `tool`, mended to its output schema where the policy allows
    /// it (with the coercions); the credentials' secret values go to `secrets`.
    async fn operation_result(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
        secrets: &mut SecretsUsed,
    ) -> Result<(Value, Vec<Coercion>), ToolError> {
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
        let credentials = self.credentials(secrets)?;
        let value = self.send(&full, op, args, credentials, ctx).await?;
        Ok(coercion::mend_result(
            op.output(),
            value,
            self.config.coerce,
        ))
    }

    /// The auth values, secrets read from the store now (so a rotated secret is used at once)
    /// and added to `secrets`.
    fn credentials(&self, secrets: &mut SecretsUsed) -> Result<Option<Credentials>, ToolError> {
        let Some(auth) = &self.config.auth else {
            return Ok(None);
        };
        let settings = Settings {
            kind: "openapi source",
            name: &self.config.name,
            store: &self.secrets,
        };
        let mut value = |key: &str, setting: &SettingValue| -> Result<String, ToolError> {
            Ok(settings.value("auth", key, setting, secrets)?.value)
        };
        Ok(Some(match auth {
            OpenApiAuth::Bearer { token } => Credentials::Bearer(value("token", token)?),
            OpenApiAuth::Basic { username, password } => {
                let username = value("username", username)?;
                Credentials::Basic(username, value("password", password)?)
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
        let path = expanded_path(full, op, args)?;
        let mut url = Url::parse(&format!(
            "{}{path}",
            self.base.as_str().trim_end_matches('/')
        ))
        .map_err(|e| invalid(format!("{full}: the request URL is invalid: {e}")))?;
        let (mut headers, cookies) =
            place_parameters(full, op, args, &mut url, credentials.as_ref())?;
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
            idempotency_header(full, key, &mut headers, credentials.as_ref())?;
        }
        let request = self
            .client
            .request(op.method.clone(), url.clone())
            .headers(headers);
        let request = self.with_credentials(request, credentials)?;
        let request = with_body(full, op, args, request)?;
        let display_url = format!("{} {}{}", op.method, origin(&url), url.path());
        ctx.before_deadline(full, self.exchange(full, &display_url, request))
            .await
    }

    /// `request` with the source's credentials (those that go in the query are in its URL
    /// already).
    fn with_credentials(
        &self,
        request: reqwest::RequestBuilder,
        credentials: Option<Credentials>,
    ) -> Result<reqwest::RequestBuilder, ToolError> {
        Ok(match credentials {
            Some(Credentials::Bearer(token)) => request.bearer_auth(token),
            Some(Credentials::Basic(user, password)) => request.basic_auth(user, Some(password)),
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
                request.header(name, value)
            }
            Some(Credentials::Query(..)) | None => request,
        })
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

/// Whether a request of `method` carries the call's idempotency key: the methods that may
/// change something, which the `Idempotency-Key` draft is for. Reads get none: repeating them
/// is harmless, and a service that honours the key could answer a replay's fresh read with
/// the answer it stored the first time.
pub(super) fn carries_idempotency_key(method: &reqwest::Method) -> bool {
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

fn invalid(message: String) -> ToolError {
    ToolError::new(ToolErrorCode::InvalidArguments, message)
}

/// The operation's path with its path parameters, percent-encoded.
fn expanded_path(
    full: &str,
    op: &Operation,
    args: &Map<String, Value>,
) -> Result<String, ToolError> {
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
    Ok(path)
}

/// The query, header and cookie parameters given in `args`: query ones (and credentials that
/// go in the query) added to `url`; the headers, and the cookies (`name=value`) to send.
fn place_parameters(
    full: &str,
    op: &Operation,
    args: &Map<String, Value>,
    url: &mut Url,
    credentials: Option<&Credentials>,
) -> Result<(HeaderMap, Vec<String>), ToolError> {
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
        if let Some(Credentials::Query(name, value)) = credentials {
            query.append_pair(name, value);
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
    Ok((headers, cookies))
}

/// The call's idempotency key as the `Idempotency-Key` header, unless the request has one.
fn idempotency_header(
    full: &str,
    key: &str,
    headers: &mut HeaderMap,
    credentials: Option<&Credentials>,
) -> Result<(), ToolError> {
    let name = HeaderName::from_static(IDEMPOTENCY_HEADER);
    // An `Idempotency-Key` the operation declares as a parameter, set by the program,
    // stays: it is part of the arguments, so a call sent again repeats it as well, and
    // the draft allows one such header per request. (The API key's header is never a
    // parameter; an operator who named it `Idempotency-Key` keeps it too.)
    let api_key_has_it = matches!(credentials, Some(Credentials::Header(h, _)) if h.eq_ignore_ascii_case(IDEMPOTENCY_HEADER));
    if !headers.contains_key(&name) && !api_key_has_it {
        let value = HeaderValue::from_str(key).map_err(|_| {
            ToolError::new(
                ToolErrorCode::Internal,
                format!("{full}: the call's idempotency key cannot be sent as a header value; nothing was sent"),
            )
        })?;
        headers.insert(name, value);
    }
    Ok(())
}

/// `request` with the operation's body from `args`, when it has one and it is given.
fn with_body(
    full: &str,
    op: &Operation,
    args: &Map<String, Value>,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::RequestBuilder, ToolError> {
    let Some((kind, body)) = op
        .body
        .as_ref()
        .and_then(|b| Some((&b.kind, b.value(args)?)))
    else {
        return Ok(request);
    };
    let body = &body;
    Ok(match kind {
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
    })
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

pub(super) fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// At most [`MAX_EXCERPT_BYTES`] of `text`, cut at a character boundary, and a note of how
/// much was left out.
pub(super) fn excerpt(text: &str) -> String {
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

pub(super) enum Piece<'a> {
    Literal(&'a str),
    Var(&'a str),
}

/// `/repos/{owner}/{repo}` → literal `/repos/`, var `owner`, literal `/`, var `repo`.
pub(super) fn template_pieces(path: &str) -> Vec<Piece<'_>> {
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
pub(super) fn percent_encode(text: &str) -> String {
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
pub(super) fn query_pairs(param: &Param, value: &Value) -> Vec<(String, String)> {
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
