//! Reading the document (JSON or YAML, bounded in size) and indexing its operations as
//! tools: names, descriptions, the base URL calls go to.

use super::OpenApiSource;
use super::schema::build_operation;
use crate::secrets::store::SecretStore;
use crate::tools::sources::http::{self, OutboundHttpError};
use crate::tools::sources::mcp::identifiers;
use crate::tools::{CallGate, ToolDescriptor};
use airlock_policy::{ApiKeyLocation, OpenApiAuth, OpenApiSource as OpenApiConfig};
use reqwest::Url;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The largest document the daemon reads (GitHub's is 13 MB).
const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// Length of a tool's description.
const MAX_DESCRIPTION_CHARS: usize = 4000;

pub(super) const METHODS: [&str; 8] = [
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
    BaseUrl { file: String, reason: BaseUrlError },
    #[error("openapi source `{name}`: {source}")]
    Client {
        name: String,
        source: OutboundHttpError,
    },
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
}

/// Whether an operation of `method` only reads: the methods HTTP defines as safe (RFC 9110,
/// 9.2.1). `TRACE` is one of them, and OpenAPI documents can declare it.
pub(super) fn reads_only(method: &reqwest::Method) -> bool {
    [
        reqwest::Method::GET,
        reqwest::Method::HEAD,
        reqwest::Method::OPTIONS,
        reqwest::Method::TRACE,
    ]
    .contains(method)
}

pub(super) fn read_document(path: &Path) -> Result<Value, OpenApiError> {
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

/// Why the base URL of an OpenAPI source cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BaseUrlError {
    #[error("`base_url` is not set in the policy and the document has no `servers`")]
    NoServers,
    #[error("`base_url` is not set in the policy and the document's first server has no `url`")]
    NoServerUrl,
    #[error(
        "`base_url` is not set in the policy and the document's first server URL \"{0}\" is not an absolute http(s) URL"
    )]
    ServerNotAbsolute(String),
    #[error("base URL \"{url}\" is invalid: {cause}")]
    Invalid {
        url: String,
        /// `url::ParseError` (reqwest re-exports `Url`, not its crate).
        cause: <Url as std::str::FromStr>::Err,
    },
    #[error("base URL \"{0}\" is not an http(s) URL with a host")]
    NotHttp(String),
    #[error("the base URL must not carry credentials; use `auth`")]
    Credentials,
}

/// The configured base URL, or the document's first server URL with its variables' defaults.
fn base_url(config: &OpenApiConfig, document: &Value) -> Result<Url, BaseUrlError> {
    let text = match &config.base_url {
        Some(url) => url.clone(),
        None => {
            let server = document
                .pointer("/servers/0")
                .ok_or(BaseUrlError::NoServers)?;
            let mut url = server
                .get("url")
                .and_then(Value::as_str)
                .ok_or(BaseUrlError::NoServerUrl)?
                .to_owned();
            if let Some(vars) = server.get("variables").and_then(Value::as_object) {
                for (name, var) in vars {
                    if let Some(default) = var.get("default").and_then(Value::as_str) {
                        url = url.replace(&format!("{{{name}}}"), default);
                    }
                }
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(BaseUrlError::ServerNotAbsolute(url));
            }
            url
        }
    };
    let url = Url::parse(&text).map_err(|cause| BaseUrlError::Invalid {
        url: text.clone(),
        cause,
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(BaseUrlError::NotHttp(text));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(BaseUrlError::Credentials);
    }
    Ok(url)
}

pub(super) fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The value a local `$ref` (`#/components/...`) points at.
pub(super) fn resolve_local<'v>(document: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    document.pointer(&percent_decode(pointer))
}

pub(super) fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Follows `$ref`s of non-schema objects (parameters, request bodies, path items), a few
/// levels at most.
pub(super) fn deref<'v>(
    document: &'v Value,
    mut value: &'v Value,
) -> Result<&'v Value, super::schema::OperationProblem> {
    for _ in 0..8 {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                value = resolve_local(document, reference).ok_or_else(|| {
                    super::schema::OperationProblem::UnresolvedRef(reference.to_owned())
                })?;
            }
            None => return Ok(value),
        }
    }
    Err(super::schema::OperationProblem::RefChainTooLong)
}

/// `get /pets/{petId}` → `get_pets_petId`.
pub(super) fn method_path_name(method: &str, path: &str) -> String {
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
