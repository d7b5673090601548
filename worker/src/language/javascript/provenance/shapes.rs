//! Shapes: keys, types, lengths; never a string's content. What a value is, and where in a
//! tool's result it was, in the words of an explanation.

use super::bindings::Key;
use super::results::{ARRAY_METHODS, STRING_METHODS};
use super::source_text::is_name;
use rquickjs::{Ctx, Type, Value};

const MAX_SHAPE: usize = 150;
/// Longest explanation: what an agent reads must stay short (shapes are cut before this).
pub(super) const MAX_EXPLANATION: usize = 300;
/// Longest string looked into for JSON text a program forgot to parse.
const MAX_JSON_TEXT: usize = 64 * 1024;
const MAX_KEY: usize = 40;
/// Array elements looked at to say their type.
const MAX_ITEMS: usize = 100;

fn short_key(key: &str) -> String {
    if key.chars().count() > MAX_KEY {
        let cut: String = key.chars().take(MAX_KEY - 1).collect();
        format!("{cut}…")
    } else {
        key.to_owned()
    }
}

/// A value's type in a few words.
fn type_word(value: &Value<'_>) -> String {
    match value.type_of() {
        Type::Null => "null".to_owned(),
        Type::Array => match value.as_array().map_or(0, |a| a.len()) {
            0 => "empty array".to_owned(),
            n => format!("array of {n}"),
        },
        Type::Object => "object".to_owned(),
        Type::String => "string".to_owned(),
        Type::Int | Type::Float => "number".to_owned(),
        Type::Bool => "boolean".to_owned(),
        _ => "value".to_owned(),
    }
}

/// What a value is: `an object with keys a (string), b (array of 2)`, `an empty array`, `a
/// string`.
fn shape(value: &Value<'_>) -> String {
    match value.type_of() {
        Type::Array => {
            let Some(array) = value.as_array() else {
                return "an array".to_owned();
            };
            let n = array.len();
            if n == 0 {
                return "an empty array".to_owned();
            }
            let items: Vec<Value> = (0..n.min(MAX_ITEMS))
                .filter_map(|i| array.get(i).ok())
                .collect();
            let kind = items.first().map(type_word).unwrap_or_default();
            if items.iter().any(|v| type_word(v) != kind) {
                return format!("an array of {n}");
            }
            if kind == "object"
                && let Some(first) = items.first().and_then(Value::as_object)
            {
                let mut keys = Vec::new();
                let mut used = 0;
                let mut all = 0;
                for key in first.keys::<String>().flatten() {
                    all += 1;
                    if used < 120 {
                        used += key.len() + 2;
                        keys.push(short_key(&key));
                    }
                }
                let more = if keys.len() < all { ", …" } else { "" };
                return format!(
                    "an array of {n} (the first an object with keys {}{more})",
                    keys.join(", ")
                );
            }
            format!("an array of {n} ({kind})")
        }
        Type::Object => {
            let Some(object) = value.as_object() else {
                return "an object".to_owned();
            };
            let mut parts = Vec::new();
            let mut used = 0;
            let mut all = 0;
            let mut cut = false;
            for (key, v) in object.props::<String, Value>().flatten() {
                all += 1;
                if cut {
                    continue;
                }
                let part = format!("{} ({})", short_key(&key), type_word(&v));
                if used + part.len() > MAX_SHAPE - 40 {
                    cut = true;
                    continue;
                }
                used += part.len() + 2;
                parts.push(part);
            }
            if all == 0 {
                return "an empty object".to_owned();
            }
            if cut {
                parts.push(format!("… {all} keys in all"));
            }
            format!("an object with keys {}", parts.join(", "))
        }
        Type::String => "a string".to_owned(),
        Type::Int | Type::Float => "a number".to_owned(),
        Type::Bool => "a boolean".to_owned(),
        Type::Null => "null".to_owned(),
        _ => "a value".to_owned(),
    }
}

/// `.items[0] of the result of tools.x.search`; `.owner of an element of .items of …` through
/// a loop.
pub(super) fn origin_text(tool: &str, path: &[Key]) -> String {
    let mut text = format!("the result of tools.{tool}");
    for part in path.split(|k| *k == Key::Each).enumerate() {
        let (n, keys) = part;
        if n > 0 {
            text = format!("an element of {text}");
        }
        if keys.is_empty() {
            continue;
        }
        let mut steps = String::new();
        for key in keys {
            match key {
                Key::Index(i) => steps.push_str(&format!("[{i}]")),
                Key::Name(name) if is_name(name) => steps.push_str(&format!(".{name}")),
                Key::Name(name) => steps.push_str(&format!("[{name:?}]")),
                Key::Each => {}
            }
        }
        text = format!("{steps} of {text}");
    }
    text
}

/// The shape of the value at `path`: through a loop, the first element's stands for all.
pub(super) fn shape_at(value: &Value<'_>, path: &[Key]) -> String {
    if path.contains(&Key::Each) {
        format!("the first {}", shape(value))
    } else {
        shape(value)
    }
}

/// What a program needed a value to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wanted {
    /// An object: a property was read from it.
    Object,
    /// An array: an array method was called or it was iterated.
    Array,
    /// A string: a string method was called.
    String,
    /// A number: a number method was called.
    Number,
    /// A method the value does not have, of no kind in particular.
    Method,
}

impl Wanted {
    /// What a call of method `name` needs its receiver to be.
    pub(super) fn method(name: &str) -> Wanted {
        if ARRAY_METHODS.contains(&name) {
            Wanted::Array
        } else if STRING_METHODS.contains(&name) {
            Wanted::String
        } else if matches!(name, "toFixed" | "toPrecision" | "toExponential") {
            Wanted::Number
        } else {
            Wanted::Method
        }
    }
}

/// How to turn `value` (named `name` in the program) into what the program needed, when
/// it says: `; it is JSON text (an object with keys a, b): JSON.parse(s) first`,
/// `; convert it: String(n)`, `; its arrays: r.items`, `; arrays have .filter, .map, …`.
/// Names keys and kinds only, never a string's content.
pub(super) fn conversion(ctx: &Ctx<'_>, value: &Value<'_>, name: &str, wanted: Wanted) -> String {
    match (value.type_of(), wanted) {
        (Type::String, Wanted::Object | Wanted::Array | Wanted::Number) => {
            json_text(ctx, value, name, wanted).unwrap_or_default()
        }
        (Type::Int | Type::Float | Type::Bool, Wanted::String) => {
            format!("; convert it first: String({name})")
        }
        (Type::Object, Wanted::Array) => {
            let Some(object) = value.as_object() else {
                return String::new();
            };
            let arrays: Vec<String> = object
                .props::<String, Value>()
                .flatten()
                .filter(|(k, v)| v.is_array() && is_name(k))
                .take(3)
                .map(|(k, _)| format!("{name}.{}", short_key(&k)))
                .collect();
            match arrays.len() {
                0 => String::new(),
                1 => format!("; its array is {}", arrays[0]),
                _ => format!("; its arrays are {}", arrays.join(", ")),
            }
        }
        (Type::Array, Wanted::Method) => {
            "; arrays have .filter, .map, .find, .forEach, .some, .reduce, .length".to_owned()
        }
        (Type::String, Wanted::Method) => {
            "; strings have .split, .slice, .includes, .trim, .length".to_owned()
        }
        _ => String::new(),
    }
}

/// A string that is JSON text (or a number written out), and how to parse it.
fn json_text(ctx: &Ctx<'_>, value: &Value<'_>, name: &str, wanted: Wanted) -> Option<String> {
    let text = value.as_string()?.to_string().ok()?;
    let trimmed = text.trim();
    if trimmed.len() > MAX_JSON_TEXT {
        return None;
    }
    if wanted == Wanted::Number {
        return (!trimmed.is_empty() && trimmed.parse::<f64>().is_ok_and(f64::is_finite))
            .then(|| format!("; it is a number written out: Number({name}) first"));
    }
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    let parsed = match ctx.json_parse(trimmed) {
        Ok(parsed) => parsed,
        Err(_) => {
            let _ = ctx.catch();
            return None;
        }
    };
    let what = match parsed.type_of() {
        Type::Array => format!("an {}", type_word(&parsed)),
        Type::Object => {
            let object = parsed.as_object()?;
            let mut keys = Vec::new();
            let mut used = 0;
            let mut all = 0;
            for key in object.keys::<String>().flatten() {
                all += 1;
                if used < 60 {
                    used += key.len() + 2;
                    keys.push(short_key(&key));
                }
            }
            let more = if keys.len() < all { ", …" } else { "" };
            if keys.is_empty() {
                "an empty object".to_owned()
            } else {
                format!("an object with keys {}{more}", keys.join(", "))
            }
        }
        _ => return None,
    };
    Some(format!(
        "; it is JSON text ({what}): JSON.parse({name}) first"
    ))
}

/// `text` cut to [`MAX_EXPLANATION`] characters.
pub(super) fn at_most(text: String) -> String {
    if text.chars().count() <= MAX_EXPLANATION {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_EXPLANATION - 1).collect();
    cut.push('…');
    cut
}

/// `, not an object` after a read of a key on a string, number, boolean or array (by name).
pub(super) fn not_an_object(parent: &Value<'_>, key: &Key) -> &'static str {
    match (parent.type_of(), key) {
        (Type::String | Type::Int | Type::Float | Type::Bool, _) => ", not an object",
        (Type::Array, Key::Name(_)) => ", not an object",
        _ => "",
    }
}
#[cfg(test)]
mod tests {
    use super::super::results::{Walk, walk};
    use super::*;

    #[test]
    fn shapes_never_show_strings() {
        let runtime = rquickjs::Runtime::new().expect("runtime");
        let context = rquickjs::Context::full(&runtime).expect("context");
        context.with(|ctx| {
            let parse = |json: &str| ctx.json_parse(json).expect("json");
            assert_eq!(
                shape(&parse(r#"{"token":"ghp_secret","n":1,"ok":true,"l":[1,2],"e":[],"o":{},"z":null}"#)),
                "an object with keys token (string), n (number), ok (boolean), l (array of 2), e (empty array), o (object), z (null)"
            );
            assert_eq!(shape(&parse("[]")), "an empty array");
            assert_eq!(shape(&parse(r#"["a","b"]"#)), "an array of 2 (string)");
            assert_eq!(shape(&parse(r#"[1,"b"]"#)), "an array of 2");
            assert_eq!(
                shape(&parse(r#"[{"id":1,"name":"x"}]"#)),
                "an array of 1 (the first an object with keys id, name)"
            );
            assert_eq!(shape(&parse(r#""secret""#)), "a string");
            assert_eq!(shape(&parse("{}")), "an empty object");
            let wide = format!(
                "{{{}}}",
                (0..100)
                    .map(|i| format!("\"k{i}\":{i}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let text = shape(&parse(&wide));
            assert!(text.len() <= 300 && text.ends_with("… 100 keys in all"), "{text}");
            // The walk reads own properties only: a key the program put on Object.prototype
            // is still missing.
            ctx.eval::<(), _>("Object.prototype.nodes = [1];")
                .expect("eval");
            assert!(matches!(
                walk(&ctx, parse(r#"{"a":{}}"#), &[Key::Name("a".into()), Key::Name("nodes".into())]),
                Walk::Broke { i: 1, null: false, .. }
            ));
            assert!(matches!(
                walk(&ctx, parse(r#"{"a":[1]}"#), &[Key::Name("a".into()), Key::Name("map".into())]),
                Walk::Opaque
            ));
        });
    }

    #[test]
    fn origin_texts() {
        assert_eq!(origin_text("x.y", &[]), "the result of tools.x.y");
        assert_eq!(
            origin_text(
                "x.y",
                &[
                    Key::Name("items".into()),
                    Key::Index(0),
                    Key::Name("a-b".into())
                ]
            ),
            ".items[0][\"a-b\"] of the result of tools.x.y"
        );
    }
}
