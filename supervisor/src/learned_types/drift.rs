//! Where a result contradicts the output schema its tool declares: the first place whose
//! kind the schema does not allow (`declared array, observed null`), or a required property
//! that is missing. Only kinds and required properties are compared (not formats, lengths or
//! patterns): what a program's code trips over.
//!
//! The schema comes from a tool server or an API document and the value from its service, so
//! both are untrusted: `$ref`s are followed only inside the schema's document, nesting is
//! bounded by [`MAX_DEPTH`], and nothing of the value but its kinds reaches the description.

use serde_json::{Map, Value};

/// Schemas and values nested deeper than this are not compared further.
pub const MAX_DEPTH: usize = 24;

/// `$ref`s followed in a row before giving up (a chain or a cycle of aliases).
const MAX_REFS: usize = 8;

/// The first contradiction of `value` by `schema` (the root of its document), described as
/// `declared array, observed null` (with the place, `at .items[].id: …`, below the top).
pub fn contradiction(schema: &Value, value: &Value) -> Option<String> {
    let mut path = String::new();
    check(schema, schema, value, 0, &mut path)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn describe(path: &str, declared: &str, observed: &str) -> String {
    if path.is_empty() {
        format!("declared {declared}, observed {observed}")
    } else {
        format!("at {path}: declared {declared}, observed {observed}")
    }
}

/// Follows `$ref` (local pointers only) from `schema`.
fn follow<'a>(root: &'a Value, mut schema: &'a Value) -> Option<&'a Value> {
    for _ in 0..MAX_REFS {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => schema = root.pointer(r.strip_prefix('#')?)?,
            None => return Some(schema),
        }
    }
    None
}

fn check(
    root: &Value,
    schema: &Value,
    value: &Value,
    depth: usize,
    path: &mut String,
) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    let obj: &Map<String, Value> = match schema {
        Value::Bool(false) => return Some(describe(path, "nothing", kind(value))),
        Value::Object(_) => follow(root, schema)?.as_object()?,
        _ => return None,
    };
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(members)) = obj.get(key)
            && !members.is_empty()
        {
            let mut first = None;
            for member in members {
                let mut inner = path.clone();
                match check(root, member, value, depth + 1, &mut inner) {
                    None => {
                        first = None;
                        break;
                    }
                    Some(c) => {
                        first.get_or_insert(c);
                    }
                }
            }
            if first.is_some() {
                return first;
            }
        }
    }
    if let Some(Value::Array(members)) = obj.get("allOf") {
        for member in members {
            if let Some(c) = check(root, member, value, depth + 1, path) {
                return Some(c);
            }
        }
    }
    let mut types: Vec<&str> = match obj.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        if obj.get("nullable") == Some(&Value::Bool(true)) {
            types.push("null");
        }
        let observed = kind(value);
        let allowed = types
            .iter()
            .any(|t| *t == observed || (*t == "number" && observed == "integer"));
        if !allowed {
            return Some(describe(path, &types.join(" or "), observed));
        }
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(required)) = obj.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(name) {
                        let at = format!("{path}.{}", short(name));
                        return Some(describe(&at, "required", "missing"));
                    }
                }
            }
            if let Some(Value::Object(properties)) = obj.get("properties") {
                for (name, property) in properties {
                    if let Some(v) = map.get(name) {
                        let len = path.len();
                        path.push('.');
                        path.push_str(&short(name));
                        let found = check(root, property, v, depth + 1, path);
                        path.truncate(len);
                        if found.is_some() {
                            return found;
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema @ Value::Object(_)) = obj.get("items") {
                let len = path.len();
                path.push_str("[]");
                for item in items {
                    if let Some(found) = check(root, item_schema, item, depth + 1, path) {
                        path.truncate(len);
                        return Some(found);
                    }
                }
                path.truncate(len);
            }
        }
        _ => {}
    }
    None
}

/// A property name as a path shows it: from the schema (so not a value), at most 40 characters.
fn short(name: &str) -> String {
    name.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::contradiction;
    use serde_json::json;

    #[test]
    fn kinds_and_required_properties_are_compared() {
        let schema = json!({"type": "array", "items": {"$ref": "#/$defs/user"}, "$defs": {
            "user": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "age": {"type": "number"}}}
        }});
        assert_eq!(
            contradiction(&schema, &json!([{"id": "a", "age": 3}])),
            None
        );
        assert_eq!(
            contradiction(&schema, &json!(null)).as_deref(),
            Some("declared array, observed null")
        );
        assert_eq!(
            contradiction(&schema, &json!([{"id": "a"}, {"id": 7}])).as_deref(),
            Some("at [].id: declared string, observed integer")
        );
        assert_eq!(
            contradiction(&schema, &json!([{"age": 1.5}])).as_deref(),
            Some("at [].id: declared required, observed missing")
        );
        // Unions, nullable, and integers as numbers.
        let schema = json!({"anyOf": [{"type": "array"}, {"type": "null"}]});
        assert_eq!(contradiction(&schema, &json!(null)), None);
        assert_eq!(
            contradiction(&schema, &json!("x")).as_deref(),
            Some("declared array, observed string")
        );
        let schema = json!({"type": "number", "nullable": true});
        assert_eq!(contradiction(&schema, &json!(null)), None);
        assert_eq!(contradiction(&schema, &json!(3)), None);
    }

    #[test]
    fn hostile_schemas_end() {
        let cycle = json!({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}});
        assert_eq!(contradiction(&cycle, &json!(1)), None);
        let mut deep = json!({"type": "string"});
        let mut value = json!(1);
        for _ in 0..500 {
            deep = json!({"type": "object", "properties": {"a": deep}});
            value = json!({ "a": value });
        }
        assert_eq!(contradiction(&deep, &value), None);
        assert_eq!(
            contradiction(&json!({"$ref": "http://x/y"}), &json!(1)),
            None
        );
    }
}
