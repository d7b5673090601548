//! Where a name's value came from: the program's bindings, from one walk of its syntax tree
//! ([`Scan`]): to a tool's result or its promise, to a part of one by destructuring or by a
//! member chain, to an element of one through `for … of`.

use super::super::tool_references::tool_reference;
use super::super::typescript::{LineIndex, check_nesting};
use airlock_proto::Language;
use oxc::allocator::Allocator;
use oxc::ast::ast::{
    AssignmentTargetPropertyIdentifier, BindingPattern, CallExpression, Expression, ForOfStatement,
    ForStatementLeft, PropertyKey, SimpleAssignmentTarget, UnaryExpression, UnaryOperator,
    VariableDeclarator,
};
use oxc::ast_visit::{Visit, walk};
use oxc::parser::{ParseOptions, Parser};
use oxc::span::{GetSpan as _, SourceType, Span};
use std::collections::{HashMap, HashSet};

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Key {
    Name(String),
    Index(u32),
    /// Any element of an array: the name a `for (const e of …)` binds.
    Each,
}

impl Key {
    pub(super) fn of(text: &str) -> Key {
        match text.parse::<u32>() {
            Ok(i) if i.to_string() == text => Key::Index(i),
            _ => Key::Name(text.to_owned()),
        }
    }
}

/// What a declaration's initializer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Init {
    /// A tool call: its result when `awaited`, else its promise.
    Tool {
        tool: String,
        line: u32,
        awaited: bool,
    },
    /// Another name's value, at `path` (`r.items`).
    Name { root: String, path: Vec<Key> },
}

/// An initializer: one value, or `await Promise.all([…])` of tool calls (`None` for an
/// element that is not one).
#[derive(Debug, Clone)]
enum Inits {
    One(Init),
    All(Vec<Option<Init>>),
}

/// How a name was bound: `path` inside its declaration's initializer (destructuring).
#[derive(Debug, Clone)]
struct Binding {
    /// Where the declaration starts (the name is usable only after it).
    start: u32,
    init: Init,
    path: Vec<Key>,
}

/// A value a destructuring needs to be an object (or iterable): `{ graph: { nodes } } = …`
/// needs `.graph`; `{ nodes } = g.graph` needs `g.graph` itself (`path` empty).
#[derive(Debug, Clone)]
pub(super) struct Required {
    /// The declaration.
    pub(super) span: Span,
    pub(super) init: Init,
    pub(super) path: Vec<Key>,
    /// The key destructured, or `None` for the initializer itself.
    pub(super) key: Option<String>,
    /// Where the initializer starts (its text names the value when `key` is `None`).
    pub(super) init_start: u32,
    /// An array pattern (iterated) rather than an object pattern.
    pub(super) array: bool,
}

/// Where a value came from: a tool's result (at `path`) or its promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    pub(super) tool: String,
    pub(super) line: u32,
    pub(super) promise: bool,
    pub(super) path: Vec<Key>,
}

/// Destructuring patterns nest at most this deep here; deeper ones are not explained.
pub(super) const MAX_PATTERN_DEPTH: usize = 32;
/// `const a = r.x; const b = a.y; …`: at most this many names are followed.
pub(super) const MAX_ALIASES: usize = 8;

/// What the program binds, assigns and calls, from one walk of its syntax tree.
pub(super) struct Scan<'s> {
    lines: LineIndex<'s>,
    /// How many times each name is bound anywhere (declarations, parameters, functions…).
    bound: HashMap<String, u32>,
    bindings: HashMap<String, Binding>,
    /// Names assigned, updated, or whose members are assigned or deleted.
    written: HashSet<String>,
    /// Call sites of each tool.
    sites: HashMap<String, u32>,
    pub(super) required: Vec<Required>,
    /// The program binds its own `tools`.
    shadowed: bool,
}

impl<'s> Scan<'s> {
    pub(super) fn of(source: &'s str, language: Language) -> Option<Scan<'s>> {
        // The program passed this check before it ran; it bounds the parser's and this walk's
        // recursion (one level per level of nesting), and is cheap.
        check_nesting(source).ok()?;
        let source_type = match language {
            Language::TypeScript => SourceType::ts().with_module(true),
            Language::JavaScript => SourceType::mjs(),
            // Not a program this engine runs.
            Language::Python => return None,
        };
        let allocator = Allocator::default();
        let parsed = Parser::new(&allocator, source, source_type)
            .with_options(ParseOptions {
                allow_return_outside_function: true,
                ..ParseOptions::default()
            })
            .parse();
        if !parsed.diagnostics.is_empty() {
            return None;
        }
        let mut scan = Scan {
            lines: LineIndex::new(source),
            bound: HashMap::new(),
            bindings: HashMap::new(),
            written: HashSet::new(),
            sites: HashMap::new(),
            required: Vec::new(),
            shadowed: false,
        };
        scan.visit_program(&parsed.program);
        (!scan.shadowed).then_some(scan)
    }

    /// Where the value of `name`, read at byte offset `at`, came from.
    pub(super) fn resolve(&self, name: &str, at: usize, depth: usize) -> Option<Origin> {
        if depth > MAX_ALIASES || self.bound.get(name) != Some(&1) || self.written.contains(name) {
            return None;
        }
        let binding = self.bindings.get(name)?;
        if binding.start as usize >= at {
            return None;
        }
        let mut origin = self.origin(&binding.init, binding.start as usize, depth)?;
        if origin.promise && !binding.path.is_empty() {
            return None;
        }
        origin.path.extend(binding.path.iter().cloned());
        Some(origin)
    }

    pub(super) fn origin(&self, init: &Init, at: usize, depth: usize) -> Option<Origin> {
        match init {
            Init::Tool {
                tool,
                line,
                awaited,
            } => (self.sites.get(tool) == Some(&1)).then(|| Origin {
                tool: tool.clone(),
                line: *line,
                promise: !awaited,
                path: Vec::new(),
            }),
            Init::Name { root, path } => {
                let mut origin = self.resolve(root, at, depth + 1)?;
                if origin.promise {
                    return None;
                }
                origin.path.extend(path.iter().cloned());
                Some(origin)
            }
        }
    }

    fn inits(&self, expression: &Expression<'_>) -> Option<Inits> {
        match expression.get_inner_expression() {
            Expression::AwaitExpression(awaited) => {
                let Expression::CallExpression(call) = awaited.argument.get_inner_expression()
                else {
                    return None;
                };
                if let Some(init) = self.tool_call(call, true) {
                    return Some(Inits::One(init));
                }
                if !call.callee.is_specific_member_access("Promise", "all") {
                    return None;
                }
                let Some(Expression::ArrayExpression(array)) = call
                    .arguments
                    .first()
                    .and_then(|a| a.as_expression())
                    .map(Expression::get_inner_expression)
                else {
                    return None;
                };
                let elements = array
                    .elements
                    .iter()
                    .map(|element| {
                        let mut e = element.as_expression()?.get_inner_expression();
                        if let Expression::AwaitExpression(a) = e {
                            e = a.argument.get_inner_expression();
                        }
                        match e {
                            Expression::CallExpression(call) => self.tool_call(call, true),
                            _ => None,
                        }
                    })
                    .collect();
                Some(Inits::All(elements))
            }
            Expression::CallExpression(call) => self.tool_call(call, false).map(Inits::One),
            other => {
                let (root, path) = member_chain(other)?;
                Some(Inits::One(Init::Name { root, path }))
            }
        }
    }

    fn tool_call(&self, call: &CallExpression<'_>, awaited: bool) -> Option<Init> {
        let (namespace, name) = tool_reference(&call.callee)?;
        Some(Init::Tool {
            tool: format!("{namespace}.{name}"),
            line: self.lines.position(call.span.start).0,
            awaited,
        })
    }

    /// Records the names `pattern` binds, at `path` inside `inits`.
    fn bind(
        &mut self,
        pattern: &BindingPattern<'_>,
        inits: &Inits,
        path: Vec<Key>,
        span: Span,
        init_start: u32,
        depth: usize,
    ) {
        if depth > MAX_PATTERN_DEPTH {
            return;
        }
        match pattern {
            BindingPattern::BindingIdentifier(id) => {
                if let Inits::One(init) = inits {
                    self.bindings.insert(
                        id.name.to_string(),
                        Binding {
                            start: span.start,
                            init: init.clone(),
                            path,
                        },
                    );
                }
            }
            BindingPattern::ObjectPattern(object) => {
                for property in &object.properties {
                    if property.computed {
                        continue;
                    }
                    let key = match &property.key {
                        PropertyKey::StaticIdentifier(id) => id.name.to_string(),
                        PropertyKey::StringLiteral(s) => s.value.to_string(),
                        _ => continue,
                    };
                    let mut inner = path.clone();
                    inner.push(Key::of(&key));
                    self.require(&property.value, inits, &inner, Some(key), span, init_start);
                    self.bind(&property.value, inits, inner, span, init_start, depth + 1);
                }
            }
            BindingPattern::ArrayPattern(array) => {
                for (i, element) in array.elements.iter().enumerate() {
                    let Some(element) = element else { continue };
                    match inits {
                        Inits::All(all) if path.is_empty() => {
                            if let Some(Some(one)) = all.get(i) {
                                let one = Inits::One(one.clone());
                                self.bind(element, &one, Vec::new(), span, init_start, depth + 1);
                            }
                        }
                        _ => {
                            let mut inner = path.clone();
                            inner.push(Key::Index(i as u32));
                            self.require(
                                element,
                                inits,
                                &inner,
                                Some(i.to_string()),
                                span,
                                init_start,
                            );
                            self.bind(element, inits, inner, span, init_start, depth + 1);
                        }
                    }
                }
            }
            // A default value may apply: what the name holds is not known.
            BindingPattern::AssignmentPattern(_) => {}
        }
    }

    /// Notes that `pattern`, when it is a pattern, needs the value at `path` to be an object.
    fn require(
        &mut self,
        pattern: &BindingPattern<'_>,
        inits: &Inits,
        path: &[Key],
        key: Option<String>,
        span: Span,
        init_start: u32,
    ) {
        let array = match pattern {
            BindingPattern::ObjectPattern(_) => false,
            BindingPattern::ArrayPattern(_) => true,
            _ => return,
        };
        if let Inits::One(init) = inits {
            self.required.push(Required {
                span,
                init: init.clone(),
                path: path.to_vec(),
                key,
                init_start,
                array,
            });
        }
    }
}

impl<'a> Visit<'a> for Scan<'_> {
    fn visit_binding_identifier(&mut self, id: &oxc::ast::ast::BindingIdentifier<'a>) {
        if id.name == "tools" {
            self.shadowed = true;
        }
        *self.bound.entry(id.name.to_string()).or_default() += 1;
    }

    fn visit_call_expression(&mut self, call: &CallExpression<'a>) {
        if let Some((namespace, name)) = tool_reference(&call.callee) {
            *self.sites.entry(format!("{namespace}.{name}")).or_default() += 1;
        }
        walk::walk_call_expression(self, call);
    }

    fn visit_variable_declarator(&mut self, declarator: &VariableDeclarator<'a>) {
        if let Some(init) = &declarator.init
            && let Some(inits) = self.inits(init)
        {
            let init_start = init.span().start;
            // `{ nodes } = g.graph`: `g.graph` itself must be an object.
            if let Inits::One(one @ Init::Name { .. }) = &inits {
                let one = Inits::One(one.clone());
                self.require(&declarator.id, &one, &[], None, declarator.span, init_start);
            }
            self.bind(
                &declarator.id,
                &inits,
                Vec::new(),
                declarator.span,
                init_start,
                0,
            );
        }
        walk::walk_variable_declarator(self, declarator);
    }

    fn visit_for_of_statement(&mut self, for_of: &ForOfStatement<'a>) {
        // `for (const e of r.items)`: `e` is each element of `r.items` in turn.
        if !for_of.r#await
            && let ForStatementLeft::VariableDeclaration(declaration) = &for_of.left
            && let [declarator] = declaration.declarations.as_slice()
            && let Some((root, mut path)) = member_chain(&for_of.right)
        {
            path.push(Key::Each);
            let each = Inits::One(Init::Name { root, path });
            let start = for_of.right.span().start;
            self.bind(&declarator.id, &each, Vec::new(), for_of.span, start, 0);
        }
        walk::walk_for_of_statement(self, for_of);
    }

    fn visit_simple_assignment_target(&mut self, target: &SimpleAssignmentTarget<'a>) {
        let root = match target {
            SimpleAssignmentTarget::AssignmentTargetIdentifier(id) => Some(id.name.to_string()),
            other => other
                .as_member_expression()
                .and_then(|m| expression_root(m.object())),
        };
        self.written.extend(root);
        walk::walk_simple_assignment_target(self, target);
    }

    fn visit_assignment_target_property_identifier(
        &mut self,
        property: &AssignmentTargetPropertyIdentifier<'a>,
    ) {
        self.written.insert(property.binding.name.to_string());
        walk::walk_assignment_target_property_identifier(self, property);
    }

    fn visit_unary_expression(&mut self, unary: &UnaryExpression<'a>) {
        if unary.operator == UnaryOperator::Delete {
            self.written.extend(expression_root(&unary.argument));
        }
        walk::walk_unary_expression(self, unary);
    }
}

/// `name.a[0]["b"]`: the name and the keys, when every key is static.
fn member_chain(expression: &Expression<'_>) -> Option<(String, Vec<Key>)> {
    let mut keys = Vec::new();
    let mut e = expression.get_inner_expression();
    loop {
        match e {
            Expression::Identifier(id) => {
                keys.reverse();
                return Some((id.name.to_string(), keys));
            }
            Expression::StaticMemberExpression(m) if !m.optional => {
                keys.push(Key::of(&m.property.name));
                e = m.object.get_inner_expression();
            }
            Expression::ComputedMemberExpression(m) if !m.optional => {
                match m.expression.get_inner_expression() {
                    Expression::StringLiteral(s) => keys.push(Key::Name(s.value.to_string())),
                    Expression::NumericLiteral(n)
                        if n.value >= 0.0 && n.value.fract() == 0.0 && n.value < 4e9 =>
                    {
                        keys.push(Key::Index(n.value as u32));
                    }
                    _ => return None,
                }
                e = m.object.get_inner_expression();
            }
            _ => return None,
        }
    }
}

/// The name a member expression (or call chain) starts from: `g` in `g.a().b`.
fn expression_root(expression: &Expression<'_>) -> Option<String> {
    let mut e = expression.get_inner_expression();
    loop {
        e = match e {
            Expression::Identifier(id) => return Some(id.name.to_string()),
            Expression::StaticMemberExpression(m) => m.object.get_inner_expression(),
            Expression::ComputedMemberExpression(m) => m.object.get_inner_expression(),
            Expression::CallExpression(c) => c.callee.get_inner_expression(),
            Expression::ChainExpression(_) => return None,
            _ => return None,
        };
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn scan(code: &str) -> Scan<'_> {
        Scan::of(code, Language::TypeScript).expect("parses")
    }

    fn origin(tool: &str, line: u32, promise: bool, path: &[Key]) -> Option<Origin> {
        Some(Origin {
            tool: tool.to_owned(),
            line,
            promise,
            path: path.to_vec(),
        })
    }

    #[test]
    fn bindings() {
        let code = "const r = await tools.x.search({});\nconst items = r.items;\nconst { a: { b } } = r;\nconst p = tools.y.z();\nconst [c, d] = await Promise.all([tools.m.n(), tools.o.p()]);\n";
        let s = scan(code);
        let end = code.len();
        assert_eq!(s.resolve("r", end, 0), origin("x.search", 1, false, &[]));
        assert_eq!(
            s.resolve("items", end, 0),
            origin("x.search", 1, false, &[Key::Name("items".into())])
        );
        assert_eq!(
            s.resolve("b", end, 0),
            origin(
                "x.search",
                1,
                false,
                &[Key::Name("a".into()), Key::Name("b".into())]
            )
        );
        assert_eq!(s.resolve("p", end, 0), origin("y.z", 4, true, &[]));
        assert_eq!(s.resolve("c", end, 0), origin("m.n", 5, false, &[]));
        assert_eq!(s.resolve("d", end, 0), origin("o.p", 5, false, &[]));
        // Read before its declaration.
        assert_eq!(s.resolve("items", 10, 0), None);
        // `{ a: { b } }` needs `.a` to be an object.
        assert!(
            s.required
                .iter()
                .any(|r| r.key.as_deref() == Some("a") && r.path == [Key::Name("a".into())])
        );
    }

    #[test]
    fn ambiguous_bindings() {
        let s = scan(
            "let r = await tools.x.y();\nr = 1;\nconst q = await tools.x.z();\nq.a = 1;\nconst w = await tools.x.w();\ndelete w.k;\nconst v = await tools.x.v();\nfunction f(v: any) {}\n",
        );
        for name in ["r", "q", "w", "v"] {
            assert_eq!(s.resolve(name, 1000, 0), None, "{name}");
        }
        let s = scan("const a = await tools.x.y();\nconst b = await tools.x.y();\n");
        assert_eq!(s.resolve("a", 1000, 0), None);
        assert!(Scan::of("const tools = 1;", Language::JavaScript).is_none());
    }
}
