//! Shapes of tool results in Python's words: `a dict with keys entities, relations`, `a list
//! of 3 dicts with keys name, entityType, …`, `a str of JSON text`; key names, types and
//! lengths only, never a value (a string's content could be a secret in a form the scanner
//! has not seen). And the walk of a path through a result.

use super::bindings::Key;
use monty_types::MontyObject;

/// Characters of key names listed, at most.
const MAX_KEYS_TEXT: usize = 90;
/// Longest key name shown whole.
const MAX_KEY: usize = 30;
/// Longest string looked into for JSON text a program forgot to parse.
const MAX_JSON_TEXT: usize = 64 * 1024;
/// Elements of a list visited by a loop in a path, in all.
const MAX_EACH: usize = 1000;

/// The values at `path` in `root` (several through a loop), or where the walk broke: the
/// value that had no such key or index, and at which step.
pub enum Walk<'v> {
    Found(Vec<&'v MontyObject>),
    Broke {
        step: usize,
        parent: &'v MontyObject,
    },
}

pub fn walk<'v>(root: &'v MontyObject, path: &[Key]) -> Walk<'v> {
    let mut values = vec![root];
    for (step, key) in path.iter().enumerate() {
        let mut next = Vec::new();
        for value in values {
            match key {
                Key::Each => match value {
                    MontyObject::List(items) => {
                        next.extend(items.iter().take(MAX_EACH.saturating_sub(next.len())));
                    }
                    _ => {
                        return Walk::Broke {
                            step,
                            parent: value,
                        };
                    }
                },
                _ => match child(value, key) {
                    Some(found) => next.push(found),
                    None => {
                        return Walk::Broke {
                            step,
                            parent: value,
                        };
                    }
                },
            }
        }
        values = next;
    }
    Walk::Found(values)
}

/// `value[key]`, as Python reads it.
pub fn child<'v>(value: &'v MontyObject, key: &Key) -> Option<&'v MontyObject> {
    match (value, key) {
        (MontyObject::Dict(pairs), Key::Name(name)) => pairs
            .iter()
            .find(|(k, _)| matches!(k, MontyObject::String(s) if s == name))
            .map(|(_, v)| v),
        (MontyObject::List(items), Key::Index(i)) => {
            let n = i64::try_from(items.len()).ok()?;
            let i = if *i < 0 { n + i } else { *i };
            items.get(usize::try_from(i).ok()?)
        }
        _ => None,
    }
}

fn short(key: &str) -> String {
    if key.chars().count() > MAX_KEY {
        let cut: String = key.chars().take(MAX_KEY - 1).collect();
        format!("{cut}…")
    } else {
        key.to_owned()
    }
}

/// The key names of a dict, cut to a length.
pub fn keys(value: &MontyObject) -> Option<String> {
    let MontyObject::Dict(pairs) = value else {
        return None;
    };
    let mut text = String::new();
    for (key, _) in pairs.iter() {
        let name = match key {
            MontyObject::String(s) => short(s),
            other => other.type_name().to_owned(),
        };
        if !text.is_empty() && text.len() + name.len() > MAX_KEYS_TEXT {
            text.push_str(&format!(", … ({} keys)", pairs.len()));
            return Some(text);
        }
        if !text.is_empty() {
            text.push_str(", ");
        }
        text.push_str(&name);
    }
    Some(text)
}

/// A value's kind in a word or two: `a dict`, `a list of 3`, `a str`, `None`.
fn kind(value: &MontyObject) -> String {
    match value {
        MontyObject::None => "None".to_owned(),
        MontyObject::Dict(p) if p.is_empty() => "an empty dict".to_owned(),
        MontyObject::Dict(_) => "a dict".to_owned(),
        MontyObject::List(items) if items.is_empty() => "an empty list".to_owned(),
        MontyObject::List(items) => format!("a list of {}", items.len()),
        MontyObject::String(_) => "a str".to_owned(),
        MontyObject::Int(_) | MontyObject::BigInt(_) => "an int".to_owned(),
        MontyObject::Float(_) => "a float".to_owned(),
        MontyObject::Bool(_) => "a bool".to_owned(),
        other => format!("a {}", other.type_name()),
    }
}

/// What a value is, without its content.
pub fn shape(value: &MontyObject) -> String {
    match value {
        MontyObject::Dict(p) if !p.is_empty() => {
            format!("a dict with keys {}", keys(value).unwrap_or_default())
        }
        MontyObject::List(items) if !items.is_empty() => {
            let n = items.len();
            let first = &items[0];
            let same = items
                .iter()
                .take(100)
                .all(|v| v.type_name() == first.type_name());
            match first {
                MontyObject::Dict(p) if same && !p.is_empty() => format!(
                    "a list of {n} dicts with keys {}",
                    keys(first).unwrap_or_default()
                ),
                _ if same => format!("a list of {n} {}s", first.type_name()),
                _ => format!("a list of {n}"),
            }
        }
        MontyObject::String(s) => match json_text(s) {
            Some(inner) => format!("a str of JSON text ({inner})"),
            None => "a str".to_owned(),
        },
        other => kind(other),
    }
}

/// The shape of the JSON a string holds, when it holds a JSON object or array.
pub fn json_text(s: &str) -> Option<String> {
    let trimmed = s.trim_start();
    if s.len() > MAX_JSON_TEXT || !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    let parsed = super::super::values::from_json(s).ok()?;
    match &parsed {
        MontyObject::Dict(_) | MontyObject::List(_) => Some(shape(&parsed)),
        _ => None,
    }
}

/// `["entities"][0]` for a path (`[…]` for every element of a loop).
pub fn path_text(path: &[Key]) -> String {
    let mut text = String::new();
    for key in path {
        match key {
            Key::Name(n) => text.push_str(&format!("[{:?}]", short(n))),
            Key::Index(i) => text.push_str(&format!("[{i}]")),
            Key::Each => text.push_str("[…]"),
        }
    }
    text
}

/// Where a value is: `the result of tools.memory.read_graph (line 1)`, `["entities"][0] of
/// the result of …`, `an element of ["entities"] of the result of …`.
pub fn origin_text(tool: &str, line: u32, path: &[Key]) -> String {
    let whole = format!("the result of tools.{tool} (line {line})");
    match path.iter().rposition(|k| *k == Key::Each) {
        Some(i) => {
            let after = path_text(&path[i + 1..]);
            let element = format!("an element of {}", origin_text(tool, line, &path[..i]));
            if after.is_empty() {
                element
            } else {
                format!("{after} of {element}")
            }
        }
        None if path.is_empty() => whole,
        None => format!("{} of {whole}", path_text(path)),
    }
}
