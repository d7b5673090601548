//! The program's literal tool calls, found with ruff's parser (the one monty parses with),
//! after lockdown, for the supervisor's contract check, exactly as the JavaScript side does.
//!
//! Found: `tools.<ns>.<name>(…)` call sites (awaited or not). Keyword arguments are the
//! argument object's properties; a single positional dict literal (`tools.ns.name({"k": 1})`)
//! is read the same way. `**spread` keywords, a non-literal key or any other positional
//! argument make the object open (any property may be present). A program that binds its own
//! `tools` (assignment, parameter, import, `def`/`class`) gives no references at all: the check
//! must never refuse a program that would work.
//!
//! ruff's parser refuses programs nested deeper than its own recursion limit (about 200
//! levels); the walk here also stops descending at [`MAX_DEPTH`] levels of statements and
//! expressions, so its recursion is bounded whatever the parser accepts.

use airlock_proto::{
    LiteralKind, LiteralObject, LiteralProperty, LiteralScalar, MAX_LITERAL_SCALAR_BYTES,
    SourcePosition, ToolReference, ToolReferences,
};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Alias, Expr, ExprContext, Keyword, Number, Parameter, Stmt, UnaryOp};
use ruff_text_size::Ranged;

/// Deepest level of the syntax tree the walk descends to.
pub const MAX_DEPTH: u32 = 256;

/// The literal tool calls of `code`, in source order, or `None` when there is nothing to
/// judge (no call site, the program binds its own `tools`, or it does not parse: monty then
/// reports the syntax error itself).
pub fn find(code: &str) -> Option<ToolReferences> {
    // Most programs that call no tool never say `tools`; they skip the parse.
    if !code.contains("tools") {
        return None;
    }
    let parsed = ruff_python_parser::parse_module(code).ok()?;
    let mut finder = Finder {
        lines: Lines::new(code),
        calls: Vec::new(),
        shadowed: false,
        depth: 0,
    };
    for stmt in &parsed.syntax().body {
        finder.visit_stmt(stmt);
    }
    if finder.shadowed || finder.calls.is_empty() {
        return None;
    }
    Some(ToolReferences {
        calls: finder.calls,
    })
}

/// Byte offsets → 1-based lines and columns (in characters, as monty counts them).
pub struct Lines<'s> {
    text: &'s str,
    starts: Vec<usize>,
}

impl<'s> Lines<'s> {
    pub fn new(text: &'s str) -> Lines<'s> {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines { text, starts }
    }

    pub fn position(&self, offset: usize) -> SourcePosition {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1) - 1;
        let start = self.starts.get(line).copied().unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(0, |prefix| prefix.chars().count());
        SourcePosition {
            line: u32::try_from(line + 1).unwrap_or(u32::MAX),
            column: u32::try_from(column + 1).unwrap_or(u32::MAX),
        }
    }
}

struct Finder<'s> {
    lines: Lines<'s>,
    calls: Vec<ToolReference>,
    /// The program binds its own `tools`; nothing about it can be judged.
    shadowed: bool,
    /// Levels of statements and expressions the walk is inside.
    depth: u32,
}

impl Finder<'_> {
    fn position(&self, node: &impl Ranged) -> SourcePosition {
        self.lines.position(node.start().to_usize())
    }

    fn shadow_if_tools(&mut self, name: &str) {
        if name == "tools" {
            self.shadowed = true;
        }
    }

    /// The argument object of a call: its keywords, or its single positional dict literal.
    fn argument(&self, arguments: &ruff_python_ast::Arguments) -> Option<LiteralObject> {
        if let ([Expr::Dict(dict)], true) = (&*arguments.args, arguments.keywords.is_empty()) {
            let mut open = false;
            let mut properties = Vec::new();
            for item in &dict.items {
                match &item.key {
                    Some(Expr::StringLiteral(key)) => {
                        properties.push(self.property(key.value.to_str(), key, &item.value));
                    }
                    // `**other` or a computed key: any property may be present.
                    _ => open = true,
                }
            }
            return Some(LiteralObject {
                at: self.position(dict),
                open,
                properties,
                positional: false,
            });
        }
        if arguments.args.is_empty() && arguments.keywords.is_empty() {
            return None;
        }
        let mut open = !arguments.args.is_empty();
        let mut properties = Vec::new();
        for keyword in &arguments.keywords {
            match &keyword.arg {
                Some(name) => {
                    properties.push(self.property(name.as_str(), keyword, &keyword.value))
                }
                None => open = true,
            }
        }
        Some(LiteralObject {
            at: self.position(arguments),
            open,
            properties,
            positional: positional(arguments),
        })
    }

    fn property(&self, key: &str, at: &impl Ranged, value: &Expr) -> LiteralProperty {
        LiteralProperty {
            key: key.to_owned(),
            at: self.position(at),
            value_at: self.position(value),
            value: literal_kind(value),
            scalar: literal_scalar(value),
        }
    }
}

impl<'a> Visitor<'a> for Finder<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        match stmt {
            Stmt::FunctionDef(f) => self.shadow_if_tools(f.name.as_str()),
            Stmt::ClassDef(c) => self.shadow_if_tools(c.name.as_str()),
            _ => {}
        }
        self.depth += 1;
        visitor::walk_stmt(self, stmt);
        self.depth -= 1;
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        match expr {
            Expr::Name(name) if !matches!(name.ctx, ExprContext::Load) => {
                self.shadow_if_tools(name.id.as_str());
            }
            Expr::Call(call) => {
                if let Some((namespace, name)) = tool_reference(&call.func) {
                    let argument = self.argument(&call.arguments);
                    self.calls.push(ToolReference {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                        at: self.position(call),
                        argument,
                    });
                }
            }
            _ => {}
        }
        self.depth += 1;
        visitor::walk_expr(self, expr);
        self.depth -= 1;
    }

    fn visit_parameter(&mut self, parameter: &'a Parameter) {
        self.shadow_if_tools(parameter.name.as_str());
        visitor::walk_parameter(self, parameter);
    }

    fn visit_alias(&mut self, alias: &'a Alias) {
        // `import tools` binds `tools`; so does `from x import y as tools`.
        let bound = alias.asname.as_ref().unwrap_or(&alias.name);
        self.shadow_if_tools(bound.as_str());
    }

    fn visit_except_handler(&mut self, handler: &'a ruff_python_ast::ExceptHandler) {
        let ruff_python_ast::ExceptHandler::ExceptHandler(h) = handler;
        if let Some(name) = &h.name {
            self.shadow_if_tools(name.as_str());
        }
        visitor::walk_except_handler(self, handler);
    }

    fn visit_keyword(&mut self, keyword: &'a Keyword) {
        visitor::walk_keyword(self, keyword);
    }
}

/// Positional arguments that cannot be the one dict a tool call may take by position: more
/// than one, one beside keywords, or one literal of another kind (`tools.a.b('UTC')`).
/// `*spread` could be anything: not judged.
fn positional(arguments: &ruff_python_ast::Arguments) -> bool {
    if arguments.args.iter().any(|a| matches!(a, Expr::Starred(_)))
        || arguments.keywords.iter().any(|k| k.arg.is_none())
    {
        return false;
    }
    match (&*arguments.args, arguments.keywords.is_empty()) {
        ([], _) => false,
        ([single], true) => literal_kind(single).is_some_and(|k| k != LiteralKind::Object),
        _ => true,
    }
}

/// `tools.ns.name` as the callee: namespace and name.
pub(super) fn tool_reference(func: &Expr) -> Option<(&str, &str)> {
    let Expr::Attribute(name) = func else {
        return None;
    };
    let Expr::Attribute(namespace) = &*name.value else {
        return None;
    };
    match &*namespace.value {
        Expr::Name(root) if root.id.as_str() == "tools" => {
            Some((namespace.attr.as_str(), name.attr.as_str()))
        }
        _ => None,
    }
}

/// A string, number or boolean literal's value (a string only up to
/// [`MAX_LITERAL_SCALAR_BYTES`]).
fn literal_scalar(value: &Expr) -> Option<LiteralScalar> {
    Some(match value {
        Expr::StringLiteral(s) if s.value.to_str().len() <= MAX_LITERAL_SCALAR_BYTES => {
            LiteralScalar::String(s.value.to_str().to_owned())
        }
        Expr::BooleanLiteral(b) => LiteralScalar::Boolean(b.value),
        other => LiteralScalar::Number(number_text(other)?),
    })
}

/// A numeric literal (or its negation) as JSON text.
fn number_text(value: &Expr) -> Option<String> {
    match value {
        Expr::NumberLiteral(n) => match &n.value {
            Number::Int(i) => i.as_i64().map(|i| i.to_string()),
            Number::Float(f) if f.is_finite() => Some(format!("{f}")),
            _ => None,
        },
        Expr::UnaryOp(u) if u.op == UnaryOp::USub => match &*u.operand {
            Expr::NumberLiteral(_) => number_text(&u.operand).map(|t| format!("-{t}")),
            _ => None,
        },
        _ => None,
    }
}

/// A literal argument value's JSON type, when the value is a literal.
fn literal_kind(value: &Expr) -> Option<LiteralKind> {
    Some(match value {
        Expr::StringLiteral(_) | Expr::FString(_) => LiteralKind::String,
        Expr::NumberLiteral(n) => match n.value {
            Number::Int(_) => LiteralKind::Integer,
            Number::Float(_) => LiteralKind::Number,
            Number::Complex { .. } => return None,
        },
        Expr::UnaryOp(u) if u.op == UnaryOp::USub => match literal_kind(&u.operand)? {
            kind @ (LiteralKind::Integer | LiteralKind::Number) => kind,
            _ => return None,
        },
        Expr::BooleanLiteral(_) => LiteralKind::Boolean,
        Expr::NoneLiteral(_) => LiteralKind::Null,
        Expr::List(_) | Expr::Tuple(_) => LiteralKind::Array,
        Expr::Dict(_) => LiteralKind::Object,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32, column: u32) -> SourcePosition {
        SourcePosition { line, column }
    }

    #[test]
    fn call_sites_and_keyword_arguments_are_found_in_source_order() {
        let refs = find(
            "r = await tools.math.add(a=1, b=2.5, label='x', n=None, xs=[], o={}, t=True, v=r2, m=-3)\nawait tools.git.status()",
        )
        .expect("two call sites");
        assert_eq!(refs.calls.len(), 2);
        let add = &refs.calls[0];
        assert_eq!((add.namespace.as_str(), add.name.as_str()), ("math", "add"));
        assert_eq!(add.at, at(1, 11));
        let object = add.argument.as_ref().expect("keywords");
        assert!(!object.open);
        let kinds: Vec<_> = object
            .properties
            .iter()
            .map(|p| (p.key.as_str(), p.value))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a", Some(LiteralKind::Integer)),
                ("b", Some(LiteralKind::Number)),
                ("label", Some(LiteralKind::String)),
                ("n", Some(LiteralKind::Null)),
                ("xs", Some(LiteralKind::Array)),
                ("o", Some(LiteralKind::Object)),
                ("t", Some(LiteralKind::Boolean)),
                ("v", None),
                ("m", Some(LiteralKind::Integer)),
            ]
        );
        assert_eq!(object.properties[0].at, at(1, 26));
        assert_eq!(object.properties[0].value_at, at(1, 28));
        let scalars: Vec<_> = object.properties.iter().map(|p| p.scalar.clone()).collect();
        assert_eq!(scalars[0], Some(LiteralScalar::Number("1".into())));
        assert_eq!(scalars[1], Some(LiteralScalar::Number("2.5".into())));
        assert_eq!(scalars[2], Some(LiteralScalar::String("x".into())));
        assert_eq!(scalars[6], Some(LiteralScalar::Boolean(true)));
        assert_eq!(scalars[8], Some(LiteralScalar::Number("-3".into())));
        let status = &refs.calls[1];
        assert_eq!(
            (status.namespace.as_str(), status.name.as_str()),
            ("git", "status")
        );
        assert_eq!(status.at, at(2, 7));
        assert_eq!(status.argument, None);
    }

    #[test]
    fn a_dict_literal_argument_spreads_and_positional_arguments() {
        let refs = find("tools.a.b({'k': 1, **more})\ntools.a.c(x, k=2)\ntools.a.d(**kw)").unwrap();
        let dict = refs.calls[0].argument.as_ref().unwrap();
        assert!(dict.open);
        assert_eq!(dict.properties[0].key, "k");
        let mixed = refs.calls[1].argument.as_ref().unwrap();
        assert!(mixed.open, "a positional argument besides keywords");
        assert_eq!(mixed.properties[0].key, "k");
        assert!(refs.calls[2].argument.as_ref().unwrap().open);
        assert!(mixed.positional, "a positional argument beside keywords");
        assert!(!dict.positional);
        let refs =
            find("tools.a.b('UTC')\ntools.a.b(args)\ntools.a.b(*xs)\ntools.a.b(1, 2)").unwrap();
        let positional: Vec<bool> = refs
            .calls
            .iter()
            .map(|c| c.argument.as_ref().unwrap().positional)
            .collect();
        assert_eq!(positional, [true, false, false, true]);
    }

    #[test]
    fn a_program_that_binds_tools_or_names_none_gives_nothing() {
        assert_eq!(find("x = 1"), None);
        assert_eq!(find("tools = {}\ntools.a.b()"), None);
        assert_eq!(find("def f(tools):\n    return tools.a.b()"), None);
        assert_eq!(find("import json as tools\ntools.a.b()"), None);
        assert_eq!(find("for tools in []:\n    pass\ntools.a.b()"), None);
        assert_eq!(find("print('tools')"), None);
        // Not parseable: monty reports the syntax error.
        assert_eq!(find("tools.a.b(("), None);
    }

    #[test]
    fn columns_count_characters() {
        let refs = find("s = 'ü'; tools.a.b()").unwrap();
        assert_eq!(refs.calls[0].at, at(1, 10));
    }

    #[test]
    fn the_walk_is_bounded_on_deep_programs() {
        // As deep as the parser accepts, on a test thread's small stack.
        let deep = format!("{}tools.a.b(){}", "[".repeat(150), "]".repeat(150));
        let refs = find(&deep).expect("found within the parser's depth");
        assert_eq!(refs.calls.len(), 1);
        // Deeper than the parser accepts: no references (monty reports the error).
        let deeper = format!("{}tools.a.b(){}", "(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(find(&deeper), None);
    }
}
