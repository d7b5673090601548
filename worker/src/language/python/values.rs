//! Python values ⇄ JSON text, at the two places they cross: tool-call arguments and the
//! program's result (Python → JSON), tool results (JSON → Python).
//!
//! Python → JSON follows `json.dumps` where it can, with these rules:
//! - `None`, `bool`, `int` (within 64 bits), `float`, `str`, `list`, `tuple`, `dict` are
//!   themselves; `NaN` and `±inf` become `null` (as in JavaScript's `JSON.stringify`);
//! - dict keys that are `int`, `float`, `bool` or `None` become strings, as `json.dumps` makes
//!   them; other keys are not JSON;
//! - `datetime`/`date`/`time` become their ISO text; a dataclass instance becomes the object
//!   of its fields;
//! - anything else (sets, bytes, functions, ints beyond 64 bits, cycles) is not JSON: the error
//!   names the JSON path (`$.a.b[2]`) and what to write instead.
//!
//! Both directions recurse once per level of nesting: Python → JSON stops at [`MAX_DEPTH`]
//! (the interpreter's own conversion is bounded by its recursion limit before that), JSON →
//! Python at serde_json's recursion limit (128).

use monty_types::{DictPairs, MontyObject};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Deepest nesting converted to JSON (serde_json's own parse limit, the other way, is 128).
pub const MAX_DEPTH: usize = 128;

/// Why a Python value has no JSON form: what it is and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at {path} has no JSON form{advice}")]
pub struct NotJson {
    pub what: String,
    pub path: String,
    pub advice: &'static str,
}

/// The JSON text of `value`.
pub fn to_json(value: &MontyObject) -> Result<String, NotJson> {
    let mut out = String::new();
    let mut path = String::from("$");
    write_value(value, &mut out, &mut path, 0)?;
    Ok(out)
}

fn not_json(what: impl Into<String>, path: &str, advice: &'static str) -> NotJson {
    NotJson {
        what: what.into(),
        path: path.to_owned(),
        advice,
    }
}

/// A JSON string literal (serde_json's escaping).
fn push_string(out: &mut String, s: &str) {
    out.push_str(&serde_json::Value::String(s.to_owned()).to_string());
}

fn write_value(
    value: &MontyObject,
    out: &mut String,
    path: &mut String,
    depth: usize,
) -> Result<(), NotJson> {
    if depth >= MAX_DEPTH {
        return Err(not_json(
            format!("a value nested more than {MAX_DEPTH} levels deep"),
            path,
            "; flatten it",
        ));
    }
    match value {
        MontyObject::None => out.push_str("null"),
        MontyObject::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        MontyObject::Int(i) => out.push_str(&i.to_string()),
        MontyObject::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => out.push_str(&n.to_string()),
            None => out.push_str("null"),
        },
        MontyObject::String(s) => push_string(out, s),
        MontyObject::List(items) | MontyObject::Tuple(items) => array(items, out, path, depth)?,
        MontyObject::NamedTuple { values, .. } => array(values, out, path, depth)?,
        MontyObject::Dict(pairs) => object(pairs, out, path, depth)?,
        MontyObject::ClassInstance(instance) => object(&instance.attrs, out, path, depth)?,
        MontyObject::Date(d) => {
            push_string(out, &format!("{:04}-{:02}-{:02}", d.year, d.month, d.day))
        }
        MontyObject::DateTime(_) | MontyObject::Time(_) | MontyObject::TimeDelta(_) => {
            push_string(out, &value.to_string());
        }
        MontyObject::BigInt(_) => {
            return Err(not_json(
                "an int beyond 64 bits",
                path,
                "; convert it with str() or float()",
            ));
        }
        MontyObject::Set(_) | MontyObject::FrozenSet(_) => {
            return Err(not_json(
                "a set",
                path,
                "; convert it with sorted() or list()",
            ));
        }
        MontyObject::Bytes(_) => {
            return Err(not_json(
                "a bytes value",
                path,
                "; decode it with .decode() or base64",
            ));
        }
        MontyObject::Cycle(..) => {
            return Err(not_json(
                "a reference back to a containing value (a cycle)",
                path,
                "; return a copy without the cycle",
            ));
        }
        MontyObject::Repr(r) if r.starts_with("<coroutine") => {
            return Err(not_json(
                "a coroutine: a tool call (or async function) that was not awaited",
                path,
                "; add `await` before the call (`await tools.<namespace>.<tool>(…)`)",
            ));
        }
        MontyObject::Repr(r) if r == "<deeply nested>" => {
            return Err(not_json(
                "a value nested deeper than the recursion limit",
                path,
                "; flatten it",
            ));
        }
        other => {
            return Err(not_json(
                format!("a {}", other.type_name()),
                path,
                "; return data (dicts, lists, str, int, float, bool or None)",
            ));
        }
    }
    Ok(())
}

fn array(
    items: &[MontyObject],
    out: &mut String,
    path: &mut String,
    depth: usize,
) -> Result<(), NotJson> {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let len = path.len();
        path.push_str(&format!("[{i}]"));
        write_value(item, out, path, depth + 1)?;
        path.truncate(len);
    }
    out.push(']');
    Ok(())
}

fn object(
    pairs: &DictPairs,
    out: &mut String,
    path: &mut String,
    depth: usize,
) -> Result<(), NotJson> {
    out.push('{');
    for (i, (key, value)) in pairs.iter().enumerate() {
        let key = match key {
            MontyObject::String(s) => s.clone(),
            MontyObject::Int(i) => i.to_string(),
            MontyObject::Bool(true) => "true".to_owned(),
            MontyObject::Bool(false) => "false".to_owned(),
            MontyObject::None => "null".to_owned(),
            MontyObject::Float(f) => MontyObject::Float(*f).to_string(),
            other => {
                return Err(not_json(
                    format!("a dict key of type {}", other.type_name()),
                    path,
                    "; use str keys",
                ));
            }
        };
        if i > 0 {
            out.push(',');
        }
        push_string(out, &key);
        out.push(':');
        let len = path.len();
        push_key(path, &key);
        write_value(value, out, path, depth + 1)?;
        path.truncate(len);
    }
    out.push('}');
    Ok(())
}

/// `.key` for identifiers, `["key"]` otherwise.
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        push_string(path, key);
        path.push(']');
    }
}

/// A tool result (JSON text) as a Python value, keys in the order the text has them. `Err`:
/// the text is not JSON the worker takes (invalid, or nested deeper than serde_json's
/// recursion limit of 128, which also bounds the recursion of the visitor below).
pub fn from_json(text: &str) -> Result<MontyObject, String> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Python
        .deserialize(&mut deserializer)
        .map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// Builds a [`MontyObject`] straight from the parser's events.
#[derive(Clone, Copy)]
struct Python;

impl<'de> DeserializeSeed<'de> for Python {
    type Value = MontyObject;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<MontyObject, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Python {
    type Value = MontyObject;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_unit<E>(self) -> Result<MontyObject, E> {
        Ok(MontyObject::None)
    }

    fn visit_bool<E>(self, b: bool) -> Result<MontyObject, E> {
        Ok(MontyObject::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<MontyObject, E> {
        Ok(MontyObject::Int(i))
    }

    fn visit_u64<E>(self, u: u64) -> Result<MontyObject, E> {
        Ok(match i64::try_from(u) {
            Ok(i) => MontyObject::Int(i),
            Err(_) => MontyObject::BigInt(u.into()),
        })
    }

    fn visit_f64<E>(self, f: f64) -> Result<MontyObject, E> {
        Ok(MontyObject::Float(f))
    }

    fn visit_str<E>(self, s: &str) -> Result<MontyObject, E> {
        Ok(MontyObject::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<MontyObject, E> {
        Ok(MontyObject::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MontyObject, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Python)? {
            items.push(item);
        }
        Ok(MontyObject::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MontyObject, A::Error> {
        let mut pairs = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Python)?;
            pairs.push((MontyObject::String(key), value));
        }
        Ok(MontyObject::Dict(pairs.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(pairs: Vec<(MontyObject, MontyObject)>) -> MontyObject {
        MontyObject::Dict(pairs.into())
    }

    #[test]
    fn json_round_trips_through_python_values() {
        let text = r#"{"a":[1,2.5,"x",true,null],"b":{"c":-3},"big":18446744073709551615}"#;
        let value = from_json(text).unwrap();
        let MontyObject::Dict(pairs) = &value else {
            panic!("{value:?}");
        };
        assert_eq!(pairs.len(), 3);
        // The big number does not fit 64 signed bits: an int, which has no JSON form back.
        let err = to_json(&value).unwrap_err();
        assert_eq!(err.path, "$.big");
        let small = from_json(r#"{"a":[1,2.5,"x",true,null],"b":{"c":-3}}"#).unwrap();
        assert_eq!(
            to_json(&small).unwrap(),
            r#"{"a":[1,2.5,"x",true,null],"b":{"c":-3}}"#
        );
        // Keys keep the order the text has (Python dicts are ordered).
        let ordered = from_json(r#"{"b":1,"a":2}"#).unwrap();
        assert_eq!(to_json(&ordered).unwrap(), r#"{"b":1,"a":2}"#);
        assert!(from_json("[1] x").is_err(), "trailing text");
    }

    #[test]
    fn python_only_values_say_where_and_what_to_write() {
        let value = dict(vec![(
            MontyObject::String("tags".into()),
            MontyObject::List(vec![
                MontyObject::Int(1),
                MontyObject::Set(vec![MontyObject::Int(2)]),
            ]),
        )]);
        let err = to_json(&value).unwrap_err();
        assert_eq!(err.path, "$.tags[1]");
        assert_eq!(
            err.to_string(),
            "a set at $.tags[1] has no JSON form; convert it with sorted() or list()"
        );
        let keys = dict(vec![
            (MontyObject::Int(1), MontyObject::Float(f64::NAN)),
            (MontyObject::None, MontyObject::Tuple(vec![])),
            (MontyObject::String("a b".into()), MontyObject::Bool(false)),
        ]);
        assert_eq!(
            to_json(&keys).unwrap(),
            r#"{"1":null,"null":[],"a b":false}"#
        );
    }

    #[test]
    fn nesting_is_bounded_both_ways() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(from_json(&deep).is_err());
        let mut value = MontyObject::None;
        for _ in 0..MAX_DEPTH + 5 {
            value = MontyObject::List(vec![value]);
        }
        let err = to_json(&value).unwrap_err();
        assert!(err.what.contains("nested"), "{err}");
    }
}
