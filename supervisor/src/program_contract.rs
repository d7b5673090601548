//! The contract check: before any worker starts, the program's literal tool calls are held
//! against the catalogue, so a model learns of an unknown tool or a wrong argument in
//! milliseconds, with the expected signature, instead of after half its calls ran.
//!
//! What is judged (everything else runs normally, and the schema check at call time still
//! applies):
//! - `tools.<ns>.<name>(…)` and `tools["ns"]["name"](…)` call sites: an unknown namespace or
//!   tool is rejected with the three closest names;
//! - a first argument written as an object literal: properties the schema does not declare
//!   (unless it allows more), required properties missing (unless the literal spreads another
//!   object), and literal values (strings, numbers, booleans, null, arrays, objects) of a type
//!   the schema does not accept.
//!
//! A program that declares its own `tools` binding is not judged at all, and namespaces that
//! could not be listed are skipped: the check must never reject a program that would work.

use crate::agent_api::ExecutionError;
use crate::tool_source::{ToolDescriptor, closest, quote_list};
use crate::typescript_sdk::tool_search::call_signature;
use oxc::allocator::Allocator;
use oxc::ast::ast::{
    Argument, BindingIdentifier, CallExpression, Expression, ObjectExpression, ObjectPropertyKind,
    PropertyKey,
};
use oxc::ast_visit::{Visit, walk};
use oxc::parser::{ParseOptions, Parser};
use oxc::span::{GetSpan as _, SourceType};
use serde_json::Value;
use std::collections::BTreeMap;

/// The catalogue as the check needs it: namespace → tool name → tool. It holds every tool
/// of the daemon, not only the caller's: a call the policy denies fails at run time with
/// `denied`, which a program may catch, so the check does not refuse it.
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
    /// Its tool list may change while the program runs (an MCP server that announces list
    /// changes): a tool missing now may exist by the time it is called, so only the arguments
    /// of tools that exist are judged.
    Changing,
}

/// A program's literal tool calls, found in one parse: the namespaces they name (so only
/// those sources are asked for their tools, which starts a lazily started server) and what
/// the check judges.
#[derive(Debug, Default)]
pub struct ToolCalls {
    sites: Vec<CallSite>,
}

/// One `tools.<ns>.<name>(…)` call.
#[derive(Debug)]
struct CallSite {
    namespace: String,
    name: String,
    offset: u32,
    /// The first argument, when it is an object literal.
    argument: Option<LiteralObject>,
}

#[derive(Debug)]
struct LiteralObject {
    offset: u32,
    /// It spreads another object or has a computed key: any property may be present.
    open: bool,
    properties: Vec<LiteralProperty>,
}

#[derive(Debug)]
struct LiteralProperty {
    key: String,
    offset: u32,
    value_offset: u32,
    /// The value's JSON type, when the value is a literal.
    literal: Option<Literal>,
}

#[derive(Debug, Clone, Copy)]
struct Literal {
    json_type: &'static str,
    /// A numeric literal's value (an `integer` must have no fraction).
    number: Option<f64>,
}

impl ToolCalls {
    /// Parses the program once. `None` when it does not parse (the worker reports syntax
    /// errors with full detail) or binds its own `tools`: then nothing is judged.
    pub fn find(code: &str, typescript: bool) -> Option<ToolCalls> {
        let allocator = Allocator::default();
        let source_type = if typescript {
            SourceType::ts().with_module(true)
        } else {
            SourceType::mjs()
        };
        let parsed = Parser::new(&allocator, code, source_type)
            .with_options(ParseOptions {
                allow_return_outside_function: true,
                ..ParseOptions::default()
            })
            .parse();
        if !parsed.diagnostics.is_empty() {
            return None;
        }
        let mut finder = Finder::default();
        finder.visit_program(&parsed.program);
        (!finder.shadowed).then_some(finder.calls)
    }

    /// The namespaces the calls name, sorted, once each.
    pub fn namespaces(&self) -> Vec<&str> {
        let mut named: Vec<&str> = self.sites.iter().map(|s| s.namespace.as_str()).collect();
        named.sort_unstable();
        named.dedup();
        named
    }

    /// The first violation in source order, as the execution error the agent receives (kind
    /// `contract`), or `None` when nothing the check can judge is wrong. `code` is the
    /// program the calls were found in (for the position).
    pub fn check(
        &self,
        code: &str,
        catalogue: &ContractCatalogue<'_>,
        lenient: &[(String, Leniency)],
    ) -> Option<ExecutionError> {
        let mut violations = Vec::new();
        for site in &self.sites {
            judge(site, catalogue, lenient, &mut violations);
        }
        let (offset, message, hint) = violations.into_iter().min_by_key(|v| v.0)?;
        let (line, column) = line_column(code, offset);
        Some(ExecutionError {
            kind: "contract".into(),
            name: None,
            message,
            line: Some(line),
            column: Some(column),
            stack: None,
            excerpt: None,
            hint: Some(hint),
        })
    }
}

/// Collects the call sites while walking the program.
#[derive(Default)]
struct Finder {
    calls: ToolCalls,
    /// The program binds its own `tools`; nothing about it can be judged.
    shadowed: bool,
}

impl<'a> Visit<'a> for Finder {
    fn visit_binding_identifier(&mut self, ident: &BindingIdentifier<'a>) {
        if ident.name == "tools" {
            self.shadowed = true;
        }
    }

    fn visit_call_expression(&mut self, call: &CallExpression<'a>) {
        if let Some((namespace, name)) = tool_reference(&call.callee) {
            let argument = match call.arguments.first() {
                Some(Argument::ObjectExpression(object)) => Some(literal_object(object)),
                _ => None,
            };
            self.calls.sites.push(CallSite {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                offset: call.span.start,
                argument,
            });
        }
        walk::walk_call_expression(self, call);
    }
}

fn literal_object(object: &ObjectExpression<'_>) -> LiteralObject {
    let mut open = false;
    let mut properties = Vec::new();
    for property in &object.properties {
        let ObjectPropertyKind::ObjectProperty(property) = property else {
            open = true;
            continue;
        };
        let key = match &property.key {
            PropertyKey::StaticIdentifier(id) => id.name.as_str(),
            PropertyKey::StringLiteral(s) => s.value.as_str(),
            _ => {
                // A computed key could be anything, required ones included.
                open = true;
                continue;
            }
        };
        properties.push(LiteralProperty {
            key: key.to_owned(),
            offset: property.span.start,
            value_offset: property.value.span().start,
            literal: literal(&property.value),
        });
    }
    LiteralObject {
        offset: object.span.start,
        open,
        properties,
    }
}

/// Holds one call against the catalogue, adding (offset, message, hint) per problem.
fn judge(
    site: &CallSite,
    catalogue: &ContractCatalogue<'_>,
    lenient: &[(String, Leniency)],
    violations: &mut Vec<(u32, String, String)>,
) {
    let (namespace, name) = (site.namespace.as_str(), site.name.as_str());
    let leniency = lenient
        .iter()
        .find(|(ns, _)| ns == namespace)
        .map(|(_, l)| *l);
    if leniency == Some(Leniency::Unlisted) {
        return;
    }
    let Some(tools) = catalogue.get(namespace) else {
        let near = closest(namespace, catalogue.keys().copied(), 3);
        let hint = if near.is_empty() {
            let all: Vec<String> = catalogue.keys().map(|k| format!("tools.{k}")).collect();
            format!("the namespaces are {}", all.join(", "))
        } else {
            format!("did you mean {}?", quote_list(&near, "tools.", ""))
        };
        violations.push((
            site.offset,
            format!("there is no tool namespace `tools.{namespace}`"),
            hint,
        ));
        return;
    };
    let Some(tool) = tools.get(name) else {
        if leniency == Some(Leniency::Changing) {
            return;
        }
        let near = closest(name, tools.keys().copied(), 3);
        let hint = if near.is_empty() {
            format!("search for it: GET /v1/tools/search?q={name}")
        } else {
            format!(
                "did you mean {}?",
                quote_list(&near, &format!("tools.{namespace}."), "()")
            )
        };
        violations.push((
            site.offset,
            format!("`tools.{namespace}` has no tool `{name}`"),
            hint,
        ));
        return;
    };
    let Some(object) = &site.argument else {
        return;
    };
    let schema = &tool.input_schema;
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = properties.is_some()
        && !matches!(
            schema.get("additionalProperties"),
            Some(Value::Bool(true) | Value::Object(_))
        )
        && schema.get("patternProperties").is_none();
    let hint = format!("the tool takes {}", call_signature(namespace, name, schema));
    for property in &object.properties {
        let key = property.key.as_str();
        match properties.and_then(|p| p.get(key)) {
            None if closed => {
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
                violations.push((
                    property.offset,
                    format!("tools.{namespace}.{name}: unknown argument `{key}`{did_you_mean}"),
                    hint.clone(),
                ));
            }
            Some(declared) => {
                if let Some(given) = property.literal
                    && let Some(expected) = accepted_types(declared)
                    && !accepts(&expected, given)
                {
                    violations.push((
                        property.value_offset,
                        format!(
                            "tools.{namespace}.{name}: argument `{key}` must be {}, not {}",
                            expected.join(" or "),
                            given.json_type
                        ),
                        hint.clone(),
                    ));
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
            violations.push((
                object.offset,
                format!("tools.{namespace}.{name}: the required argument `{missing}` is missing"),
                hint.clone(),
            ));
        }
    }
}

/// `tools.ns.name` or `tools["ns"]["name"]` as the callee.
fn tool_reference<'e>(callee: &'e Expression<'_>) -> Option<(&'e str, &'e str)> {
    let (object, name) = member(callee)?;
    let (root, namespace) = member(object)?;
    match root {
        Expression::Identifier(id) if id.name == "tools" => Some((namespace, name)),
        _ => None,
    }
}

fn member<'e>(expression: &'e Expression<'_>) -> Option<(&'e Expression<'e>, &'e str)> {
    match expression {
        Expression::StaticMemberExpression(m) if !m.optional => {
            Some((&m.object, m.property.name.as_str()))
        }
        Expression::ComputedMemberExpression(m) if !m.optional => match &m.expression {
            Expression::StringLiteral(s) => Some((&m.object, s.value.as_str())),
            _ => None,
        },
        Expression::ParenthesizedExpression(p) => member(&p.expression),
        _ => None,
    }
}

/// A literal argument value's JSON type (and number), when the value is a literal.
fn literal(value: &Expression<'_>) -> Option<Literal> {
    let json_type = match value {
        Expression::StringLiteral(_) | Expression::TemplateLiteral(_) => "string",
        Expression::NumericLiteral(_) => "number",
        Expression::BooleanLiteral(_) => "boolean",
        Expression::NullLiteral(_) => "null",
        Expression::ArrayExpression(_) => "array",
        Expression::ObjectExpression(_) => "object",
        _ => return None,
    };
    let number = match value {
        Expression::NumericLiteral(n) => Some(n.value),
        _ => None,
    };
    Some(Literal { json_type, number })
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

fn accepts(expected: &[String], given: Literal) -> bool {
    expected.iter().any(|t| match t.as_str() {
        "integer" => given.number.is_some_and(|n| n.fract() == 0.0),
        other => other == given.json_type,
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(code: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(code.len());
    let before = code.get(..offset).unwrap_or(code);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Finds the calls and checks them, as the daemon does.
    fn check(
        code: &str,
        catalogue: &ContractCatalogue<'_>,
        lenient: &[(String, Leniency)],
    ) -> Option<ExecutionError> {
        ToolCalls::find(code, true)?.check(code, catalogue, lenient)
    }

    fn referenced_namespaces(code: &str, typescript: bool) -> Option<Vec<String>> {
        let calls = ToolCalls::find(code, typescript)?;
        Some(calls.namespaces().into_iter().map(str::to_owned).collect())
    }

    fn tools() -> Vec<ToolDescriptor> {
        vec![
            ToolDescriptor {
                name: "add".into(),
                description: "Adds.".into(),
                input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}, "label": {"type": "string"}}, "required": ["a", "b"]}),
                output_schema: None,
            },
            ToolDescriptor {
                name: "open".into(),
                description: "Takes anything.".into(),
                input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": true}),
                output_schema: None,
            },
        ]
    }

    fn run(code: &str) -> Option<ExecutionError> {
        let tools = tools();
        check(code, &catalogue([("math", tools.as_slice())]), &[])
    }

    #[test]
    fn correct_and_dynamic_programs_pass() {
        assert!(run("const r = await tools.math.add({ a: 1, b: 2 }); r").is_none());
        assert!(run("await tools['math']['add']({ a: 1.5, b: 2, label: `x` })").is_none());
        // Not judged: computed names, non-literal arguments, spreads, shadowed `tools`.
        assert!(run("const n = 'nope'; await tools.math[n]({})").is_none());
        assert!(run("const args = {}; await tools.math.add(args)").is_none());
        assert!(run("const rest = { b: 2 }; await tools.math.add({ a: 1, ...rest })").is_none());
        assert!(run("const tools = { x: { y: () => 1 } }; tools.x.y({})").is_none());
        assert!(run("await tools.math.open({ x: 'a', extra: 1 })").is_none());
        // Syntax errors are the worker's to report.
        assert!(run("await tools.math.add({ a: ").is_none());
    }

    #[test]
    fn unknown_tools_and_namespaces_suggest_near_names() {
        let e = run("let x = 1;\nawait tools.math.addd({ a: 1, b: 2 })").unwrap();
        assert_eq!(e.kind, "contract");
        assert_eq!(e.message, "`tools.math` has no tool `addd`");
        assert_eq!(e.hint.as_deref(), Some("did you mean tools.math.add()?"));
        assert_eq!((e.line, e.column), (Some(2), Some(7)));
        let e = run("await tools.maht.add({})").unwrap();
        assert_eq!(e.message, "there is no tool namespace `tools.maht`");
        assert_eq!(e.hint.as_deref(), Some("did you mean tools.math?"));
    }

    #[test]
    fn arguments_are_held_against_the_schema() {
        let e = run("await tools.math.add({ a: 1, b: 2, lable: 'x' })").unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: unknown argument `lable` (did you mean `label`?)"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some("the tool takes tools.math.add({ a: number, b: number, label?: string })")
        );
        let e = run("await tools.math.add({ a: 1 })").unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: the required argument `b` is missing"
        );
        let e = run("await tools.math.add({ a: '1', b: 2 })").unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: argument `a` must be number, not string"
        );
        let e = run("await tools.math.add({ a: 1, b: 2.5 })").unwrap();
        assert_eq!(
            e.message,
            "tools.math.add: argument `b` must be integer, not number"
        );
        // The first problem in source order is the one reported.
        let e = run("await tools.math.add({ a: 1, b: 2 });\nawait tools.math.add({ a: null, b: 1 });\nawait tools.nope.x({})").unwrap();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn namespaces_that_could_not_be_listed_are_not_judged() {
        let tools = tools();
        let cat = catalogue([("math", tools.as_slice())]);
        let unlisted = [("down".to_owned(), Leniency::Unlisted)];
        assert!(check("await tools.down.anything({})", &cat, &unlisted).is_none());
        // A namespace whose list may change: unknown tools pass, known ones are judged.
        let changing = [("math".to_owned(), Leniency::Changing)];
        assert!(check("await tools.math.added_later({})", &cat, &changing).is_none());
        assert!(check("await tools.math.add({ a: 1 })", &cat, &changing).is_some());
    }

    #[test]
    fn only_named_namespaces_are_listed() {
        assert_eq!(
            referenced_namespaces(
                "await tools.b.x({}); await tools['a'].y(); tools.c; f(tools.d.z)",
                true
            ),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(
            referenced_namespaces("const tools = 1; tools.a.b()", true),
            None
        );
        assert_eq!(referenced_namespaces("syntax error (", true), None);
    }
}
