//! Tool search: BM25F over a tool's fields, answering with one-line signatures, so a model
//! finds the two tools it needs among a thousand without reading them all.
//!
//! - **Fields.** Each tool is split into fields, each with its own weight and length
//!   normalisation (BM25F): the name (an OpenAPI operation id such as `issues_create_comment`,
//!   whose first word is the operation's tag), the summary (the description's first
//!   paragraph), the rest of the description, the path and method of an OpenAPI operation
//!   (the description's last line, `POST /repos/{owner}/{repo}/issues`; the method counts as
//!   its verb: `POST` create, `PATCH`/`PUT` update, `DELETE` delete, `GET` get), the
//!   parameter names and the namespace.
//! - **Terms.** Lower-cased alphanumeric runs, split at camelCase humps, with a plural `s`
//!   dropped (`ies` → `y`), and a few spellings made one (`repository` → `repo`,
//!   `organization` → `org`, `PR` → `pull`), so `listRepos`, `list_repos` and
//!   "repositories list" meet in the middle.
//! - **The query.** Filler words are dropped ("a", "the", "on"…), "pull request" is `pull`
//!   (GitHub's `pulls_…`), and each word stands for a few alternatives with weights: the
//!   verbs a model types for the verbs APIs name (open/add/new → create, close/edit/modify
//!   → update, remove/drop → delete, show/fetch/read → get/list, …) and a few nouns
//!   (branch → ref, file → content, me/my → authenticated). A word scores its best
//!   alternative, so a tool is not paid twice for one idea.
//! - **Extra resources.** A tool whose name has resource words the query did not mention
//!   loses a share of its score per word (`reactions_create_for_issue_comment` for "create
//!   a comment on an issue"), so the tool that is exactly what was asked comes first.
//! - Someone who typed a tool's exact name gets that tool first.
//!
//! All of it is tables and arithmetic over an index built once per catalogue: no model, no
//! download.

use super::Language;
use super::python_types::is_identifier;
use super::sdk_files::{SdkTool, first_sentence};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

const K1: f64 = 1.2;

/// One field of a tool: its weight and its BM25 length normalisation `b`.
#[derive(Debug, Clone, Copy)]
struct Field {
    weight: f64,
    b: f64,
}

/// The fields, in the order of [`ToolSearch::new`]'s term lists.
const FIELDS: [Field; 6] = [
    // name (operation id; its first word is the tag)
    Field {
        weight: 4.0,
        b: 0.5,
    },
    // summary: the description's first paragraph
    Field {
        weight: 2.0,
        b: 0.75,
    },
    // the rest of the description
    Field {
        weight: 0.4,
        b: 0.75,
    },
    // an OpenAPI operation's path and method
    Field {
        weight: 1.5,
        b: 0.5,
    },
    // parameter names
    Field {
        weight: 0.5,
        b: 0.75,
    },
    // namespace
    Field {
        weight: 0.5,
        b: 0.0,
    },
];

/// The share of its score a tool keeps per resource word of its name the query did not
/// mention.
const EXTRA_WORD_FACTOR: f64 = 0.75;

/// An index over a catalogue's tools.
#[derive(Debug, Default)]
pub struct ToolSearch {
    entries: Vec<Entry>,
    /// term → (entry, the term's weighted, length-normalised frequency over the fields)
    postings: HashMap<String, Vec<(usize, f64)>>,
}

#[derive(Debug)]
struct Entry {
    hit: SearchHit,
    /// The signature in Python ([`python_signature`]), for a search that asks for Python.
    python_signature: String,
    /// The resource words of the name (not verbs, not filler).
    resources: Vec<String>,
}

/// One result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SearchHit {
    /// `namespace.tool`.
    pub tool: String,
    /// `tools.ns.tool({ a: number, b?: string }): Promise<{ id: number, … }>`.
    pub signature: String,
    /// The description's first sentence.
    pub summary: String,
    /// The SDK file with its types.
    pub file: String,
    pub score: f64,
}

impl ToolSearch {
    pub fn new(tools: &[SdkTool]) -> ToolSearch {
        let mut index = ToolSearch::default();
        let fields: Vec<[Vec<String>; 6]> = tools.iter().map(tool_fields).collect();
        let mut average = [0f64; 6];
        for f in &fields {
            for (i, terms) in f.iter().enumerate() {
                average[i] += terms.len() as f64;
            }
        }
        for a in &mut average {
            *a = (*a / fields.len().max(1) as f64).max(1.0);
        }
        for (id, (tool, f)) in tools.iter().zip(&fields).enumerate() {
            let mut weighted: HashMap<&str, f64> = HashMap::new();
            for (i, terms) in f.iter().enumerate() {
                let field = FIELDS[i];
                let norm = 1.0 - field.b + field.b * terms.len() as f64 / average[i];
                for term in terms {
                    *weighted.entry(term.as_str()).or_default() += field.weight / norm;
                }
            }
            for (term, tf) in weighted {
                index
                    .postings
                    .entry(term.to_owned())
                    .or_default()
                    .push((id, tf));
            }
            let mut resources: Vec<String> = f[0]
                .iter()
                .filter(|t| !is_filler(t) && !is_verb(t) && !STRUCTURAL.contains(&t.as_str()))
                .cloned()
                .collect();
            resources.sort();
            resources.dedup();
            index.entries.push(Entry {
                hit: SearchHit {
                    tool: format!("{}.{}", tool.namespace, tool.name),
                    signature: signature(tool),
                    summary: first_sentence(&tool.description),
                    file: format!("servers/{}/{}.ts", tool.namespace, tool.name),
                    score: 0.0,
                },
                python_signature: python_signature(tool),
                resources,
            });
        }
        index
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The best `limit` tools for `query`, best first (ties by name, so results are stable).
    pub fn search(&self, query: &str, limit: usize) -> Vec<SearchHit> {
        self.search_in(query, limit, Language::TypeScript)
    }

    /// [`Self::search`], each hit's signature and file in `language` (the ranking is the same).
    pub fn search_in(&self, query: &str, limit: usize, language: Language) -> Vec<SearchHit> {
        let n = self.entries.len() as f64;
        let concepts = query_concepts(query);
        let mut scores = vec![0f64; self.entries.len()];
        let mut best = vec![0f64; self.entries.len()];
        let mut touched: Vec<usize> = Vec::new();
        for alternatives in &concepts {
            for (term, weight) in alternatives {
                let Some(postings) = self.postings.get(term.as_str()) else {
                    continue;
                };
                let df = postings.len() as f64;
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                for &(id, tf) in postings {
                    let s = weight * idf * tf * (K1 + 1.0) / (tf + K1);
                    if best[id] == 0.0 {
                        touched.push(id);
                    }
                    if s > best[id] {
                        best[id] = s;
                    }
                }
            }
            for id in touched.drain(..) {
                scores[id] += best[id];
                best[id] = 0.0;
            }
        }
        // Resource words of the name that the query did not mention.
        for (id, entry) in self.entries.iter().enumerate() {
            if scores[id] > 0.0 {
                let extra = entry
                    .resources
                    .iter()
                    .filter(|r| {
                        !concepts
                            .iter()
                            .any(|alternatives| alternatives.iter().any(|(t, _)| t == *r))
                    })
                    .count();
                scores[id] *= EXTRA_WORD_FACTOR.powi(i32::try_from(extra).unwrap_or(i32::MAX));
            }
        }
        // Someone who typed the tool's exact name wants that tool first.
        let wanted = query.trim();
        for (id, entry) in self.entries.iter().enumerate() {
            if entry.hit.tool == wanted || entry.hit.tool.ends_with(&format!(".{wanted}")) {
                scores[id] += 100.0;
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.entries[a.0].hit.tool.cmp(&self.entries[b.0].hit.tool))
        });
        ranked
            .into_iter()
            .take(limit)
            .map(|(id, score)| {
                let entry = &self.entries[id];
                let mut hit = SearchHit {
                    score: (score * 1000.0).round() / 1000.0,
                    ..entry.hit.clone()
                };
                if language == Language::Python {
                    hit.signature.clone_from(&entry.python_signature);
                    if let Some(stem) = hit.file.strip_suffix(".ts") {
                        hit.file = format!("{stem}.pyi");
                    }
                }
                hit
            })
            .collect()
    }
}

/// A tool's terms by field, in the order of [`FIELDS`].
fn tool_fields(tool: &SdkTool) -> [Vec<String>; 6] {
    let description = tool.description.trim();
    // An OpenAPI operation's description ends with its `METHOD /path` line.
    let (text, route) = match description.rsplit_once('\n') {
        Some((text, last)) if route_verb(last).is_some() => (text.trim(), Some(last.trim())),
        _ if route_verb(description).is_some() => ("", Some(description)),
        _ => (description, None),
    };
    let (summary, body) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut path = Vec::new();
    if let Some(route) = route
        && let Some((method, target)) = route.split_once(' ')
    {
        path.extend(route_verb(method).map(str::to_owned));
        // `{owner}` and the like are parameters, not resources.
        let mut depth = 0usize;
        let bare: String = target
            .chars()
            .map(|c| match c {
                '{' => {
                    depth += 1;
                    ' '
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    ' '
                }
                _ if depth > 0 => ' ',
                _ => c,
            })
            .collect();
        path.extend(tokens(&bare));
    }
    let parameters: Vec<String> = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().flat_map(|k| tokens(k)).collect())
        .unwrap_or_default();
    [
        tokens(&tool.name),
        tokens(summary),
        tokens(body),
        path,
        parameters,
        tokens(&tool.namespace),
    ]
}

/// The verb an HTTP method stands for in a route line (`POST /repos`), if it is one.
fn route_verb(line: &str) -> Option<&'static str> {
    let (method, target) = line.trim().split_once(' ')?;
    if !target.starts_with('/') && !method.is_empty() && target.contains(' ') {
        return None;
    }
    match method {
        "GET" | "HEAD" => Some("get"),
        "POST" => Some("create"),
        "PUT" | "PATCH" => Some("update"),
        "DELETE" => Some("delete"),
        _ => None,
    }
}

/// Words of a query that say nothing about the tool.
fn is_filler(term: &str) -> bool {
    matches!(
        term,
        "a" | "an"
            | "the"
            | "to"
            | "of"
            | "in"
            | "on"
            | "for"
            | "from"
            | "by"
            | "with"
            | "at"
            | "and"
            | "or"
            | "is"
            | "it"
            | "its"
            | "this"
            | "that"
            | "these"
            | "those"
            | "all"
            | "some"
            | "any"
            | "about"
            | "into"
            | "onto"
            | "please"
            | "how"
            | "do"
            | "can"
            | "what"
            | "which"
            | "single"
            | "one"
            | "two"
            | "given"
            | "specific"
            | "certain"
            | "as"
            | "be"
    )
}

/// Words of a tool name that are neither verbs nor resources.
const STRUCTURAL: [&str; 4] = ["mutation", "query", "authenticated", "user"];

/// Verbs, as they appear in tool names; a name's other words are its resources.
fn is_verb(term: &str) -> bool {
    matches!(
        term,
        "get"
            | "list"
            | "create"
            | "update"
            | "delete"
            | "remove"
            | "add"
            | "set"
            | "check"
            | "edit"
            | "search"
            | "read"
            | "open"
            | "close"
            | "find"
            | "fetch"
            | "show"
            | "view"
            | "replace"
            | "upsert"
            | "put"
            | "post"
            | "patch"
            | "new"
    )
}

/// What a word of a query may mean in a tool: (term, weight), the word itself first.
fn alternatives(term: &str) -> Vec<(String, f64)> {
    let also: &[(&str, f64)] = match term {
        // Making something.
        "create" => &[("add", 0.6)],
        "add" => &[("create", 0.7), ("sum", 0.5)],
        "sum" | "total" | "plus" => &[("add", 0.6), ("sum", 0.8)],
        "new" | "make" | "start" | "write" | "post" | "submit" | "insert" => &[("create", 0.7)],
        "open" | "publish" | "draft" | "raise" => &[("create", 0.7)],
        // Changing something.
        "update" => &[("edit", 0.8), ("set", 0.4)],
        "edit" | "modify" | "change" | "alter" | "rename" | "patch" | "tweak" => {
            &[("update", 0.8), ("edit", 0.8), ("set", 0.4)]
        }
        "set" | "configure" => &[("update", 0.6), ("set", 0.8)],
        "close" | "reopen" | "resolve" | "archive" => &[("update", 0.6), ("state", 0.3)],
        // Removing something.
        "delete" => &[("remove", 0.8)],
        "remove" => &[("delete", 0.8)],
        "drop" | "erase" | "destroy" | "discard" | "trash" | "purge" | "unlink" => {
            &[("delete", 0.8), ("remove", 0.8)]
        }
        // Reading something.
        "list" => &[("get", 0.4)],
        "get" => &[("list", 0.4)],
        "fetch" | "retrieve" | "show" | "view" | "read" | "display" | "see" | "look" | "load"
        | "inspect" | "describe" | "detail" => &[("get", 0.8), ("list", 0.4)],
        "find" | "lookup" => &[("search", 0.8), ("get", 0.5)],
        "search" => &[("find", 0.5), ("query", 0.3)],
        "enumerate" => &[("list", 0.8)],
        // Nouns.
        "assign" => &[("assignee", 0.8)],
        "branch" => &[("ref", 0.6)],
        "tag" => &[("ref", 0.4)],
        // "read a file" and "file a bug".
        "file" | "files" => &[("content", 0.6), ("create", 0.5)],
        "history" => &[("log", 0.6)],
        "link" | "connect" | "relate" => &[("relation", 0.6)],
        "me" | "my" | "mine" | "myself" | "i" => &[("authenticated", 0.5)],
        "stage" => &[("staging", 0.8)],
        _ => &[],
    };
    let mut out = vec![(term.to_owned(), 1.0)];
    out.extend(also.iter().map(|(t, w)| ((*t).to_owned(), *w)));
    out
}

/// A query as concepts, each a list of alternative terms with weights; filler dropped, a
/// repeated word counted once, "pull request" as `pull`.
fn query_concepts(query: &str) -> Vec<Vec<(String, f64)>> {
    let words = tokens(query);
    let mut concepts: Vec<Vec<(String, f64)>> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if word == "request" && i > 0 && words[i - 1] == "pull" {
            continue;
        }
        if is_filler(word) || seen.contains(&word.as_str()) {
            continue;
        }
        seen.push(word);
        concepts.push(alternatives(word));
    }
    concepts
}

/// `tools.ns.tool({ a: number, b?: string }): Promise<{ id: number, … }>`: the top-level
/// parameters and their types, and the result's top level.
pub fn signature(tool: &SdkTool) -> String {
    format!(
        "{}: Promise<{}>",
        call_signature(&tool.namespace, &tool.name, &tool.input_schema),
        tool_result_type(tool, Language::TypeScript)
    )
}

/// `async def issues_create(*, owner: str, title: str = ...) -> {"id": int, …}`: the
/// signature in Python, keyword-only as a Python program calls it (keys that are not
/// identifiers as `**{"a-b": str}`); a tool Python cannot name says so instead.
pub fn python_signature(tool: &SdkTool) -> String {
    if !is_identifier(&tool.namespace) || !is_identifier(&tool.name) {
        return format!(
            "tools.{}.{}: not callable from Python (its name is not a Python identifier)",
            tool.namespace, tool.name
        );
    }
    format!(
        "async def {}({}) -> {}",
        tool.name,
        python_parameters(&tool.input_schema),
        tool_result_type(tool, Language::Python)
    )
}

/// `*, a: int, b: str = ...`: an input schema's top-level properties as keyword-only
/// parameters, required ones first.
fn python_parameters(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "**kwargs: Any".into();
    };
    let mut named = Vec::new();
    let mut optional = Vec::new();
    let mut odd = Vec::new();
    for (name, s) in properties {
        let t = short_type_in(s, Language::Python);
        let is_required = required.contains(&name.as_str());
        if !is_identifier(name) {
            let t = if is_required {
                t
            } else {
                format!("NotRequired[{t}]")
            };
            odd.push(format!("{}: {t}", Value::String(name.clone())));
        } else if is_required {
            named.push(format!("{name}: {t}"));
        } else {
            optional.push(format!("{name}: {t} = ..."));
        }
    }
    named.extend(optional);
    let mut params: Vec<String> = Vec::new();
    let shown = named.len().min(SHOWN_PARAMETERS);
    if shown > 0 {
        params.push("*".into());
        params.extend(named[..shown].iter().cloned());
    }
    if named.len() > shown {
        params.push(format!("… {} more", named.len() - shown));
    }
    if !odd.is_empty() {
        params.push(format!("**{{{}}}", odd.join(", ")));
    }
    params.join(", ")
}

/// The result type a signature ends in: the declared one; the learned one when nothing is
/// declared; both when the results contradict the declaration.
fn tool_result_type(tool: &SdkTool, language: Language) -> String {
    match (&tool.output_schema, &tool.learned) {
        (Some(declared), Some(learned)) if !learned.drift.is_empty() => format!(
            "{} | {}",
            result_type_in(Some(declared), language),
            result_type_in(Some(&learned.schema), language)
        ),
        (None, Some(learned)) => result_type_in(Some(&learned.schema), language),
        (declared, _) => result_type_in(declared.as_ref(), language),
    }
}

/// Properties of a result object a signature names before `… N more`.
const SHOWN_RESULT_PROPERTIES: usize = 6;

/// The result's type in a few words: an object's first properties with their short types,
/// an array's items, `unknown` when the tool declares nothing. A top-level `$ref` (or
/// `allOf` of one) is followed once, so `Promise<{ id: number, … }>` rather than `object`.
#[cfg(test)]
fn result_type(schema: Option<&Value>) -> String {
    result_type_in(schema, Language::TypeScript)
}

/// [`result_type`] in `language`'s notation.
fn result_type_in(schema: Option<&Value>, language: Language) -> String {
    let Some(root) = schema else {
        return match language {
            Language::TypeScript => "unknown".into(),
            Language::Python => "Any".into(),
        };
    };
    let follow = |s: &'_ Value| -> Value {
        let mut s = s.clone();
        for _ in 0..4 {
            let target = s
                .get("$ref")
                .or_else(|| {
                    s.get("allOf")
                        .and_then(Value::as_array)
                        .filter(|a| a.len() == 1)
                        .and_then(|a| a[0].get("$ref"))
                })
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix('#'))
                .and_then(|p| root.pointer(p));
            match target {
                Some(t) => s = t.clone(),
                None => break,
            }
        }
        s
    };
    let schema = follow(root);
    // A union of shapes (`{ … } | string`): each member's, one level deep.
    if schema.get("type").is_none()
        && let Some(members) = ["anyOf", "oneOf"]
            .iter()
            .find_map(|key| schema.get(*key).and_then(Value::as_array))
            .filter(|m| !m.is_empty() && m.len() <= 4)
    {
        return members
            .iter()
            .map(|member| shape(&follow(member), &follow, language))
            .collect::<Vec<_>>()
            .join(" | ");
    }
    shape(&schema, &follow, language)
}

/// One (followed) schema's shape for [`result_type`]: an object's first properties, an
/// array's items, or a short type.
fn shape(schema: &Value, follow: &dyn Fn(&Value) -> Value, language: Language) -> String {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = match (types.contains(&"null"), language) {
        (false, _) => "",
        (true, Language::TypeScript) => " | null",
        (true, Language::Python) => " | None",
    };
    if types.contains(&"array") {
        let item = schema.get("items").map(follow).unwrap_or(Value::Null);
        let item = object_type(&item, language).unwrap_or_else(|| short_type_in(&item, language));
        return match language {
            Language::TypeScript => format!("{item}[]{nullable}"),
            Language::Python => format!("list[{item}]{nullable}"),
        };
    }
    match object_type(schema, language) {
        Some(object) => format!("{object}{nullable}"),
        None => short_type_in(schema, language),
    }
}

/// `{ a: number, b?: string, … 3 more }` for an object schema with properties (in Python
/// `{"a": float, "b": NotRequired[str], … 3 more}`).
fn object_type(schema: &Value, language: Language) -> Option<String> {
    let properties = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut shown: Vec<String> = properties
        .iter()
        .take(SHOWN_RESULT_PROPERTIES)
        .map(|(name, s)| {
            let is_required = required.contains(&name.as_str());
            match language {
                Language::TypeScript => {
                    let optional = if is_required { "" } else { "?" };
                    format!("{name}{optional}: {}", short_type(s))
                }
                Language::Python => {
                    let t = short_type_in(s, language);
                    let key = Value::String(name.clone());
                    if is_required {
                        format!("{key}: {t}")
                    } else {
                        format!("{key}: NotRequired[{t}]")
                    }
                }
            }
        })
        .collect();
    if properties.len() > SHOWN_RESULT_PROPERTIES {
        shown.push(format!(
            "… {} more",
            properties.len() - SHOWN_RESULT_PROPERTIES
        ));
    }
    Some(match (shown.is_empty(), language) {
        (true, _) => "{}".to_owned(),
        (false, Language::TypeScript) => format!("{{ {} }}", shown.join(", ")),
        (false, Language::Python) => format!("{{{}}}", shown.join(", ")),
    })
}

/// [`signature`] from its parts, without the result.
pub fn call_signature(namespace: &str, name: &str, schema: &Value) -> String {
    format!("tools.{namespace}.{name}({})", parameters(schema))
}

/// Top-level parameters shown before `… N more`.
const SHOWN_PARAMETERS: usize = 12;

/// `{ a: number, b?: string }`: an input schema's top-level properties with their short
/// types (also the hint of an `invalid_arguments` error, see [`crate::tools::arguments`]).
pub fn parameters(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let params: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{optional}: {}", short_type(s))
                })
                .collect()
        })
        .unwrap_or_default();
    if params.is_empty() {
        "{}".to_owned()
    } else if params.len() > SHOWN_PARAMETERS {
        format!(
            "{{ {}, … {} more }}",
            params[..SHOWN_PARAMETERS].join(", "),
            params.len() - SHOWN_PARAMETERS
        )
    } else {
        format!("{{ {} }}", params.join(", "))
    }
}

/// A schema's type in a word or a short union: `number`, `string[]`, `"a" | "b" | …`.
pub fn short_type(schema: &Value) -> String {
    short_type_in(schema, Language::TypeScript)
}

/// [`short_type`] in `language`'s notation (Python: `int`, `list[str]`, `Literal["a", "b", …]`).
fn short_type_in(schema: &Value, language: Language) -> String {
    if language == Language::Python {
        return short_python_type(schema);
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().take(5).map(Value::to_string).collect();
        return if values.len() > 5 {
            format!("{} | …", shown.join(" | "))
        } else {
            shown.join(" | ")
        };
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "integer" => "number".into(),
        Some(Value::String(t)) if t == "array" => {
            let item = schema.get("items").map_or("unknown".into(), short_type);
            format!("{item}[]")
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(|t| if t == "integer" { "number" } else { t })
            .collect::<Vec<_>>()
            .join(" | "),
        _ if schema.get("$ref").is_some() => "object".into(),
        _ => "unknown".into(),
    }
}

/// A schema's type in a word or a short union, in Python: `int`, `list[str]`,
/// `Literal["a", "b", …]`, `dict` for an object, `Any` when it says nothing.
fn short_python_type(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values
            .iter()
            .take(5)
            .map(|v| match v {
                Value::Bool(true) => "True".into(),
                Value::Bool(false) => "False".into(),
                Value::Null => "None".into(),
                other => other.to_string(),
            })
            .collect();
        let more = if values.len() > 5 { ", …" } else { "" };
        return format!("Literal[{}{more}]", shown.join(", "));
    }
    let word = |t: &str| -> String {
        match t {
            "integer" => "int".into(),
            "number" => "float".into(),
            "string" => "str".into(),
            "boolean" => "bool".into(),
            "null" => "None".into(),
            "object" => "dict".into(),
            "array" => {
                let item = schema.get("items").map_or("Any".into(), short_python_type);
                format!("list[{item}]")
            }
            _ => "Any".into(),
        }
    };
    match schema.get("type") {
        Some(Value::String(t)) => word(t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(word)
            .collect::<Vec<_>>()
            .join(" | "),
        _ if schema.get("$ref").is_some() => "dict".into(),
        _ => "Any".into(),
    }
}

/// Lower-cased terms: alphanumeric runs, split at camelCase humps, plural `s` dropped, a
/// few spellings made one (`repository` → `repo`).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let mut w = std::mem::take(word).to_lowercase();
            if w.len() > 4 && w.ends_with("ies") {
                w.truncate(w.len() - 3);
                w.push('y');
            } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                w.pop();
            }
            let w = match w.as_str() {
                "repository" | "repositorie" => "repo".to_owned(),
                "organization" | "organisation" => "org".to_owned(),
                "pr" => "pull".to_owned(),
                _ => w,
            };
            out.push(w);
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower {
                flush(&mut word, &mut out);
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            previous_lower = false;
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(ns: &str, name: &str, description: &str, params: &[&str]) -> SdkTool {
        let properties: serde_json::Map<String, Value> = params
            .iter()
            .map(|p| ((*p).to_owned(), json!({"type": "string"})))
            .collect();
        SdkTool {
            namespace: ns.into(),
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object", "properties": properties, "required": params.first().map(|p| vec![*p]).unwrap_or_default()}),
            output_schema: None,
            learned: None,
        }
    }

    fn catalogue() -> Vec<SdkTool> {
        vec![
            tool(
                "github",
                "repos_get",
                "Get a repository.",
                &["owner", "repo"],
            ),
            tool(
                "github",
                "issues_create",
                "Create an issue in a repository.",
                &["owner", "repo", "title"],
            ),
            tool(
                "github",
                "issues_list",
                "List issues assigned to you.",
                &["state"],
            ),
            tool(
                "time",
                "get_current_time",
                "Current time in a timezone.",
                &["timezone"],
            ),
            tool("everything", "echo", "Echoes back the input.", &["message"]),
        ]
    }

    #[test]
    fn ranks_by_name_description_and_parameters() {
        let index = ToolSearch::new(&catalogue());
        let hits = index.search("create issue", 3);
        assert_eq!(hits[0].tool, "github.issues_create");
        assert_eq!(
            hits[0].signature,
            "tools.github.issues_create({ owner: string, repo?: string, title?: string }): Promise<unknown>"
        );
        assert_eq!(hits[0].file, "servers/github/issues_create.ts");
        assert_eq!(index.search("timezone", 1)[0].tool, "time.get_current_time");
        assert_eq!(index.search("repositories", 5)[0].tool, "github.repos_get");
        assert_eq!(index.search("echo", 1)[0].tool, "everything.echo");
        assert!(index.search("nothing matches this", 5).is_empty());
    }

    #[test]
    fn signatures_show_the_result_compactly() {
        let mut t = tool("everything", "weather", "Weather.", &["city"]);
        t.output_schema = Some(json!({
            "type": "object",
            "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}},
            "required": ["temperature"]
        }));
        assert_eq!(
            signature(&t),
            "tools.everything.weather({ city: string }): Promise<{ conditions?: string, temperature: number }>"
        );
        // References are followed once; long objects are cut; lists and null are kept.
        let properties: serde_json::Map<String, Value> = (0..9)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        t.output_schema = Some(json!({
            "type": ["array", "null"],
            "items": {"$ref": "#/$defs/repo"},
            "$defs": {"repo": {"type": "object", "properties": properties}}
        }));
        assert_eq!(
            result_type(t.output_schema.as_ref()),
            "{ p0?: number, p1?: number, p2?: number, p3?: number, p4?: number, p5?: number, … 3 more }[] | null"
        );
        t.output_schema = Some(json!({"type": "string"}));
        assert_eq!(result_type(t.output_schema.as_ref()), "string");
        assert_eq!(result_type(None), "unknown");
        // A union of shapes shows each (`tools.airlock.read_sdk`: the tree or a file's text).
        t.output_schema = Some(json!({"anyOf": [
            {"type": "object", "properties": {"files": {"type": "array"}}, "required": ["files"]},
            {"$ref": "#/$defs/text"}
        ], "$defs": {"text": {"type": "string"}}}));
        assert_eq!(
            result_type(t.output_schema.as_ref()),
            "{ files: unknown[] } | string"
        );
    }

    #[test]
    fn python_signatures() {
        let index = ToolSearch::new(&catalogue());
        let hits = index.search_in("create issue", 3, Language::Python);
        assert_eq!(hits[0].tool, "github.issues_create");
        assert_eq!(
            hits[0].signature,
            "async def issues_create(*, owner: str, repo: str = ..., title: str = ...) -> Any"
        );
        assert_eq!(hits[0].file, "servers/github/issues_create.pyi");
        // The same ranking, in TypeScript by default.
        let ts = index.search("create issue", 3);
        assert_eq!(
            ts.iter().map(|h| &h.tool).collect::<Vec<_>>(),
            hits.iter().map(|h| &h.tool).collect::<Vec<_>>()
        );
        assert_eq!(ts[0].file, "servers/github/issues_create.ts");
        let mut t = tool("s", "weather", "Weather.", &["city"]);
        t.input_schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["c", "f"]}, "x-y": {"type": "integer"}}, "required": ["city"]});
        t.output_schema = Some(json!({
            "type": ["array", "null"],
            "items": {"type": "object", "properties": {"temperature": {"type": "number"}, "ok": {"type": "boolean"}}, "required": ["temperature"]}
        }));
        assert_eq!(
            python_signature(&t),
            "async def weather(*, city: str, units: Literal[\"c\", \"f\"] = ..., **{\"x-y\": NotRequired[int]}) -> list[{\"ok\": NotRequired[bool], \"temperature\": float}] | None"
        );
        t.name = "class".into();
        assert!(python_signature(&t).contains("not callable from Python"));
        t.name = "ping".into();
        t.input_schema = json!({"type": "object", "properties": {}});
        t.output_schema = None;
        assert_eq!(python_signature(&t), "async def ping() -> Any");
    }

    #[test]
    fn camel_and_snake_case_meet() {
        assert_eq!(tokens("listReposForUser"), ["list", "repo", "for", "user"]);
        assert_eq!(
            tokens("list_repos-for.user"),
            ["list", "repo", "for", "user"]
        );
        // Acronyms stay whole; "ss" is not a plural.
        assert_eq!(tokens("HTTPStatus access"), ["httpstatu", "access"]);
    }
}
