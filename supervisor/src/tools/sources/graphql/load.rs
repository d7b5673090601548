//! Reading the schema file (SDL, or an introspection result) into what tools need: types
//! with their fields, arguments, input fields, enum values and union members, and the
//! root types. Duplicates and extensions are merged; the first definition of a field wins.

use super::GraphQlApi;
use super::schema::build_tools;
use crate::secrets::store::SecretStore;
use crate::tools::CallGate;
use crate::tools::sources::http;
use airlock_policy::GraphQlSource;
use graphql_parser::schema as gs;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

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
pub(super) enum TypeRef {
    Named(String),
    List(Box<TypeRef>),
    NonNull(Box<TypeRef>),
}

impl TypeRef {
    pub(super) fn named(&self) -> &str {
        match self {
            TypeRef::Named(n) => n,
            TypeRef::List(t) | TypeRef::NonNull(t) => t.named(),
        }
    }

    pub(super) fn is_non_null(&self) -> bool {
        matches!(self, TypeRef::NonNull(_))
    }

    pub(super) fn render(&self) -> String {
        match self {
            TypeRef::Named(n) => n.clone(),
            TypeRef::List(t) => format!("[{}]", t.render()),
            TypeRef::NonNull(t) => format!("{}!", t.render()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Scalar,
    Object,
    Interface,
    Union,
    Enum,
    InputObject,
}

#[derive(Debug, Clone)]
pub(super) struct InputValue {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) ty: TypeRef,
    pub(super) has_default: bool,
}

impl InputValue {
    /// Whether a caller must give it: non-null and without a default.
    pub(super) fn required(&self) -> bool {
        self.ty.is_non_null() && !self.has_default
    }
}

#[derive(Debug, Clone)]
pub(super) struct FieldDef {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) args: Vec<InputValue>,
    pub(super) ty: TypeRef,
    pub(super) deprecated: bool,
}

#[derive(Debug, Clone)]
pub(super) struct TypeDef {
    pub(super) kind: Kind,
    pub(super) description: Option<String>,
    pub(super) fields: Vec<FieldDef>,
    pub(super) input_fields: Vec<InputValue>,
    pub(super) enum_values: Vec<String>,
    /// Union members.
    pub(super) members: Vec<String>,
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
pub(super) struct Schema {
    pub(super) types: HashMap<String, TypeDef>,
    pub(super) query: Option<String>,
    pub(super) mutation: Option<String>,
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

    pub(super) fn kind(&self, name: &str) -> Option<Kind> {
        self.types.get(name).map(|t| t.kind)
    }

    pub(super) fn is_leaf(&self, name: &str) -> bool {
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
    pub(super) fn from_sdl(text: &str) -> Result<Schema, (usize, usize, String)> {
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
    pub(super) fn from_introspection(text: &str) -> Result<Schema, (usize, usize, String)> {
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
pub(super) fn parse_error(text: &str) -> (usize, usize, String) {
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
}
