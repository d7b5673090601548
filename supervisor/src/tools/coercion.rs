//! Coercion of near misses: a value that misses a tool's JSON Schema in a trivial way whose
//! meaning is unambiguous (`"100"` where a number is wanted) is rewritten to the schema,
//! instead of the call being refused (arguments) or failed (a result that breaks a declared
//! output schema). A source's `coerce = "off"` turns it off.
//!
//! The rules, each only where the schema's `type` (or `enum`) does not take the value as it is:
//! - **number from string**: a string that is a whole JSON number in plain form (`"100"`,
//!   `"-1.5"`, `"2e3"`) for `number`; only digits (`"-12"`) for `integer`. Never `"12abc"`,
//!   `""`, `" 1"`, `"+1"`, `"007"`, `"0x10"`, `"1e999"`, `"NaN"`, an integer outside 64 bits, or
//!   a decimal with more than 15 significant digits (an `f64` would change it);
//! - **boolean from string**: exactly `"true"` or `"false"`; other spellings (`"True"`,
//!   `"1"`, `"yes"`) are not unambiguous across languages and stay errors;
//! - **string from scalar**: a number or boolean for a `string` (`5` → `"5"`);
//! - **wrap in array**: a scalar (string, number, boolean) for an array, as its one element
//!   (then coerced to the items' schema like any value);
//! - **null omitted**: `null` for a property that is not `required` and whose schema does not
//!   take `null` is left out; never for a required property;
//! - **enum case**: a string that is not a member of a string `enum` becomes the one member
//!   that equals it ignoring case; two such members (`"a"` and `"A"`) is ambiguous: none;
//! - **date format** (applied even when the type matches, since the validator does not assert
//!   formats): for `format: "date-time"`, an RFC 3339 date-time written with a space for the
//!   `T` (`2026-11-20 10:00:00Z`) or an offset without its colon (`+0200`) is rewritten; for
//!   `format: "date"`, a date-time at exactly midnight UTC becomes its date. A date alone is
//!   *not* made a date-time, nor a date-time without an offset given one (the time or zone
//!   would be invented), nor a date-time at another time or in another zone made a date (the
//!   time would be lost).
//!
//! Never: a `const` (nothing under a `const` is touched), a `pattern` mismatch (no rule
//! rewrites a string to fit a pattern; a number made a string must still fit it), anything
//! lossy. `anyOf`/`oneOf`: a value one branch takes as it is is walked into that branch (when
//! exactly one takes it); a value none takes is coerced only when exactly one branch can take
//! it after coercion; otherwise (ambiguous) not at all. `$ref`s within the document are
//! followed; others are not.
//!
//! A coercion is all or nothing: `coerce_valid` hands back the coerced value only if it then
//! satisfies the whole schema; otherwise the value stays as it came and its error is the
//! caller's. Schemas and values are untrusted (tool servers, programs): the walk is bounded in
//! depth and in work, and never panics.

use crate::agent_api::{Coercion, CoercionPlace, CoercionRule};
use airlock_policy::CoercePolicy;
use serde_json::{Map, Number, Value};
use std::cell::Cell;

/// Why a tool's schema cannot be used: it is not valid JSON Schema (the validator's own
/// message, which names the keyword at fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{0}")]
    NotJsonSchema(String),
}

/// `schema` compiled, or why it is not valid JSON Schema.
pub fn validator(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    jsonschema::validator_for(schema).map_err(|e| SchemaError::NotJsonSchema(e.to_string()))
}

/// A declared output schema, compiled, and kept for coercing results that break it.
#[derive(Debug)]
pub struct OutputSchema {
    pub validator: jsonschema::Validator,
    schema: Value,
}

impl OutputSchema {
    /// The schema compiled, or why it is not valid JSON Schema.
    pub fn compile(schema: &Value) -> Result<OutputSchema, SchemaError> {
        let validator = validator(schema)?;
        Ok(OutputSchema {
            validator,
            schema: schema.clone(),
        })
    }

    /// A result that breaks the schema, coerced to it (place `result`), when that helps.
    pub fn coerce(&self, value: &Value) -> Option<(Value, Vec<Coercion>)> {
        coerce_valid(&self.validator, &self.schema, value, CoercionPlace::Result)
    }
}

/// A result of a source that does not hold its results to their declared output schema
/// (OpenAPI, GraphQL): one that breaks it only trivially is coerced, with the coercions made,
/// when `policy` is `safe`; any other result is handed on as it came (the schema is the
/// document's promise, not a check).
pub fn mend_result(
    output: Option<&OutputSchema>,
    value: Value,
    policy: CoercePolicy,
) -> (Value, Vec<Coercion>) {
    let Some(output) = output else {
        return (value, Vec::new());
    };
    if !policy.is_safe() || output.validator.is_valid(&value) {
        return (value, Vec::new());
    }
    match output.coerce(&value) {
        Some((coerced, made)) => (coerced, made),
        None => (value, Vec::new()),
    }
}

/// How deep the walk goes into a schema and its value together (`$ref`s count).
pub(crate) const MAX_DEPTH: usize = 32;

/// How many schema nodes one coercion may visit (trial walks of `anyOf` branches included),
/// so a schema of nested unions cannot make a call expensive.
pub(crate) const MAX_VISITS: usize = 20_000;

/// More coercions than this in one value is no near miss: none are made.
pub(crate) const MAX_COERCIONS: usize = 256;

/// Longest string tried against each branch of a union.
const MAX_TRIAL_STRING: usize = 4096;

/// `value` coerced to `schema`, when the coerced value then satisfies `validator` (compiled
/// from the same `schema`) and something changed; `None` otherwise (nothing to do, nothing
/// that helps, or more than the walk's bounds).
pub(crate) fn coerce_valid(
    validator: &jsonschema::Validator,
    schema: &Value,
    value: &Value,
    place: CoercionPlace,
) -> Option<(Value, Vec<Coercion>)> {
    let (coerced, coercions) = coerce(schema, value, place)?;
    validator.is_valid(&coerced).then_some((coerced, coercions))
}

/// `value` walked alongside `schema` with every rule applied, without checking the result
/// against the whole schema (see `coerce_valid`); `None` when nothing changed or a bound
/// was reached.
pub fn coerce(
    schema: &Value,
    value: &Value,
    place: CoercionPlace,
) -> Option<(Value, Vec<Coercion>)> {
    let mut walk = Walk {
        root: schema,
        place,
        pointer: String::new(),
        out: Vec::new(),
        visits: Cell::new(0),
        exhausted: Cell::new(false),
    };
    let mut coerced = value.clone();
    walk.node(schema, &mut coerced, 0);
    if walk.exhausted.get() || walk.out.is_empty() || walk.out.len() > MAX_COERCIONS {
        return None;
    }
    Some((coerced, walk.out))
}

/// Whether `schema` names a format the date rule rewrites (`date`, `date-time`) anywhere:
/// such a schema is walked even for values its validator accepts, since formats are not
/// asserted by the validator. Bounded like the walk.
pub(crate) fn names_date_formats(schema: &Value) -> bool {
    fn visit(value: &Value, depth: usize, budget: &mut usize) -> bool {
        if depth > MAX_DEPTH * 2 || *budget == 0 {
            return false;
        }
        *budget -= 1;
        match value {
            Value::Object(map) => {
                if let Some(Value::String(f)) = map.get("format")
                    && (f == "date" || f == "date-time")
                {
                    return true;
                }
                map.values().any(|v| visit(v, depth + 1, budget))
            }
            Value::Array(items) => items.iter().any(|v| visit(v, depth + 1, budget)),
            _ => false,
        }
    }
    let mut budget = MAX_VISITS;
    visit(schema, 0, &mut budget)
}

struct Walk<'s> {
    root: &'s Value,
    place: CoercionPlace,
    /// The pointer of the value being walked.
    pointer: String,
    out: Vec<Coercion>,
    /// Schema nodes visited so far (shared with trial walks and [`Walk::takes`]).
    visits: Cell<usize>,
    /// A bound was reached: the walk is abandoned.
    exhausted: Cell<bool>,
}

impl<'s> Walk<'s> {
    /// Counts one visit; `false` (and the walk abandoned) past the bounds.
    fn visit(&self, depth: usize) -> bool {
        let visits = self.visits.get() + 1;
        self.visits.set(visits);
        if depth > MAX_DEPTH || visits > MAX_VISITS {
            self.exhausted.set(true);
        }
        !self.exhausted.get()
    }

    fn record(&mut self, from: Value, to: Option<Value>, rule: CoercionRule) {
        if self.out.len() >= MAX_COERCIONS {
            self.exhausted.set(true);
            return;
        }
        self.out.push(Coercion {
            place: self.place,
            pointer: self.pointer.clone(),
            from,
            to,
            rule,
        });
    }

    /// Walks `value` at `self.pointer` under `schema`.
    fn node(&mut self, schema: &'s Value, value: &mut Value, depth: usize) {
        if !self.visit(depth) {
            return;
        }
        let Value::Object(schema) = schema else {
            return;
        };
        // Never under a `const`: it names the one value wanted.
        if schema.contains_key("const") {
            return;
        }
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            self.node(target, value, depth + 1);
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for branch in all {
                self.node(branch, value, depth + 1);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = schema.get(key) {
                self.branches(branches, value, depth);
            }
        }
        self.scalar(schema, value);
        match value {
            Value::Object(map) => self.object(schema, map, depth),
            Value::Array(items) => self.array(schema, items, depth),
            _ => {}
        }
    }

    /// A union: walked into the one branch that takes the value, or coerced to the one branch
    /// that can take it after coercion; nothing when that is ambiguous.
    fn branches(&mut self, branches: &'s [Value], value: &mut Value, depth: usize) {
        let taking: Vec<&'s Value> = branches
            .iter()
            .filter(|b| self.takes(b, value, depth))
            .collect();
        match taking.as_slice() {
            [one] => return self.node(one, value, depth + 1),
            [] => {}
            _ => return,
        }
        // Only a scalar is tried against each branch (objects and arrays are taken by a
        // branch of their type or not coerced), and only a short one: trials clone it.
        let short = match value {
            Value::String(s) => s.len() <= MAX_TRIAL_STRING,
            Value::Number(_) | Value::Bool(_) => true,
            _ => false,
        };
        if !short {
            return;
        }
        let mut found: Option<(Value, Vec<Coercion>)> = None;
        for branch in branches {
            let mut trial = Walk {
                root: self.root,
                place: self.place,
                pointer: self.pointer.clone(),
                out: Vec::new(),
                visits: Cell::new(self.visits.get()),
                exhausted: Cell::new(false),
            };
            let mut candidate = value.clone();
            trial.node(branch, &mut candidate, depth + 1);
            self.visits.set(trial.visits.get());
            if trial.exhausted.get() {
                self.exhausted.set(true);
                return;
            }
            if trial.out.is_empty() || !self.takes(branch, &candidate, depth) {
                continue;
            }
            if found.is_some() {
                // Two branches could take it: ambiguous.
                return;
            }
            found = Some((candidate, trial.out));
        }
        if let Some((candidate, coercions)) = found {
            *value = candidate;
            for c in coercions {
                if self.out.len() >= MAX_COERCIONS {
                    self.exhausted.set(true);
                    return;
                }
                self.out.push(c);
            }
        }
    }

    /// Whether `schema` takes `value` as it is, by its `const`, `enum` and `type` (and, for a
    /// schema without them, its unions): a shallow look that decides which branch a value
    /// belongs to, not validation.
    fn takes(&self, schema: &Value, value: &Value, depth: usize) -> bool {
        if !self.visit(depth) {
            return false;
        }
        let schema = match schema {
            Value::Bool(b) => return *b,
            Value::Object(map) => map,
            _ => return true,
        };
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
            && !self.takes(target, value, depth + 1)
        {
            return false;
        }
        if let Some(c) = schema.get("const") {
            return c == value;
        }
        if let Some(Value::Array(members)) = schema.get("enum") {
            return members.contains(value);
        }
        if let Some(types) = types(schema) {
            return types.iter().any(|t| type_takes(t, value));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = schema.get(key) {
                return branches.iter().any(|b| self.takes(b, value, depth + 1));
            }
        }
        true
    }

    /// A `$ref` within the document (`#`, `#/$defs/x`); anything else is not followed.
    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(&percent_decode(fragment)?)
    }

    /// The rules on one value whose own schema node is `schema`.
    fn scalar(&mut self, schema: &Map<String, Value>, value: &mut Value) {
        let types = types(schema);
        let type_takes_it = types
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| type_takes(t, value)));
        if type_takes_it {
            let Value::String(text) = &*value else {
                return;
            };
            if let Some(Value::Array(members)) = schema.get("enum") {
                if members.contains(value) {
                    return;
                }
                let lower = text.to_lowercase();
                let mut matching = members
                    .iter()
                    .filter(|m| m.as_str().is_some_and(|m| m.to_lowercase() == lower));
                if let (Some(member), None) = (matching.next(), matching.next()) {
                    let to = member.clone();
                    let from = std::mem::replace(value, to.clone());
                    self.record(from, Some(to), CoercionRule::EnumCase);
                }
                return;
            }
            if let Some(format) = schema.get("format").and_then(Value::as_str)
                && let Some(rewritten) = date_format(format, text)
            {
                let to = Value::String(rewritten);
                let from = std::mem::replace(value, to.clone());
                self.record(from, Some(to), CoercionRule::DateFormat);
            }
            return;
        }
        let Some(types) = types else {
            return;
        };
        let wants = |t: &str| types.contains(&t);
        let to = match &*value {
            Value::String(text) => {
                let number = if wants("integer") {
                    number(text, true)
                } else {
                    None
                }
                .or_else(|| {
                    if wants("number") {
                        number(text, false)
                    } else {
                        None
                    }
                });
                match number {
                    Some(n) => Some((Value::Number(n), CoercionRule::NumberFromString)),
                    None if wants("boolean") && (text == "true" || text == "false") => {
                        Some((Value::Bool(text == "true"), CoercionRule::BooleanFromString))
                    }
                    None => None,
                }
            }
            Value::Number(n) if wants("string") => {
                Some((Value::String(n.to_string()), CoercionRule::StringFromScalar))
            }
            Value::Bool(b) if wants("string") => {
                Some((Value::String(b.to_string()), CoercionRule::StringFromScalar))
            }
            _ => None,
        };
        let wrap =
            wants("array") && matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_));
        match (to, wrap) {
            // `["string", "array"]` and `5`: `"5"` or `[5]`? Ambiguous: neither.
            (Some(_), true) => {}
            (Some((to, rule)), false) => {
                let from = std::mem::replace(value, to.clone());
                self.record(from, Some(to), rule);
            }
            (None, true) => {
                let from = value.take();
                let to = Value::Array(vec![from.clone()]);
                *value = to.clone();
                self.record(from, Some(to), CoercionRule::WrapInArray);
            }
            (None, false) => {}
        }
    }

    fn object(
        &mut self,
        schema: &'s Map<String, Value>,
        map: &mut Map<String, Value>,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|s| s.is_object());
        let required = |name: &str| {
            schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
        };
        let names: Vec<String> = map.keys().cloned().collect();
        for name in names {
            let declared = properties.and_then(|p| p.get(&name));
            let Some(sub) = declared.or(additional) else {
                continue;
            };
            let Some(value) = map.get_mut(&name) else {
                continue;
            };
            let len = self.pointer.len();
            push_token(&mut self.pointer, &name);
            if value.is_null()
                && declared.is_some()
                && !required(&name)
                && !self.takes(sub, &Value::Null, depth + 1)
            {
                map.remove(&name);
                self.record(Value::Null, None, CoercionRule::NullOmitted);
            } else {
                self.node(sub, value, depth + 1);
            }
            self.pointer.truncate(len);
            if self.exhausted.get() {
                return;
            }
        }
    }

    fn array(&mut self, schema: &'s Map<String, Value>, items: &mut [Value], depth: usize) {
        // 2020-12 `prefixItems` + `items`; draft 7 `items` as an array + `additionalItems`.
        let (prefix, rest) = match (schema.get("prefixItems"), schema.get("items")) {
            (Some(Value::Array(prefix)), rest) => (prefix.as_slice(), rest),
            (None, Some(Value::Array(prefix))) => {
                (prefix.as_slice(), schema.get("additionalItems"))
            }
            (_, rest) => (&[][..], rest),
        };
        for (i, item) in items.iter_mut().enumerate() {
            let Some(sub) = prefix.get(i).or(rest) else {
                continue;
            };
            let len = self.pointer.len();
            self.pointer.push('/');
            self.pointer.push_str(&i.to_string());
            self.node(sub, item, depth + 1);
            self.pointer.truncate(len);
            if self.exhausted.get() {
                return;
            }
        }
    }
}

/// The schema's `type` as a list (`"string"` or `["string", "null"]`).
fn types(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(list) => Some(list.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn type_takes(t: &str, value: &Value) -> bool {
    match (t, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// Appends `/token` to a JSON Pointer, escaped (RFC 6901: `~` → `~0`, `/` → `~1`).
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// A URI fragment's `%XX` escapes decoded (a `$ref` is a URI reference); `None` if malformed.
fn percent_decode(fragment: &str) -> Option<String> {
    if !fragment.contains('%') {
        return Some(fragment.to_owned());
    }
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = fragment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The number a string spells, when it is a whole JSON number in plain form and the number
/// keeps its meaning: for `integer`, digits only, within 64 bits; otherwise a JSON number
/// with at most 15 significant digits that is finite and not rounded to zero.
pub fn number(text: &str, integer: bool) -> Option<Number> {
    let bytes = text.as_bytes();
    let mut i = 0;
    if bytes.first() == Some(&b'-') {
        i += 1;
    }
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let int_len = digits(i);
    if int_len == 0 || (int_len > 1 && bytes[i] == b'0') {
        return None;
    }
    let int_digits = &text[i..i + int_len];
    i += int_len;
    let mut frac_digits = "";
    if bytes.get(i) == Some(&b'.') {
        let n = digits(i + 1);
        if n == 0 {
            return None;
        }
        frac_digits = &text[i + 1..i + 1 + n];
        i += 1 + n;
    }
    let mut exponent = false;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(i);
        if n == 0 {
            return None;
        }
        i += n;
        exponent = true;
    }
    if i != bytes.len() {
        return None;
    }
    let plain_integer = frac_digits.is_empty() && !exponent;
    if plain_integer {
        if let Ok(n) = text.parse::<i64>() {
            return Some(Number::from(n));
        }
        if let Ok(n) = text.parse::<u64>() {
            return Some(Number::from(n));
        }
        return None;
    }
    if integer {
        return None;
    }
    let significant = format!("{int_digits}{frac_digits}");
    let significant = significant.trim_start_matches('0').trim_end_matches('0');
    if significant.len() > 15 {
        return None;
    }
    let f: f64 = text.parse().ok()?;
    if !f.is_finite() || (f == 0.0 && !significant.is_empty()) {
        return None;
    }
    Number::from_f64(f)
}

/// `text` rewritten to `format` (`date`, `date-time`) by the date rule, when it applies.
fn date_format(format: &str, text: &str) -> Option<String> {
    match format {
        "date-time" => {
            if is_date_time(text) {
                return None;
            }
            let (date, sep, rest) = (text.get(..10)?, text.get(10..11)?, text.get(11..)?);
            if sep != " " && sep != "T" && sep != "t" {
                return None;
            }
            let (time, offset) = split_offset(rest)?;
            // `+0200` → `+02:00`.
            let offset = if offset.len() == 5 && !offset.contains(':') {
                format!("{}:{}", offset.get(..3)?, offset.get(3..)?)
            } else {
                offset.to_owned()
            };
            let candidate = format!("{date}T{time}{offset}");
            is_date_time(&candidate).then_some(candidate)
        }
        "date" => {
            if is_date(text) || !is_date_time(text) {
                return None;
            }
            let (time, offset) = split_offset(text.get(11..)?)?;
            let midnight = time.get(..8) == Some("00:00:00")
                && time
                    .get(8..)?
                    .trim_start_matches('.')
                    .bytes()
                    .all(|b| b == b'0');
            let utc = matches!(offset, "Z" | "z" | "+00:00" | "-00:00");
            (midnight && utc).then(|| text.get(..10).map(str::to_owned))?
        }
        _ => None,
    }
}

/// `HH:MM:SS[.frac]` and its offset (`Z`, `+HH:MM`, `+HHMM`).
fn split_offset(rest: &str) -> Option<(&str, &str)> {
    let at = rest.find(['Z', 'z', '+', '-'])?;
    Some((&rest[..at], &rest[at..]))
}

/// RFC 3339 `full-date`.
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(_), Some(m), Some(d)) = (
        num(text.get(..4)),
        num(text.get(5..7)),
        num(text.get(8..10)),
    ) else {
        return false;
    };
    (1..=12).contains(&m) && (1..=31).contains(&d)
}

/// RFC 3339 `date-time` (`T` or `t`, `Z`/`z` or `±HH:MM`).
fn is_date_time(text: &str) -> bool {
    let (Some(date), Some(sep), Some(rest)) = (text.get(..10), text.get(10..11), text.get(11..))
    else {
        return false;
    };
    if !is_date(date) || (sep != "T" && sep != "t") {
        return false;
    }
    let Some((time, offset)) = split_offset(rest) else {
        return false;
    };
    let tb = time.as_bytes();
    if tb.len() < 8 || tb[2] != b':' || tb[5] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(s)) =
        (num(time.get(..2)), num(time.get(3..5)), num(time.get(6..8)))
    else {
        return false;
    };
    if h > 23 || m > 59 || s > 60 {
        return false;
    }
    let Some(frac) = time.get(8..) else {
        return false;
    };
    if !frac.is_empty()
        && (!frac.starts_with('.')
            || frac.len() < 2
            || !frac[1..].bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    match offset {
        "Z" | "z" => true,
        _ => {
            let ob = offset.as_bytes();
            ob.len() == 6
                && ob[3] == b':'
                && num(offset.get(1..3)).is_some_and(|h| h <= 23)
                && num(offset.get(4..6)).is_some_and(|m| m <= 59)
        }
    }
}

/// A run of ASCII digits as a number.
fn num(text: Option<&str>) -> Option<u32> {
    let text = text?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests;
