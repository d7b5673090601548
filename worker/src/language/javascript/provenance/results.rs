//! What a tool's value really was: its latest result, parsed ([`Results`]), and a path
//! walked through it ([`walk`]), loops included ([`walk_each`]).

use super::super::bridge::MAX_REMEMBERED_RESULT;
use super::bindings::Key;
use rquickjs::{Ctx, Type, Value};
use std::cell::RefCell;
use std::collections::HashMap;

/// Tools' latest results, parsed (once each) when an explanation needs them.
pub(super) struct Results<'c, 'js> {
    pub(super) ctx: &'c Ctx<'js>,
    latest: &'c dyn Fn(&str) -> Option<String>,
    parsed: RefCell<HashMap<String, Option<Value<'js>>>>,
}

impl<'c, 'js> Results<'c, 'js> {
    pub(super) fn new(ctx: &'c Ctx<'js>, latest: &'c dyn Fn(&str) -> Option<String>) -> Self {
        Results {
            ctx,
            latest,
            parsed: RefCell::new(HashMap::new()),
        }
    }

    pub(super) fn of(&self, tool: &str) -> Option<Value<'js>> {
        if let Some(found) = self.parsed.borrow().get(tool) {
            return found.clone();
        }
        let value = (self.latest)(tool)
            .filter(|json| json.len() <= MAX_REMEMBERED_RESULT)
            .and_then(|json| match self.ctx.json_parse(json) {
                Ok(value) => Some(value),
                Err(_) => {
                    // A result that no longer parses (the heap is nearly full): no explanation.
                    let _ = self.ctx.catch();
                    None
                }
            });
        self.parsed
            .borrow_mut()
            .insert(tool.to_owned(), value.clone());
        value
    }
}

/// One step of a walk through a parsed JSON value.
enum Walked<'js> {
    Found(Value<'js>),
    /// Not there: the program read `undefined`.
    Missing,
    /// Something the JSON does not hold (a method of arrays, strings…): the walk stops.
    Opaque,
}

/// `value[key]`, for a value made by `JSON.parse`: own data properties only, so nothing the
/// program put on the prototypes runs or counts.
fn child<'js>(ctx: &Ctx<'js>, value: &Value<'js>, key: &Key) -> Walked<'js> {
    let name = match key {
        Key::Name(name) => name.as_str(),
        Key::Index(_) => "",
        Key::Each => return Walked::Opaque,
    };
    match value.type_of() {
        Type::Array => {
            let Some(array) = value.as_array() else {
                return Walked::Opaque;
            };
            match key {
                Key::Index(i) if (*i as usize) < array.len() => match array.get(*i as usize) {
                    Ok(v) => Walked::Found(v),
                    Err(_) => Walked::Opaque,
                },
                Key::Index(_) => Walked::Missing,
                Key::Name(n) if n == "length" => {
                    Walked::Found(Value::new_number(ctx.clone(), array.len() as f64))
                }
                Key::Name(n) if ARRAY_METHODS.contains(&n.as_str()) || is_object_method(n) => {
                    Walked::Opaque
                }
                Key::Name(_) => Walked::Missing,
                Key::Each => Walked::Opaque,
            }
        }
        Type::Object => {
            let Some(object) = value.as_object() else {
                return Walked::Opaque;
            };
            let wanted = match key {
                Key::Name(n) => n.clone(),
                Key::Index(i) => i.to_string(),
                Key::Each => return Walked::Opaque,
            };
            for (k, v) in object.props::<String, Value>().flatten() {
                if k == wanted {
                    return Walked::Found(v);
                }
            }
            if is_object_method(&wanted) {
                Walked::Opaque
            } else {
                Walked::Missing
            }
        }
        Type::String => match key {
            Key::Name(n) if n == "length" => Walked::Opaque,
            Key::Name(n) if STRING_METHODS.contains(&n.as_str()) || is_object_method(n) => {
                Walked::Opaque
            }
            Key::Name(_) => Walked::Missing,
            // A character, or `undefined` past the end: not worth telling apart.
            Key::Index(_) | Key::Each => Walked::Opaque,
        },
        Type::Int | Type::Float => {
            if NUMBER_METHODS.contains(&name) || is_object_method(name) {
                Walked::Opaque
            } else {
                Walked::Missing
            }
        }
        Type::Bool => {
            if is_object_method(name) {
                Walked::Opaque
            } else {
                Walked::Missing
            }
        }
        _ => Walked::Opaque,
    }
}

pub(super) fn is_object_method(name: &str) -> bool {
    OBJECT_METHODS.contains(&name)
}

const OBJECT_METHODS: &[&str] = &[
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toString",
    "toLocaleString",
    "valueOf",
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];

pub(super) const ARRAY_METHODS: &[&str] = &[
    "at",
    "concat",
    "copyWithin",
    "entries",
    "every",
    "fill",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "flat",
    "flatMap",
    "forEach",
    "includes",
    "indexOf",
    "join",
    "keys",
    "lastIndexOf",
    "map",
    "pop",
    "push",
    "reduce",
    "reduceRight",
    "reverse",
    "shift",
    "slice",
    "some",
    "sort",
    "splice",
    "toReversed",
    "toSorted",
    "toSpliced",
    "unshift",
    "values",
    "with",
];

pub(super) const STRING_METHODS: &[&str] = &[
    "at",
    "charAt",
    "charCodeAt",
    "codePointAt",
    "concat",
    "endsWith",
    "includes",
    "indexOf",
    "isWellFormed",
    "lastIndexOf",
    "localeCompare",
    "match",
    "matchAll",
    "normalize",
    "padEnd",
    "padStart",
    "repeat",
    "replace",
    "replaceAll",
    "search",
    "slice",
    "split",
    "startsWith",
    "substring",
    "substr",
    "toLocaleLowerCase",
    "toLocaleUpperCase",
    "toLowerCase",
    "toUpperCase",
    "toWellFormed",
    "trim",
    "trimEnd",
    "trimStart",
    "trimLeft",
    "trimRight",
];

const NUMBER_METHODS: &[&str] = &["toExponential", "toFixed", "toPrecision"];

pub(super) const PROMISE_METHODS: &[&str] = &["then", "catch", "finally"];

/// The kind a method `name` belongs to, when `value` is not of that kind: `not a string`.
pub(super) fn method_of(value: &Value<'_>, name: &str) -> Option<&'static str> {
    let kind = value.type_of();
    if ARRAY_METHODS.contains(&name) && kind != Type::Array {
        Some("an array")
    } else if STRING_METHODS.contains(&name) && kind != Type::String {
        Some("a string")
    } else if NUMBER_METHODS.contains(&name) && !matches!(kind, Type::Int | Type::Float) {
        Some("a number")
    } else {
        None
    }
}

/// Walks `path` from `value`: the value at its end, or where it broke (the index of the step
/// that found nothing, and the value it was read from).
pub(super) enum Walk<'js> {
    Found(Value<'js>),
    /// `path[i]` is missing (or null, `true`) in `parent`.
    Broke {
        i: usize,
        parent: Value<'js>,
        null: bool,
    },
    Opaque,
}

pub(super) fn walk<'js>(ctx: &Ctx<'js>, value: Value<'js>, path: &[Key]) -> Walk<'js> {
    if path.iter().filter(|k| **k == Key::Each).count() > MAX_EACH_IN_PATH {
        return Walk::Opaque;
    }
    let mut current = value;
    for (i, key) in path.iter().enumerate() {
        if *key == Key::Each {
            return walk_each(ctx, &current, i, &path[i + 1..]);
        }
        match child(ctx, &current, key) {
            Walked::Found(next) if next.is_null() => {
                return Walk::Broke {
                    i,
                    parent: current,
                    null: true,
                };
            }
            Walked::Found(next) => current = next,
            Walked::Missing => {
                return Walk::Broke {
                    i,
                    parent: current,
                    null: false,
                };
            }
            Walked::Opaque => return Walk::Opaque,
        }
    }
    Walk::Found(current)
}

/// Loops nest at most this deep in a path (each multiplies the walk by an array's length).
pub(super) const MAX_EACH_IN_PATH: usize = 2;
/// Elements of an array walked for a loop over it; longer arrays are not explained.
pub(super) const MAX_EACH: usize = 1000;

/// The walk of `rest` from every element of `array` (the value `path[i]` loops over): the
/// loop may have failed on any of them, so the walk agrees only when every element breaks at
/// the same step the same way (or every one gets through, to values of one type). The first
/// element stands for all in the explanation.
fn walk_each<'js>(ctx: &Ctx<'js>, array: &Value<'js>, i: usize, rest: &[Key]) -> Walk<'js> {
    let Some(elements) = array.as_array() else {
        return Walk::Opaque;
    };
    let n = elements.len();
    // An empty array runs no loop body; a long one is too costly to check.
    if n == 0 || n > MAX_EACH {
        return Walk::Opaque;
    }
    let mut first: Option<Walk<'js>> = None;
    for k in 0..n {
        let Ok(element) = elements.get::<Value>(k) else {
            return Walk::Opaque;
        };
        let this = match walk(ctx, element, rest) {
            Walk::Broke {
                i: at,
                parent,
                null,
            } => Walk::Broke {
                i: i + 1 + at,
                parent,
                null,
            },
            other => other,
        };
        let agrees = match (&first, &this) {
            (_, Walk::Opaque) => false,
            (None, _) => true,
            (Some(Walk::Found(a)), Walk::Found(b)) => a.type_of() == b.type_of(),
            (Some(Walk::Broke { i: a, null: x, .. }), Walk::Broke { i: b, null: y, .. }) => {
                a == b && x == y
            }
            _ => false,
        };
        if !agrees {
            return Walk::Opaque;
        }
        if first.is_none() {
            first = Some(this);
        }
    }
    first.unwrap_or(Walk::Opaque)
}
