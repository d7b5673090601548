//! JSON Schema → Python types, for the `.pyi` stubs of the SDK in Python (the sibling of
//! [`super::schema_types`], with the same guarantees).
//!
//! Schemas come from tool servers and API documents, which are not trusted to be well formed
//! or small, so every input gives *some* valid Python:
//! - objects with properties become `TypedDict`s, declared at the top of the stub (Python has
//!   no inline object types): the class form when every key is an identifier, else the
//!   functional form `X = TypedDict("X", {"a-b": int})`; optional keys are `NotRequired[…]`;
//! - enums and consts are `Literal[…]`, arrays `list[…]`, maps `dict[str, …]`, null `None`,
//!   unions `A | B`; anything the generator cannot express (an intersection of non-objects,
//!   an unresolved `$ref`) is `Any`;
//! - nesting deeper than [`MAX_DEPTH`], and everything after [`MAX_STEPS`] schemas of one
//!   document, is `Any`, and generated names are cut to a bounded length, so the stub stays
//!   in proportion to the schema;
//! - `$ref`s become named types (a class, or a `TypeAlias`), so recursive schemas stay
//!   finite; a cycle made only of aliases (which no type checker accepts) becomes `Any`;
//! - text copied into comments cannot end the comment's line, text in docstrings and string
//!   literals is escaped (quotes, backslashes, control characters), so no description can
//!   break the stub's syntax.
//!
//! The output depends only on the input (serde_json keeps object keys sorted), so the same
//! schema always gives byte-identical text.

use super::schema_types::{declared_types, pascal_case, resolve_pointer, schema_facts};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Schemas nested deeper than this are typed `Any`.
pub const MAX_DEPTH: usize = super::schema_types::MAX_DEPTH;

/// Schemas of one document typed before the rest is `Any`: `allOf` merges may type a
/// definition more than once, so depth alone does not bound the work.
pub const MAX_STEPS: usize = 20_000;

/// Longest part a property name adds to a generated class name.
const MAX_NAME_PART: usize = 32;
/// Longest generated class name beyond its document's prefix.
const MAX_NAME_TAIL: usize = 64;

/// The names a stub imports from `typing` (every stub imports them all, so a name's meaning
/// never depends on which types a schema needed).
pub const TYPING_IMPORT: &str =
    "from typing import Any, Literal, Never, NotRequired, TypeAlias, TypedDict, Unpack\n";

/// Python's keywords: never a property's key in the class form, an argument's name or a
/// tool's name in a stub.
const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// `[A-Za-z_][A-Za-z0-9_]*` and not a keyword: usable as an argument, attribute or class key.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

/// One key of a declared `TypedDict`.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub key: String,
    /// Its type (without the `NotRequired[…]` of an optional key).
    pub ty: String,
    pub required: bool,
}

/// Named types (classes and aliases) plus the expressions that use them, for one document.
#[derive(Debug)]
pub struct PythonTypes<'a> {
    /// The document `$ref`s are resolved against (`#/...` pointers only).
    root: &'a Value,
    /// Prefix of every generated name, so two documents' types never collide in one stub.
    prefix: String,
    /// Pointer → name, for every `$ref` met so far.
    names: BTreeMap<String, String>,
    taken: BTreeSet<String>,
    /// Base name → the next number to try, so many colliding names cost no rescans.
    next_suffix: BTreeMap<String, usize>,
    /// Name → its declaration (a class or an alias), filled as types are met.
    declarations: BTreeMap<String, String>,
    /// Pointers whose declaration is being generated (to find alias-only cycles).
    in_progress: Vec<String>,
    /// Aliases that name another alias directly (`A: TypeAlias = B | None`), per alias.
    direct_refs: BTreeMap<String, BTreeSet<String>>,
    /// Schemas typed so far (see [`MAX_STEPS`]).
    steps: usize,
    /// Class name → its keys, and whether it admits further keys.
    class_fields: BTreeMap<String, (Vec<Field>, bool)>,
    /// Alias name → the type it names.
    alias_bodies: BTreeMap<String, String>,
}

/// Where a type expression appears: alias-to-alias edges only count at the top of an alias
/// declaration, outside classes and lists.
#[derive(Clone, Copy)]
struct Position {
    depth: usize,
    /// The declaration whose top level we are in, if any.
    top_of: Option<usize>,
}

impl<'a> PythonTypes<'a> {
    pub fn new(root: &'a Value, prefix: &str) -> Self {
        PythonTypes {
            root,
            prefix: pascal_case(prefix),
            names: BTreeMap::new(),
            taken: BTreeSet::new(),
            next_suffix: BTreeMap::new(),
            declarations: BTreeMap::new(),
            in_progress: Vec::new(),
            direct_refs: BTreeMap::new(),
            steps: 0,
            class_fields: BTreeMap::new(),
            alias_bodies: BTreeMap::new(),
        }
    }

    /// The keys of the class `name` (or of the class the alias `name` names), and whether it
    /// admits further keys; `None` when it is no class.
    pub fn fields_of(&self, name: &str) -> Option<(&[Field], bool)> {
        let class = match self.alias_bodies.get(name) {
            Some(body) => body.as_str(),
            None => name,
        };
        self.class_fields
            .get(class)
            .map(|(fields, open)| (fields.as_slice(), *open))
    }

    /// The Python type of `schema`, as an annotation that may name declared types; objects
    /// get class names that start with the prefix.
    #[cfg(test)]
    pub fn type_of(&mut self, schema: &Value) -> String {
        let hint = self.prefix.clone();
        self.ty(
            schema,
            Position {
                depth: 0,
                top_of: None,
            },
            &hint,
        )
    }

    /// Declares `schema` under exactly the prefix: a `TypedDict` class when it is a plain
    /// object with properties, else an alias (`Prefix: TypeAlias = …`) with `doc` above it.
    /// Returns the prefix.
    pub fn declare_root(&mut self, schema: &Value, doc: &str) -> String {
        let name = self.prefix.clone();
        self.taken.insert(name.clone());
        let pos = Position {
            depth: 0,
            top_of: None,
        };
        if let Some(obj) = plain_object(schema) {
            self.steps += 1;
            self.class(obj, pos, &name, doc);
        } else {
            let t = self.ty(schema, pos, &name);
            self.alias_bodies.insert(name.clone(), t.clone());
            self.declarations.insert(
                name.clone(),
                format!("{}{name}: TypeAlias = {t}\n", comment_lines(doc, "")),
            );
        }
        name
    }

    /// The declarations the expressions so far need, in name order, cycles broken.
    pub fn declarations(&self) -> String {
        let cyclic = self.alias_cycles();
        let mut out = String::new();
        for (name, decl) in &self.declarations {
            if cyclic.contains(name) {
                let _ = writeln!(
                    out,
                    "# (Its schema refers only to itself through other names, so it has no Python type.)\n{name}: TypeAlias = Any\n"
                );
            } else {
                out.push_str(decl);
                out.push('\n');
            }
        }
        out
    }

    fn ty(&mut self, schema: &Value, pos: Position, hint: &str) -> String {
        self.steps += 1;
        if pos.depth > MAX_DEPTH || self.steps > MAX_STEPS {
            return "Any".into();
        }
        let obj = match schema {
            Value::Bool(true) => return "Any".into(),
            Value::Bool(false) => return "Never".into(),
            Value::Object(obj) => obj,
            _ => return "Any".into(),
        };
        let inner = Position {
            depth: pos.depth + 1,
            ..pos
        };
        // Python has no intersection: a value meets every part, so any one part is a true
        // (if wider) type. The first that says something wins, in the order of the most
        // specific: a reference, a literal, the own type, then the combinators.
        let mut out: Option<String> = None;
        if let Some(Value::String(reference)) = obj.get("$ref") {
            out = Some(self.reference(reference, pos));
        }
        if out.as_deref().is_none_or(vague) {
            if let Some(value) = obj.get("const") {
                out = Some(literal_union(std::slice::from_ref(value)));
            } else if let Some(Value::Array(values)) = obj.get("enum") {
                out = Some(literal_union(values));
            } else if let Some(own) = self.own_type(obj, inner, hint) {
                out = Some(own);
            }
        }
        for key in ["oneOf", "anyOf"] {
            if out.as_deref().is_none_or(vague)
                && let Some(Value::Array(members)) = obj.get(key)
                && !members.is_empty()
            {
                let types: Vec<String> = members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| self.ty(m, inner, &self.child_hint(hint, &(i + 1).to_string())))
                    .collect();
                out = Some(union(types));
            }
        }
        if out.as_deref().is_none_or(vague)
            && let Some(Value::Array(members)) = obj.get("allOf")
            && !members.is_empty()
        {
            out = Some(self.all_of(members, inner, hint));
        }
        let mut out = out.unwrap_or_else(|| "Any".to_owned());
        if obj.get("nullable") == Some(&Value::Bool(true)) && out != "Any" {
            out = union(vec![out, "None".into()]);
        }
        out
    }

    /// `allOf`: objects (inline or one `$ref` away) merge into one `TypedDict`; anything else
    /// is its first member that says something.
    fn all_of(&mut self, members: &[Value], pos: Position, hint: &str) -> String {
        if members.len() == 1 {
            return self.ty(&members[0], pos, hint);
        }
        let followed: Vec<&Value> = members
            .iter()
            .map(|m| {
                m.get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| resolve_pointer(self.root, r))
                    .unwrap_or(m)
            })
            .collect();
        if followed.iter().all(|m| plain_object(m).is_some()) {
            let mut properties = Map::new();
            let mut required: Vec<Value> = Vec::new();
            for member in &followed {
                if let Some(p) = member.get("properties").and_then(Value::as_object) {
                    for (k, v) in p {
                        properties.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
                if let Some(r) = member.get("required").and_then(Value::as_array) {
                    required.extend(r.iter().cloned());
                }
            }
            let merged = serde_json::json!({
                "type": "object",
                "properties": properties,
                "required": required,
            });
            let name = self.fresh(hint);
            if let Value::Object(obj) = &merged {
                self.class(obj, pos, &name, "");
            }
            return name;
        }
        for member in members {
            let t = self.ty(member, pos, hint);
            if !vague(&t) {
                return t;
            }
        }
        "Any".into()
    }

    /// The type from `type` (and the keywords that go with it), or `None` when the schema
    /// says nothing about its own shape.
    fn own_type(&mut self, obj: &Map<String, Value>, pos: Position, hint: &str) -> Option<String> {
        let rendered: Vec<String> = declared_types(obj)?
            .into_iter()
            .map(|t| match t {
                "string" => "str".to_owned(),
                "integer" => "int".to_owned(),
                "number" => "float".to_owned(),
                "boolean" => "bool".to_owned(),
                "null" => "None".to_owned(),
                "array" => self.array(obj, pos, hint),
                "object" => self.object(obj, pos, hint),
                _ => "Any".to_owned(),
            })
            .collect();
        Some(union(rendered))
    }

    fn array(&mut self, obj: &Map<String, Value>, pos: Position, hint: &str) -> String {
        let nested = Position {
            top_of: None,
            ..pos
        };
        let item_hint = self.child_hint(hint, "Item");
        // 2020-12 `prefixItems` (+ `items` for the rest), or draft-07 `items: [...]` (+
        // `additionalItems`).
        let (prefix, rest) = match (obj.get("prefixItems"), obj.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (None, Some(Value::Array(prefix))) => (Some(prefix), obj.get("additionalItems")),
            (_, items) => (None, items),
        };
        match prefix {
            Some(prefix) => {
                let mut members: Vec<String> = prefix
                    .iter()
                    .map(|s| self.ty(s, nested, &item_hint))
                    .collect();
                match rest {
                    // A fixed length: a tuple.
                    Some(Value::Bool(false)) => {
                        if members.is_empty() {
                            "tuple[()]".into()
                        } else {
                            format!("tuple[{}]", members.join(", "))
                        }
                    }
                    None | Some(Value::Bool(true)) => "list[Any]".into(),
                    Some(schema) => {
                        members.push(self.ty(schema, nested, &item_hint));
                        format!("list[{}]", union(members))
                    }
                }
            }
            None => {
                let item = match rest {
                    Some(schema) => self.ty(schema, nested, &item_hint),
                    None => "Any".into(),
                };
                format!("list[{item}]")
            }
        }
    }

    fn object(&mut self, obj: &Map<String, Value>, pos: Position, hint: &str) -> String {
        let nested = Position {
            top_of: None,
            ..pos
        };
        let has_properties = obj
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_properties {
            let name = self.fresh(hint);
            self.class(obj, nested, &name, "");
            return name;
        }
        match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => "dict[str, Never]".into(),
            Some(schema @ Value::Object(_)) => {
                let t = self.ty(schema, nested, &self.child_hint(hint, "Value"));
                format!("dict[str, {t}]")
            }
            _ => "dict[str, Any]".into(),
        }
    }

    /// Declares `obj`'s properties as the `TypedDict` `name`, with `doc` (else the schema's
    /// own) as its docstring.
    fn class(&mut self, obj: &Map<String, Value>, pos: Position, name: &str, doc: &str) {
        let pos = Position {
            top_of: None,
            ..pos
        };
        let required: BTreeSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let properties = obj.get("properties").and_then(Value::as_object);
        let mut fields: Vec<(String, String, String)> = Vec::new();
        let mut record: Vec<Field> = Vec::new();
        for (key, schema) in properties.into_iter().flatten() {
            let t = self.ty(schema, pos, &self.child_hint(name, key));
            let is_required = required.contains(key.as_str());
            record.push(Field {
                key: key.clone(),
                ty: t.clone(),
                required: is_required,
            });
            let t = if is_required {
                t
            } else {
                format!("NotRequired[{t}]")
            };
            fields.push((key.clone(), t, schema_doc(schema)));
        }
        let extra = match obj.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => {
                let t = self.ty(schema, pos, &self.child_hint(name, "Value"));
                Some(format!("Further keys: {t}."))
            }
            Some(Value::Bool(true)) => Some("Further keys: Any.".to_owned()),
            _ => None,
        };
        self.class_fields
            .insert(name.to_owned(), (record, extra.is_some()));
        let own_doc = match (doc, schema_doc(&Value::Object(obj.clone()))) {
            ("", schema) => schema,
            (doc, schema) if schema.is_empty() => doc.to_owned(),
            (doc, schema) => format!("{doc}\n\n{schema}"),
        };
        let mut out = String::new();
        if fields.iter().all(|(key, _, _)| is_identifier(key)) {
            let _ = writeln!(out, "class {name}(TypedDict):");
            let mut body = String::new();
            if !own_doc.is_empty() {
                let _ = writeln!(body, "    {}", docstring(&own_doc, "    "));
            }
            for (key, t, doc) in &fields {
                body.push_str(&comment_lines(doc, "    "));
                let _ = writeln!(body, "    {key}: {t}");
            }
            if let Some(extra) = &extra {
                body.push_str(&comment_lines(extra, "    "));
            }
            // A class body needs a statement: comments alone are none.
            if fields.is_empty() && own_doc.is_empty() {
                body.push_str("    pass\n");
            }
            out.push_str(&body);
        } else {
            // Keys that are not identifiers (or are keywords) only fit the functional form.
            out.push_str(&comment_lines(&own_doc, ""));
            let _ = writeln!(out, "{name} = TypedDict({}, {{", string_literal(name));
            for (key, t, doc) in &fields {
                out.push_str(&comment_lines(doc, "    "));
                let _ = writeln!(out, "    {}: {t},", string_literal(key));
            }
            if let Some(extra) = &extra {
                out.push_str(&comment_lines(extra, "    "));
            }
            out.push_str("})\n");
        }
        self.declarations.insert(name.to_owned(), out);
    }

    fn reference(&mut self, reference: &str, pos: Position) -> String {
        let Some(target) = resolve_pointer(self.root, reference) else {
            return "Any".into();
        };
        let name = match self.names.get(reference) {
            Some(name) => name.clone(),
            None => {
                let base =
                    self.child_hint(&self.prefix, reference.rsplit('/').next().unwrap_or("Type"));
                let name = self.fresh(&base);
                self.names.insert(reference.to_owned(), name.clone());
                // The name exists before its body, so recursion ends at the name.
                self.in_progress.push(reference.to_owned());
                let index = self.in_progress.len() - 1;
                self.direct_refs.entry(name.clone()).or_default();
                let at = Position {
                    depth: pos.depth + 1,
                    top_of: Some(index),
                };
                if let Some(obj) = plain_object(target) {
                    self.steps += 1;
                    self.class(obj, at, &name, "");
                } else {
                    let body = self.ty(target, at, &format!("{name}Object"));
                    self.alias_bodies.insert(name.clone(), body.clone());
                    let decl = format!(
                        "{}{name}: TypeAlias = {body}\n",
                        comment_lines(&schema_doc(target), "")
                    );
                    self.declarations.insert(name.clone(), decl);
                }
                self.in_progress.pop();
                name
            }
        };
        if let Some(index) = pos.top_of
            && let Some(owner) = self.in_progress.get(index).cloned()
            && let Some(owner_name) = self.names.get(&owner).cloned()
        {
            self.direct_refs
                .entry(owner_name)
                .or_default()
                .insert(name.clone());
        }
        name
    }

    /// `hint`, or `hint2`, `hint3`, … when taken.
    fn fresh(&mut self, hint: &str) -> String {
        if self.taken.insert(hint.to_owned()) {
            return hint.to_owned();
        }
        let n = self.next_suffix.entry(hint.to_owned()).or_insert(2);
        loop {
            let candidate = format!("{hint}{n}");
            *n += 1;
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }

    /// A generated class name's child: `ParentKey`, the key's part and the tail after the
    /// prefix bounded (never the prefix itself, which keeps the names of one stub's
    /// documents apart).
    fn child_hint(&self, parent: &str, key: &str) -> String {
        let part: String = pascal_case(key).chars().take(MAX_NAME_PART).collect();
        let mut name = format!("{parent}{part}");
        // Names are ASCII (pascal_case keeps ASCII alphanumerics only).
        let limit = self.prefix.len() + MAX_NAME_TAIL;
        if name.len() > limit {
            name.truncate(limit);
        }
        name
    }

    fn alias_cycles(&self) -> BTreeSet<String> {
        super::schema_types::alias_cycles(&self.direct_refs)
    }
}

/// The schema as an object with properties and nothing that changes its type (no `$ref`,
/// literal, combinator, nullability or other `type`): it can be declared as a class.
fn plain_object(schema: &Value) -> Option<&Map<String, Value>> {
    let obj = schema.as_object()?;
    let object_typed = match obj.get("type") {
        None => true,
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.len() == 1 && ts[0] == "object",
        _ => false,
    };
    let has_properties = obj
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    let plain = ["$ref", "const", "enum", "oneOf", "anyOf", "allOf"]
        .iter()
        .all(|k| !obj.contains_key(*k))
        && obj.get("nullable") != Some(&Value::Bool(true));
    (object_typed && has_properties && plain).then_some(obj)
}

/// A type that says nothing a part beside it might not say better.
fn vague(t: &str) -> bool {
    t == "Any" || t == "dict[str, Any]"
}

/// Enum or const values as one type: `Literal[…]` for strings, integers and booleans,
/// `None` for null, `float` for other numbers, `Any` when a value is an object or array.
fn literal_union(values: &[Value]) -> String {
    let mut literals: Vec<String> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for value in values {
        let literal = match value {
            Value::String(s) => string_literal(s),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
            Value::Number(_) => {
                others.push("float".into());
                continue;
            }
            Value::Null => {
                others.push("None".into());
                continue;
            }
            Value::Object(_) | Value::Array(_) => return "Any".into(),
        };
        if seen.insert(literal.clone()) {
            literals.push(literal);
        }
    }
    let mut parts = Vec::new();
    if !literals.is_empty() {
        parts.push(format!("Literal[{}]", literals.join(", ")));
    }
    parts.extend(others);
    union(parts)
}

/// `A | B | C`, duplicates removed (first occurrence kept); `Any` absorbs the rest, an empty
/// union is `Never`.
fn union(types: Vec<String>) -> String {
    let mut seen = BTreeSet::new();
    let members: Vec<String> = types
        .into_iter()
        .flat_map(|t| split_union(&t))
        .filter(|t| seen.insert(t.clone()))
        .collect();
    if members.iter().any(|t| t == "Any") {
        return "Any".into();
    }
    let members: Vec<String> = if members.len() > 1 {
        members.into_iter().filter(|t| t != "Never").collect()
    } else {
        members
    };
    match members.len() {
        0 => "Never".into(),
        _ => members.join(" | "),
    }
}

/// The top-level members of a union expression (`A | list[B | C]` → `A`, `list[B | C]`).
fn split_union(t: &str) -> Vec<String> {
    let mut members = Vec::new();
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in t.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            '|' if depth == 0 => {
                members.push(t[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    members.push(t[start..].trim().to_owned());
    members
}

/// A Python string literal (`"…"`) holding `text` exactly: quotes, backslashes and every
/// control or line-breaking character escaped.
pub fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    escape_into(&mut out, text, true);
    out.push('"');
    out
}

/// A triple-quoted docstring holding `text`, its later lines indented by `indent`.
pub fn docstring(text: &str, indent: &str) -> String {
    let mut out = String::from("\"\"\"");
    let mut first = true;
    for line in text.split('\n') {
        if !first {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(indent);
            }
        }
        first = false;
        escape_into(&mut out, line, false);
    }
    if text.contains('\n') {
        out.push('\n');
        out.push_str(indent);
    }
    out.push_str("\"\"\"");
    out
}

/// Escapes `text` for a `"`-delimited literal: every `"` and `\` escaped (so no run of quotes
/// can end a triple-quoted string), control characters and Unicode line breaks as escapes
/// (`\n` too, unless `newlines` stay as they are, which only a triple-quoted string allows).
fn escape_into(out: &mut String, text: &str, escape_newlines: bool) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' if escape_newlines => out.push_str("\\n"),
            '\n' => out.push('\n'),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            '\u{85}' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// Characters that end a line or that some parser may take for one: never inside a comment.
fn breaks_line(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{b}'
            | '\u{c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Text safe in a `# …` comment: on one line, no NUL (which no Python source may hold).
pub fn one_line_comment(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '\0')
        .map(|c| if breaks_line(c) { ' ' } else { c })
        .collect()
}

/// `text` as `# …` lines, each indented by `indent`; nothing for empty text.
pub fn comment_lines(text: &str, indent: &str) -> String {
    let text = text.replace("\r\n", "\n");
    let lines: Vec<String> = text
        .split(breaks_line)
        .map(|l| one_line_comment(l).trim_end().to_owned())
        .collect();
    let first = lines.iter().position(|l| !l.is_empty());
    let last = lines.iter().rposition(|l| !l.is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return String::new();
    };
    let mut out = String::new();
    for line in &lines[first..=last] {
        if line.is_empty() {
            let _ = writeln!(out, "{indent}#");
        } else {
            let _ = writeln!(out, "{indent}# {line}");
        }
    }
    out
}

/// What a schema says about itself, as plain lines (title, description, default, format,
/// bounds, deprecation), the same facts the TypeScript types give in JSDoc.
pub fn schema_doc(schema: &Value) -> String {
    schema_facts(schema, |fact, value| match value {
        Some(value) => format!("{fact}: {value}"),
        None => fact.to_owned(),
    })
    .join("\n")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn py(schema: Value) -> (String, String) {
        let mut types = PythonTypes::new(&schema, "t");
        let t = types.type_of(&schema);
        (t, types.declarations())
    }

    /// `text` parses as a Python module (ruff's parser, the one the worker uses).
    pub(crate) fn assert_parses(text: &str) {
        if let Err(e) = ruff_python_parser::parse_module(text) {
            panic!("does not parse as Python: {e:?}\n---\n{text}");
        }
    }

    fn stub(schema: &Value) -> String {
        let mut types = PythonTypes::new(schema, "tool_input");
        types.declare_root(schema, "The input.");
        let text = format!("{TYPING_IMPORT}\n{}", types.declarations());
        assert_parses(&text);
        text
    }

    #[test]
    fn scalars_enums_consts_and_nullable() {
        assert_eq!(py(json!({"type": "string"})).0, "str");
        assert_eq!(py(json!({"type": "integer"})).0, "int");
        assert_eq!(py(json!({"type": "number"})).0, "float");
        assert_eq!(
            py(json!({"enum": ["a", "b", 3, true, null, 1.5]})).0,
            "Literal[\"a\", \"b\", 3, True] | None | float"
        );
        assert_eq!(py(json!({"const": "x"})).0, "Literal[\"x\"]");
        assert_eq!(py(json!({"type": ["string", "null"]})).0, "str | None");
        assert_eq!(
            py(json!({"type": "string", "nullable": true})).0,
            "str | None"
        );
        assert_eq!(py(json!({})).0, "Any");
        assert_eq!(py(json!(false)).0, "Never");
        assert_eq!(py(json!({"enum": [{"a": 1}]})).0, "Any");
    }

    #[test]
    fn objects_become_typed_dicts() {
        let schema = json!({
            "type": "object",
            "description": "A \"\"\" thing \\ with quotes",
            "properties": {
                "a": {"type": "number", "description": "First\nnumber", "default": 1},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}},
                "meta": {"type": "object", "additionalProperties": {"type": "integer"}}
            },
            "required": ["a"],
            "additionalProperties": false
        });
        let text = stub(&schema);
        assert!(
            text.contains("class ToolInput(TypedDict):\n    \"\"\"The input.\n\n    A \\\"\\\"\\\" thing \\\\ with quotes\n    \"\"\"\n    # First\n    # number\n    # default: 1\n    a: float\n    meta: NotRequired[dict[str, int]]\n    tags: NotRequired[list[ToolInputTagsItem]]\n    # format: date-time\n    when: NotRequired[str]\n"),
            "{text}"
        );
        assert!(
            text.contains("class ToolInputTagsItem(TypedDict):\n    k: str\n"),
            "{text}"
        );
    }

    #[test]
    fn keys_that_are_not_identifiers_use_the_functional_form() {
        let schema = json!({
            "type": "object",
            "properties": {"a-b": {"type": "integer"}, "class": {"type": "string"}, "ok": {"type": "boolean"}},
            "required": ["a-b"]
        });
        let text = stub(&schema);
        assert!(
            text.contains("ToolInput = TypedDict(\"ToolInput\", {\n    \"a-b\": int,\n    \"class\": NotRequired[str],\n    \"ok\": NotRequired[bool],\n})"),
            "{text}"
        );
        assert!(is_identifier("match") && is_identifier("_x1"));
        assert!(!is_identifier("None") && !is_identifier("a$b") && !is_identifier("1a"));
    }

    #[test]
    fn unions_arrays_tuples_and_maps() {
        assert_eq!(
            py(json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]})).0,
            "str | list[float]"
        );
        assert_eq!(
            py(json!({"type": "array", "items": {"type": ["string", "integer"]}})).0,
            "list[str | int]"
        );
        assert_eq!(
            py(json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": false})).0,
            "tuple[str, float]"
        );
        assert_eq!(
            py(json!({"type": "object", "additionalProperties": {"type": "number"}})).0,
            "dict[str, float]"
        );
        assert_eq!(py(json!({"type": "object"})).0, "dict[str, Any]");
        // Intersections of objects merge; `type: object` beside a union is the union.
        let (t, decls) = py(json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"type": "string"}}}
        ]}));
        assert_eq!(t, "T");
        assert!(
            decls.contains("class T(TypedDict):\n    a: str\n    b: NotRequired[str]\n"),
            "{decls}"
        );
        assert_eq!(
            py(json!({"type": "object", "oneOf": [{"type": "string"}, {"type": "null"}]})).0,
            "str | None"
        );
    }

    #[test]
    fn refs_become_names_and_recursion_terminates() {
        let schema = json!({
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/node"}, "kind": {"$ref": "#/$defs/kind"}},
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}
                },
                "kind": {"enum": ["a", "b"], "description": "Which kind."}
            }
        });
        let text = stub(&schema);
        assert!(
            text.contains(
                "class ToolInputNode(TypedDict):\n    children: NotRequired[list[ToolInputNode]]\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("# Which kind.\nToolInputKind: TypeAlias = Literal[\"a\", \"b\"]\n"),
            "{text}"
        );
        assert!(
            text.contains("    root: NotRequired[ToolInputNode]\n"),
            "{text}"
        );
        // An alias-only cycle has no Python type.
        let cyc = json!({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}}});
        let mut types = PythonTypes::new(&cyc, "c");
        assert_eq!(types.type_of(&cyc), "CA");
        let decls = types.declarations();
        assert!(decls.contains("CA: TypeAlias = Any"), "{decls}");
        assert!(decls.contains("CB: TypeAlias = Any"), "{decls}");
        assert_parses(&format!("{TYPING_IMPORT}{decls}"));
        // A reference to itself, and one that resolves nowhere.
        let selfish = json!({"$ref": "#"});
        stub(&selfish);
        assert_eq!(py(json!({"$ref": "http://x/\"\"\"/y"})).0, "Any");
    }

    #[test]
    fn hostile_schemas_give_valid_bounded_stubs() {
        // Deep nesting.
        let mut schema = json!({"type": "string"});
        for i in 0..200 {
            schema = json!({"type": "object", "properties": {format!("p{i}"): schema}});
        }
        let text = stub(&schema);
        assert!(text.len() < 200_000, "{}", text.len());
        // A huge enum.
        let values: Vec<Value> = (0..10_000).map(|i| json!(format!("v{i}\"\\"))).collect();
        let text = stub(&json!({"type": "object", "properties": {"e": {"enum": values}}}));
        assert!(text.contains("\"v9999\\\"\\\\\""), "{}", &text[..200]);
        // Descriptions that try to end a docstring, a comment or a string.
        let evil = "x\"\"\" + 1\n\r\u{2028}\u{c}\0import os #\\";
        let schema = json!({
            "type": "object",
            "description": evil,
            "title": "\"\"\"",
            "properties": {
                evil: {"type": "string", "description": evil, "enum": [evil]},
                "ok": {"type": "object", "description": evil, "properties": {"\\": {"type": "string"}}}
            }
        });
        let text = stub(&schema);
        assert!(!text.contains('\0'));
        // Exponential `allOf` fan-out stays bounded.
        let mut defs = Map::new();
        for i in 0..30 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"type": "object", "properties": {
                    "x": {"allOf": [{"$ref": next}, {"type": "object", "properties": {"y": {"type": "string"}}}]},
                    "z": {"allOf": [{"$ref": next}, {"type": "object", "properties": {"w": {"type": "string"}}}]}
                }}),
            );
        }
        defs.insert(
            "d30".into(),
            json!({"type": "object", "properties": {"end": {"type": "string"}}}),
        );
        let text = stub(&json!({"$ref": "#/$defs/d0", "$defs": defs}));
        assert!(text.len() < 4_000_000, "{}", text.len());
        // Long keys do not grow class names without bound.
        let long = "k".repeat(10_000);
        let text = stub(
            &json!({"type": "object", "properties": {long.clone(): {"type": "object", "properties": {long: {"type": "object", "properties": {"a": {"type": "string"}}}}}}}),
        );
        assert!(text.len() < 40_000, "{}", text.len());
    }

    #[test]
    fn output_is_deterministic() {
        let schema = json!({"type": "object", "properties": {"b": {"$ref": "#/$defs/x"}, "a": {"$ref": "#/$defs/y"}, "c": {"type": "object", "properties": {"d": {"type": "string"}}}}, "$defs": {"x": {"type": "string"}, "y": {"type": "object", "properties": {"z": {"type": "number"}}}}});
        let first = stub(&schema);
        for _ in 0..5 {
            assert_eq!(stub(&schema), first);
        }
    }

    #[test]
    fn comments_and_docstrings_are_escaped() {
        assert_eq!(
            comment_lines("a\n\nb\r\nc\u{2028}d", "  "),
            "  # a\n  #\n  # b\n  # c\n  # d\n"
        );
        assert_eq!(comment_lines("", ""), "");
        assert_eq!(
            docstring("one \"\"\" \\", ""),
            "\"\"\"one \\\"\\\"\\\" \\\\\"\"\""
        );
        assert_eq!(string_literal("a\"\n\0"), "\"a\\\"\\n\\x00\"");
    }
}
