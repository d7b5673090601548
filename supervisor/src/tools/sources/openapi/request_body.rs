//! How an operation's request body becomes arguments, and how the arguments become the body
//! again, the way Octokit and other generated clients take it.
//!
//! A body that is an object with declared `properties` (JSON or form) is *flattened*: each of
//! its properties is an argument of its own, next to the parameters
//! (`issues_create_comment({ owner, repo, issue_number, body: "text" })`), required when the
//! request body is required and the property is. The call puts every argument that is not a
//! parameter back into the body.
//!
//! A body property whose name a parameter already has stays under the argument `body` (an
//! object holding just those properties): `{ owner, repo, name, value, body: { name } }`. The
//! name `body` always belongs to the request body (a parameter of that name gets its location
//! as a suffix, `body_query`), so a body property called `body` is flattened like any other.
//!
//! The whole body stays under `body`, as it is, when it cannot be flattened faithfully: it is
//! not an object schema with `properties` (an array, a string, a `oneOf` of alternatives, a
//! free-form object or map, a `text/*` body), it allows properties it does not declare
//! (`additionalProperties` other than `false`, `patternProperties`), it constrains the object
//! as a whole in a way the parameters would disturb (`minProperties`, `propertyNames`, `$ref`s
//! or unknown names inside `anyOf`/`oneOf`/…), it requires a property it does not declare, or
//! a property collides with a parameter while another one is called `body` or the body has
//! `anyOf`/`oneOf`/`allOf`/`not`/`if` constraints (which would then name the wrong argument).
//! Constraints on the object as a whole that survive flattening (`anyOf: [{required: [a]},
//! {required: [b]}]`, `dependentRequired`) move to the top of the input schema, where the
//! body's properties now are.

use super::BodyKind;
use super::load::resolve_local;
use super::schema::MAX_PROPERTIES;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The argument that holds a nested body (or the colliding properties of a flattened one).
pub(super) const BODY: &str = "body";

/// One operation's request body: what is sent, and where it is in the arguments.
#[derive(Debug, Clone)]
pub(super) struct Body {
    pub kind: BodyKind,
    /// Whether the document says the body is required (a required flattened body is sent even
    /// when no property of it was given).
    pub required: bool,
    pub shape: BodyShape,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BodyShape {
    /// The whole body is the argument `body`.
    Nested,
    /// The body's properties are arguments; `nested` are those whose names a parameter has,
    /// given under the argument `body`.
    Flat {
        properties: Vec<String>,
        nested: Vec<String>,
    },
}

impl Body {
    /// The body to send, taken out of the arguments; `None` sends no body.
    pub fn value(&self, args: &Map<String, Value>) -> Option<Value> {
        match &self.shape {
            BodyShape::Nested => args.get(BODY).cloned(),
            BodyShape::Flat { properties, nested } => {
                let mut body = Map::new();
                for name in properties {
                    if let Some(value) = args.get(name) {
                        body.insert(name.clone(), value.clone());
                    }
                }
                if let Some(Value::Object(inner)) = args.get(BODY).filter(|_| !nested.is_empty()) {
                    for name in nested {
                        if let Some(value) = inner.get(name) {
                            body.insert(name.clone(), value.clone());
                        }
                    }
                }
                (self.required || !body.is_empty()).then_some(Value::Object(body))
            }
        }
    }
}

/// A body schema that can be flattened: its properties (raw, from the document), the ones it
/// requires, and its constraints on the object as a whole.
#[derive(Debug)]
pub(super) struct Flat<'d> {
    pub properties: &'d Map<String, Value>,
    pub required: BTreeSet<String>,
    /// `anyOf`, `oneOf`, `allOf`, `not`, `if`/`then`/`else`, `dependentRequired`,
    /// `dependentSchemas`: they name body properties, which become top-level arguments.
    pub whole: Map<String, Value>,
    /// The properties whose names a parameter has (they stay under `body`).
    pub colliding: BTreeSet<String>,
}

/// Keywords that say nothing about what is valid.
const ANNOTATIONS: [&str; 15] = [
    "title",
    "description",
    "example",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "externalDocs",
    "xml",
    "nullable",
    "$comment",
    "$schema",
    "$id",
    "discriminator",
];

/// Keywords on the object as a whole that stay true when its properties sit next to other
/// arguments (as long as they name only declared properties, which [`whole_ok`] checks).
const WHOLE: [&str; 9] = [
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
];

/// Whether `schema` (a raw schema from `document`, behind at most a few `$ref`s) is flattened,
/// given the argument names the parameters use. `Err` when it has more properties than a
/// schema may.
pub(super) fn flatten<'d>(
    document: &'d Value,
    schema: &'d Value,
    parameters: &BTreeSet<String>,
) -> Result<Option<Flat<'d>>, super::schema::OperationProblem> {
    let Some(schema) = follow_refs(document, schema) else {
        return Ok(None);
    };
    let Some(object) = schema.as_object() else {
        return Ok(None);
    };
    let is_object = match object.get("type") {
        None => true,
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => {
            types.contains(&Value::from("object"))
                && types.iter().all(|t| t == "object" || t == "null")
        }
        Some(_) => false,
    };
    let Some(Value::Object(properties)) = object.get("properties") else {
        return Ok(None);
    };
    if !is_object || properties.is_empty() {
        return Ok(None);
    }
    if properties.len() > MAX_PROPERTIES {
        return Err(super::schema::OperationProblem::TooManyProperties(
            properties.len(),
        ));
    }
    let mut required = BTreeSet::new();
    let mut whole = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "type" | "properties" => {}
            "required" => {
                let Some(names) = value.as_array() else {
                    return Ok(None);
                };
                for name in names {
                    match name.as_str() {
                        Some(name) if properties.contains_key(name) => {
                            required.insert(name.to_owned());
                        }
                        // Requiring what it does not declare: only the body as a whole can.
                        _ => return Ok(None),
                    }
                }
            }
            "additionalProperties" if value == &Value::Bool(false) => {}
            k if ANNOTATIONS.contains(&k) || k.starts_with("x-") => {}
            k if WHOLE.contains(&k) => {
                if !whole_ok(value, properties) {
                    return Ok(None);
                }
                whole.insert(key.clone(), value.clone());
            }
            // `additionalProperties` (other than false), `patternProperties`, `minProperties`,
            // `propertyNames`, `enum`, `const`, …: about the body object itself.
            _ => return Ok(None),
        }
    }
    let colliding: BTreeSet<String> = properties
        .keys()
        .filter(|name| parameters.contains(*name))
        .cloned()
        .collect();
    if !colliding.is_empty() && (properties.contains_key(BODY) || !whole.is_empty()) {
        return Ok(None);
    }
    Ok(Some(Flat {
        properties,
        required,
        whole,
        colliding,
    }))
}

/// The schema a body's `$ref`s lead to, when the references carry nothing else but notes.
fn follow_refs<'d>(document: &'d Value, mut schema: &'d Value) -> Option<&'d Value> {
    for _ in 0..8 {
        let Some(Value::String(reference)) = schema.get("$ref") else {
            return Some(schema);
        };
        let only_notes = schema.as_object().is_some_and(|o| {
            o.keys()
                .all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str()))
        });
        if !only_notes {
            return None;
        }
        schema = resolve_local(document, reference)?;
    }
    None
}

/// Whether a whole-object constraint still means the same with parameters next to the body's
/// properties: the object levels it reaches through `anyOf`/`oneOf`/… name only declared
/// properties, hold no `$ref` (which could say anything), and nothing that counts or limits
/// the properties.
fn whole_ok(value: &Value, properties: &Map<String, Value>) -> bool {
    match value {
        Value::Bool(_) => true,
        Value::Array(items) => items.iter().all(|v| whole_ok(v, properties)),
        Value::Object(object) => object.iter().all(|(key, v)| match key.as_str() {
            "required" => v.as_array().is_some_and(|names| {
                names
                    .iter()
                    .all(|n| n.as_str().is_some_and(|n| properties.contains_key(n)))
            }),
            "properties" => v
                .as_object()
                .is_some_and(|p| p.keys().all(|n| properties.contains_key(n))),
            "dependentRequired" => v.as_object().is_some_and(|d| {
                d.iter().all(|(n, names)| {
                    properties.contains_key(n)
                        && names.as_array().is_some_and(|names| {
                            names
                                .iter()
                                .all(|m| m.as_str().is_some_and(|m| properties.contains_key(m)))
                        })
                })
            }),
            "additionalProperties" | "unevaluatedProperties" => v == &Value::Bool(true),
            "type" => {
                v == "object"
                    || v.as_array()
                        .is_some_and(|t| t.contains(&Value::from("object")))
            }
            "$ref" | "$dynamicRef" | "patternProperties" | "propertyNames" | "minProperties"
            | "maxProperties" | "enum" | "const" => false,
            k if WHOLE.contains(&k) => whole_ok(v, properties),
            "dependentSchemas" => whole_ok(v, properties),
            // Notes, and anything else a level holds, say nothing about which names exist.
            _ => true,
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn flat_names(document: &Value, schema: &Value, parameters: &[&str]) -> Option<Vec<String>> {
        flatten(document, schema, &params(parameters))
            .unwrap()
            .map(|f| f.properties.keys().cloned().collect())
    }

    #[test]
    fn object_bodies_with_properties_are_flattened() {
        let doc = json!({ "components": { "schemas": { "Comment": {
            "type": "object", "required": ["body"], "description": "A comment",
            "properties": { "body": { "type": "string" }, "pinned": { "type": "boolean" } }
        } } } });
        let schema = json!({ "$ref": "#/components/schemas/Comment" });
        let flat = flatten(&doc, &schema, &params(&["owner", "repo"]))
            .unwrap()
            .unwrap();
        assert_eq!(
            flat.properties.keys().collect::<Vec<_>>(),
            ["body", "pinned"]
        );
        assert_eq!(flat.required, params(&["body"]));
        assert!(flat.colliding.is_empty() && flat.whole.is_empty());
        // 3.0's nullable object and 3.1's type list are objects too.
        let nullable = json!({ "type": "object", "nullable": true, "properties": { "a": {} } });
        assert!(flat_names(&doc, &nullable, &[]).is_some());
        let listed = json!({ "type": ["object", "null"], "properties": { "a": {} } });
        assert!(flat_names(&doc, &listed, &[]).is_some());
        let closed =
            json!({ "type": "object", "additionalProperties": false, "properties": { "a": {} } });
        assert!(flat_names(&doc, &closed, &[]).is_some());
    }

    #[test]
    fn bodies_that_are_not_plain_objects_stay_nested() {
        let doc = json!({});
        for schema in [
            json!({ "type": "array", "items": { "type": "string" } }),
            json!({ "type": "string" }),
            json!({ "oneOf": [{ "type": "string" }, { "type": "array", "items": { "type": "string" } }] }),
            json!({ "oneOf": [{ "type": "object", "properties": { "a": {} } }] }),
            json!({ "type": "object" }),
            json!({ "type": "object", "additionalProperties": { "type": "string" } }),
            json!({ "type": "object", "properties": { "a": {} }, "additionalProperties": true }),
            json!({ "type": "object", "properties": { "a": {} }, "patternProperties": { "^x": {} } }),
            json!({ "type": "object", "properties": { "a": {} }, "minProperties": 1 }),
            json!({ "type": "object", "properties": { "a": {} }, "required": ["b"] }),
            json!({ "type": "object", "properties": { "a": {} }, "anyOf": [{ "required": ["b"] }] }),
            json!({ "type": "object", "properties": { "a": {} }, "anyOf": [{ "$ref": "#/x" }] }),
            json!({ "type": "object", "properties": { "a": {} }, "oneOf": [{ "additionalProperties": false }] }),
            json!({ "allOf": [{ "$ref": "#/components/schemas/A" }] }),
            json!({ "$ref": "#/components/schemas/Missing" }),
            json!({ "$ref": "#/x", "properties": { "a": {} } }),
            json!(true),
        ] {
            assert_eq!(flat_names(&doc, &schema, &[]), None, "{schema}");
        }
    }

    #[test]
    fn whole_object_constraints_on_declared_properties_are_kept() {
        let schema = json!({
            "type": "object",
            "properties": { "state": {}, "assignees": {}, "status": {} },
            "anyOf": [{ "required": ["state"] }, { "required": ["assignees"] }],
            "oneOf": [{ "properties": { "status": { "enum": ["done"] } }, "additionalProperties": true }, { "required": ["status"] }]
        });
        let doc = json!({});
        let flat = flatten(&doc, &schema, &params(&["owner"]))
            .unwrap()
            .unwrap();
        assert_eq!(flat.whole.keys().collect::<Vec<_>>(), ["anyOf", "oneOf"]);
        // With a colliding property, such a constraint would name the parameter instead.
        assert!(
            flatten(&json!({}), &schema, &params(&["state"]))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_property_named_like_a_parameter_collides() {
        let schema = json!({ "type": "object", "required": ["name", "value"],
            "properties": { "name": { "type": "string" }, "value": { "type": "string" } } });
        let doc = json!({});
        let flat = flatten(&doc, &schema, &params(&["owner", "repo", "name"]))
            .unwrap()
            .unwrap();
        assert_eq!(flat.colliding, params(&["name"]));
        // Colliding while another property is called `body`: the name is needed twice, so the
        // whole body stays nested.
        let both = json!({ "type": "object",
            "properties": { "name": {}, "body": { "type": "string" } } });
        assert_eq!(flat_names(&json!({}), &both, &["name"]), None);
        assert!(flat_names(&json!({}), &both, &["owner"]).is_some());
    }

    #[test]
    fn too_many_properties_fail_the_tool() {
        let many: Map<String, Value> = (0..=MAX_PROPERTIES)
            .map(|i| (format!("p{i}"), json!({})))
            .collect();
        let e = flatten(
            &json!({}),
            &json!({ "type": "object", "properties": many }),
            &params(&[]),
        )
        .unwrap_err();
        assert_eq!(
            e,
            super::super::schema::OperationProblem::TooManyProperties(1001)
        );
        assert!(e.to_string().contains("1001 properties"), "{e}");
    }

    fn flat_body(required: bool, properties: &[&str], nested: &[&str]) -> Body {
        let names = |n: &[&str]| n.iter().map(|n| (*n).to_owned()).collect();
        Body {
            kind: BodyKind::Json("application/json".into()),
            required,
            shape: BodyShape::Flat {
                properties: names(properties),
                nested: names(nested),
            },
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_are_split_back_into_the_body() {
        let comment = flat_body(true, &["body"], &[]);
        let call = args(json!({ "owner": "o", "repo": "r", "issue_number": 7, "body": "text" }));
        assert_eq!(comment.value(&call), Some(json!({ "body": "text" })));

        // Colliding properties come from under `body`; null values are sent as they are.
        let variable = flat_body(false, &["value", "visibility"], &["name"]);
        let call = args(json!({
            "owner": "o", "name": "OLD", "value": "v", "visibility": null,
            "body": { "name": "NEW", "stray": 1 }
        }));
        assert_eq!(
            variable.value(&call),
            Some(json!({ "name": "NEW", "value": "v", "visibility": null }))
        );

        // An optional body with nothing of it given is not sent; a required one is, empty.
        let call = args(json!({ "owner": "o" }));
        assert_eq!(variable.value(&call), None);
        assert_eq!(flat_body(true, &["a"], &[]).value(&call), Some(json!({})));

        let nested = Body {
            kind: BodyKind::Json("application/json".into()),
            required: true,
            shape: BodyShape::Nested,
        };
        let call = args(json!({ "owner": "o", "body": ["a", "b"] }));
        assert_eq!(nested.value(&call), Some(json!(["a", "b"])));
        assert_eq!(nested.value(&args(json!({}))), None);
    }
}
