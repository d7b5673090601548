//! A tool source backed by a GraphQL endpoint (`[[graphql]]` in the policy): the schema file
//! (SDL, or the JSON result of an introspection query) is read once at start-up and every field
//! of the query and mutation root types becomes a tool.
//!
//! Tool names (all sanitised with [`crate::tools::sources::mcp::identifiers`]):
//! - a query field `repository` is the tool `repository`;
//! - a mutation field `createIssue` is the tool `mutation_createIssue` (queries and mutations
//!   are separate namespaces in GraphQL, so the prefix keeps them from colliding, and lets an
//!   operator deny every mutation with one glob: `deny = ["github.mutation_*"]`);
//! - `query` takes `{ query, variables?, operationName? }` and runs a custom document that may
//!   contain only queries, and `mutate` takes the same and may also run mutations. Separate
//!   tools, so that granting `query` never grants writes. A schema field whose name collides
//!   with either gets `_2`.
//!
//! A field tool's arguments are the field's arguments, as a JSON Schema (scalars as JSON types,
//! custom scalars as any value, enums as string enums, input objects under `$defs`), checked
//! by the call pipeline before anything is sent. Its document selects a default selection
//! set: the return type's scalar and enum fields, down to `selection_depth` levels of object
//! fields, skipping deprecated fields and fields that need arguments, with `__typename` on
//! interfaces and unions, `first: 10` on Relay connections, and a cap on the number of fields
//! so that huge types (GitHub's `Repository`) stay bounded. The result is `data.<field>`;
//! a response with GraphQL `errors` fails the call with `upstream_error`.
//!
//! Query fields and the `query` tool only read ([`ToolDescriptor::read_only`]); mutation
//! fields and `mutate` may write. A call with an idempotency key
//! ([`CallContext::idempotency_key`]) sends it as the `Idempotency-Key` header when its
//! document has a mutation (a mutation field, or a `mutate` document with one), unless the
//! policy's `headers` set that header already.
//!
//! Schemas are parsed without validation (`graphql-parser`), because real schemas are not
//! always valid: GitHub's has duplicate field definitions. A duplicate field, or a type defined
//! twice, is merged and the first definition of each field wins.

use crate::secrets::store::SecretStore;
use crate::tools::coercion::{self, OutputSchema};
use crate::tools::sources::http;
use crate::tools::sources::settings::Settings;
use crate::tools::{
    CallContext, CallGate, IDEMPOTENCY_HEADER, ToolDescriptor, ToolError, ToolErrorCode,
    ToolFuture, ToolSource, ToolsFuture,
};
use airlock_policy::{GraphQlSource, SchemaFormat};
use graphql_parser::query as gq;
use graphql_parser::schema as gs;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Fields one default selection set may hold in all (leaves and object fields), so that a tool's
/// document and its answer stay small whatever the schema.
const MAX_SELECTED_FIELDS: usize = 120;
/// Scalar fields taken from one type, so nested objects still get a share of the budget.
const MAX_LEAVES_PER_TYPE: usize = 30;
/// Object fields followed from one type.
const MAX_OBJECTS_PER_TYPE: usize = 8;
/// Union members listed as inline fragments; a larger union gets only `__typename`.
const MAX_UNION_FRAGMENTS: usize = 6;
/// `first:` given to Relay connections, which servers such as GitHub's require.
const CONNECTION_PAGE: u32 = 10;
/// Largest response body read from the endpoint.
const MAX_RESPONSE_BYTES: usize = 32 << 20;
/// How much of the default selection a tool's description shows.
const MAX_DESCRIBED_SELECTION: usize = 240;
/// How many GraphQL error messages one `ToolError` lists.
const MAX_REPORTED_ERRORS: usize = 3;

/// Why a GraphQL source could not be loaded. Every message names the source and the file, with
/// `line:column` where the parser knows it.
#[derive(Debug, thiserror::Error)]
pub enum GraphQlLoadError {
    #[error("{}: cannot read the schema of GraphQL source `{name}`: {cause}", path.display())]
    Read {
        name: String,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}:{line}:{column}: invalid GraphQL schema of source `{name}`: {message}", path.display())]
    Syntax {
        name: String,
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: unusable GraphQL schema of source `{name}`: {problem}", path.display())]
    Unusable {
        name: String,
        path: PathBuf,
        problem: String,
    },
    #[error("GraphQL source `{name}`: {cause}")]
    Http {
        name: String,
        cause: http::OutboundHttpError,
    },
}

/// A type reference as written in a schema (`[String!]!`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum TypeRef {
    Named(String),
    List(Box<TypeRef>),
    NonNull(Box<TypeRef>),
}

impl TypeRef {
    fn named(&self) -> &str {
        match self {
            TypeRef::Named(n) => n,
            TypeRef::List(t) | TypeRef::NonNull(t) => t.named(),
        }
    }

    fn is_non_null(&self) -> bool {
        matches!(self, TypeRef::NonNull(_))
    }

    fn render(&self) -> String {
        match self {
            TypeRef::Named(n) => n.clone(),
            TypeRef::List(t) => format!("[{}]", t.render()),
            TypeRef::NonNull(t) => format!("{}!", t.render()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Scalar,
    Object,
    Interface,
    Union,
    Enum,
    InputObject,
}

#[derive(Debug, Clone)]
struct InputValue {
    name: String,
    description: Option<String>,
    ty: TypeRef,
    has_default: bool,
}

impl InputValue {
    /// Whether a caller must give it: non-null and without a default.
    fn required(&self) -> bool {
        self.ty.is_non_null() && !self.has_default
    }
}

#[derive(Debug, Clone)]
struct FieldDef {
    name: String,
    description: Option<String>,
    args: Vec<InputValue>,
    ty: TypeRef,
    deprecated: bool,
}

#[derive(Debug, Clone)]
struct TypeDef {
    kind: Kind,
    description: Option<String>,
    fields: Vec<FieldDef>,
    input_fields: Vec<InputValue>,
    enum_values: Vec<String>,
    /// Union members.
    members: Vec<String>,
}

impl TypeDef {
    fn new(kind: Kind, description: Option<String>) -> Self {
        TypeDef {
            kind,
            description,
            fields: Vec::new(),
            input_fields: Vec::new(),
            enum_values: Vec::new(),
            members: Vec::new(),
        }
    }

    /// Adds what another definition (a duplicate or an `extend`) of the same type brings; the
    /// first definition of a field or value wins.
    fn merge(&mut self, other: TypeDef) {
        merge_by_name(&mut self.fields, other.fields, |f| &f.name);
        merge_by_name(&mut self.input_fields, other.input_fields, |f| &f.name);
        merge_by_name(&mut self.enum_values, other.enum_values, |v| v);
        merge_by_name(&mut self.members, other.members, |v| v);
        if self.description.is_none() {
            self.description = other.description;
        }
    }
}

fn merge_by_name<T>(into: &mut Vec<T>, from: Vec<T>, name: impl Fn(&T) -> &String) {
    let mut seen: HashSet<String> = into.iter().map(|x| name(x).clone()).collect();
    for item in from {
        if seen.insert(name(&item).clone()) {
            into.push(item);
        }
    }
}

/// A schema reduced to what tools need.
#[derive(Debug, Default)]
struct Schema {
    types: HashMap<String, TypeDef>,
    query: Option<String>,
    mutation: Option<String>,
}

impl Schema {
    /// Adds a definition, merged into an earlier one of the same name; duplicate fields
    /// within one definition (GitHub's schema has them) are dropped the same way.
    fn add(&mut self, name: String, def: TypeDef) {
        let existing = self
            .types
            .entry(name)
            .or_insert_with(|| TypeDef::new(def.kind, None));
        existing.merge(def);
    }

    fn kind(&self, name: &str) -> Option<Kind> {
        self.types.get(name).map(|t| t.kind)
    }

    fn is_leaf(&self, name: &str) -> bool {
        // An unknown type name is treated as a scalar: selecting sub-fields of it cannot work.
        matches!(self.kind(name), None | Some(Kind::Scalar | Kind::Enum))
    }

    /// The built-in scalars, which SDL files need not declare.
    fn add_builtin_scalars(&mut self) {
        for name in ["Int", "Float", "String", "Boolean", "ID"] {
            self.types
                .entry(name.to_owned())
                .or_insert_with(|| TypeDef::new(Kind::Scalar, None));
        }
    }

    /// Parses SDL. Errors carry the parser's line and column.
    fn from_sdl(text: &str) -> Result<Schema, (usize, usize, String)> {
        let document = gs::parse_schema::<&str>(text).map_err(|e| parse_error(&e.to_string()))?;
        let mut schema = Schema::default();
        for definition in document.definitions {
            match definition {
                gs::Definition::SchemaDefinition(s) => {
                    schema.query = s.query.map(str::to_owned).or(schema.query);
                    schema.mutation = s.mutation.map(str::to_owned).or(schema.mutation);
                }
                gs::Definition::TypeDefinition(t) => {
                    let (name, def) = sdl_type(t);
                    schema.add(name, def);
                }
                gs::Definition::TypeExtension(e) => {
                    let (name, def) = sdl_extension(e);
                    schema.add(name, def);
                }
                gs::Definition::DirectiveDefinition(_) => {}
            }
        }
        schema.add_builtin_scalars();
        // Without a `schema { … }` block the roots are the conventional names.
        if schema.query.is_none() && schema.types.contains_key("Query") {
            schema.query = Some("Query".to_owned());
        }
        if schema.mutation.is_none() && schema.types.contains_key("Mutation") {
            schema.mutation = Some("Mutation".to_owned());
        }
        Ok(schema)
    }

    /// Reads an introspection result (`{"data": {"__schema": …}}` or `{"__schema": …}`).
    fn from_introspection(text: &str) -> Result<Schema, (usize, usize, String)> {
        let document: IntrospectionDocument = serde_json::from_str(text).map_err(|e| {
            (
                e.line(),
                e.column(),
                format!("invalid introspection JSON: {e}"),
            )
        })?;
        let raw = match document {
            IntrospectionDocument::Wrapped { data } => data.schema,
            IntrospectionDocument::Bare { schema } => schema,
        };
        let mut schema = Schema {
            query: raw.query_type.map(|t| t.name),
            mutation: raw.mutation_type.map(|t| t.name),
            ..Schema::default()
        };
        for t in raw.types {
            let kind = match t.kind.as_str() {
                "SCALAR" => Kind::Scalar,
                "OBJECT" => Kind::Object,
                "INTERFACE" => Kind::Interface,
                "UNION" => Kind::Union,
                "ENUM" => Kind::Enum,
                "INPUT_OBJECT" => Kind::InputObject,
                // LIST and NON_NULL never name a type.
                _ => continue,
            };
            let Some(name) = t.name else { continue };
            let mut def = TypeDef::new(kind, t.description);
            def.fields = t
                .fields
                .unwrap_or_default()
                .into_iter()
                .map(|f| FieldDef {
                    name: f.name,
                    description: f.description,
                    args: f
                        .args
                        .into_iter()
                        .map(IntrospectionInput::into_input)
                        .collect(),
                    ty: f.ty.into_type_ref(),
                    deprecated: f.is_deprecated,
                })
                .collect();
            def.input_fields = t
                .input_fields
                .unwrap_or_default()
                .into_iter()
                .map(IntrospectionInput::into_input)
                .collect();
            def.enum_values = t
                .enum_values
                .unwrap_or_default()
                .into_iter()
                .map(|v| v.name)
                .collect();
            if kind == Kind::Union {
                def.members = t
                    .possible_types
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|p| p.name)
                    .collect();
            }
            schema.add(name, def);
        }
        schema.add_builtin_scalars();
        Ok(schema)
    }
}

/// `Parse error at 3:5\nUnexpected …` → (3, 5, message). graphql-parser reports positions only
/// inside its message text.
fn parse_error(text: &str) -> (usize, usize, String) {
    let position = text.split_once(" at ").and_then(|(_, rest)| {
        let token = rest.split_whitespace().next()?;
        let (line, column) = token.split_once(':')?;
        Some((line.parse().ok()?, column.parse().ok()?))
    });
    let (line, column) = position.unwrap_or((1, 1));
    let message = text
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let message = if message.is_empty() {
        text.trim().to_owned()
    } else {
        message
    };
    (line, column, message)
}

fn sdl_type_ref<'a>(t: &gs::Type<'a, &'a str>) -> TypeRef {
    match t {
        gs::Type::NamedType(n) => TypeRef::Named((*n).to_owned()),
        gs::Type::ListType(inner) => TypeRef::List(Box::new(sdl_type_ref(inner))),
        gs::Type::NonNullType(inner) => TypeRef::NonNull(Box::new(sdl_type_ref(inner))),
    }
}

fn sdl_inputs<'a>(values: &[gs::InputValue<'a, &'a str>]) -> Vec<InputValue> {
    values
        .iter()
        .map(|v| InputValue {
            name: v.name.to_owned(),
            description: v.description.clone(),
            ty: sdl_type_ref(&v.value_type),
            has_default: v.default_value.is_some(),
        })
        .collect()
}

fn sdl_fields<'a>(fields: &[gs::Field<'a, &'a str>]) -> Vec<FieldDef> {
    fields
        .iter()
        .map(|f| FieldDef {
            name: f.name.to_owned(),
            description: f.description.clone(),
            args: sdl_inputs(&f.arguments),
            ty: sdl_type_ref(&f.field_type),
            deprecated: f.directives.iter().any(|d| d.name == "deprecated"),
        })
        .collect()
}

fn sdl_type<'a>(t: gs::TypeDefinition<'a, &'a str>) -> (String, TypeDef) {
    match t {
        gs::TypeDefinition::Scalar(s) => {
            (s.name.to_owned(), TypeDef::new(Kind::Scalar, s.description))
        }
        gs::TypeDefinition::Object(o) => {
            let mut def = TypeDef::new(Kind::Object, o.description);
            def.fields = sdl_fields(&o.fields);
            (o.name.to_owned(), def)
        }
        gs::TypeDefinition::Interface(i) => {
            let mut def = TypeDef::new(Kind::Interface, i.description);
            def.fields = sdl_fields(&i.fields);
            (i.name.to_owned(), def)
        }
        gs::TypeDefinition::Union(u) => {
            let mut def = TypeDef::new(Kind::Union, u.description);
            def.members = u.types.iter().map(|t| (*t).to_owned()).collect();
            (u.name.to_owned(), def)
        }
        gs::TypeDefinition::Enum(e) => {
            let mut def = TypeDef::new(Kind::Enum, e.description);
            def.enum_values = e.values.iter().map(|v| v.name.to_owned()).collect();
            (e.name.to_owned(), def)
        }
        gs::TypeDefinition::InputObject(i) => {
            let mut def = TypeDef::new(Kind::InputObject, i.description);
            def.input_fields = sdl_inputs(&i.fields);
            (i.name.to_owned(), def)
        }
    }
}

fn sdl_extension<'a>(e: gs::TypeExtension<'a, &'a str>) -> (String, TypeDef) {
    match e {
        gs::TypeExtension::Scalar(s) => (s.name.to_owned(), TypeDef::new(Kind::Scalar, None)),
        gs::TypeExtension::Object(o) => {
            let mut def = TypeDef::new(Kind::Object, None);
            def.fields = sdl_fields(&o.fields);
            (o.name.to_owned(), def)
        }
        gs::TypeExtension::Interface(i) => {
            let mut def = TypeDef::new(Kind::Interface, None);
            def.fields = sdl_fields(&i.fields);
            (i.name.to_owned(), def)
        }
        gs::TypeExtension::Union(u) => {
            let mut def = TypeDef::new(Kind::Union, None);
            def.members = u.types.iter().map(|t| (*t).to_owned()).collect();
            (u.name.to_owned(), def)
        }
        gs::TypeExtension::Enum(en) => {
            let mut def = TypeDef::new(Kind::Enum, None);
            def.enum_values = en.values.iter().map(|v| v.name.to_owned()).collect();
            (en.name.to_owned(), def)
        }
        gs::TypeExtension::InputObject(i) => {
            let mut def = TypeDef::new(Kind::InputObject, None);
            def.input_fields = sdl_inputs(&i.fields);
            (i.name.to_owned(), def)
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IntrospectionDocument {
    Wrapped {
        data: IntrospectionData,
    },
    Bare {
        #[serde(rename = "__schema")]
        schema: IntrospectionSchema,
    },
}

#[derive(Deserialize)]
struct IntrospectionData {
    #[serde(rename = "__schema")]
    schema: IntrospectionSchema,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntrospectionSchema {
    query_type: Option<NamedRef>,
    mutation_type: Option<NamedRef>,
    types: Vec<IntrospectionType>,
}

#[derive(Deserialize)]
struct NamedRef {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntrospectionType {
    kind: String,
    name: Option<String>,
    description: Option<String>,
    fields: Option<Vec<IntrospectionField>>,
    input_fields: Option<Vec<IntrospectionInput>>,
    enum_values: Option<Vec<IntrospectionEnumValue>>,
    possible_types: Option<Vec<IntrospectionTypeRef>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntrospectionField {
    name: String,
    description: Option<String>,
    #[serde(default)]
    args: Vec<IntrospectionInput>,
    #[serde(rename = "type")]
    ty: IntrospectionTypeRef,
    #[serde(default)]
    is_deprecated: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntrospectionInput {
    name: String,
    description: Option<String>,
    #[serde(rename = "type")]
    ty: IntrospectionTypeRef,
    default_value: Option<String>,
}

impl IntrospectionInput {
    fn into_input(self) -> InputValue {
        InputValue {
            name: self.name,
            description: self.description,
            ty: self.ty.into_type_ref(),
            has_default: self.default_value.is_some(),
        }
    }
}

#[derive(Deserialize)]
struct IntrospectionEnumValue {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntrospectionTypeRef {
    kind: String,
    name: Option<String>,
    of_type: Option<Box<IntrospectionTypeRef>>,
}

impl IntrospectionTypeRef {
    fn into_type_ref(self) -> TypeRef {
        let inner = || {
            self.of_type
                .map(|t| t.into_type_ref())
                .unwrap_or_else(|| TypeRef::Named(String::new()))
        };
        match self.kind.as_str() {
            "NON_NULL" => TypeRef::NonNull(Box::new(inner())),
            "LIST" => TypeRef::List(Box::new(inner())),
            _ => TypeRef::Named(self.name.unwrap_or_default()),
        }
    }
}

/// Which root type a field or document belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Query,
    Mutation,
}

impl Operation {
    fn keyword(self) -> &'static str {
        match self {
            Operation::Query => "query",
            Operation::Mutation => "mutation",
        }
    }
}

#[derive(Debug)]
enum ToolKind {
    /// One root field with its default selection set.
    Field {
        operation: Operation,
        field: String,
        /// The field's arguments with their GraphQL types, in schema order.
        args: Vec<(String, String)>,
        /// `{ … }` or empty for a scalar result.
        selection: String,
    },
    /// A document the program writes; `Mutation` allows mutations as well as queries.
    Custom(Operation),
}

#[derive(Debug)]
struct Tool {
    descriptor: ToolDescriptor,
    kind: ToolKind,
    /// The descriptor's output schema, compiled on the first call that needed it: results
    /// that break it trivially (a custom scalar's) are coerced ([`coercion::mend_result`]).
    output: OnceLock<Option<OutputSchema>>,
}

impl Tool {
    fn output(&self) -> Option<&OutputSchema> {
        self.output
            .get_or_init(|| {
                self.descriptor
                    .output_schema
                    .as_ref()
                    .and_then(|s| OutputSchema::compile(s).ok())
            })
            .as_ref()
    }
}

/// One configured GraphQL endpoint with its tools.
#[derive(Debug)]
pub struct GraphQlApi {
    config: GraphQlSource,
    secrets: Arc<SecretStore>,
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
    descriptors: Arc<[ToolDescriptor]>,
    client: reqwest::Client,
    gate: CallGate,
}

impl GraphQlApi {
    /// Reads the schema file and builds the tools. Secrets are read at each call, so a secret
    /// provided later works without a restart.
    pub fn load(
        config: GraphQlSource,
        secrets: Arc<SecretStore>,
    ) -> Result<GraphQlApi, GraphQlLoadError> {
        let text =
            std::fs::read_to_string(&config.schema).map_err(|cause| GraphQlLoadError::Read {
                name: config.name.clone(),
                path: config.schema.clone(),
                cause,
            })?;
        let client = http::client().map_err(|cause| GraphQlLoadError::Http {
            name: config.name.clone(),
            cause,
        })?;
        let tools = build_tools(&config, &text)?;
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.descriptor.name.clone(), i))
            .collect();
        let descriptors = tools.iter().map(|t| t.descriptor.clone()).collect();
        let gate = CallGate::new(config.max_concurrent_calls, config.call_timeout_ms);
        Ok(GraphQlApi {
            config,
            secrets,
            tools,
            by_name,
            descriptors,
            client,
            gate,
        })
    }

    pub fn config(&self) -> &GraphQlSource {
        &self.config
    }

    /// The tools as programs see them.
    pub fn descriptors(&self) -> &[ToolDescriptor] {
        &self.descriptors
    }

    /// The secrets the headers name that the store cannot give now, as warnings: the calls
    /// fail (naming the secret) until they are provided.
    pub fn missing_secrets(&self) -> Vec<String> {
        self.config
            .headers
            .iter()
            .filter_map(|(key, value)| {
                let secret = value.secret()?;
                let error = self.secrets.get(secret).err()?;
                Some(format!(
                    "graphql source `{}`: headers.{key} needs secret `{secret}`, so its calls will fail until it is provided: {error}",
                    self.config.name
                ))
            })
            .collect()
    }

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

    async fn perform(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ToolError> {
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
                    &ctx.coercions,
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
                self.post(&label, body, mutates, ctx).await
            }
        }
    }

    /// Sends one request and returns its `data`, or the GraphQL errors as a `ToolError`.
    /// `mutates`: the document has a mutation, so the call's idempotency key goes with it.
    async fn post(
        &self,
        label: &str,
        body: Value,
        mutates: bool,
        ctx: &CallContext,
    ) -> Result<Value, ToolError> {
        let mut headers = self.headers(ctx)?;
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

    /// The policy's headers, secrets read now (and noted in the call's context).
    fn headers(&self, ctx: &CallContext) -> Result<reqwest::header::HeaderMap, ToolError> {
        let settings = self.settings();
        let mut map = reqwest::header::HeaderMap::new();
        for (key, value) in &self.config.headers {
            let resolved = settings.value("headers", key, value, &ctx.secrets)?;
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

    fn settings(&self) -> Settings<'_> {
        Settings {
            kind: "GraphQL source",
            name: &self.config.name,
            store: &self.secrets,
        }
    }
}

/// A GraphQL response → its `data`, or a `ToolError` with the `errors` messages.
fn interpret(label: &str, status: reqwest::StatusCode, bytes: &[u8]) -> Result<Value, ToolError> {
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
fn field_document(
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
fn check_custom_document(label: &str, query: &str, allowed: Operation) -> Result<bool, ToolError> {
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

/// Whether `text` parses as an executable GraphQL document (used by tests to check generated
/// selection sets with the same parser that reads schemas).
pub fn parses_as_document(text: &str) -> Result<(), String> {
    gq::parse_query::<&str>(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn build_tools(config: &GraphQlSource, text: &str) -> Result<Vec<Tool>, GraphQlLoadError> {
    let parsed = match config.schema_format {
        SchemaFormat::Sdl => Schema::from_sdl(text),
        SchemaFormat::Introspection => Schema::from_introspection(text),
    };
    let schema = parsed.map_err(|(line, column, message)| GraphQlLoadError::Syntax {
        name: config.name.clone(),
        path: config.schema.clone(),
        line,
        column,
        message,
    })?;
    let unusable = |problem: String| GraphQlLoadError::Unusable {
        name: config.name.clone(),
        path: config.schema.clone(),
        problem,
    };
    let query_root = schema.query.clone().ok_or_else(|| {
        unusable("it has no query type (no `type Query` and no `schema { query: … }`)".to_owned())
    })?;
    let mut roots: Vec<(Operation, &TypeDef)> = Vec::new();
    for (operation, root) in [
        (Operation::Query, Some(&query_root)),
        (Operation::Mutation, schema.mutation.as_ref()),
    ] {
        let Some(root) = root else { continue };
        let def = schema.types.get(root).ok_or_else(|| {
            unusable(format!(
                "its {} type `{root}` is not defined",
                operation.keyword()
            ))
        })?;
        if def.kind != Kind::Object {
            return Err(unusable(format!(
                "its {} type `{root}` is not an object type",
                operation.keyword()
            )));
        }
        roots.push((operation, def));
    }

    // Field tools first, named together so sanitised names are numbered deterministically.
    let fields: Vec<(Operation, &FieldDef)> = roots
        .iter()
        .flat_map(|(op, def)| def.fields.iter().map(move |f| (*op, f)))
        .collect();
    let names = crate::tools::sources::mcp::identifiers(fields.iter().map(|(op, f)| match op {
        Operation::Query => f.name.clone(),
        Operation::Mutation => format!("mutation_{}", f.name),
    }));
    let mut taken: HashSet<String> = ["query".to_owned(), "mutate".to_owned()].into();
    let mut tools = vec![
        custom_tool(config, Operation::Query),
        custom_tool(config, Operation::Mutation),
    ];
    for ((operation, field), base) in fields.into_iter().zip(names) {
        let mut name = base.clone();
        let mut k = 2;
        while !taken.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        tools.push(field_tool(&schema, config, operation, field, name));
    }
    Ok(tools)
}

fn custom_tool(config: &GraphQlSource, operation: Operation) -> Tool {
    let (name, description) = match operation {
        Operation::Query => (
            "query",
            format!(
                "Runs a GraphQL document of your own against `{}` and returns its `data`. Only queries: use `mutate` for mutations.",
                config.name
            ),
        ),
        Operation::Mutation => (
            "mutate",
            format!(
                "Runs a GraphQL document of your own, which may contain mutations, against `{}` and returns its `data`.",
                config.name
            ),
        ),
    };
    Tool {
        descriptor: ToolDescriptor {
            name: name.to_owned(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The GraphQL document."},
                    "variables": {"type": "object", "description": "Values of the document's variables."},
                    "operationName": {"type": "string", "description": "Which operation to run when the document has several."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            // A custom document's answer depends on the document.
            output_schema: None,
            // `query` refuses mutations; `mutate` may run them.
            read_only: operation == Operation::Query,
        },
        kind: ToolKind::Custom(operation),
        output: OnceLock::new(),
    }
}

fn field_tool(
    schema: &Schema,
    config: &GraphQlSource,
    operation: Operation,
    field: &FieldDef,
    name: String,
) -> Tool {
    let mut builder = InputSchemaBuilder {
        schema,
        defs: BTreeMap::new(),
    };
    let mut properties = Map::new();
    let mut required = Vec::new();
    for arg in &field.args {
        let mut s = builder.type_schema(&arg.ty);
        if let (Some(d), Some(obj)) = (&arg.description, s.as_object_mut())
            && !obj.contains_key("$ref")
        {
            obj.insert("description".to_owned(), Value::String(d.clone()));
        }
        if let (Some(d), true) = (&arg.description, s.get("$ref").is_some()) {
            s = json!({"allOf": [s], "description": d});
        }
        properties.insert(arg.name.clone(), s);
        if arg.required() {
            required.push(Value::String(arg.name.clone()));
        }
    }
    let mut input_schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    if !builder.defs.is_empty() {
        input_schema["$defs"] = Value::Object(builder.defs.into_iter().collect());
    }

    let mut selector = Selector {
        schema,
        budget: MAX_SELECTED_FIELDS,
        defs: BTreeMap::new(),
    };
    let return_type = field.ty.named();
    let (selection, shape) = if schema.is_leaf(return_type) {
        (String::new(), selector.leaf_schema(return_type))
    } else {
        let (body, shape) = selector.select(return_type, config.selection_depth);
        if body.is_empty() {
            (
                "{ __typename }".to_owned(),
                json!({"type": "object", "properties": {"__typename": {"type": "string"}}, "required": ["__typename"]}),
            )
        } else {
            (format!("{{ {body} }}"), shape)
        }
    };
    // The call answers `data.<field>`: the selection, wrapped as the field's type says.
    let mut output_schema = output_type(&field.ty, shape, &None);
    if !selector.defs.is_empty() {
        let defs = Value::Object(std::mem::take(&mut selector.defs).into_iter().collect());
        output_schema = match output_schema {
            Value::Object(mut obj) => {
                obj.insert("$defs".to_owned(), defs);
                Value::Object(obj)
            }
            other => other,
        };
    }

    let mut description = field.description.clone().unwrap_or_default();
    if !description.is_empty() {
        description.push_str("\n\n");
    }
    description.push_str(&format!(
        "GraphQL {} field `{}` returning `{}`.",
        operation.keyword(),
        field.name,
        field.ty.render()
    ));
    if !selection.is_empty() {
        description.push_str(&format!(
            " Selects {} by default; for other fields use tools.{}.{}.",
            abbreviated(&selection, MAX_DESCRIBED_SELECTION),
            config.name,
            match operation {
                Operation::Query => "query",
                Operation::Mutation => "mutate",
            }
        ));
    }
    if field.deprecated {
        description.push_str(" Deprecated.");
    }
    Tool {
        descriptor: ToolDescriptor {
            name,
            description,
            input_schema,
            output_schema: Some(output_schema),
            read_only: operation == Operation::Query,
        },
        kind: ToolKind::Field {
            operation,
            field: field.name.clone(),
            args: field
                .args
                .iter()
                .map(|a| (a.name.clone(), a.ty.render()))
                .collect(),
            selection,
        },
        output: OnceLock::new(),
    }
}

/// GraphQL input types → JSON Schema, with enums and input objects under `$defs` (so recursive
/// input types stay finite).
struct InputSchemaBuilder<'s> {
    schema: &'s Schema,
    defs: BTreeMap<String, Value>,
}

impl InputSchemaBuilder<'_> {
    fn type_schema(&mut self, ty: &TypeRef) -> Value {
        match ty {
            TypeRef::NonNull(inner) => self.non_null(inner),
            other => nullable(self.non_null(other)),
        }
    }

    fn non_null(&mut self, ty: &TypeRef) -> Value {
        match ty {
            TypeRef::NonNull(inner) => self.non_null(inner),
            TypeRef::List(inner) => json!({"type": "array", "items": self.type_schema(inner)}),
            TypeRef::Named(name) => self.named(name),
        }
    }

    fn named(&mut self, name: &str) -> Value {
        match name {
            "Int" => return json!({"type": "integer"}),
            "Float" => return json!({"type": "number"}),
            "String" => return json!({"type": "string"}),
            "Boolean" => return json!({"type": "boolean"}),
            // GraphQL accepts an integer for an ID input too.
            "ID" => return json!({"type": ["string", "integer"]}),
            _ => {}
        }
        let Some(def) = self.schema.types.get(name) else {
            return json!({});
        };
        match def.kind {
            Kind::Enum | Kind::InputObject => {
                let reference = json!({"$ref": format!("#/$defs/{name}")});
                if self.defs.contains_key(name) {
                    return reference;
                }
                // Placeholder first, so a recursive input type refers to itself.
                self.defs.insert(name.to_owned(), json!({}));
                let mut body = if def.kind == Kind::Enum {
                    json!({"type": "string", "enum": def.enum_values})
                } else {
                    let mut properties = Map::new();
                    let mut required = Vec::new();
                    for f in &def.input_fields {
                        let mut s = self.type_schema(&f.ty);
                        if let (Some(d), Some(obj)) = (&f.description, s.as_object_mut())
                            && !obj.contains_key("$ref")
                        {
                            obj.insert("description".to_owned(), Value::String(d.clone()));
                        }
                        properties.insert(f.name.clone(), s);
                        if f.required() {
                            required.push(Value::String(f.name.clone()));
                        }
                    }
                    json!({
                        "type": "object",
                        "properties": properties,
                        "required": required,
                        "additionalProperties": false,
                    })
                };
                if let Some(d) = &def.description {
                    body["description"] = Value::String(d.clone());
                }
                self.defs.insert(name.to_owned(), body);
                reference
            }
            // A custom scalar can be any JSON value (GitHub's are strings, others are objects).
            Kind::Scalar => match &def.description {
                Some(d) => json!({"description": format!("custom scalar `{name}`: {d}")}),
                None => json!({"description": format!("custom scalar `{name}`")}),
            },
            // Output types cannot be inputs; an invalid schema gets an unconstrained value.
            Kind::Object | Kind::Interface | Kind::Union => json!({}),
        }
    }
}

/// `s`, or null.
fn nullable(s: Value) -> Value {
    match s.get("type") {
        Some(Value::String(t)) => {
            let mut s = s.clone();
            s["type"] = json!([t, "null"]);
            s
        }
        Some(Value::Array(types)) => {
            let mut types = types.clone();
            types.push(json!("null"));
            let mut s = s.clone();
            s["type"] = Value::Array(types);
            s
        }
        // `{}` (a custom scalar) already admits null.
        _ if s.get("$ref").is_none() => s,
        _ => json!({"anyOf": [s, {"type": "null"}]}),
    }
}

/// The schema of a selected field's value: `inner` (the named type's shape) wrapped as the
/// field's type says, lists as arrays and every position without `!` nullable.
fn output_type(ty: &TypeRef, inner: Value, description: &Option<String>) -> Value {
    fn wrap(ty: &TypeRef, inner: Value) -> Value {
        match ty {
            TypeRef::NonNull(t) => wrap_non_null(t, inner),
            other => {
                let s = wrap_non_null(other, inner);
                match s.get("type") {
                    Some(_) => nullable(s),
                    None => json!({"anyOf": [s, {"type": "null"}]}),
                }
            }
        }
    }
    fn wrap_non_null(ty: &TypeRef, inner: Value) -> Value {
        match ty {
            TypeRef::NonNull(t) => wrap_non_null(t, inner),
            TypeRef::List(t) => json!({"type": "array", "items": wrap(t, inner)}),
            TypeRef::Named(_) => inner,
        }
    }
    let mut s = wrap(ty, inner);
    if let (Some(d), Some(obj)) = (description, s.as_object_mut())
        && !obj.contains_key("$ref")
    {
        obj.insert("description".to_owned(), Value::String(d.clone()));
    }
    s
}

/// `text` cut at a space before `max` bytes, with `…`: the catalogue shows every tool's
/// description, and a full selection on a large type would dominate it.
fn abbreviated(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    // GraphQL names are ASCII, but an introspection file could hold anything.
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text[..end].rfind(' ').unwrap_or(0);
    format!("{} …", &text[..cut])
}

/// Builds default selection sets within a field budget, and the JSON Schema of what each
/// selection answers (exactly the selected fields, so the SDK's output type names no field
/// the answer lacks).
struct Selector<'s> {
    schema: &'s Schema,
    budget: usize,
    /// Enums met in selected fields, as `$defs` of the output schema.
    defs: BTreeMap<String, Value>,
}

impl Selector<'_> {
    /// The body of a selection set on `type_name` (without braces), `depth` levels deep
    /// (1 = scalar fields only), with the schema of the object it selects; an empty body
    /// when nothing can be selected.
    fn select(&mut self, type_name: &str, depth: u32) -> (String, Value) {
        let Some(def) = self.schema.types.get(type_name) else {
            return (String::new(), json!({}));
        };
        let mut parts: Vec<String> = Vec::new();
        let mut properties = Map::new();
        let typename = |properties: &mut Map<String, Value>, value: Value| {
            properties.insert("__typename".to_owned(), value);
        };
        match def.kind {
            Kind::Object | Kind::Interface => {
                if def.kind == Kind::Interface && self.take() {
                    parts.push("__typename".to_owned());
                    typename(&mut properties, json!({"type": "string"}));
                }
                let usable = def
                    .fields
                    .iter()
                    .filter(|f| !f.deprecated && !f.args.iter().any(InputValue::required));
                let mut leaves = 0;
                for f in usable.clone() {
                    if leaves == MAX_LEAVES_PER_TYPE {
                        break;
                    }
                    if self.schema.is_leaf(f.ty.named()) && self.take() {
                        parts.push(f.name.clone());
                        let leaf = self.leaf_schema(f.ty.named());
                        properties.insert(f.name.clone(), output_type(&f.ty, leaf, &f.description));
                        leaves += 1;
                    }
                }
                if depth > 1 {
                    let mut objects = 0;
                    for f in usable {
                        if objects == MAX_OBJECTS_PER_TYPE || self.budget < 2 {
                            break;
                        }
                        if self.schema.is_leaf(f.ty.named()) {
                            continue;
                        }
                        // The field itself costs one; its body is paid for inside.
                        let before = self.budget;
                        self.budget -= 1;
                        let (body, shape) = self.select(f.ty.named(), depth - 1);
                        if body.is_empty() {
                            self.budget = before;
                            continue;
                        }
                        parts.push(format!(
                            "{}{} {{ {body} }}",
                            f.name,
                            page_argument(self.schema, f)
                        ));
                        properties
                            .insert(f.name.clone(), output_type(&f.ty, shape, &f.description));
                        objects += 1;
                    }
                }
            }
            Kind::Union => {
                let with_typename = self.take();
                if with_typename {
                    parts.push("__typename".to_owned());
                }
                // One object per member, told apart by `__typename`, each with the fields of
                // its fragment (none for a member without one).
                let mut variants = Vec::new();
                let fragments = depth > 1 && def.members.len() <= MAX_UNION_FRAGMENTS;
                for member in &def.members {
                    let mut shape = json!({"type": "object", "properties": {}, "required": []});
                    if fragments {
                        let before = self.budget;
                        let (body, member_shape) = self.select(member, 1);
                        if body.is_empty() {
                            self.budget = before;
                        } else {
                            parts.push(format!("... on {member} {{ {body} }}"));
                            shape = member_shape;
                        }
                    }
                    if with_typename {
                        shape["properties"]["__typename"] = json!({"const": member});
                        if let Some(required) = shape["required"].as_array_mut() {
                            required.insert(0, json!("__typename"));
                        }
                    }
                    variants.push(shape);
                }
                let shape = if variants.is_empty() {
                    json!({})
                } else {
                    json!({"anyOf": variants})
                };
                return (parts.join(" "), shape);
            }
            Kind::Scalar | Kind::Enum | Kind::InputObject => {}
        }
        let required: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
        let mut shape = json!({"type": "object", "properties": properties, "required": required});
        if let Some(d) = &def.description {
            shape["description"] = Value::String(d.clone());
        }
        (parts.join(" "), shape)
    }

    /// A scalar or enum as it comes back: the built-in scalars as JSON types (`ID` is
    /// serialised as a string, whatever an input accepts), enums as string enums under
    /// `$defs`, and custom scalars as any value.
    fn leaf_schema(&mut self, name: &str) -> Value {
        match name {
            "Int" => return json!({"type": "integer"}),
            "Float" => return json!({"type": "number"}),
            "String" | "ID" => return json!({"type": "string"}),
            "Boolean" => return json!({"type": "boolean"}),
            _ => {}
        }
        let Some(def) = self.schema.types.get(name) else {
            return json!({});
        };
        match def.kind {
            Kind::Enum => {
                if !self.defs.contains_key(name) {
                    let mut body = json!({"type": "string", "enum": def.enum_values});
                    if let Some(d) = &def.description {
                        body["description"] = Value::String(d.clone());
                    }
                    self.defs.insert(name.to_owned(), body);
                }
                json!({"$ref": format!("#/$defs/{name}")})
            }
            _ => match &def.description {
                Some(d) => json!({"description": format!("custom scalar `{name}`: {d}")}),
                None => json!({"description": format!("custom scalar `{name}`")}),
            },
        }
    }

    fn take(&mut self) -> bool {
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        true
    }
}

/// `(first: 10)` for a Relay connection that takes an optional `first`, which GitHub and other
/// servers require before they return a page.
fn page_argument(schema: &Schema, field: &FieldDef) -> String {
    let is_connection = field.ty.named().ends_with("Connection")
        && schema.kind(field.ty.named()) == Some(Kind::Object);
    let takes_first = field
        .args
        .iter()
        .any(|a| a.name == "first" && !a.ty.is_non_null() && a.ty.named() == "Int");
    if is_connection && takes_first {
        format!("(first: {CONNECTION_PAGE})")
    } else {
        String::new()
    }
}

impl ToolSource for GraphQlApi {
    fn namespace(&self) -> &str {
        &self.config.name
    }

    fn tools(&self) -> ToolsFuture<'_> {
        let descriptors = self.descriptors.clone();
        Box::pin(async move { Ok(descriptors) })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(self.perform(tool, args, ctx))
    }

    fn gate(&self) -> Option<&CallGate> {
        Some(&self.gate)
    }

    fn coerce(&self) -> airlock_policy::CoercePolicy {
        self.config.coerce
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tools::arguments::ArgumentSchema;

    const SDL: &str = r#"
"A custom date."
scalar DateTime

schema { query: Root mutation: Mutations }

type Root {
  "Look up a repository."
  repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
  viewer: User!
  search(query: String!, type: SearchType!, first: Int): SearchResult
  node(id: ID!): Node
  count: Int
  query: String
}

type Mutations {
  createIssue(input: CreateIssueInput!): CreateIssuePayload
}

interface Node { id: ID! }

type Repository implements Node {
  id: ID!
  name: String!
  name: String!
  createdAt: DateTime
  owner: User
  issues(first: Int, after: String): IssueConnection!
  old: String @deprecated(reason: "no")
  secret(key: String!): String
}

type User implements Node { id: ID! login: String! repositories(first: Int): RepositoryConnection }
type IssueConnection { totalCount: Int! nodes: [Issue] }
type RepositoryConnection { totalCount: Int! nodes: [Repository] }
type Issue implements Node { id: ID! title: String state: IssueState }
enum IssueState { OPEN CLOSED }
enum SearchType { ISSUE REPOSITORY }
union SearchResult = Issue | Repository
type CreateIssuePayload { issue: Issue clientMutationId: String }
input CreateIssueInput {
  repositoryId: ID!
  title: String!
  labels: [String!]
  state: IssueState
  parent: CreateIssueInput
}
"#;

    fn config(depth: u32) -> GraphQlSource {
        GraphQlSource {
            name: "gh".into(),
            schema: "/x/schema.graphql".into(),
            schema_format: SchemaFormat::Sdl,
            endpoint: "http://127.0.0.1:1/graphql".into(),
            headers: Vec::new(),
            selection_depth: depth,
            call_timeout_ms: 1000,
            max_concurrent_calls: 2,
            coerce: Default::default(),
            learn_types: true,
        }
    }

    fn tools(depth: u32) -> Vec<Tool> {
        build_tools(&config(depth), SDL).unwrap()
    }

    fn find<'t>(tools: &'t [Tool], name: &str) -> &'t Tool {
        tools.iter().find(|t| t.descriptor.name == name).unwrap()
    }

    fn selection(tool: &Tool) -> &str {
        match &tool.kind {
            ToolKind::Field { selection, .. } => selection,
            ToolKind::Custom(_) => panic!("custom"),
        }
    }

    /// Query fields and `query` only read; mutation fields and `mutate` may write.
    #[test]
    fn graphql_queries_are_read_only_and_mutations_are_not() {
        let tools = tools(2);
        let read_only: Vec<&str> = tools
            .iter()
            .filter(|t| t.descriptor.read_only)
            .map(|t| t.descriptor.name.as_str())
            .collect();
        assert_eq!(
            read_only,
            [
                "query",
                "repository",
                "viewer",
                "search",
                "node",
                "count",
                "query_2"
            ]
        );
        assert!(!find(&tools, "mutation_createIssue").descriptor.read_only);
        assert!(!find(&tools, "mutate").descriptor.read_only);
    }

    #[test]
    fn graphql_fields_become_named_tools() {
        let tools = tools(2);
        let names: Vec<&str> = tools.iter().map(|t| t.descriptor.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "query",
                "mutate",
                "repository",
                "viewer",
                "search",
                "node",
                "count",
                "query_2",
                "mutation_createIssue"
            ]
        );
        let repo = find(&tools, "repository");
        assert_eq!(
            repo.descriptor.input_schema["required"],
            json!(["owner", "name"])
        );
        assert!(
            repo.descriptor
                .description
                .starts_with("Look up a repository.")
        );
        assert_eq!(
            repo.descriptor.input_schema["properties"]["followRenames"]["type"],
            json!(["boolean", "null"])
        );
    }

    #[test]
    fn graphql_input_objects_and_enums_go_to_defs() {
        let tools = tools(2);
        let create = &find(&tools, "mutation_createIssue").descriptor.input_schema;
        let input = &create["$defs"]["CreateIssueInput"];
        assert_eq!(input["required"], json!(["repositoryId", "title"]));
        assert_eq!(
            input["properties"]["parent"]["anyOf"][0]["$ref"],
            "#/$defs/CreateIssueInput"
        );
        assert_eq!(
            create["$defs"]["IssueState"]["enum"],
            json!(["OPEN", "CLOSED"])
        );
        let schema = ArgumentSchema::compile(create);
        schema
            .check("t", &json!({"input": {"repositoryId": "R1", "title": "x", "state": "OPEN", "parent": {"repositoryId": 1, "title": "y"}}}))
            .unwrap();
        let err = schema
            .check(
                "t",
                &json!({"input": {"repositoryId": "R1", "title": "x", "state": "SHUT"}}),
            )
            .unwrap_err();
        assert_eq!(err.code, "invalid_arguments");
        let search = &find(&tools, "search").descriptor.input_schema;
        assert_eq!(search["required"], json!(["query", "type"]));
    }

    #[test]
    fn graphql_default_selection_is_bounded_and_parses() {
        let tools = tools(2);
        let repo = selection(find(&tools, "repository"));
        assert_eq!(
            repo,
            "{ id name createdAt owner { id login } issues(first: 10) { totalCount } }"
        );
        // Interfaces and unions carry __typename; small unions get fragments.
        assert_eq!(selection(find(&tools, "node")), "{ __typename id }");
        assert_eq!(
            selection(find(&tools, "search")),
            "{ __typename ... on Issue { id title state } ... on Repository { id name createdAt } }"
        );
        assert_eq!(selection(find(&tools, "count")), "");
        let deep = tools_depth_selection(3, "repository");
        assert!(
            deep.contains("issues(first: 10) { totalCount nodes { id title state } }"),
            "{deep}"
        );
        for t in &tools {
            if let ToolKind::Field { .. } = t.kind {
                let doc = field_document_for(t, &json!({"owner": "o", "name": "n"}));
                parses_as_document(&doc).unwrap();
            }
        }
    }

    /// The output type names exactly the selected fields, with GraphQL's nullability.
    #[test]
    fn graphql_output_schema_follows_the_default_selection() {
        use crate::sdk::schema_types::TypeScriptTypes;
        let tools = tools(2);
        let typed = |name: &str| {
            let schema = find(&tools, name).descriptor.output_schema.clone().unwrap();
            let mut types = TypeScriptTypes::new(&schema, "t");
            let t = types.type_of(&schema);
            (t, types.declarations())
        };
        // `Repository` is nullable; `issues` is `IssueConnection!`; `DateTime` is custom.
        assert_eq!(
            typed("repository").0,
            "{\n  createdAt: unknown;\n  id: string;\n  issues: {\n    totalCount: number;\n  };\n  name: string;\n  owner: {\n    id: string;\n    login: string;\n  } | null;\n} | null"
        );
        assert_eq!(typed("count").0, "number | null");
        assert_eq!(
            typed("node").0,
            "{\n  __typename: string;\n  id: string;\n} | null"
        );
        let (search, decls) = typed("search");
        assert_eq!(
            search,
            "({\n  __typename: \"Issue\";\n  id: string;\n  state: TIssueState | null;\n  title: string | null;\n} | {\n  __typename: \"Repository\";\n  createdAt: unknown;\n  id: string;\n  name: string;\n}) | null"
        );
        assert!(
            decls.contains("export type TIssueState = \"OPEN\" | \"CLOSED\";"),
            "{decls}"
        );
        assert_eq!(
            find(&tools, "query").descriptor.output_schema,
            None,
            "a custom document's answer has no fixed type"
        );
        // Lists of nullable items inside a non-null list.
        let deep = tools_depth_selection(3, "repository");
        assert!(deep.contains("nodes { id title state }"), "{deep}");
        let tools3 = super::tests::tools(3);
        let schema = find(&tools3, "repository")
            .descriptor
            .output_schema
            .clone()
            .unwrap();
        let nodes = &schema["properties"]["issues"]["properties"]["nodes"];
        assert_eq!(nodes["type"], json!(["array", "null"]));
        assert_eq!(nodes["items"]["type"], json!(["object", "null"]));
    }

    fn tools_depth_selection(depth: u32, name: &str) -> String {
        let tools = tools(depth);
        selection(find(&tools, name)).to_owned()
    }

    fn field_document_for(tool: &Tool, args: &Value) -> String {
        let ToolKind::Field {
            operation,
            field,
            args: declared,
            selection,
        } = &tool.kind
        else {
            panic!("custom");
        };
        field_document(*operation, field, declared, selection, args)
    }

    #[test]
    fn graphql_documents_declare_only_given_variables() {
        let tools = tools(1);
        let repo = find(&tools, "repository");
        assert_eq!(
            field_document_for(repo, &json!({"owner": "o", "name": "n"})),
            "query airlock_repository($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id name createdAt } }"
        );
        assert_eq!(
            field_document_for(find(&tools, "count"), &json!({})),
            "query airlock_count { count }"
        );
        let create = find(&tools, "mutation_createIssue");
        assert!(
            field_document_for(create, &json!({"input": {}}))
                .starts_with("mutation airlock_createIssue($input: CreateIssueInput!) { createIssue(input: $input) {")
        );
    }

    #[test]
    fn graphql_documents_nested_without_end_fail_cleanly_on_a_small_stack() {
        // Programs send these documents, and they are parsed in the daemon: graphql-parser's
        // own recursion limit must hold on a runtime thread's 2 MiB stack (pinned here, so a
        // dependency update that drops it fails this test rather than the daemon).
        let outcome = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let n = 100_000;
                let selections = format!("{}a{}", "{ a ".repeat(n), " }".repeat(n));
                let lists = format!("{{ a(x: {}1{}) }}", "[".repeat(n), "]".repeat(n));
                let objects = format!("{{ a(x: {}1{}) }}", "{b: ".repeat(n), "}".repeat(n));
                [selections, lists, objects]
                    .iter()
                    .map(|doc| check_custom_document("gh.query", doc, Operation::Query).map(|_| ()))
                    .collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .expect("the parser overflowed a 2 MiB stack");
        for result in outcome {
            let e = result.unwrap_err();
            assert_eq!(e.code, "invalid_arguments");
            assert!(
                e.message.contains("Recursion limit exceeded"),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn graphql_custom_documents_are_checked() {
        assert!(
            !check_custom_document("gh.query", "{ viewer { login } }", Operation::Query).unwrap()
        );
        assert!(
            !check_custom_document(
                "gh.query",
                "query Q($n: Int) { a(n: $n) }",
                Operation::Query,
            )
            .unwrap()
        );
        let e = check_custom_document("gh.query", "mutation { a }", Operation::Query).unwrap_err();
        assert!(e.message.contains("contains a mutation"), "{}", e.message);
        assert_eq!(
            e.hint.as_deref(),
            Some("gh.mutate runs documents with mutations")
        );
        // `mutate` says whether its document writes (the idempotency key goes only with a
        // mutation).
        assert!(check_custom_document("gh.mutate", "mutation { a }", Operation::Mutation).unwrap());
        assert!(
            check_custom_document(
                "gh.mutate",
                "query Q { a } mutation M { b }",
                Operation::Mutation
            )
            .unwrap()
        );
        assert!(!check_custom_document("gh.mutate", "{ a }", Operation::Mutation).unwrap());
        let e =
            check_custom_document("gh.query", "{ viewer { login }", Operation::Query).unwrap_err();
        assert_eq!(e.code, "invalid_arguments");
        assert!(e.message.contains("does not parse at 1:"), "{}", e.message);
    }

    #[test]
    fn graphql_malformed_sdl_names_file_line_and_column() {
        let err = match build_tools(&config(2), "type Query {\n  a: Int\n  b(: Int\n}\n") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("parsed"),
        };
        assert!(
            err.starts_with("/x/schema.graphql:3:5: invalid GraphQL schema of source `gh`"),
            "{err}"
        );
        let err = match build_tools(&config(2), "type Mutation { a: Int }") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("parsed"),
        };
        assert!(err.contains("has no query type"), "{err}");
        let mut json_config = config(2);
        json_config.schema_format = SchemaFormat::Introspection;
        let err = match build_tools(&json_config, "{\"__schema\": \n {\"types\": [}") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("parsed"),
        };
        assert!(err.starts_with("/x/schema.graphql:2:"), "{err}");
    }

    #[test]
    fn graphql_introspection_results_load() {
        let introspection = json!({"data": {"__schema": {
            "queryType": {"name": "Query"},
            "mutationType": null,
            "types": [
                {"kind": "OBJECT", "name": "Query", "description": null, "fields": [
                    {"name": "user", "description": "A user.", "isDeprecated": false,
                     "args": [{"name": "login", "description": null, "defaultValue": null,
                               "type": {"kind": "NON_NULL", "name": null, "ofType": {"kind": "SCALAR", "name": "String", "ofType": null}}}],
                     "type": {"kind": "OBJECT", "name": "User", "ofType": null}}
                ], "inputFields": null, "enumValues": null, "possibleTypes": null, "interfaces": []},
                {"kind": "OBJECT", "name": "User", "description": null, "fields": [
                    {"name": "login", "description": null, "isDeprecated": false, "args": [],
                     "type": {"kind": "NON_NULL", "name": null, "ofType": {"kind": "SCALAR", "name": "String", "ofType": null}}}
                ]},
                {"kind": "SCALAR", "name": "String"}
            ]
        }}});
        let mut c = config(2);
        c.schema_format = SchemaFormat::Introspection;
        let tools = build_tools(&c, &introspection.to_string()).unwrap();
        let user = find(&tools, "user");
        assert_eq!(user.descriptor.input_schema["required"], json!(["login"]));
        assert_eq!(selection(user), "{ login }");
        assert!(user.descriptor.description.starts_with("A user."));
    }

    #[test]
    fn graphql_errors_become_tool_errors() {
        let ok = interpret("gh.t", reqwest::StatusCode::OK, br#"{"data": {"a": 1}}"#).unwrap();
        assert_eq!(ok, json!({"a": 1}));
        let e = interpret(
            "gh.t",
            reqwest::StatusCode::OK,
            br#"{"data": null, "errors": [{"message": "Could not resolve", "path": ["repository", 0]}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, "upstream_error");
        assert_eq!(
            e.message,
            "gh.t failed: Could not resolve (at repository.0)"
        );
        let e = interpret("gh.t", reqwest::StatusCode::BAD_GATEWAY, b"<html>").unwrap_err();
        assert!(e.message.contains("HTTP 502"), "{}", e.message);
    }

    #[test]
    fn graphql_load_errors_name_the_file() {
        let mut c = config(2);
        c.schema = "/nonexistent/airlock/schema.graphql".into();
        let e = GraphQlApi::load(c, Arc::new(SecretStore::empty())).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "/nonexistent/airlock/schema.graphql: cannot read the schema of GraphQL source `gh`"
            ),
            "{e}"
        );
    }
}
