//! An operation as a tool: its input schema (parameters and the request body as one
//! arguments object, `$ref`s made self-contained, OpenAPI 3.0's dialect rewritten) and the
//! schema of its success response. A schema this source cannot use fails only its tool.

use super::load::{deref, escape_pointer, percent_decode, resolve_local};
use super::request_body::{self, BODY, Body, BodyShape};
use super::send::{Piece, template_pieces};
use super::{BodyKind, Location, Operation, Param};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Nesting limit of one tool's input schema: deeper schemas are hostile or broken, and would
/// strain everything that walks them later (validation, the TypeScript SDK).
const MAX_SCHEMA_DEPTH: usize = 64;

/// Properties of one object schema.
pub(super) const MAX_PROPERTIES: usize = 1000;

/// JSON values in one tool's input schema, `$defs` included.
const MAX_SCHEMA_NODES: usize = 200_000;

/// Why one operation cannot be a tool (the tool is listed, says so, and fails when called;
/// the rest of the document still loads).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum OperationProblem {
    #[error("`parameters` is not an array")]
    ParametersNotAnArray,
    #[error("a parameter has no `name`")]
    ParameterWithoutName,
    #[error("parameter `{0}` has no `in`")]
    ParameterWithoutIn(String),
    #[error("parameter `{name}` is in unknown location `{location}`")]
    UnknownLocation { name: String, location: String },
    #[error(
        "its request body ({0}) is of a type this source cannot send (JSON, form and text are supported)"
    )]
    UnsupportedBody(String),
    /// A `$ref` of a parameter, a request body or a component that points nowhere.
    #[error("unresolved $ref `{0}`")]
    UnresolvedRef(String),
    #[error("a chain of more than 8 $refs")]
    RefChainTooLong,
    #[error("its schema is nested more than {MAX_SCHEMA_DEPTH} levels deep")]
    SchemaTooDeep,
    #[error("its schema has more than {MAX_SCHEMA_NODES} parts")]
    SchemaTooLarge,
    #[error("its schema has an object with {0} properties (at most {MAX_PROPERTIES} are accepted)")]
    TooManyProperties(usize),
    #[error("its schema has the remote $ref `{0}`, which is never fetched")]
    RemoteRef(String),
    #[error("its schema has a $ref cycle through `{0}`")]
    RefCycle(String),
    #[error("its schema has the unresolved $ref `{0}`")]
    UnresolvedSchemaRef(String),
}

/// Builds an operation; a problem with its parameters or schemas is recorded in it, so only
/// this tool fails.
pub(super) fn build_operation(
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
        Err(problem) => operation.problem = Some(problem.to_string()),
    }
    operation
}

/// The JSON Schema of what a successful call resolves to: the schema of the operation's
/// success response (200, else 201, else the first other 2xx, else `2XX`) for a JSON media
/// type (`application/json` or `*+json`), self-contained like an input schema. The program
/// gets that response's parsed body, so the type is what it receives. `None` (the SDK says
/// `unknown`) when the response has no JSON schema, or one this source will not copy (too
/// large, remote or broken `$ref`s): the output type is a help, and never fails the tool.
pub(super) fn output_schema(document: &Value, op: &Map<String, Value>) -> Option<Value> {
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

/// One operation's arguments object: its parameters and its request body as properties,
/// with the parameters as the request is built from them and the body's shape.
fn input_schema(
    document: &Value,
    path: &str,
    item: &Map<String, Value>,
    op: &Map<String, Value>,
    api_key_header: Option<&str>,
) -> Result<Built, OperationProblem> {
    // Template variables nobody declared are still needed to build the URL.
    let implicit = json!({ "required": true, "schema": { "type": "string" } });
    let declared = declared_parameters(document, path, item, op, &implicit)?;
    let body = request_body(document, op)?;
    let mut builder = SchemaBuilder::new(document);
    let mut arguments = Arguments::default();
    if body.is_some() {
        arguments.taken.insert("body".to_owned());
    }
    let params = arguments.add_parameters(&mut builder, &declared, api_key_header)?;
    let body = match body {
        Some(body) => Some(arguments.add_body(&mut builder, document, body)?),
        None => None,
    };
    Ok((arguments.into_schema(builder)?, params, body))
}

/// The operation's parameters with the path item's (an operation's overrides a path item's
/// of the same name and location), and a `path` parameter for each template variable
/// nobody declared (as `implicit`), in the order path, query, header, cookie.
fn declared_parameters<'v>(
    document: &'v Value,
    path: &str,
    item: &'v Map<String, Value>,
    op: &'v Map<String, Value>,
    implicit: &'v Value,
) -> Result<Vec<(Location, String, &'v Value)>, OperationProblem> {
    // Operation parameters override path-item ones with the same name and location.
    let mut declared: Vec<(Location, String, &Value)> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")]
        .into_iter()
        .flatten()
    {
        let list = list
            .as_array()
            .ok_or(OperationProblem::ParametersNotAnArray)?;
        for param in list {
            let param = deref(document, param)?;
            let name = param
                .get("name")
                .and_then(Value::as_str)
                .ok_or(OperationProblem::ParameterWithoutName)?;
            let location = param
                .get("in")
                .and_then(Value::as_str)
                .ok_or_else(|| OperationProblem::ParameterWithoutIn(name.to_owned()))?;
            let location =
                Location::parse(location).ok_or_else(|| OperationProblem::UnknownLocation {
                    name: name.to_owned(),
                    location: location.to_owned(),
                })?;
            declared.retain(|(l, n, _)| !(*l == location && n == name));
            declared.push((location, name.to_owned(), param));
        }
    }
    for piece in template_pieces(path) {
        if let Piece::Var(var) = piece
            && !declared
                .iter()
                .any(|(l, n, _)| *l == Location::Path && n == var)
        {
            declared.push((Location::Path, var.to_owned(), implicit));
        }
    }
    // Stable: the order path, query, header, cookie decides who keeps a contested name.
    declared.sort_by_key(|(l, _, _)| *l);
    Ok(declared)
}

/// The request body this source sends: the first JSON, form, text or `*/*` content.
struct RequestBody {
    kind: BodyKind,
    /// Its schema as the document writes it (`string` for text).
    schema: Value,
    required: bool,
}

/// The operation's request body, if it has one this source can send; an error when a
/// required one is of a type it cannot send.
fn request_body(
    document: &Value,
    op: &Map<String, Value>,
) -> Result<Option<RequestBody>, OperationProblem> {
    let Some(body) = op.get("requestBody") else {
        return Ok(None);
    };
    let body = deref(document, body)?;
    let required = body
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
            let schema = match kind {
                BodyKind::Text(_) => json!({ "type": "string" }),
                _ => media.get("schema").cloned().unwrap_or_else(|| json!({})),
            };
            Ok(Some(RequestBody {
                kind,
                schema,
                required,
            }))
        }
        None if required => {
            let types: Vec<&str> = content
                .map(|c| c.keys().map(String::as_str).collect())
                .unwrap_or_default();
            Err(OperationProblem::UnsupportedBody(if types.is_empty() {
                "no content".to_owned()
            } else {
                types.join(", ")
            }))
        }
        // An optional body of an unsupported type is left out.
        None => Ok(None),
    }
}

/// The arguments object as it is built: its properties, the required ones, the names taken,
/// and the body's constraints on itself as a whole.
#[derive(Default)]
struct Arguments {
    properties: Map<String, Value>,
    required: Vec<Value>,
    taken: BTreeSet<String>,
    whole: Map<String, Value>,
}

impl Arguments {
    /// A property per parameter (a header the request sets itself is left out), named as the
    /// API names it unless an earlier one took the name.
    fn add_parameters(
        &mut self,
        builder: &mut SchemaBuilder<'_>,
        declared: &[(Location, String, &Value)],
        api_key_header: Option<&str>,
    ) -> Result<Vec<Param>, OperationProblem> {
        let mut params = Vec::new();
        for (location, name, param) in declared {
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
            if self.taken.contains(&arg) {
                arg = format!("{name}_{}", location.as_str());
                let mut k = 2;
                while self.taken.contains(&arg) {
                    arg = format!("{name}_{}_{k}", location.as_str());
                    k += 1;
                }
            }
            self.taken.insert(arg.clone());
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
                self.required.push(Value::String(arg.clone()));
            }
            self.properties.insert(arg.clone(), schema);
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
        Ok(params)
    }

    /// The request body: its properties as arguments when it is an object that can be
    /// flattened ([`request_body::flatten`]; those named like a parameter under `body`),
    /// else the whole body as `body`.
    fn add_body(
        &mut self,
        builder: &mut SchemaBuilder<'_>,
        document: &Value,
        body: RequestBody,
    ) -> Result<Body, OperationProblem> {
        let RequestBody {
            kind,
            schema: raw,
            required: body_required,
        } = body;
        self.taken.remove(BODY);
        let shape = match request_body::flatten(document, &raw, &self.taken)? {
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
                        self.properties.insert(name.clone(), property);
                        if needed {
                            self.required.push(Value::String(name.clone()));
                        }
                    }
                }
                for (key, value) in &flat.whole {
                    self.whole.insert(key.clone(), builder.import(value)?);
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
                            self.required.push(Value::String(BODY.into()));
                        }
                    }
                    container.insert("additionalProperties".into(), json!(false));
                    self.properties
                        .insert(BODY.into(), Value::Object(container));
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
                self.properties.insert(BODY.into(), schema);
                if body_required {
                    self.required.push(Value::String(BODY.into()));
                }
                BodyShape::Nested
            }
        };
        Ok(Body {
            kind,
            required: body_required,
            shape,
        })
    }

    /// The arguments object's schema, with the components it refers to under `$defs`.
    fn into_schema(self, builder: SchemaBuilder<'_>) -> Result<Value, OperationProblem> {
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(self.properties));
        if !self.required.is_empty() {
            schema.insert("required".into(), Value::Array(self.required));
        }
        // The body's constraints on itself as a whole (`anyOf: [{required: [a]}, …]`): its
        // properties are arguments now.
        schema.extend(self.whole);
        // Unknown arguments are refused: a misspelt optional parameter would otherwise be dropped
        // silently and the call would do something else than the program meant.
        schema.insert("additionalProperties".into(), json!(false));
        let defs = builder.finish()?;
        if !defs.is_empty() {
            schema.insert("$defs".into(), Value::Object(defs));
        }
        Ok(Value::Object(schema))
    }
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

    fn import(&mut self, schema: &Value) -> Result<Value, OperationProblem> {
        self.copy(schema, 0)
    }

    /// Copies every queued component (and what they refer to) into `$defs`.
    fn finish(mut self) -> Result<Map<String, Value>, OperationProblem> {
        while let Some(name) = self.queued.pop() {
            let target = self
                .document
                .pointer(&format!("/components/schemas/{}", escape_pointer(&name)))
                .ok_or_else(|| {
                    OperationProblem::UnresolvedRef(format!(
                        "{SCHEMA_PREFIX}{}",
                        escape_pointer(&name)
                    ))
                })?;
            let copy = self.copy(target, 0)?;
            self.defs.insert(name, copy);
        }
        Ok(self.defs)
    }

    fn copy(&mut self, value: &Value, depth: usize) -> Result<Value, OperationProblem> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(OperationProblem::SchemaTooDeep);
        }
        self.nodes += 1;
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(OperationProblem::SchemaTooLarge);
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
                    return Err(OperationProblem::TooManyProperties(props.len()));
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
    fn reference(&mut self, reference: &str, depth: usize) -> Result<Value, OperationProblem> {
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
            return Err(OperationProblem::RemoteRef(reference.to_owned()));
        }
        if self.inlining.iter().any(|r| r == reference) {
            return Err(OperationProblem::RefCycle(reference.to_owned()));
        }
        let target = resolve_local(self.document, reference)
            .ok_or_else(|| OperationProblem::UnresolvedSchemaRef(reference.to_owned()))?;
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
