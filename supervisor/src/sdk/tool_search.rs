//! Tool search: BM25 over tool names, descriptions and parameter names, answering with
//! one-line signatures, so a model finds the two tools it needs among a thousand without
//! reading them all.
//!
//! Fields are weighted by repeating their terms in the document (name ×3, parameter names
//! ×2, namespace and description ×1), the usual cheap stand-in for BM25F. Terms are
//! lower-cased alphanumeric runs, split at camelCase humps, with a plural `s` dropped (`ies` → `y`), so
//! `listRepos`, `list_repos` and "repositories list" meet in the middle.

use super::sdk_files::{SdkTool, first_sentence};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// An index over a catalogue's tools.
#[derive(Debug, Default)]
pub struct ToolSearch {
    entries: Vec<Entry>,
    /// term → (entry, term frequency)
    postings: HashMap<String, Vec<(usize, u32)>>,
    average_length: f64,
}

#[derive(Debug)]
struct Entry {
    hit: SearchHit,
    length: f64,
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
        let mut total = 0usize;
        for tool in tools {
            let mut terms: Vec<String> = Vec::new();
            for _ in 0..3 {
                terms.extend(tokens(&tool.name));
            }
            terms.extend(tokens(&tool.namespace));
            if let Some(properties) = tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
            {
                for name in properties.keys() {
                    let t = tokens(name);
                    terms.extend(t.iter().cloned());
                    terms.extend(t);
                }
            }
            terms.extend(tokens(&tool.description));
            let id = index.entries.len();
            let mut counts: HashMap<String, u32> = HashMap::new();
            for term in &terms {
                *counts.entry(term.clone()).or_default() += 1;
            }
            for (term, count) in counts {
                index.postings.entry(term).or_default().push((id, count));
            }
            total += terms.len();
            index.entries.push(Entry {
                hit: SearchHit {
                    tool: format!("{}.{}", tool.namespace, tool.name),
                    signature: signature(tool),
                    summary: first_sentence(&tool.description),
                    file: format!("servers/{}/{}.ts", tool.namespace, tool.name),
                    score: 0.0,
                },
                length: terms.len() as f64,
            });
        }
        index.average_length = if index.entries.is_empty() {
            1.0
        } else {
            (total as f64 / index.entries.len() as f64).max(1.0)
        };
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
        let n = self.entries.len() as f64;
        let mut scores: HashMap<usize, f64> = HashMap::new();
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        for term in &terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(id, tf) in postings {
                let tf = f64::from(tf);
                let norm = 1.0 - B + B * self.entries[id].length / self.average_length;
                *scores.entry(id).or_default() += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        // Someone who typed the tool's exact name wants that tool first.
        let wanted = query.trim();
        for (id, entry) in self.entries.iter().enumerate() {
            if entry.hit.tool == wanted || entry.hit.tool.ends_with(&format!(".{wanted}")) {
                *scores.entry(id).or_default() += 100.0;
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.entries[a.0].hit.tool.cmp(&self.entries[b.0].hit.tool))
        });
        ranked
            .into_iter()
            .take(limit)
            .map(|(id, score)| SearchHit {
                score: (score * 1000.0).round() / 1000.0,
                ..self.entries[id].hit.clone()
            })
            .collect()
    }
}

/// `tools.ns.tool({ a: number, b?: string }): Promise<{ id: number, … }>`: the top-level
/// parameters and their types, and the result's top level.
pub fn signature(tool: &SdkTool) -> String {
    format!(
        "{}: Promise<{}>",
        call_signature(&tool.namespace, &tool.name, &tool.input_schema),
        result_type(tool.output_schema.as_ref())
    )
}

/// Properties of a result object a signature names before `… N more`.
const SHOWN_RESULT_PROPERTIES: usize = 6;

/// The result's type in a few words: an object's first properties with their short types,
/// an array's items, `unknown` when the tool declares nothing. A top-level `$ref` (or
/// `allOf` of one) is followed once, so `Promise<{ id: number, … }>` rather than `object`.
fn result_type(schema: Option<&Value>) -> String {
    let Some(root) = schema else {
        return "unknown".into();
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
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = if types.contains(&"null") {
        " | null"
    } else {
        ""
    };
    if types.contains(&"array") {
        let item = schema.get("items").map(&follow).unwrap_or(Value::Null);
        return format!(
            "{}[]{nullable}",
            object_type(&item).unwrap_or_else(|| short_type(&item))
        );
    }
    match object_type(&schema) {
        Some(object) => format!("{object}{nullable}"),
        None => short_type(&schema),
    }
}

/// `{ a: number, b?: string, … 3 more }` for an object schema with properties.
fn object_type(schema: &Value) -> Option<String> {
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
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{optional}: {}", short_type(s))
        })
        .collect();
    if properties.len() > SHOWN_RESULT_PROPERTIES {
        shown.push(format!(
            "… {} more",
            properties.len() - SHOWN_RESULT_PROPERTIES
        ));
    }
    Some(if shown.is_empty() {
        "{}".to_owned()
    } else {
        format!("{{ {} }}", shown.join(", "))
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

/// Lower-cased terms: alphanumeric runs, split at camelCase humps, plural `s` dropped.
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
