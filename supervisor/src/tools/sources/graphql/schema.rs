//! The tools of a schema: `query` and `mutate` for documents of the program's own, and one
//! tool per root field, with its arguments as an input schema and its default selection's
//! answer as an output schema.

use super::GraphQlLoadError;
use super::load::{FieldDef, Kind, Schema, TypeDef, TypeRef};
use super::selection::{MAX_SELECTED_FIELDS, Selector};
use super::{Operation, Tool, ToolKind};
use crate::tools::ToolDescriptor;
use airlock_policy::{GraphQlSource, SchemaFormat};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

/// How much of the default selection a tool's description shows.
const MAX_DESCRIBED_SELECTION: usize = 240;

pub(super) fn build_tools(
    config: &GraphQlSource,
    text: &str,
) -> Result<Vec<Tool>, GraphQlLoadError> {
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
pub(super) fn output_type(ty: &TypeRef, inner: Value, description: &Option<String>) -> Value {
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
