//! A field tool's default selection set: the return type's scalar and enum fields, down to
//! `selection_depth` levels of object fields, within a budget of fields, and the JSON
//! Schema of exactly what it selects.

use super::load::{FieldDef, InputValue, Kind, Schema};
use super::schema::output_type;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Fields one default selection set may hold in all (leaves and object fields), so that a tool's
/// document and its answer stay small whatever the schema.
pub(super) const MAX_SELECTED_FIELDS: usize = 120;

/// Scalar fields taken from one type, so nested objects still get a share of the budget.
const MAX_LEAVES_PER_TYPE: usize = 30;

/// Object fields followed from one type.
const MAX_OBJECTS_PER_TYPE: usize = 8;

/// Union members listed as inline fragments; a larger union gets only `__typename`.
const MAX_UNION_FRAGMENTS: usize = 6;

/// `first:` given to Relay connections, which servers such as GitHub's require.
const CONNECTION_PAGE: u32 = 10;

/// Builds default selection sets within a field budget, and the JSON Schema of what each
/// selection answers (exactly the selected fields, so the SDK's output type names no field
/// the answer lacks).
pub(super) struct Selector<'s> {
    pub(super) schema: &'s Schema,
    pub(super) budget: usize,
    /// Enums met in selected fields, as `$defs` of the output schema.
    pub(super) defs: BTreeMap<String, Value>,
}

impl Selector<'_> {
    /// The body of a selection set on `type_name` (without braces), `depth` levels deep
    /// (1 = scalar fields only), with the schema of the object it selects; an empty body
    /// when nothing can be selected.
    pub(super) fn select(&mut self, type_name: &str, depth: u32) -> (String, Value) {
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
    pub(super) fn leaf_schema(&mut self, name: &str) -> Value {
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
