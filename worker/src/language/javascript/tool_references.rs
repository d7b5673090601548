//! The program's literal tool calls, found in the parse the worker does anyway (after lockdown),
//! for the supervisor's contract check. The supervisor never parses a program: a parser bug
//! or a pathologically nested program can then cost one sandboxed worker, never the daemon.
//!
//! Found: `tools.<ns>.<name>(…)` and `tools["ns"]["name"](…)` call sites, and, when the first
//! argument is an object literal, its properties with the JSON type of each literal value.
//! Nothing else is judged (computed names, non-literal arguments), and a program that binds
//! its own `tools` gives no references at all: the check must never refuse a program that
//! would work.
//!
//! The walk recurses once per level of the syntax tree; [`super::typescript::check_nesting`]
//! bounds that depth before the parser runs, exactly as for oxc's own visitors.

use super::typescript::LineIndex;
use airlock_proto::{
    LiteralKind, LiteralObject, LiteralProperty, LiteralScalar, MAX_LITERAL_SCALAR_BYTES,
    SourcePosition, ToolReference, ToolReferences,
};
use oxc::ast::ast::{
    Argument, BindingIdentifier, CallExpression, Expression, ObjectExpression, ObjectPropertyKind,
    Program, PropertyKey,
};
use oxc::ast_visit::{Visit, walk};
use oxc::span::GetSpan as _;

/// The literal tool calls of a parsed program, in source order, or `None` when there is
/// nothing to judge (no call site, or the program binds its own `tools`).
pub fn find(code: &str, program: &Program<'_>, lines: &LineIndex<'_>) -> Option<ToolReferences> {
    // Most programs that call no tool never say `tools`; they skip the walk.
    if !code.contains("tools") {
        return None;
    }
    let mut finder = Finder {
        lines,
        calls: Vec::new(),
        shadowed: false,
    };
    finder.visit_program(program);
    if finder.shadowed || finder.calls.is_empty() {
        return None;
    }
    Some(ToolReferences {
        calls: finder.calls,
    })
}

/// Collects the call sites while walking the program.
struct Finder<'l, 's> {
    lines: &'l LineIndex<'s>,
    calls: Vec<ToolReference>,
    /// The program binds its own `tools`; nothing about it can be judged.
    shadowed: bool,
}

impl Finder<'_, '_> {
    fn position(&self, offset: u32) -> SourcePosition {
        let (line, column) = self.lines.position(offset);
        SourcePosition { line, column }
    }

    fn literal_object(&self, object: &ObjectExpression<'_>) -> LiteralObject {
        let mut open = false;
        let mut properties = Vec::new();
        for property in &object.properties {
            let ObjectPropertyKind::ObjectProperty(property) = property else {
                // A spread: any property may be present.
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
                at: self.position(property.span.start),
                value_at: self.position(property.value.span().start),
                value: literal_kind(&property.value),
                scalar: literal_scalar(&property.value),
            });
        }
        LiteralObject {
            at: self.position(object.span.start),
            open,
            properties,
            positional: false,
        }
    }
}

impl<'a> Visit<'a> for Finder<'_, '_> {
    fn visit_binding_identifier(&mut self, ident: &BindingIdentifier<'a>) {
        if ident.name == "tools" {
            self.shadowed = true;
        }
    }

    fn visit_call_expression(&mut self, call: &CallExpression<'a>) {
        if let Some((namespace, name)) = tool_reference(&call.callee) {
            let argument = match call.arguments.first() {
                Some(Argument::ObjectExpression(object)) => Some(self.literal_object(object)),
                _ => None,
            };
            self.calls.push(ToolReference {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                at: self.position(call.span.start),
                argument,
            });
        }
        walk::walk_call_expression(self, call);
    }
}

/// `tools.ns.name` or `tools["ns"]["name"]` as the callee.
pub(super) fn tool_reference<'e>(callee: &'e Expression<'_>) -> Option<(&'e str, &'e str)> {
    let (object, name) = member(callee)?;
    let (root, namespace) = member(object)?;
    match root {
        Expression::Identifier(id) if id.name == "tools" => Some((namespace, name)),
        _ => None,
    }
}

/// `object.name` or `object["name"]` (not optional chaining), looking through parentheses.
///
/// Recurses through parentheses only, which the nesting guard bounds like any bracket.
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

/// A string, number or boolean literal's value (a string only up to
/// [`MAX_LITERAL_SCALAR_BYTES`]).
fn literal_scalar(value: &Expression<'_>) -> Option<LiteralScalar> {
    Some(match value {
        Expression::StringLiteral(s) if s.value.len() <= MAX_LITERAL_SCALAR_BYTES => {
            LiteralScalar::String(s.value.as_str().to_owned())
        }
        Expression::NumericLiteral(n) if n.value.is_finite() => {
            // Integers within 2^53 as integers (JSON.stringify's `100`, not `100.0`).
            if n.value.fract() == 0.0 && n.value.abs() < 9_007_199_254_740_992.0 {
                LiteralScalar::Number(format!("{}", n.value as i64))
            } else {
                LiteralScalar::Number(format!("{}", n.value))
            }
        }
        Expression::BooleanLiteral(b) => LiteralScalar::Boolean(b.value),
        _ => return None,
    })
}

/// A literal argument value's JSON type, when the value is a literal.
fn literal_kind(value: &Expression<'_>) -> Option<LiteralKind> {
    Some(match value {
        Expression::StringLiteral(_) | Expression::TemplateLiteral(_) => LiteralKind::String,
        Expression::NumericLiteral(n) if n.value.fract() == 0.0 => LiteralKind::Integer,
        Expression::NumericLiteral(_) => LiteralKind::Number,
        Expression::BooleanLiteral(_) => LiteralKind::Boolean,
        Expression::NullLiteral(_) => LiteralKind::Null,
        Expression::ArrayExpression(_) => LiteralKind::Array,
        Expression::ObjectExpression(_) => LiteralKind::Object,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::typescript::prepare_program;
    use super::*;
    use airlock_proto::Language;

    fn references(code: &str) -> Option<ToolReferences> {
        prepare_program(code, Language::TypeScript)
            .expect("the program parses")
            .tool_references
    }

    fn at(line: u32, column: u32) -> SourcePosition {
        SourcePosition { line, column }
    }

    #[test]
    fn call_sites_and_literal_arguments_are_found_in_source_order() {
        let refs = references(
            "const r = await tools.math.add({ a: 1, b: 2.5, 'label': `x`, n: null, xs: [], o: {}, t: true, v: r2 });\nawait tools['git'][\"status\"]()",
        )
        .unwrap();
        assert_eq!(refs.calls.len(), 2);
        let add = &refs.calls[0];
        assert_eq!((add.namespace.as_str(), add.name.as_str()), ("math", "add"));
        assert_eq!(add.at, at(1, 17));
        let object = add.argument.as_ref().unwrap();
        assert_eq!(object.at, at(1, 32));
        assert!(!object.open);
        let kinds: Vec<(&str, Option<LiteralKind>)> = object
            .properties
            .iter()
            .map(|p| (p.key.as_str(), p.value))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("a", Some(LiteralKind::Integer)),
                ("b", Some(LiteralKind::Number)),
                ("label", Some(LiteralKind::String)),
                ("n", Some(LiteralKind::Null)),
                ("xs", Some(LiteralKind::Array)),
                ("o", Some(LiteralKind::Object)),
                ("t", Some(LiteralKind::Boolean)),
                ("v", None),
            ]
        );
        let scalars: Vec<Option<LiteralScalar>> =
            object.properties.iter().map(|p| p.scalar.clone()).collect();
        assert_eq!(
            scalars,
            vec![
                Some(LiteralScalar::Number("1".into())),
                Some(LiteralScalar::Number("2.5".into())),
                // A template literal's value is not carried.
                None,
                None,
                None,
                None,
                Some(LiteralScalar::Boolean(true)),
                None,
            ]
        );
        assert_eq!(object.properties[0].at, at(1, 34));
        assert_eq!(object.properties[0].value_at, at(1, 37));
        let status = &refs.calls[1];
        assert_eq!(
            (status.namespace.as_str(), status.name.as_str()),
            ("git", "status")
        );
        assert_eq!(status.at, at(2, 7));
        assert!(status.argument.is_none());
    }

    #[test]
    fn spreads_and_computed_keys_open_the_object() {
        let refs = references("const rest = {}; await tools.m.t({ a: 1, ...rest })").unwrap();
        assert!(refs.calls[0].argument.as_ref().unwrap().open);
        let refs = references("const k = 'a'; await tools.m.t({ [k]: 1 })").unwrap();
        assert!(refs.calls[0].argument.as_ref().unwrap().open);
    }

    #[test]
    fn nothing_to_judge_gives_no_references() {
        assert!(references("1 + 1").is_none());
        // Named but not called, or called through a computed name.
        assert!(references("const t = tools.a; const n = 'x'; await tools.a[n]({})").is_none());
        // Optional chaining is not a literal call of a known tool.
        assert!(references("await tools.a?.b({})").is_none());
        // A program that binds its own `tools` is not judged at all.
        assert!(references("const tools = { x: { y: () => 1 } }; tools.x.y({})").is_none());
        assert!(references("function f(tools: any) { return tools.a.b({}) }").is_none());
    }

    #[test]
    fn positions_count_utf16_columns_like_syntax_errors() {
        let refs = references("const s = '😀'; await tools.a.b({ c: 1 })").unwrap();
        // The emoji is two UTF-16 code units.
        assert_eq!(refs.calls[0].at, at(1, 23));
    }
}
