//! The contract check: before a program runs, its literal tool calls are held against the
//! catalogue, so a model learns of an unknown tool or a wrong argument in milliseconds, with
//! the expected signature, instead of after half its calls ran.
//!
//! The daemon never parses a program: the worker finds the calls in its own parse, after
//! lockdown, and sends them as [`ToolReferences`] before it evaluates anything; the
//! execution answers `Proceed` or refuses with the error [`check`] returns. A program that
//! crashes the parser costs one sandboxed worker, never the daemon. A worker that skipped
//! the message would only skip this courtesy: policy and argument schemas are enforced at
//! every call regardless.
//!
//! What is judged (everything else runs normally, and the schema check at call time still
//! applies):
//! - `tools.<ns>.<name>(…)` and `tools["ns"]["name"](…)` call sites: an unknown namespace or
//!   tool is rejected with the three closest names;
//! - a first argument written as an object literal: properties the schema does not declare
//!   (unless it allows more), required properties missing (unless the literal spreads another
//!   object), and literal values (strings, numbers, booleans, null, arrays, objects) of a type
//!   the schema does not accept, unless the source coerces near misses (`coerce = "safe"`)
//!   and the call would coerce this one ([`crate::tools::coercion`]: `"100"` for a number,
//!   `null` for an optional property): that is a warning naming the pointer and the value
//!   before and after, and the program runs.
//!
//! A program that declares its own `tools` binding sends no references, and namespaces that
//! could not be listed are skipped: the check must never reject a program that would work.
//! Calls of tools the caller may not call are not judged (they fail at run time with
//! `denied`, existing or not), and its answers name only what the caller may call: it is no
//! way to learn what other principals' tools are called or take.
//!
//! The references come from the worker, so they are untrusted: every site is judged with a
//! bounded amount of work, and the costly part of an answer (the did-you-mean search over a
//! catalogue) is done once, for the first violation only.

use crate::agent_api::{CoercionPlace, ExecutionError, ExecutionErrorKind};
use crate::sdk::tool_search::call_signature;
use crate::tools::coercion;
use crate::tools::naming::{closest, namespace_search, near_namespaces, near_tools, quote_list};
use crate::tools::{ToolDescriptor, ToolRegistry};
use airlock_policy::Principal;
use airlock_proto::{
    LiteralKind, LiteralProperty, LiteralScalar, SourcePosition, ToolReference, ToolReferences,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The catalogue as the check needs it: namespace → tool name → tool. [`check`] puts in it
/// only namespaces the caller may call in (of those the calls name, the ones with a tool it
/// may call), so that the names an answer suggests or lists are ones it may call.
pub type ContractCatalogue<'a> = BTreeMap<&'a str, BTreeMap<&'a str, &'a ToolDescriptor>>;

/// Builds the lookup from each namespace's tools.
pub fn catalogue<'a>(
    lists: impl IntoIterator<Item = (&'a str, &'a [ToolDescriptor])>,
) -> ContractCatalogue<'a> {
    let mut out: ContractCatalogue<'a> = BTreeMap::new();
    for (namespace, tools) in lists {
        let entry = out.entry(namespace).or_default();
        for tool in tools {
            entry.insert(tool.name.as_str(), tool);
        }
    }
    out
}

/// How the check treats a namespace it could not fully judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leniency {
    /// Its tools could not be listed: nothing about it is judged.
    Unlisted,
    /// Its tool list may change while the program runs (an MCP server with `dynamic_tools =
    /// true` that announces list changes): a tool missing now may exist by the time it is
    /// called, so only the arguments of tools that exist are judged.
    Changing,
}

/// The contract check of a program's literal tool calls against the tools `principal` may
/// call: the first violation in source order, as the execution error the agent receives
/// (kind `contract`), or `None` when nothing the check can judge is wrong.
///
/// A call of a tool the principal may not call is not judged, whether the tool exists or not:
/// it fails at run time with `denied` either way, which a program may catch, and judging it
/// would tell the program which tools exist and what they take. What an answer suggests or
/// lists (near names, the namespaces) is drawn from what the principal may call.
///
/// Only the namespaces the calls name are listed (listing starts a lazily started server).
/// `client` holds the request's client-owned tools (`tools.client.<name>`), judged like any.
pub async fn check(
    tools: &ToolRegistry,
    principal: &Principal,
    client: Option<Arc<[ToolDescriptor]>>,
    references: &ToolReferences,
) -> Verdict {
    let client_namespace = crate::tools::client::NAMESPACE;
    let callable = |namespace: &str, name: &str| {
        namespace == client_namespace || principal.allows_tool(&format!("{namespace}.{name}"))
    };
    let references = ToolReferences {
        calls: references
            .calls
            .iter()
            .filter(|c| callable(&c.namespace, &c.name))
            .cloned()
            .collect(),
    };
    let mut named: Vec<&str> = references
        .calls
        .iter()
        .map(|c| c.namespace.as_str())
        .collect();
    named.sort_unstable();
    named.dedup();
    let mut lists = Vec::new();
    let mut lenient = Vec::new();
    let mut coercing = Vec::new();
    for source in tools.sources() {
        let namespace = source.namespace().to_owned();
        if source.coerce().is_safe() {
            coercing.push(namespace.clone());
        }
        if named.binary_search(&namespace.as_str()).is_err() {
            // Not called: known by name (for suggestions) if the principal may call in it,
            // but not listed.
            if principal.may_call_in(&namespace) {
                lists.push((namespace, None));
            }
            continue;
        }
        let listed = match source.tools().await {
            // A name the list lacks is refused below, unless the source may add tools while
            // the program runs: first make sure the list is not one a missed change left stale.
            Ok(tools)
                if !source.tools_may_change()
                    && references.calls.iter().any(|c| {
                        c.namespace == namespace && !tools.iter().any(|t| t.name == c.name)
                    }) =>
            {
                source.tools_listed_within(RELIST_AFTER).await
            }
            listed => listed,
        };
        match listed {
            Ok(tools) => {
                if !tools.iter().any(|t| callable(&namespace, &t.name)) {
                    // Nothing in it the principal may call: as if there were no such
                    // namespace; but one that may add tools while the program runs is not
                    // judged (refusing it could refuse a program that would work, and
                    // warning about it would say that it exists).
                    if source.tools_may_change() {
                        lenient.push((namespace, Leniency::Unlisted));
                    }
                    continue;
                }
                if source.tools_may_change() {
                    lenient.push((namespace.clone(), Leniency::Changing));
                }
                lists.push((namespace, Some(tools)));
            }
            // Its calls will fail at run time with the reason; the check cannot judge them.
            Err(_) => lenient.push((namespace, Leniency::Unlisted)),
        }
    }
    if let Some(client) = client {
        lists.push((client_namespace.to_owned(), Some(client)));
    }
    let catalogue = catalogue(
        lists
            .iter()
            .map(|(ns, tools)| (ns.as_str(), tools.as_deref().unwrap_or_default())),
    );
    let near = |namespace: &str, wanted: &str| -> Vec<String> {
        let Some((_, Some(list))) = lists.iter().find(|(ns, _)| ns == namespace) else {
            return Vec::new();
        };
        if namespace == client_namespace {
            // The request's own tools: not the daemon's to cache.
            return near_tools(wanted, list, &namespace_search(namespace, list));
        }
        tools.near_callable_tools(namespace, wanted, list, principal)
    };
    judge(&references, &catalogue, &lenient, &coercing, &near)
}

/// What the contract check found: the refusal, if the program may not run, and what the
/// agent should know about calls it ran without judging.
#[derive(Debug, Default)]
pub struct Verdict {
    pub refusal: Option<ExecutionError>,
    /// Unknown tools of namespaces whose lists may change (the program ran: the tool may
    /// exist by the time it is called), with the tools they may have meant; and literal
    /// arguments the daemon will coerce to the tool's schema (`coerce = "safe"`), with the
    /// pointer and the value before and after.
    pub warnings: Vec<String>,
}

/// A tool list older than this is listed again before a name missing from it is refused.
const RELIST_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// At most this many literal arguments that will be coerced get a warning each.
const MAX_COERCION_WARNINGS: usize = 5;

/// The tools of a namespace that an unknown name may have meant (`tools/naming.rs`'s
/// `near_tools`, over a cached index where there is one).
pub type NearTools<'a> = dyn Fn(&str, &str) -> Vec<String> + 'a;

/// At most this many unknown tools of changing namespaces get a warning each.
const MAX_UNJUDGED_WARNINGS: usize = 3;

/// [`check`] against a catalogue already listed.
/// `coercing` lists the namespaces whose sources coerce near misses (`coerce = "safe"`): a
/// literal of the wrong type that the daemon will coerce is warned about instead of refused.
pub fn judge(
    references: &ToolReferences,
    catalogue: &ContractCatalogue<'_>,
    lenient: &[(String, Leniency)],
    coercing: &[String],
    near: &NearTools<'_>,
) -> Verdict {
    let mut first: Option<Violation<'_>> = None;
    let mut unjudged: Vec<&ToolReference> = Vec::new();
    let mut coerced = Vec::new();
    for site in &references.calls {
        let coerces = coercing.contains(&site.namespace);
        let judged = Judged {
            first: &mut first,
            unjudged: &mut unjudged,
            coerced: &mut coerced,
        };
        judge_site(site, catalogue, lenient, coerces, judged);
    }
    let Some(violation) = first else {
        let mut warnings = Vec::new();
        for (at, site, key, from, to, expected) in coerced.iter().take(MAX_COERCION_WARNINGS) {
            let to = match to {
                Some(to) => format!("to {to}"),
                None => "by leaving it out".to_owned(),
            };
            warnings.push(format!(
                "line {}: tools.{}.{}: argument `{key}` (/{}) is {from} where the schema wants {}; the daemon will coerce it {to}, as the source's coerce = \"safe\" allows — pass that instead",
                at.line,
                site.namespace,
                site.name,
                pointer_token(key),
                expected.join(" or ")
            ));
        }
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for site in unjudged {
            let key = (site.namespace.as_str(), site.name.as_str());
            if seen.contains(&key) || warnings.len() == MAX_UNJUDGED_WARNINGS {
                continue;
            }
            seen.push(key);
            let suggestion = unknown_tool_hint(catalogue, key.0, key.1, near);
            warnings.push(format!(
                "line {}: `tools.{}` lists no tool `{}` now; the program ran because this \
                 server may add tools while it runs, but the call will fail unless it does \
                 — {suggestion}",
                site.at.line, key.0, key.1
            ));
        }
        return Verdict {
            refusal: None,
            warnings,
        };
    };
    let (message, hint) = violation.problem.explain(catalogue, near);
    Verdict {
        refusal: Some(ExecutionError {
            kind: ExecutionErrorKind::Contract,
            name: None,
            message,
            line: Some(violation.at.line),
            column: Some(violation.at.column),
            stack: None,
            excerpt: None,
            hint: Some(hint),
            explanation: None,
        }),
        warnings: Vec::new(),
    }
}

/// One thing wrong with a call, at a position in the program.
#[derive(Debug)]
struct Violation<'r> {
    at: SourcePosition,
    problem: Problem<'r>,
}

/// What is wrong, with just enough to explain it later: the explanation (did-you-mean over
/// the catalogue, the tool's signature) is built for the reported violation only.
#[derive(Debug)]
enum Problem<'r> {
    UnknownNamespace {
        namespace: &'r str,
    },
    UnknownTool {
        namespace: &'r str,
        name: &'r str,
    },
    UnknownArgument {
        tool: &'r ToolReference,
        key: &'r str,
    },
    WrongType {
        tool: &'r ToolReference,
        key: &'r str,
        expected: Vec<String>,
        given: LiteralKind,
    },
    MissingArgument {
        tool: &'r ToolReference,
        missing: String,
    },
    /// Python: arguments passed by position.
    Positional {
        tool: &'r ToolReference,
    },
}

impl Problem<'_> {
    /// The message and the hint the agent gets.
    fn explain(&self, catalogue: &ContractCatalogue<'_>, near: &NearTools<'_>) -> (String, String) {
        match self {
            Problem::UnknownNamespace { namespace } => {
                let near = near_namespaces(namespace, catalogue.keys().copied());
                let hint = if *namespace == crate::tools::client::NAMESPACE {
                    "tools.client.<name> calls the tools a request declares in client_tools, and this one declares none".to_owned()
                } else if catalogue.is_empty() {
                    "you may call no tools; the operator grants tools with `allow` in the principal's policy entry".to_owned()
                } else if near.is_empty() {
                    let all: Vec<String> = catalogue.keys().map(|k| format!("tools.{k}")).collect();
                    format!("the namespaces you may call are {}", all.join(", "))
                } else {
                    format!("did you mean {}?", quote_list(&near, "tools.", ""))
                };
                (
                    format!("there is no tool namespace `tools.{namespace}` you may call"),
                    hint,
                )
            }
            Problem::UnknownTool { namespace, name } => (
                format!("`tools.{namespace}` has no tool `{name}`"),
                unknown_tool_hint(catalogue, namespace, name, near),
            ),
            Problem::UnknownArgument { tool, key } => {
                let schema = input_schema(catalogue, tool);
                let properties = schema
                    .and_then(|s| s.get("properties"))
                    .and_then(Value::as_object);
                let near = closest(
                    key,
                    properties.into_iter().flatten().map(|(k, _)| k.as_str()),
                    3,
                );
                let did_you_mean = if near.is_empty() {
                    String::new()
                } else {
                    format!(" (did you mean {}?)", quote_list(&near, "`", "`"))
                };
                (
                    format!(
                        "tools.{}.{}: unknown argument `{key}`{did_you_mean}",
                        tool.namespace, tool.name
                    ),
                    signature_hint(catalogue, tool),
                )
            }
            Problem::WrongType {
                tool,
                key,
                expected,
                given,
            } => (
                format!(
                    "tools.{}.{}: argument `{key}` must be {}, not {}",
                    tool.namespace,
                    tool.name,
                    expected.join(" or "),
                    given.json_type()
                ),
                signature_hint(catalogue, tool),
            ),
            Problem::MissingArgument { tool, missing } => (
                format!(
                    "tools.{}.{}: the required argument `{missing}` is missing",
                    tool.namespace, tool.name
                ),
                signature_hint(catalogue, tool),
            ),
            Problem::Positional { tool } => (
                format!(
                    "tools.{}.{}: arguments are passed by keyword, not by position",
                    tool.namespace, tool.name
                ),
                format!(
                    "write {}",
                    keyword_signature(tool, input_schema(catalogue, tool).unwrap_or(&Value::Null))
                ),
            ),
        }
    }
}

/// Parameter names shown in a keyword signature, at most.
const SHOWN_KEYWORDS: usize = 12;

/// `tools.time.get_current_time(timezone=…)`: the call with its parameters as keywords, the
/// required ones first (Python's spelling of the tool's signature).
fn keyword_signature(tool: &ToolReference, schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut names: Vec<&str> = properties
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    names.sort_by_key(|n| !required.contains(n));
    let mut shown: Vec<String> = names
        .iter()
        .take(SHOWN_KEYWORDS)
        .map(|n| format!("{n}=…"))
        .collect();
    if names.len() > SHOWN_KEYWORDS {
        shown.push("…".to_owned());
    }
    format!(
        "tools.{}.{}({}) (keyword arguments)",
        tool.namespace,
        tool.name,
        shown.join(", ")
    )
}

/// What an agent that called the unknown `tools.<namespace>.<name>` should do: the tools it
/// may have meant, else (for the request's own client tools) the ones declared, else a search.
fn unknown_tool_hint(
    catalogue: &ContractCatalogue<'_>,
    namespace: &str,
    name: &str,
    near: &NearTools<'_>,
) -> String {
    let near = near(namespace, name);
    let near: Vec<&str> = near.iter().map(String::as_str).collect();
    if near.is_empty() && namespace == crate::tools::client::NAMESPACE {
        // The request's own tools are not in the daemon's search: name them.
        let declared: Vec<&str> = catalogue
            .get(namespace)
            .into_iter()
            .flat_map(|t| t.keys().copied())
            .collect();
        format!(
            "the request declares {} in client_tools",
            quote_list(&declared, "tools.client.", "()")
        )
    } else if near.is_empty() {
        format!("search for it: GET /v1/tools/search?q={name}")
    } else {
        format!(
            "did you mean {}?",
            quote_list(&near, &format!("tools.{namespace}."), "()")
        )
    }
}

fn input_schema<'c>(
    catalogue: &'c ContractCatalogue<'_>,
    tool: &ToolReference,
) -> Option<&'c Value> {
    catalogue
        .get(tool.namespace.as_str())?
        .get(tool.name.as_str())
        .map(|t| &t.input_schema)
}

fn signature_hint(catalogue: &ContractCatalogue<'_>, tool: &ToolReference) -> String {
    let schema = input_schema(catalogue, tool).unwrap_or(&Value::Null);
    format!(
        "the tool takes {}",
        call_signature(&tool.namespace, &tool.name, schema)
    )
}

/// Keeps the violation that comes first in the program (the first found, among equals).
fn note<'r>(first: &mut Option<Violation<'r>>, at: SourcePosition, problem: Problem<'r>) {
    if first.as_ref().is_none_or(|v| at < v.at) {
        *first = Some(Violation { at, problem });
    }
}

/// A literal argument the daemon will coerce: where, the call, the key, the value before and
/// after (`None`: left out), and the types the schema wants.
type Coerced<'r> = (
    SourcePosition,
    &'r ToolReference,
    &'r str,
    Value,
    Option<Value>,
    Vec<String>,
);

/// What judging the sites collects.
struct Judged<'a, 'r> {
    first: &'a mut Option<Violation<'r>>,
    unjudged: &'a mut Vec<&'r ToolReference>,
    coerced: &'a mut Vec<Coerced<'r>>,
}

/// What coercion would make of a literal of the wrong type.
enum WouldCoerce {
    /// This value (`None`: the property left out), which the schema's type takes.
    To(Value, Option<Value>),
    /// It may be coerced, but the literal's value is not known (a template literal, a long
    /// string): not judged.
    Unknown,
    /// It would not be.
    No,
}

/// Whether the daemon would coerce the literal `property` of a call to a tool whose input
/// schema is `schema`, where `declared` (the property's schema) does not take its type.
fn would_coerce(
    schema: &Value,
    declared: &Value,
    property: &LiteralProperty,
    given: LiteralKind,
    expected: &[String],
) -> WouldCoerce {
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|k| k.as_str() == Some(property.key.as_str())));
    if given == LiteralKind::Null {
        return if required {
            WouldCoerce::No
        } else {
            WouldCoerce::To(Value::Null, None)
        };
    }
    let wants = |t: &str| expected.iter().any(|e| e == t);
    let maybe = match given {
        LiteralKind::String => {
            wants("number") || wants("integer") || wants("boolean") || wants("array")
        }
        LiteralKind::Number | LiteralKind::Integer | LiteralKind::Boolean => {
            wants("string") || wants("array")
        }
        _ => false,
    };
    if !maybe {
        return WouldCoerce::No;
    }
    let from = match &property.scalar {
        Some(LiteralScalar::String(s)) => Value::String(s.clone()),
        Some(LiteralScalar::Boolean(b)) => Value::Bool(*b),
        Some(LiteralScalar::Number(n)) => match serde_json::from_str::<Value>(n) {
            Ok(v @ Value::Number(_)) => v,
            _ => return WouldCoerce::Unknown,
        },
        None => return WouldCoerce::Unknown,
    };
    // The property alone, walked under the whole schema (its `$ref`s point into it).
    let mut object = serde_json::Map::new();
    object.insert(property.key.clone(), from.clone());
    let Some((coerced, _)) =
        coercion::coerce(schema, &Value::Object(object), CoercionPlace::Arguments)
    else {
        return WouldCoerce::No;
    };
    let Some(to) = coerced.get(&property.key) else {
        return WouldCoerce::No;
    };
    // Shallowly, as the check judges types: the rest is checked at the call.
    if accepted_types(declared).is_some_and(|t| accepts_value(&t, to)) {
        WouldCoerce::To(from, Some(to.clone()))
    } else {
        WouldCoerce::No
    }
}

fn accepts_value(expected: &[String], value: &Value) -> bool {
    let kind = match value {
        Value::String(_) => LiteralKind::String,
        Value::Number(n) if n.is_i64() || n.is_u64() => LiteralKind::Integer,
        Value::Number(_) => LiteralKind::Number,
        Value::Bool(_) => LiteralKind::Boolean,
        Value::Null => LiteralKind::Null,
        Value::Array(_) => LiteralKind::Array,
        Value::Object(_) => LiteralKind::Object,
    };
    accepts(expected, kind)
}

/// A key as a JSON Pointer token (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Holds one call against the catalogue, keeping its problem if it comes before `first`.
fn judge_site<'r>(
    site: &'r ToolReference,
    catalogue: &ContractCatalogue<'_>,
    lenient: &[(String, Leniency)],
    coerces: bool,
    judged: Judged<'_, 'r>,
) {
    let Judged {
        first,
        unjudged,
        coerced,
    } = judged;
    // Nothing in this call can come before what is already found (its own problems all lie
    // at or after the call's position).
    if first.as_ref().is_some_and(|v| v.at <= site.at) {
        return;
    }
    let (namespace, name) = (site.namespace.as_str(), site.name.as_str());
    let leniency = lenient
        .iter()
        .find(|(ns, _)| ns == namespace)
        .map(|(_, l)| *l);
    if leniency == Some(Leniency::Unlisted) {
        return;
    }
    let Some(tools) = catalogue.get(namespace) else {
        note(first, site.at, Problem::UnknownNamespace { namespace });
        return;
    };
    let Some(tool) = tools.get(name) else {
        if leniency == Some(Leniency::Changing) {
            unjudged.push(site);
        } else {
            note(first, site.at, Problem::UnknownTool { namespace, name });
        }
        return;
    };
    let Some(object) = &site.argument else {
        return;
    };
    if object.positional {
        note(first, object.at, Problem::Positional { tool: site });
        return;
    }
    let schema = &tool.input_schema;
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = properties.is_some()
        && !matches!(
            schema.get("additionalProperties"),
            Some(Value::Bool(true) | Value::Object(_))
        )
        && schema.get("patternProperties").is_none();
    for property in &object.properties {
        let key = property.key.as_str();
        match properties.and_then(|p| p.get(key)) {
            None if closed => note(
                first,
                property.at,
                Problem::UnknownArgument { tool: site, key },
            ),
            Some(declared) => {
                if let Some(given) = property.value
                    && let Some(expected) = accepted_types(declared)
                    && !accepts(&expected, given)
                {
                    if coerces {
                        match would_coerce(schema, declared, property, given, &expected) {
                            WouldCoerce::To(from, to) => {
                                coerced.push((property.value_at, site, key, from, to, expected));
                                continue;
                            }
                            WouldCoerce::Unknown => continue,
                            WouldCoerce::No => {}
                        }
                    }
                    note(
                        first,
                        property.value_at,
                        Problem::WrongType {
                            tool: site,
                            key,
                            expected,
                            given,
                        },
                    );
                }
            }
            None => {}
        }
    }
    if !object.open {
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        for missing in required.filter(|r| !object.properties.iter().any(|p| p.key == *r)) {
            note(
                first,
                object.at,
                Problem::MissingArgument {
                    tool: site,
                    missing: missing.to_owned(),
                },
            );
        }
    }
}

/// The JSON types a property schema accepts, when it says (`type`, no unions to reason
/// about).
fn accepted_types(schema: &Value) -> Option<Vec<String>> {
    if ["oneOf", "anyOf", "allOf", "$ref", "not", "if"]
        .iter()
        .any(|k| schema.get(k).is_some())
    {
        return None;
    }
    let mut types: Vec<String> = match schema.get("type")? {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => return None,
    };
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        types.push("null".into());
    }
    Some(types)
}

fn accepts(expected: &[String], given: LiteralKind) -> bool {
    expected.iter().any(|t| match t.as_str() {
        "integer" => given == LiteralKind::Integer,
        other => other == given.json_type(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_proto::LiteralObject;
    use serde_json::json;

    fn at(line: u32, column: u32) -> SourcePosition {
        SourcePosition { line, column }
    }

    /// `tools.<ns>.<name>(…)` at `line`:`column`, with no literal argument.
    fn call(ns: &str, name: &str, line: u32, column: u32) -> ToolReference {
        ToolReference {
            namespace: ns.into(),
            name: name.into(),
            at: at(line, column),
            argument: None,
        }
    }

    /// The same call with an object literal right after the parenthesis; each property is
    /// `(key, value kind)`, laid out as `{ k: v, k: v }` would be on one line.
    fn with_object(
        mut site: ToolReference,
        open: bool,
        props: &[(&str, Option<LiteralKind>)],
    ) -> ToolReference {
        let start = site.at.column + site.namespace.len() as u32 + site.name.len() as u32 + 8;
        let mut column = start + 2;
        let properties = props
            .iter()
            .map(|(key, value)| {
                let property = LiteralProperty {
                    key: (*key).into(),
                    at: at(site.at.line, column),
                    value_at: at(site.at.line, column + key.len() as u32 + 2),
                    value: *value,
                    // A string is some text no rule coerces; numbers are 1 (or 1.5).
                    scalar: match value {
                        Some(Str) => Some(LiteralScalar::String("some text".into())),
                        Some(Integer) => Some(LiteralScalar::Number("1".into())),
                        Some(Number) => Some(LiteralScalar::Number("1.5".into())),
                        _ => None,
                    },
                };
                column += key.len() as u32 + 6;
                property
            })
            .collect();
        site.argument = Some(LiteralObject {
            at: at(site.at.line, start),
            open,
            properties,
            positional: false,
        });
        site
    }

    fn tools() -> Vec<ToolDescriptor> {
        vec![
            ToolDescriptor {
                name: "add".into(),
                description: "Adds.".into(),
                input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}, "label": {"type": "string"}}, "required": ["a", "b"]}),
                output_schema: None,
                read_only: false,
            },
            ToolDescriptor {
                name: "open".into(),
                description: "Takes anything.".into(),
                input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": true}),
                output_schema: None,
                read_only: false,
            },
        ]
    }

    fn run_lenient(
        calls: Vec<ToolReference>,
        lenient: &[(String, Leniency)],
    ) -> Option<ExecutionError> {
        let tools = tools();
        let index = namespace_search("math", &tools);
        let near = |_: &str, wanted: &str| near_tools(wanted, &tools, &index);
        judge(
            &ToolReferences { calls },
            &catalogue([("math", tools.as_slice())]),
            lenient,
            &["math".to_owned()],
            &near,
        )
        .refusal
    }

    /// The verdict on one call to `math.add` whose properties carry these literal values, for
    /// a source that coerces (`coercing`) or not.
    fn verdict_on(props: &[(&str, LiteralKind, Option<LiteralScalar>)], coercing: bool) -> Verdict {
        let tools = tools();
        let index = namespace_search("math", &tools);
        let near = |_: &str, wanted: &str| near_tools(wanted, &tools, &index);
        let mut site = with_object(call("math", "add", 4, 1), false, &[]);
        let object = site.argument.as_mut().unwrap();
        for (i, (key, kind, scalar)) in props.iter().enumerate() {
            object.properties.push(LiteralProperty {
                key: (*key).into(),
                at: at(4, 20 + 10 * i as u32),
                value_at: at(4, 23 + 10 * i as u32),
                value: Some(*kind),
                scalar: scalar.clone(),
            });
        }
        let coercing = if coercing {
            vec!["math".to_owned()]
        } else {
            Vec::new()
        };
        judge(
            &ToolReferences { calls: vec![site] },
            &catalogue([("math", tools.as_slice())]),
            &[],
            &coercing,
            &near,
        )
    }

    /// A literal the daemon will coerce is a warning with the pointer and the values; one it
    /// would not coerce is refused as before, and so is everything with `coerce = "off"`.
    #[test]
    fn literals_the_daemon_will_coerce_are_warned_about_not_refused() {
        let number = |n: &str| Some(LiteralScalar::Number(n.into()));
        let text = |t: &str| Some(LiteralScalar::String(t.into()));
        let v = verdict_on(
            &[
                ("a", Str, text("100")),
                ("b", Integer, number("2")),
                ("label", Integer, number("5")),
            ],
            true,
        );
        assert!(v.refusal.is_none(), "{:?}", v.refusal);
        assert_eq!(
            v.warnings,
            vec![
                "line 4: tools.math.add: argument `a` (/a) is \"100\" where the schema wants number; the daemon will coerce it to 100, as the source's coerce = \"safe\" allows — pass that instead",
                "line 4: tools.math.add: argument `label` (/label) is 5 where the schema wants string; the daemon will coerce it to \"5\", as the source's coerce = \"safe\" allows — pass that instead",
            ]
        );
        // null for the optional `label`: left out.
        let v = verdict_on(
            &[
                ("a", Integer, number("1")),
                ("b", Integer, number("2")),
                ("label", Null, None),
            ],
            true,
        );
        assert!(v.refusal.is_none());
        assert!(
            v.warnings[0].contains("the daemon will coerce it by leaving it out"),
            "{:?}",
            v.warnings
        );
        // Not coercible: refused as before.
        for (value, message) in [
            (text("12abc"), "argument `a` must be number, not string"),
            (text(""), "argument `a` must be number, not string"),
        ] {
            let v = verdict_on(&[("a", Str, value), ("b", Integer, number("2"))], true);
            assert_eq!(
                v.refusal.unwrap().message,
                format!("tools.math.add: {message}")
            );
        }
        let v = verdict_on(
            &[("a", Integer, number("1")), ("b", Str, text("1.5"))],
            true,
        );
        assert_eq!(
            v.refusal.unwrap().message,
            "tools.math.add: argument `b` must be integer, not string"
        );
        // A value the worker did not send (a long string): not judged.
        let v = verdict_on(&[("a", Str, None), ("b", Integer, number("2"))], true);
        assert!(v.refusal.is_none() && v.warnings.is_empty());
        // coerce = "off": refused.
        let v = verdict_on(
            &[("a", Str, text("100")), ("b", Integer, number("2"))],
            false,
        );
        assert_eq!(
            v.refusal.unwrap().message,
            "tools.math.add: argument `a` must be number, not string"
        );
    }

    fn run(calls: Vec<ToolReference>) -> Option<ExecutionError> {
        run_lenient(calls, &[])
    }

    use LiteralKind::{Integer, Null, Number, String as Str};

    #[test]
    fn correct_calls_pass() {
        let add = with_object(
            call("math", "add", 1, 17),
            false,
            &[("a", Some(Integer)), ("b", Some(Integer))],
        );
        assert!(run(vec![add]).is_none());
        let add = with_object(
            call("math", "add", 1, 1),
            false,
            &[
                ("a", Some(Number)),
                ("b", Some(Integer)),
                ("label", Some(Str)),
            ],
        );
        assert!(run(vec![add]).is_none());
        // Not judged: non-literal values and arguments, spreads, open schemas.
        assert!(run(vec![call("math", "add", 1, 1)]).is_none());
        let add = with_object(
            call("math", "add", 1, 1),
            false,
            &[("a", None), ("b", None)],
        );
        assert!(run(vec![add]).is_none());
        let spread = with_object(call("math", "add", 1, 1), true, &[("a", Some(Integer))]);
        assert!(run(vec![spread]).is_none());
        let open = with_object(
            call("math", "open", 1, 1),
            false,
            &[("x", Some(Str)), ("extra", Some(Integer))],
        );
        assert!(run(vec![open]).is_none());
        assert!(run(vec![]).is_none());
    }

    #[test]
    fn python_positional_arguments_are_refused_with_the_keywords() {
        let mut add = with_object(call("math", "add", 1, 1), true, &[]);
        if let Some(object) = add.argument.as_mut() {
            object.positional = true;
        }
        let e = run(vec![add]).expect("refused");
        assert_eq!(
            e.message,
            "tools.math.add: arguments are passed by keyword, not by position"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some("write tools.math.add(a=…, b=…, label=…) (keyword arguments)")
        );
    }

    /// A source of fixed tools, for [`check`] over a registry.
    struct Fixed(&'static str, Vec<ToolDescriptor>);

    impl crate::tools::ToolSource for Fixed {
        fn namespace(&self) -> &str {
            self.0
        }
        fn tools(&self) -> crate::tools::ToolsFuture<'_> {
            let tools: Arc<[ToolDescriptor]> = self.1.clone().into();
            Box::pin(async move { Ok(tools) })
        }
        fn call<'a>(
            &'a self,
            _: &'a str,
            args: Value,
            _: &'a crate::tools::CallContext,
        ) -> crate::tools::ToolFuture<'a> {
            Box::pin(async move { Ok(args).into() })
        }
    }

    /// [`check`] of `calls` by a principal allowed `allow` and denied `deny`, against `math`
    /// and a `vault` whose one tool takes only `path`.
    fn check_as(
        allow: &[&str],
        deny: &[&str],
        calls: Vec<ToolReference>,
    ) -> Option<ExecutionError> {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Fixed("math", tools())));
        registry.register(Arc::new(Fixed(
            "vault",
            vec![ToolDescriptor {
                name: "read_all".into(),
                description: "Reads every secret in the vault.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
                output_schema: None,
                read_only: true,
            }],
        )));
        let principal = Principal {
            deny: deny.iter().map(|d| (*d).into()).collect(),
            ..Principal::new("p", vec![], allow)
        };
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(check(
                &registry,
                &principal,
                None,
                &ToolReferences { calls },
            ))
            .refusal
    }

    /// What the check answers names only what the principal may call: a namespace it may
    /// call nothing in is answered as one that does not exist, a tool it may not call in a
    /// namespace it may call in is not judged at all (it fails at run time with `denied`,
    /// existing or not), and near names are drawn from the tools it may call.
    #[test]
    fn the_check_tells_nothing_of_what_the_principal_may_not_call() {
        let wrong_argument = |ns: &str| {
            with_object(
                call(ns, "read_all", 1, 7),
                false,
                &[("nope", Some(Integer))],
            )
        };
        let told =
            |e: &ExecutionError| format!("{} {}", e.message, e.hint.clone().unwrap_or_default());
        for (allow, deny) in [
            (&["math.*"][..], &[][..]),
            (&["*"], &["vault.*"]),
            (&["math.*", "vault.list"], &[]),
        ] {
            // Not judged, existing or not (each fails at run time with `denied`).
            for site in [wrong_argument("vault"), call("vault", "nothing", 1, 7)] {
                assert!(check_as(allow, deny, vec![site]).is_none(), "{allow:?}");
            }
        }
        assert!(check_as(&["math.*"], &[], vec![wrong_argument("vaulx")]).is_none());
        // A name it may call, in a namespace it may call nothing in, is unknown; suggestions
        // do not name that namespace.
        let e = check_as(
            &["math.*", "*.list"],
            &["vault.*"],
            vec![call("vaul", "list", 1, 7)],
        )
        .unwrap();
        assert_eq!(
            e.message,
            "there is no tool namespace `tools.vaul` you may call"
        );
        assert!(!told(&e).contains("vault"), "{}", told(&e));
        // `vault.list` may be called but does not exist, and nothing else in `vault` may be.
        let e = check_as(
            &["math.*", "vault.list"],
            &[],
            vec![call("vault", "list", 1, 7)],
        )
        .unwrap();
        assert_eq!(
            e.message,
            "there is no tool namespace `tools.vault` you may call"
        );
        // Near names are ones the principal may call.
        let e = check_as(
            &["math.*"],
            &["math.open"],
            vec![call("math", "opne", 1, 7)],
        )
        .unwrap();
        assert!(!told(&e).contains("open()"), "{}", told(&e));
        let e = check_as(&["math.*"], &[], vec![call("math", "opne", 1, 7)]).unwrap();
        assert!(told(&e).contains("tools.math.open()"), "{}", told(&e));
        // Whoever may call it is told what it takes.
        let e = check_as(&["*"], &[], vec![wrong_argument("vault")]).unwrap();
        assert!(
            e.message.starts_with("tools.vault.read_all: "),
            "{}",
            e.message
        );
    }

    #[test]
    fn unknown_tools_and_namespaces_suggest_near_names() {
        let e = run(vec![call("math", "addd", 2, 7)]).unwrap();
        assert_eq!(e.kind.as_str(), "contract");
        assert_eq!(e.message, "`tools.math` has no tool `addd`");
        assert_eq!(e.hint.as_deref(), Some("did you mean tools.math.add()?"));
        assert_eq!((e.line, e.column), (Some(2), Some(7)));
        let e = run(vec![call("maht", "add", 1, 7)]).unwrap();
        assert_eq!(
            e.message,
            "there is no tool namespace `tools.maht` you may call"
        );
        assert_eq!(e.hint.as_deref(), Some("did you mean tools.math?"));
        let e = run(vec![call("zzzzzzzz", "add", 1, 7)]).unwrap();
        assert_eq!(
            e.hint.as_deref(),
            Some("the namespaces you may call are tools.math")
        );
        let e = run(vec![call("math", "qqqqqqqqq", 1, 7)]).unwrap();
        assert_eq!(
            e.hint.as_deref(),
            Some("search for it: GET /v1/tools/search?q=qqqqqqqqq")
        );
    }

    #[test]
    fn arguments_are_held_against_the_schema() {
        let e = run(vec![with_object(
            call("math", "add", 1, 7),
            false,
            &[
                ("a", Some(Integer)),
                ("b", Some(Integer)),
                ("lable", Some(Str)),
            ],
        )])
        .unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: unknown argument `lable` (did you mean `label`?)"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some("the tool takes tools.math.add({ a: number, b: number, label?: string })")
        );
        let e = run(vec![with_object(
            call("math", "add", 1, 7),
            false,
            &[("a", Some(Integer))],
        )])
        .unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: the required argument `b` is missing"
        );
        let e = run(vec![with_object(
            call("math", "add", 1, 7),
            false,
            &[("a", Some(Str)), ("b", Some(Integer))],
        )])
        .unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: argument `a` must be number, not string"
        );
        let e = run(vec![with_object(
            call("math", "add", 1, 7),
            false,
            &[("a", Some(Integer)), ("b", Some(Number))],
        )])
        .unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: argument `b` must be integer, not number"
        );
    }

    #[test]
    fn the_first_problem_in_source_order_is_reported() {
        let fine = with_object(
            call("math", "add", 1, 7),
            false,
            &[("a", Some(Integer)), ("b", Some(Integer))],
        );
        let null_a = with_object(
            call("math", "add", 2, 7),
            false,
            &[("a", Some(Null)), ("b", Some(Integer))],
        );
        let e = run(vec![fine, null_a, call("nope", "x", 3, 7)]).unwrap();
        assert_eq!(e.line, Some(2));
        assert_eq!(
            e.message,
            "tools.math.add: argument `a` must be number, not null"
        );
        // Sites need not arrive in order: a nested call inside an argument comes after its
        // outer call, but its problem may come before the outer call's later property.
        let outer = with_object(
            call("math", "add", 1, 1),
            false,
            &[
                ("a", Some(Integer)),
                ("b", Some(Integer)),
                ("zz", Some(Integer)),
            ],
        );
        let inner = call("math", "nope", 1, 28);
        let e = run(vec![outer, inner]).unwrap();
        assert_eq!(e.message, "`tools.math` has no tool `nope`");
        // Within one call, a missing argument (at the object) comes before a wrong property.
        let e = run(vec![with_object(
            call("math", "add", 1, 7),
            false,
            &[("a", Some(Str))],
        )])
        .unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: the required argument `b` is missing"
        );
    }

    #[test]
    fn namespaces_that_could_not_be_listed_are_not_judged() {
        let unlisted = [("down".to_owned(), Leniency::Unlisted)];
        assert!(run_lenient(vec![call("down", "anything", 1, 1)], &unlisted).is_none());
        // A namespace whose list may change: unknown tools pass, known ones are judged.
        let changing = [("math".to_owned(), Leniency::Changing)];
        assert!(run_lenient(vec![call("math", "added_later", 1, 1)], &changing).is_none());
        let short = with_object(call("math", "add", 1, 1), false, &[("a", Some(Integer))]);
        assert!(run_lenient(vec![short], &changing).is_some());
    }

    /// An unknown tool of a changing namespace runs, with a warning that names what it may
    /// have meant (found by the search when the spelling is far off).
    #[test]
    fn unknown_tools_of_changing_namespaces_are_warned_about() {
        let tools = tools();
        let index = namespace_search("math", &tools);
        let near = |_: &str, wanted: &str| near_tools(wanted, &tools, &index);
        let changing = [("math".to_owned(), Leniency::Changing)];
        let calls = vec![
            call("math", "sum_numbers_adds", 3, 1),
            call("math", "sum_numbers_adds", 4, 1),
            call("math", "zzzzzzz", 5, 1),
        ];
        let verdict = judge(
            &ToolReferences { calls },
            &catalogue([("math", tools.as_slice())]),
            &changing,
            &[],
            &near,
        );
        assert!(verdict.refusal.is_none());
        assert_eq!(verdict.warnings.len(), 2, "{:?}", verdict.warnings);
        assert!(
            verdict.warnings[0]
                .starts_with("line 3: `tools.math` lists no tool `sum_numbers_adds`")
                && verdict.warnings[0].ends_with("did you mean tools.math.add()?"),
            "{}",
            verdict.warnings[0]
        );
        assert!(
            verdict.warnings[1].ends_with("GET /v1/tools/search?q=zzzzzzz"),
            "{}",
            verdict.warnings[1]
        );
    }
}
