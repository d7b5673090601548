//! The shape of JSON values, inferred from observed results and merged across them: kinds
//! (a union of at most seven), object properties (with how often each was present, so a
//! property missing from some results is optional), array element shapes, nullability, and
//! string formats. Never a value: a string is `string` or one of [`Format`], never its text,
//! and no set of observed strings or numbers is kept (an enum-like set of values would be
//! values).
//!
//! Results are untrusted, so every shape is bounded: nesting past `MAX_DEPTH` is `unknown`;
//! an object with more than `MAX_PROPERTIES` keys, or with keys that look like data (ids,
//! dates, e-mail addresses, long text), is a map (`{ [key: string]: T }`) whose keys are not
//! kept; a shape of more than `MAX_NODES` nodes is cut at a shallower depth until it fits.
//! Shapes are deterministic: properties are kept in key order.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Values nested deeper than this are `unknown`.
pub(crate) const MAX_DEPTH: usize = 16;
/// An object with more distinct keys than this (at one place, over all results) is a map.
pub(crate) const MAX_PROPERTIES: usize = 64;
/// A shape larger than this many nodes is cut shallower.
pub(crate) const MAX_NODES: usize = 2048;
/// Keys longer than this are data, not field names.
const MAX_KEY_LEN: usize = 64;
/// Strings longer than this are not checked for a format (they are plain strings).
const MAX_FORMAT_LEN: usize = 256;

/// A string's format, as JSON Schema names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Any string (or strings of different formats).
    Plain,
    DateTime,
    Date,
    Uuid,
    Email,
    Uri,
}

impl Format {
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Format::Plain => None,
            Format::DateTime => Some("date-time"),
            Format::Date => Some("date"),
            Format::Uuid => Some("uuid"),
            Format::Email => Some("email"),
            Format::Uri => Some("uri"),
        }
    }

    /// The format of `s`.
    pub fn of(s: &str) -> Format {
        let b = s.as_bytes();
        if b.is_empty() || b.len() > MAX_FORMAT_LEN {
            return Format::Plain;
        }
        if is_date(b) {
            if b.len() == 10 {
                return Format::Date;
            }
            if is_date_time_rest(&b[10..]) {
                return Format::DateTime;
            }
            return Format::Plain;
        }
        if is_uuid(b) {
            return Format::Uuid;
        }
        if is_email(s) {
            return Format::Email;
        }
        if is_uri(s) {
            return Format::Uri;
        }
        Format::Plain
    }

    fn merged(self, other: Format) -> Format {
        if self == other { self } else { Format::Plain }
    }
}

fn digits(b: &[u8]) -> bool {
    b.iter().all(u8::is_ascii_digit)
}

/// `YYYY-MM-DD` at the start.
fn is_date(b: &[u8]) -> bool {
    b.len() >= 10
        && digits(&b[0..4])
        && b[4] == b'-'
        && digits(&b[5..7])
        && b[7] == b'-'
        && digits(&b[8..10])
}

/// `THH:MM:SS[.fff](Z|±HH:MM)` after the date (RFC 3339; `t`, a space, `z` too).
fn is_date_time_rest(b: &[u8]) -> bool {
    if b.len() < 9 || !matches!(b[0], b'T' | b't' | b' ') {
        return false;
    }
    let t = &b[1..];
    if !(digits(&t[0..2]) && t[2] == b':' && digits(&t[3..5]) && t[5] == b':' && digits(&t[6..8])) {
        return false;
    }
    let mut rest = &t[8..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    match rest {
        b"Z" | b"z" => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => digits(&[*h1, *h2, *m1, *m2]),
        _ => false,
    }
}

fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
        && s.bytes().all(|c| c.is_ascii_graphic())
}

fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    !scheme.is_empty()
        && scheme.as_bytes()[0].is_ascii_alphabetic()
        && scheme
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
        && !rest.is_empty()
        && !s
            .bytes()
            .any(|c| c.is_ascii_whitespace() || c.is_ascii_control())
}

/// Whether an object key is data rather than a field name (an id, a date, an address, a
/// number, long text): an object with such keys is a map.
fn is_data_key(key: &str) -> bool {
    key.is_empty()
        || key.len() > MAX_KEY_LEN
        || digits(key.as_bytes())
        || Format::of(key) != Format::Plain
}

/// The shape of the values seen at one place: the union of their kinds. Nothing set: nothing
/// seen yet (an empty array's elements), which renders as `unknown`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    #[serde(default, skip_serializing_if = "is_false")]
    pub unknown: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub null: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub boolean: bool,
    /// Numbers, all of them integers so far.
    #[serde(default, skip_serializing_if = "is_false")]
    pub integer: bool,
    /// Numbers, some with a fraction.
    #[serde(default, skip_serializing_if = "is_false")]
    pub number: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<Format>,
    /// Arrays: the shape of their elements (over all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<Box<Shape>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Box<ObjectShape>>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Objects seen at one place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObjectShape {
    /// How many objects were seen here.
    pub seen: u64,
    /// Field name → in how many of them it was, and its shape.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, Property>,
    /// A map: its keys are data (not kept); the shape of its values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<Shape>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Property {
    pub seen: u64,
    pub shape: Shape,
}

impl Shape {
    /// The shape of one value.
    pub fn of(value: &Value) -> Shape {
        let mut shape = Shape::default();
        shape.absorb(value, 0);
        shape.bound();
        shape
    }

    /// Whether nothing was seen.
    pub fn is_empty(&self) -> bool {
        *self == Shape::default()
    }

    fn absorb(&mut self, value: &Value, depth: usize) {
        if self.unknown {
            return;
        }
        if depth > MAX_DEPTH {
            *self = Shape::unknown();
            return;
        }
        match value {
            Value::Null => self.null = true,
            Value::Bool(_) => self.boolean = true,
            Value::Number(n) => {
                if n.is_i64() || n.is_u64() {
                    self.integer = true;
                } else {
                    self.number = true;
                }
            }
            Value::String(s) => {
                let format = Format::of(s);
                self.string = Some(self.string.map_or(format, |f| f.merged(format)));
            }
            Value::Array(items) => {
                let element = self.array.get_or_insert_with(Box::default);
                for item in items {
                    element.absorb(item, depth + 1);
                }
            }
            Value::Object(map) => {
                let object = self.object.get_or_insert_with(Box::default);
                object.absorb(map, depth + 1);
            }
        }
    }

    fn unknown() -> Shape {
        Shape {
            unknown: true,
            ..Shape::default()
        }
    }

    /// Merges `other` (seen at the same place) into this one.
    pub fn merge(&mut self, other: Shape) {
        self.merge_at(other, 0);
        self.bound();
    }

    fn merge_at(&mut self, other: Shape, depth: usize) {
        if self.unknown || other.unknown || depth > MAX_DEPTH {
            *self = Shape::unknown();
            return;
        }
        self.null |= other.null;
        self.boolean |= other.boolean;
        self.integer |= other.integer;
        self.number |= other.number;
        self.string = match (self.string, other.string) {
            (Some(a), Some(b)) => Some(a.merged(b)),
            (a, b) => a.or(b),
        };
        match (&mut self.array, other.array) {
            (Some(mine), Some(theirs)) => mine.merge_at(*theirs, depth + 1),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
        match (&mut self.object, other.object) {
            (Some(mine), Some(theirs)) => mine.merge_at(*theirs, depth + 1),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    /// A hash of what the shape renders as (kinds, formats, properties and which are
    /// required), without the counts: it moves only when the learned type does.
    pub fn fingerprint(&self) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        self.hash_type(&mut hasher);
        std::hash::Hasher::finish(&hasher)
    }

    fn hash_type(&self, h: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        (
            self.unknown,
            self.null,
            self.boolean,
            self.integer,
            self.number,
            self.string,
        )
            .hash(h);
        match &self.array {
            Some(items) => {
                1u8.hash(h);
                items.hash_type(h);
            }
            None => 0u8.hash(h),
        }
        match &self.object {
            Some(object) => {
                1u8.hash(h);
                for (name, p) in &object.properties {
                    (name, p.seen >= object.seen).hash(h);
                    p.shape.hash_type(h);
                }
                match &object.map {
                    Some(values) => {
                        1u8.hash(h);
                        values.hash_type(h);
                    }
                    None => 0u8.hash(h),
                }
            }
            None => 0u8.hash(h),
        }
    }

    /// Nodes in the shape (itself, its element shape, its properties', recursively).
    pub fn nodes(&self) -> usize {
        1 + self.array.as_ref().map_or(0, |a| a.nodes())
            + self.object.as_ref().map_or(0, |o| {
                o.properties
                    .values()
                    .map(|p| p.shape.nodes())
                    .sum::<usize>()
                    + o.map.as_ref().map_or(0, Shape::nodes)
            })
    }

    /// Cuts the shape shallower until it has at most [`MAX_NODES`] nodes.
    fn bound(&mut self) {
        let mut depth = MAX_DEPTH;
        while self.nodes() > MAX_NODES && depth > 0 {
            depth -= 1;
            self.cut(depth, 0);
        }
    }

    fn cut(&mut self, max: usize, depth: usize) {
        if depth >= max && (self.array.is_some() || self.object.is_some()) {
            *self = Shape::unknown();
            return;
        }
        if let Some(a) = &mut self.array {
            a.cut(max, depth + 1);
        }
        if let Some(o) = &mut self.object {
            for p in o.properties.values_mut() {
                p.shape.cut(max, depth + 1);
            }
            if let Some(m) = &mut o.map {
                m.cut(max, depth + 1);
            }
        }
    }

    /// The shape as JSON Schema (which the SDK's generator turns into TypeScript): `{}`
    /// (unknown) when nothing or anything was seen.
    pub fn to_schema(&self) -> Value {
        if self.unknown || self.is_empty() {
            return json!({});
        }
        let mut types = Vec::new();
        let mut schema = Map::new();
        if let Some(format) = self.string {
            types.push("string");
            if let Some(f) = format.as_str() {
                schema.insert("format".into(), f.into());
            }
        }
        if self.number {
            types.push("number");
        } else if self.integer {
            types.push("integer");
        }
        if self.boolean {
            types.push("boolean");
        }
        if let Some(items) = &self.array {
            types.push("array");
            schema.insert("items".into(), items.to_schema());
        }
        if let Some(object) = &self.object {
            types.push("object");
            if let Some(values) = &object.map {
                schema.insert("additionalProperties".into(), values.to_schema());
            } else {
                let properties: Map<String, Value> = object
                    .properties
                    .iter()
                    .map(|(k, p)| (k.clone(), p.shape.to_schema()))
                    .collect();
                let required: Vec<Value> = object
                    .properties
                    .iter()
                    .filter(|(_, p)| p.seen >= object.seen)
                    .map(|(k, _)| Value::from(k.as_str()))
                    .collect();
                schema.insert("properties".into(), Value::Object(properties));
                if !required.is_empty() {
                    schema.insert("required".into(), Value::Array(required));
                }
            }
        }
        if self.null {
            types.push("null");
        }
        let ty = match types.as_slice() {
            [one] => Value::from(*one),
            many => Value::from(many.to_vec()),
        };
        schema.insert("type".into(), ty);
        Value::Object(schema)
    }
}

impl ObjectShape {
    fn absorb(&mut self, map: &Map<String, Value>, depth: usize) {
        self.seen += 1;
        let too_many = || {
            self.properties.len() + map.len() > MAX_PROPERTIES
                && self.properties.len()
                    + map
                        .keys()
                        .filter(|k| !self.properties.contains_key(*k))
                        .count()
                    > MAX_PROPERTIES
        };
        if self.map.is_none() && (map.keys().any(|k| is_data_key(k)) || too_many()) {
            self.become_map(depth);
        }
        if let Some(values) = &mut self.map {
            for v in map.values() {
                values.absorb(v, depth);
            }
            return;
        }
        for (k, v) in map {
            let property = self.properties.entry(k.clone()).or_default();
            property.seen += 1;
            property.shape.absorb(v, depth);
        }
    }

    /// Forgets the keys: every property's shape becomes the map's value shape.
    fn become_map(&mut self, depth: usize) {
        let mut values = Shape::default();
        for (_, p) in std::mem::take(&mut self.properties) {
            values.merge_at(p.shape, depth);
        }
        self.map = Some(values);
    }

    fn merge_at(&mut self, other: ObjectShape, depth: usize) {
        self.seen += other.seen;
        let union = self.properties.len()
            + other
                .properties
                .keys()
                .filter(|k| !self.properties.contains_key(*k))
                .count();
        if self.map.is_none() && (other.map.is_some() || union > MAX_PROPERTIES) {
            self.become_map(depth);
        }
        if let Some(values) = &mut self.map {
            if let Some(theirs) = other.map {
                values.merge_at(theirs, depth);
            }
            for (_, p) in other.properties {
                values.merge_at(p.shape, depth);
            }
            return;
        }
        for (k, p) in other.properties {
            let mine = self.properties.entry(k).or_default();
            mine.seen += p.seen;
            mine.shape.merge_at(p.shape, depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(values: &[Value]) -> Value {
        let mut shape = Shape::default();
        for v in values {
            shape.merge(Shape::of(v));
        }
        shape.to_schema()
    }

    #[test]
    fn formats() {
        for (s, f) in [
            ("2026-11-20T10:00:00Z", Format::DateTime),
            ("2026-11-20T10:00:00.123+01:00", Format::DateTime),
            ("2026-11-20", Format::Date),
            ("2026-11-20T10:00", Format::Plain),
            ("3f2504e0-4f89-11d3-9a0c-0305e82c3301", Format::Uuid),
            ("ada@example.org", Format::Email),
            ("https://example.org/a?b=c", Format::Uri),
            ("a b@example.org", Format::Plain),
            ("hello", Format::Plain),
            ("", Format::Plain),
        ] {
            assert_eq!(Format::of(s), f, "{s}");
        }
    }

    #[test]
    fn optional_fields_unions_nullability_and_formats_merge() {
        let schema = learned(&[
            json!({"id": 1, "name": "a", "at": "2026-11-20T10:00:00Z", "tags": ["x"]}),
            json!({"id": 2, "at": "2026-11-21T10:00:00Z", "tags": [], "parent": null}),
            json!({"id": 2.5, "name": null, "at": "2026-11-21T10:00:00Z", "tags": [1], "parent": {"id": 1}}),
        ]);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "at": {"type": "string", "format": "date-time"},
                    "id": {"type": "number"},
                    "name": {"type": ["string", "null"]},
                    "parent": {"type": ["object", "null"], "properties": {"id": {"type": "integer"}}, "required": ["id"]},
                    "tags": {"type": "array", "items": {"type": ["string", "integer"]}}
                },
                "required": ["at", "id", "tags"]
            })
        );
        // A different format makes a plain string.
        assert_eq!(
            learned(&[json!("2026-11-20"), json!("tomorrow")]),
            json!({"type": "string"})
        );
        // Empty arrays: elements unknown.
        assert_eq!(learned(&[json!([])]), json!({"type": "array", "items": {}}));
        assert_eq!(learned(&[]), json!({}));
    }

    #[test]
    fn merging_is_order_independent() {
        let values = [
            json!({"a": 1}),
            json!({"b": "x", "a": null}),
            json!([{"c": true}]),
            json!("2026-11-20"),
        ];
        let forward = learned(&values);
        let mut reversed = values.to_vec();
        reversed.reverse();
        assert_eq!(learned(&reversed), forward);
    }

    #[test]
    fn data_keys_make_maps_and_keep_no_key() {
        let schema = learned(&[json!({
            "ada@example.org": {"n": 1},
            "bob@example.org": {"n": 2}
        })]);
        assert_eq!(
            schema,
            json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
        );
        assert!(!schema.to_string().contains("ada"));
        // Too many keys over several results: a map too.
        let many: Vec<Value> = (0..3)
            .map(|i| {
                let map: Map<String, Value> = (0..40)
                    .map(|k| (format!("key_{i}_{k}"), json!(k)))
                    .collect();
                Value::Object(map)
            })
            .collect();
        assert_eq!(
            learned(&many),
            json!({"type": "object", "additionalProperties": {"type": "integer"}})
        );
    }

    #[test]
    fn strings_are_never_kept() {
        let shape = Shape::of(&json!({"secretish": "hunter2-value", "list": ["alpha", "beta"]}));
        let text = serde_json::to_string(&shape).unwrap_or_default();
        for value in ["hunter2", "alpha", "beta"] {
            assert!(!text.contains(value), "{text}");
        }
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!({ "a": deep });
        }
        let shape = Shape::of(&deep);
        assert!(shape.nodes() <= MAX_DEPTH + 2, "{}", shape.nodes());
        // Wide and deep: 60 keys per level, 3 levels.
        fn wide(level: usize) -> Value {
            if level == 0 {
                return json!(1);
            }
            Value::Object(
                (0..60)
                    .map(|k| (format!("k{k}"), wide(level - 1)))
                    .collect(),
            )
        }
        let shape = Shape::of(&wide(3));
        assert!(shape.nodes() <= MAX_NODES, "{}", shape.nodes());
        let text = serde_json::to_string(&shape).unwrap_or_default();
        assert!(text.len() < 200_000, "{}", text.len());
    }

    /// The fingerprint moves when the rendered type does (a new kind, a property that
    /// became optional), not when only the counts do.
    #[test]
    fn fingerprints_follow_the_type_not_the_counts() {
        let mut shape = Shape::of(&json!({"a": 1}));
        let first = shape.fingerprint();
        shape.merge(Shape::of(&json!({"a": 2})));
        assert_eq!(shape.fingerprint(), first);
        shape.merge(Shape::of(&json!({})));
        let optional = shape.fingerprint();
        assert_ne!(optional, first);
        shape.merge(Shape::of(&json!({"a": null})));
        assert_ne!(shape.fingerprint(), optional);
    }

    #[test]
    fn stored_shapes_round_trip() {
        let shape = Shape::of(&json!({"a": [1, "x", null], "b": {"c": 1.5}}));
        let text = serde_json::to_string(&shape).unwrap_or_default();
        let back: Shape = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, shape);
    }
}
