//! Explanations of TypeErrors on tool results: "g.nodes is undefined: g is the result of
//! tools.memory.read_graph (line 1), an object with keys entities (array of 3), …".
//!
//! Nothing happens at run time beyond the bridge remembering each tool's latest result text
//! ([`super::bridge::LatestResults`]): tool results reach the program untouched. All the work
//! is done here, once, when a program ends on an uncaught TypeError:
//!
//! 1. the engine's message says what failed (a read on `undefined`, a call of a non-function,
//!    iteration of a non-iterable, destructuring of `undefined`);
//! 2. the member chain at the error's position in the submitted code (`g.nodes.map`) is read
//!    from the source text;
//! 3. the program is parsed again (oxc) to find how the chain's first name was bound: to a
//!    tool's result (`const g = await tools.memory.read_graph({})`), to its promise (no
//!    `await`), to a part of it by destructuring or by `const items = r.items`, or to one of
//!    the results of `await Promise.all([tools.a.b(…), …])`;
//! 4. that tool's latest result is parsed and the chain is walked through it: only when the
//!    walk breaks exactly where the message says the program failed is the error explained,
//!    by the shape of the value where it broke (keys, types, lengths; never a string's content).
//!
//! Anything ambiguous gives no explanation: a name bound more than once or assigned, a tool
//! called from more than one place or twice at once (its latest result may not be the one the
//! name holds), a result too big to remember, a loop over elements that do not all break the
//! same way, a walk that does not agree with the message.
//!
//! Bounds on untrusted input: the program passed [`check_nesting`] (re-checked here), which
//! bounds oxc's and this module's syntax-tree recursion; patterns are followed
//! [`MAX_PATTERN_DEPTH`] deep, names [`MAX_ALIASES`] far; the JSON walks are loops over the
//! chain's keys (at most [`MAX_EACH_IN_PATH`] loops, [`MAX_EACH`] elements each). A wrong
//! explanation is worse than none.

use super::bridge::MAX_REMEMBERED_RESULT;
use super::tool_references::tool_reference;
use super::typescript::{LineIndex, check_nesting};
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
use rquickjs::{Ctx, Type, Value};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// An uncaught TypeError, as the engine reported it.
pub(super) struct Failed<'a> {
    /// The code the agent submitted.
    pub source: &'a str,
    pub language: Language,
    /// The engine's message.
    pub message: &'a str,
    /// 1-based line and UTF-16 column in `source`, when the engine gave one.
    pub position: Option<(u32, u32)>,
}

/// The explanation of `failed`, or `None` when no tool's value accounts for it. `latest`
/// gives a tool's latest result text (`namespace.name`).
pub(super) fn explain(
    ctx: &Ctx<'_>,
    failed: &Failed<'_>,
    latest: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let failure = failure(failed.message)?;
    if !failed.source.contains("tools") {
        return None;
    }
    let scan = Scan::of(failed.source, failed.language)?;
    let values = Results {
        ctx,
        latest,
        parsed: RefCell::new(HashMap::new()),
    };
    let at = failed
        .position
        .and_then(|(line, column)| offset_of(failed.source, line, column));
    if let Some(at) = at
        && let Some(found) = at_position(&scan, failed.source, at, failure, &values)
    {
        return Some(found);
    }
    if matches!(
        failure,
        Failure::ToObject | Failure::PropertyOf("Symbol.iterator", false)
    ) {
        return destructured(&scan, failed.source, at, failure, &values);
    }
    None
}

/// What the engine's message says failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure<'m> {
    /// `cannot read property 'P' of undefined` (or `set`; `true` for `of null`): the value
    /// before `.P` is missing.
    PropertyOf(&'m str, bool),
    /// `not a function`.
    NotAFunction,
    /// `value is not iterable`.
    NotIterable,
    /// `Cannot convert undefined or null to object` (destructuring, `Object.keys`).
    ToObject,
}

fn failure(message: &str) -> Option<Failure<'_>> {
    let property = |verb: &str| {
        let rest = message.strip_prefix(verb)?.strip_prefix(" property '")?;
        let (name, tail) = rest.split_once("' of ")?;
        match tail {
            "undefined" => Some(Failure::PropertyOf(name, false)),
            "null" => Some(Failure::PropertyOf(name, true)),
            _ => None,
        }
    };
    if let Some(f) = property("cannot read").or_else(|| property("cannot set")) {
        return Some(f);
    }
    match message {
        "not a function" => Some(Failure::NotAFunction),
        "value is not iterable" => Some(Failure::NotIterable),
        "Cannot convert undefined or null to object" => Some(Failure::ToObject),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Where a name's value came from: the program's bindings.

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Name(String),
    Index(u32),
    /// Any element of an array: the name a `for (const e of …)` binds.
    Each,
}

impl Key {
    fn of(text: &str) -> Key {
        match text.parse::<u32>() {
            Ok(i) if i.to_string() == text => Key::Index(i),
            _ => Key::Name(text.to_owned()),
        }
    }
}

/// What a declaration's initializer is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Init {
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
struct Required {
    /// The declaration.
    span: Span,
    init: Init,
    path: Vec<Key>,
    /// The key destructured, or `None` for the initializer itself.
    key: Option<String>,
    /// Where the initializer starts (its text names the value when `key` is `None`).
    init_start: u32,
    /// An array pattern (iterated) rather than an object pattern.
    array: bool,
}

/// Where a value came from: a tool's result (at `path`) or its promise.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    tool: String,
    line: u32,
    promise: bool,
    path: Vec<Key>,
}

/// Destructuring patterns nest at most this deep here; deeper ones are not explained.
const MAX_PATTERN_DEPTH: usize = 32;
/// `const a = r.x; const b = a.y; …`: at most this many names are followed.
const MAX_ALIASES: usize = 8;

/// What the program binds, assigns and calls, from one walk of its syntax tree.
struct Scan<'s> {
    lines: LineIndex<'s>,
    /// How many times each name is bound anywhere (declarations, parameters, functions…).
    bound: HashMap<String, u32>,
    bindings: HashMap<String, Binding>,
    /// Names assigned, updated, or whose members are assigned or deleted.
    written: HashSet<String>,
    /// Call sites of each tool.
    sites: HashMap<String, u32>,
    required: Vec<Required>,
    /// The program binds its own `tools`.
    shadowed: bool,
}

impl<'s> Scan<'s> {
    fn of(source: &'s str, language: Language) -> Option<Scan<'s>> {
        // The program passed this check before it ran; it bounds the parser's and this walk's
        // recursion (one level per level of nesting), and is cheap.
        check_nesting(source).ok()?;
        let source_type = match language {
            Language::TypeScript => SourceType::ts().with_module(true),
            Language::JavaScript => SourceType::mjs(),
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
    fn resolve(&self, name: &str, at: usize, depth: usize) -> Option<Origin> {
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

    fn origin(&self, init: &Init, at: usize, depth: usize) -> Option<Origin> {
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

// ---------------------------------------------------------------------------------------------
// What a tool's value really was: its latest result, walked.

/// Tools' latest results, parsed (once each) when an explanation needs them.
struct Results<'c, 'js> {
    ctx: &'c Ctx<'js>,
    latest: &'c dyn Fn(&str) -> Option<String>,
    parsed: RefCell<HashMap<String, Option<Value<'js>>>>,
}

impl<'js> Results<'_, 'js> {
    fn of(&self, tool: &str) -> Option<Value<'js>> {
        if let Some(found) = self.parsed.borrow().get(tool) {
            return found.clone();
        }
        let value = (self.latest)(tool)
            .filter(|json| json.len() <= MAX_REMEMBERED_RESULT)
            .and_then(|json| match self.ctx.json_parse(json) {
                Ok(value) => Some(value),
                Err(_) => {
                    // A result that no longer parses (the heap is nearly full): no explanation.
                    let _ = self.ctx.catch();
                    None
                }
            });
        self.parsed
            .borrow_mut()
            .insert(tool.to_owned(), value.clone());
        value
    }
}

/// One step of a walk through a parsed JSON value.
enum Walked<'js> {
    Found(Value<'js>),
    /// Not there: the program read `undefined`.
    Missing,
    /// Something the JSON does not hold (a method of arrays, strings…): the walk stops.
    Opaque,
}

/// `value[key]`, for a value made by `JSON.parse`: own data properties only, so nothing the
/// program put on the prototypes runs or counts.
fn child<'js>(ctx: &Ctx<'js>, value: &Value<'js>, key: &Key) -> Walked<'js> {
    let name = match key {
        Key::Name(name) => name.as_str(),
        Key::Index(_) => "",
        Key::Each => return Walked::Opaque,
    };
    match value.type_of() {
        Type::Array => {
            let Some(array) = value.as_array() else {
                return Walked::Opaque;
            };
            match key {
                Key::Index(i) if (*i as usize) < array.len() => match array.get(*i as usize) {
                    Ok(v) => Walked::Found(v),
                    Err(_) => Walked::Opaque,
                },
                Key::Index(_) => Walked::Missing,
                Key::Name(n) if n == "length" => {
                    Walked::Found(Value::new_number(ctx.clone(), array.len() as f64))
                }
                Key::Name(n) if ARRAY_METHODS.contains(&n.as_str()) || is_object_method(n) => {
                    Walked::Opaque
                }
                Key::Name(_) => Walked::Missing,
                Key::Each => Walked::Opaque,
            }
        }
        Type::Object => {
            let Some(object) = value.as_object() else {
                return Walked::Opaque;
            };
            let wanted = match key {
                Key::Name(n) => n.clone(),
                Key::Index(i) => i.to_string(),
                Key::Each => return Walked::Opaque,
            };
            for (k, v) in object.props::<String, Value>().flatten() {
                if k == wanted {
                    return Walked::Found(v);
                }
            }
            if is_object_method(&wanted) {
                Walked::Opaque
            } else {
                Walked::Missing
            }
        }
        Type::String => match key {
            Key::Name(n) if n == "length" => Walked::Opaque,
            Key::Name(n) if STRING_METHODS.contains(&n.as_str()) || is_object_method(n) => {
                Walked::Opaque
            }
            Key::Name(_) => Walked::Missing,
            // A character, or `undefined` past the end: not worth telling apart.
            Key::Index(_) | Key::Each => Walked::Opaque,
        },
        Type::Int | Type::Float => {
            if NUMBER_METHODS.contains(&name) || is_object_method(name) {
                Walked::Opaque
            } else {
                Walked::Missing
            }
        }
        Type::Bool => {
            if is_object_method(name) {
                Walked::Opaque
            } else {
                Walked::Missing
            }
        }
        _ => Walked::Opaque,
    }
}

fn is_object_method(name: &str) -> bool {
    OBJECT_METHODS.contains(&name)
}

const OBJECT_METHODS: &[&str] = &[
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toString",
    "toLocaleString",
    "valueOf",
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];

const ARRAY_METHODS: &[&str] = &[
    "at",
    "concat",
    "copyWithin",
    "entries",
    "every",
    "fill",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "flat",
    "flatMap",
    "forEach",
    "includes",
    "indexOf",
    "join",
    "keys",
    "lastIndexOf",
    "map",
    "pop",
    "push",
    "reduce",
    "reduceRight",
    "reverse",
    "shift",
    "slice",
    "some",
    "sort",
    "splice",
    "toReversed",
    "toSorted",
    "toSpliced",
    "unshift",
    "values",
    "with",
];

const STRING_METHODS: &[&str] = &[
    "at",
    "charAt",
    "charCodeAt",
    "codePointAt",
    "concat",
    "endsWith",
    "includes",
    "indexOf",
    "isWellFormed",
    "lastIndexOf",
    "localeCompare",
    "match",
    "matchAll",
    "normalize",
    "padEnd",
    "padStart",
    "repeat",
    "replace",
    "replaceAll",
    "search",
    "slice",
    "split",
    "startsWith",
    "substring",
    "substr",
    "toLocaleLowerCase",
    "toLocaleUpperCase",
    "toLowerCase",
    "toUpperCase",
    "toWellFormed",
    "trim",
    "trimEnd",
    "trimStart",
    "trimLeft",
    "trimRight",
];

const NUMBER_METHODS: &[&str] = &["toExponential", "toFixed", "toPrecision"];

const PROMISE_METHODS: &[&str] = &["then", "catch", "finally"];

/// The kind a method `name` belongs to, when `value` is not of that kind: `not a string`.
fn method_of(value: &Value<'_>, name: &str) -> Option<&'static str> {
    let kind = value.type_of();
    if ARRAY_METHODS.contains(&name) && kind != Type::Array {
        Some("an array")
    } else if STRING_METHODS.contains(&name) && kind != Type::String {
        Some("a string")
    } else if NUMBER_METHODS.contains(&name) && !matches!(kind, Type::Int | Type::Float) {
        Some("a number")
    } else {
        None
    }
}

/// Walks `path` from `value`: the value at its end, or where it broke (the index of the step
/// that found nothing, and the value it was read from).
enum Walk<'js> {
    Found(Value<'js>),
    /// `path[i]` is missing (or null, `true`) in `parent`.
    Broke {
        i: usize,
        parent: Value<'js>,
        null: bool,
    },
    Opaque,
}

fn walk<'js>(ctx: &Ctx<'js>, value: Value<'js>, path: &[Key]) -> Walk<'js> {
    if path.iter().filter(|k| **k == Key::Each).count() > MAX_EACH_IN_PATH {
        return Walk::Opaque;
    }
    let mut current = value;
    for (i, key) in path.iter().enumerate() {
        if *key == Key::Each {
            return walk_each(ctx, &current, i, &path[i + 1..]);
        }
        match child(ctx, &current, key) {
            Walked::Found(next) if next.is_null() => {
                return Walk::Broke {
                    i,
                    parent: current,
                    null: true,
                };
            }
            Walked::Found(next) => current = next,
            Walked::Missing => {
                return Walk::Broke {
                    i,
                    parent: current,
                    null: false,
                };
            }
            Walked::Opaque => return Walk::Opaque,
        }
    }
    Walk::Found(current)
}

/// Loops nest at most this deep in a path (each multiplies the walk by an array's length).
const MAX_EACH_IN_PATH: usize = 2;
/// Elements of an array walked for a loop over it; longer arrays are not explained.
const MAX_EACH: usize = 1000;

/// The walk of `rest` from every element of `array` (the value `path[i]` loops over): the
/// loop may have failed on any of them, so the walk agrees only when every element breaks at
/// the same step the same way (or every one gets through, to values of one type). The first
/// element stands for all in the explanation.
fn walk_each<'js>(ctx: &Ctx<'js>, array: &Value<'js>, i: usize, rest: &[Key]) -> Walk<'js> {
    let Some(elements) = array.as_array() else {
        return Walk::Opaque;
    };
    let n = elements.len();
    // An empty array runs no loop body; a long one is too costly to check.
    if n == 0 || n > MAX_EACH {
        return Walk::Opaque;
    }
    let mut first: Option<Walk<'js>> = None;
    for k in 0..n {
        let Ok(element) = elements.get::<Value>(k) else {
            return Walk::Opaque;
        };
        let this = match walk(ctx, element, rest) {
            Walk::Broke {
                i: at,
                parent,
                null,
            } => Walk::Broke {
                i: i + 1 + at,
                parent,
                null,
            },
            other => other,
        };
        let agrees = match (&first, &this) {
            (_, Walk::Opaque) => false,
            (None, _) => true,
            (Some(Walk::Found(a)), Walk::Found(b)) => a.type_of() == b.type_of(),
            (Some(Walk::Broke { i: a, null: x, .. }), Walk::Broke { i: b, null: y, .. }) => {
                a == b && x == y
            }
            _ => false,
        };
        if !agrees {
            return Walk::Opaque;
        }
        if first.is_none() {
            first = Some(this);
        }
    }
    first.unwrap_or(Walk::Opaque)
}

// ---------------------------------------------------------------------------------------------
// Shapes: keys, types, lengths; never a string's content.

const MAX_SHAPE: usize = 280;
const MAX_KEY: usize = 40;
/// Array elements looked at to say their type.
const MAX_ITEMS: usize = 100;

fn short_key(key: &str) -> String {
    if key.chars().count() > MAX_KEY {
        let cut: String = key.chars().take(MAX_KEY - 1).collect();
        format!("{cut}…")
    } else {
        key.to_owned()
    }
}

/// A value's type in a few words.
fn type_word(value: &Value<'_>) -> String {
    match value.type_of() {
        Type::Null => "null".to_owned(),
        Type::Array => match value.as_array().map_or(0, |a| a.len()) {
            0 => "empty array".to_owned(),
            n => format!("array of {n}"),
        },
        Type::Object => "object".to_owned(),
        Type::String => "string".to_owned(),
        Type::Int | Type::Float => "number".to_owned(),
        Type::Bool => "boolean".to_owned(),
        _ => "value".to_owned(),
    }
}

/// What a value is: `an object with keys a (string), b (array of 2)`, `an empty array`, `a
/// string`.
fn shape(value: &Value<'_>) -> String {
    match value.type_of() {
        Type::Array => {
            let Some(array) = value.as_array() else {
                return "an array".to_owned();
            };
            let n = array.len();
            if n == 0 {
                return "an empty array".to_owned();
            }
            let items: Vec<Value> = (0..n.min(MAX_ITEMS))
                .filter_map(|i| array.get(i).ok())
                .collect();
            let kind = items.first().map(type_word).unwrap_or_default();
            if items.iter().any(|v| type_word(v) != kind) {
                return format!("an array of {n}");
            }
            if kind == "object"
                && let Some(first) = items.first().and_then(Value::as_object)
            {
                let mut keys = Vec::new();
                let mut used = 0;
                let mut all = 0;
                for key in first.keys::<String>().flatten() {
                    all += 1;
                    if used < 120 {
                        used += key.len() + 2;
                        keys.push(short_key(&key));
                    }
                }
                let more = if keys.len() < all { ", …" } else { "" };
                return format!(
                    "an array of {n} (the first an object with keys {}{more})",
                    keys.join(", ")
                );
            }
            format!("an array of {n} ({kind})")
        }
        Type::Object => {
            let Some(object) = value.as_object() else {
                return "an object".to_owned();
            };
            let mut parts = Vec::new();
            let mut used = 0;
            let mut all = 0;
            let mut cut = false;
            for (key, v) in object.props::<String, Value>().flatten() {
                all += 1;
                if cut {
                    continue;
                }
                let part = format!("{} ({})", short_key(&key), type_word(&v));
                if used + part.len() > MAX_SHAPE - 40 {
                    cut = true;
                    continue;
                }
                used += part.len() + 2;
                parts.push(part);
            }
            if all == 0 {
                return "an empty object".to_owned();
            }
            if cut {
                parts.push(format!("… {all} keys in all"));
            }
            format!("an object with keys {}", parts.join(", "))
        }
        Type::String => "a string".to_owned(),
        Type::Int | Type::Float => "a number".to_owned(),
        Type::Bool => "a boolean".to_owned(),
        Type::Null => "null".to_owned(),
        _ => "a value".to_owned(),
    }
}

/// `.items[0] of the result of tools.x.search`; `.owner of an element of .items of …` through
/// a loop.
fn origin_text(tool: &str, path: &[Key]) -> String {
    let mut text = format!("the result of tools.{tool}");
    for part in path.split(|k| *k == Key::Each).enumerate() {
        let (n, keys) = part;
        if n > 0 {
            text = format!("an element of {text}");
        }
        if keys.is_empty() {
            continue;
        }
        let mut steps = String::new();
        for key in keys {
            match key {
                Key::Index(i) => steps.push_str(&format!("[{i}]")),
                Key::Name(name) if is_name(name) => steps.push_str(&format!(".{name}")),
                Key::Name(name) => steps.push_str(&format!("[{name:?}]")),
                Key::Each => {}
            }
        }
        text = format!("{steps} of {text}");
    }
    text
}

/// The shape of the value at `path`: through a loop, the first element's stands for all.
fn shape_at(value: &Value<'_>, path: &[Key]) -> String {
    if path.contains(&Key::Each) {
        format!("the first {}", shape(value))
    } else {
        shape(value)
    }
}

/// `, not an object` after a read of a key on a string, number, boolean or array (by name).
fn not_an_object(parent: &Value<'_>, key: &Key) -> &'static str {
    match (parent.type_of(), key) {
        (Type::String | Type::Int | Type::Float | Type::Bool, _) => ", not an object",
        (Type::Array, Key::Name(_)) => ", not an object",
        _ => "",
    }
}

// ---------------------------------------------------------------------------------------------
// The error's expression, held against the value.

/// The key a chain step reads, when it is known.
fn step_key(step: &Step) -> Option<Key> {
    match step {
        Step::Name(name) => Some(Key::Name(name.clone())),
        Step::Index(Some(literal)) => Some(Key::of(literal)),
        _ => None,
    }
}

/// The step reads property `p` (a computed key might).
fn reads(step: Option<&Step>, p: &str) -> bool {
    match step {
        Some(Step::Name(name)) => name == p,
        Some(Step::Index(Some(literal))) => literal == p,
        Some(Step::Index(None)) => true,
        _ => false,
    }
}

/// The explanation of the error at byte offset `at` from the member chain there.
fn at_position(
    scan: &Scan<'_>,
    source: &str,
    at: usize,
    failure: Failure<'_>,
    results: &Results<'_, '_>,
) -> Option<String> {
    let start = chain_start(source, at)?;
    let chain = parse_chain(source, start);
    let last = chain.last()?;
    if at > last.end {
        return None;
    }
    let head = &source[chain.first()?.start..chain.first()?.end];
    if !is_name(head) {
        return None;
    }
    let origin = scan.resolve(head, start, 0)?;
    let text = |end: usize| compact(&source[start..end]);
    // The value before step `i`, named in the program.
    let object = |i: usize| text(chain[i].start).map(|t| t.trim_end_matches(['?', '!']).to_owned());
    let line = origin.line;
    let tool = &origin.tool;

    if origin.promise {
        let promise_tail = |object: &str| {
            format!(
                "{object} is the Promise that tools.{tool} (line {line}) returned, not its result — add await"
            )
        };
        let member = chain
            .get(1)
            .and_then(|s| step_key(&s.step))
            .is_some_and(|k| !matches!(&k, Key::Name(n) if PROMISE_METHODS.contains(&n.as_str()) || is_object_method(n)));
        return match failure {
            Failure::PropertyOf(p, false) if member && reads(chain.get(2).map(|s| &s.step), p) => {
                Some(format!(
                    "{} is undefined: {}",
                    text(chain[1].end)?,
                    promise_tail(head)
                ))
            }
            Failure::NotAFunction
                if member && chain.get(2).map(|s| &s.step) == Some(&Step::Call) =>
            {
                Some(format!(
                    "{} is not a function: {}",
                    text(chain[1].end)?,
                    promise_tail(head)
                ))
            }
            Failure::NotIterable if chain.len() == 1 => {
                Some(format!("{head} is not iterable: {}", promise_tail(head)))
            }
            _ => None,
        };
    }

    let root = results.of(tool)?;
    let ctx = results.ctx;
    // The keys the chain reads, up to its first call or computed key.
    let keys: Vec<Key> = chain[1..].iter().map_while(|s| step_key(&s.step)).collect();
    // The path in the result to the value before chain step `i` (step 0 is the name). The
    // walks below always start from the result, so a loop's every element is walked.
    let path_to = |i: usize| {
        let mut path = origin.path.clone();
        path.extend(keys[..i - 1].iter().cloned());
        path
    };
    let base = origin.path.len();
    if base == 0 && root.is_null() {
        // The result itself is `null`.
        return match failure {
            Failure::PropertyOf(p, true) if reads(chain.get(1).map(|s| &s.step), p) => Some(
                format!("{head} is null: {head} is the result of tools.{tool} (line {line})"),
            ),
            _ => None,
        };
    }

    match failure {
        Failure::PropertyOf(..) | Failure::ToObject => {
            let (p, is_null) = match failure {
                Failure::PropertyOf(p, n) => (Some(p), n),
                _ => (None, false),
            };
            let Walk::Broke { i, parent, null } = walk(ctx, root, &path_to(keys.len() + 1)) else {
                return None;
            };
            let what = if null { "null" } else { "undefined" };
            if i + 1 < base {
                return None;
            }
            if i + 1 == base {
                // The name itself is missing or null (`const { graph } = …; graph.nodes`).
                if p.is_none_or(|p| null != is_null || !reads(chain.get(1).map(|s| &s.step), p)) {
                    return None;
                }
                return Some(format!(
                    "{head} is {what}: the object it is read from is {} (line {line}), {}{}",
                    origin_text(tool, &origin.path[..i]),
                    shape_at(&parent, &origin.path[..i]),
                    not_an_object(&parent, &origin.path[i]),
                ));
            }
            let i = i - base + 1; // the chain's step that found nothing
            let agrees = match p {
                Some("Symbol.iterator") | None => i + 1 == chain.len(),
                Some(p) => null == is_null && reads(chain.get(i + 1).map(|s| &s.step), p),
            };
            if !agrees {
                return None;
            }
            Some(format!(
                "{} is {what}: {} is {} (line {line}), {}{}",
                text(chain[i].end)?,
                object(i)?,
                origin_text(tool, &path_to(i)),
                shape_at(&parent, &path_to(i)),
                not_an_object(&parent, &keys[i - 1]),
            ))
        }
        Failure::NotAFunction => {
            // The called member: the one at the error's position, else the chain's only call
            // of a member.
            let called: Vec<usize> = (1..chain.len())
                .filter(|&i| {
                    step_key(&chain[i].step).is_some()
                        && chain.get(i + 1).map(|s| &s.step) == Some(&Step::Call)
                })
                .collect();
            let i = called
                .iter()
                .copied()
                .find(|&i| chain[i].start <= at && at < chain[i].end)
                .or_else(|| (called.len() == 1).then(|| called[0]))?;
            if i > keys.len() {
                return None;
            }
            let key = &keys[i - 1];
            let not = match walk(ctx, root.clone(), &path_to(i + 1)) {
                // A JSON value is never a function.
                Walk::Found(_) => String::new(),
                Walk::Broke {
                    i: at, null: false, ..
                } if at + 1 == base + i => match key {
                    Key::Name(name) => {
                        let Walk::Found(receiver) = walk(ctx, root.clone(), &path_to(i)) else {
                            return None;
                        };
                        method_of(&receiver, name)
                            .map(|kind| format!(", not {kind}"))
                            .unwrap_or_default()
                    }
                    _ => String::new(),
                },
                _ => return None,
            };
            let Walk::Found(receiver) = walk(ctx, root, &path_to(i)) else {
                return None;
            };
            Some(format!(
                "{} is not a function: {} is {} (line {line}), {}{not}",
                text(chain[i].end)?,
                object(i)?,
                origin_text(tool, &path_to(i)),
                shape_at(&receiver, &path_to(i)),
            ))
        }
        Failure::NotIterable => {
            if keys.len() + 1 != chain.len() {
                return None;
            }
            let path = path_to(chain.len());
            let Walk::Found(value) = walk(ctx, root, &path) else {
                return None;
            };
            if matches!(value.type_of(), Type::Array | Type::String) {
                return None;
            }
            let whole = text(last.end)?;
            Some(format!(
                "{whole} is not iterable: {whole} is {} (line {line}), {}",
                origin_text(tool, &path),
                shape_at(&value, &path),
            ))
        }
    }
}

/// A destructuring that needs a missing value to be an object: the engine gives no reliable
/// position for these, so the one declaration (at the position, if any) whose value is
/// missing in its tool's result.
fn destructured(
    scan: &Scan<'_>,
    source: &str,
    at: Option<usize>,
    failure: Failure<'_>,
    results: &Results<'_, '_>,
) -> Option<String> {
    let array = failure != Failure::ToObject;
    let mut found = Vec::new();
    for required in &scan.required {
        if required.array != array {
            continue;
        }
        let Some(origin) = scan.origin(&required.init, required.span.start as usize, 0) else {
            continue;
        };
        if origin.promise {
            continue;
        }
        let mut path = origin.path.clone();
        path.extend(required.path.iter().cloned());
        let Some(root) = results.of(&origin.tool) else {
            continue;
        };
        let Walk::Broke { i, parent, null } = walk(results.ctx, root, &path) else {
            continue;
        };
        if i + 1 != path.len() {
            continue;
        }
        let what = if null { "null" } else { "undefined" };
        let tail = format!(
            "(line {}), {}{}",
            origin.line,
            shape_at(&parent, &path[..i]),
            not_an_object(&parent, &path[i])
        );
        let text = match &required.key {
            Some(key) => format!(
                "the destructured {key} is {what}: the object it is read from is {} {tail}",
                origin_text(&origin.tool, &path[..i])
            ),
            None => {
                // `{ … } = g.graph`: name the initializer as the program wrote it.
                let start = required.init_start as usize;
                let chain = parse_chain(source, start);
                let (Some(last), Some(before)) = (chain.last(), chain.len().checked_sub(1)) else {
                    continue;
                };
                if before == 0 {
                    continue;
                }
                let (Some(subject), Some(object)) = (
                    compact(&source[start..last.end]),
                    compact(&source[start..chain[before].start]),
                ) else {
                    continue;
                };
                format!(
                    "{subject} is {what}: {} is {} {tail}",
                    object.trim_end_matches(['?', '!']),
                    origin_text(&origin.tool, &path[..i])
                )
            }
        };
        let here = at.is_some_and(|at| {
            (required.span.start as usize) <= at && at < required.span.end as usize
        });
        found.push((here, text));
    }
    if found.iter().filter(|(here, _)| *here).count() == 1 {
        return found.into_iter().find(|(here, _)| *here).map(|(_, t)| t);
    }
    (found.len() == 1).then(|| found.remove(0).1)
}

// ---------------------------------------------------------------------------------------------
// The source text around the error.

/// Byte offset of a 1-based line and UTF-16 column.
fn offset_of(source: &str, line: u32, column: u32) -> Option<usize> {
    let start = if line <= 1 {
        0
    } else {
        let mut n = 1;
        let mut found = None;
        for (i, b) in source.bytes().enumerate() {
            if b == b'\n' {
                n += 1;
                if n == line {
                    found = Some(i + 1);
                    break;
                }
            }
        }
        found?
    };
    let mut units = 1;
    for (i, c) in source[start..].char_indices() {
        if units >= column {
            return Some(start + i);
        }
        if c == '\n' {
            return None;
        }
        units += c.len_utf16() as u32;
    }
    None
}

/// One step of a member chain.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// The chain's head: a name, or a parenthesised expression (`None`).
    Head,
    /// `.name` or `?.name`.
    Name(String),
    /// `[expr]`: the key when it is a literal.
    Index(Option<String>),
    /// `(args)`.
    Call,
}

#[derive(Debug)]
struct Segment {
    start: usize,
    end: usize,
    step: Step,
}

/// Where the member chain around `at` begins: back over `.name`, `?.name`, `[…]` and `(…)`.
fn chain_start(source: &str, at: usize) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut p = at;
    // Into the start of the name `at` is in.
    while p > 0 && is_name_byte(bytes[p - 1]) {
        p -= 1;
    }
    if !bytes
        .get(p)
        .is_some_and(|&b| is_name_byte(b) || b == b'(' || b == b'[')
    {
        return None;
    }
    while let Some(prev) = skip_back_ws(bytes, p) {
        let attached = matches!(bytes[p], b'[' | b'(');
        let (before, dotted) = match bytes[prev] {
            b'.' if prev > 0 && bytes[prev - 1] == b'.' => break,
            b'.' => {
                let q = if prev > 0 && bytes[prev - 1] == b'?' {
                    prev - 1
                } else {
                    prev
                };
                match skip_back_ws(bytes, q) {
                    Some(b) => (b, true),
                    None => break,
                }
            }
            // TypeScript's non-null assertion: `g!.nodes`.
            b'!' if prev > 0 && is_name_byte(bytes[prev - 1]) => (prev - 1, true),
            _ if attached => (prev, false),
            _ => break,
        };
        match bytes[before] {
            b if is_name_byte(b) => {
                let mut s = before;
                while s > 0 && is_name_byte(bytes[s - 1]) {
                    s -= 1;
                }
                // `return (x).y` or `await (x)`: the keyword is not the callee.
                if !dotted && is_keyword(&source[s..=before]) {
                    break;
                }
                p = s;
            }
            b')' | b']' => match matching_open(bytes, before) {
                Some(open) => p = open,
                None => return None,
            },
            _ => break,
        }
    }
    Some(p)
}

/// The chain's segments from its head at `start`.
fn parse_chain(source: &str, start: usize) -> Vec<Segment> {
    let bytes = source.as_bytes();
    let mut segments = Vec::new();
    let head_end = if bytes.get(start) == Some(&b'(') || bytes.get(start) == Some(&b'[') {
        match matching_close(bytes, start) {
            Some(close) => close + 1,
            None => return segments,
        }
    } else {
        name_end(bytes, start)
    };
    if head_end == start {
        return segments;
    }
    segments.push(Segment {
        start,
        end: head_end,
        step: Step::Head,
    });
    let mut p = head_end;
    loop {
        let mut q = skip_ws(bytes, p);
        if bytes.get(q) == Some(&b'!') && bytes.get(q + 1) != Some(&b'=') {
            q += 1;
        }
        let seg_start = q;
        let optional = bytes.get(q) == Some(&b'?') && bytes.get(q + 1) == Some(&b'.');
        if optional {
            q += 2;
        }
        match bytes.get(q) {
            Some(b'.') if !optional && bytes.get(q + 1) != Some(&b'.') => {
                let n = skip_ws(bytes, q + 1);
                let end = name_end(bytes, n);
                if end == n {
                    break;
                }
                segments.push(Segment {
                    start: seg_start,
                    end,
                    step: Step::Name(source[n..end].to_owned()),
                });
                p = end;
            }
            Some(b) if optional && is_name_byte(*b) => {
                let end = name_end(bytes, q);
                segments.push(Segment {
                    start: seg_start,
                    end,
                    step: Step::Name(source[q..end].to_owned()),
                });
                p = end;
            }
            Some(b'[') => {
                let Some(close) = matching_close(bytes, q) else {
                    break;
                };
                let literal = literal_key(source[q + 1..close].trim());
                segments.push(Segment {
                    start: seg_start,
                    end: close + 1,
                    step: Step::Index(literal),
                });
                p = close + 1;
            }
            Some(b'(') => {
                let Some(close) = matching_close(bytes, q) else {
                    break;
                };
                segments.push(Segment {
                    start: seg_start,
                    end: close + 1,
                    step: Step::Call,
                });
                p = close + 1;
            }
            _ => break,
        }
    }
    segments
}

/// `'k'`, `"k"` or `0` inside brackets: the key read.
fn literal_key(text: &str) -> Option<String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(text.to_owned());
    }
    let quoted = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))?;
    (!quoted.contains(['\\', '\'', '"'])).then(|| quoted.to_owned())
}

/// Longest expression quoted in an explanation.
const MAX_EXPRESSION: usize = 80;

/// The expression as one line without layout whitespace, or `None` when too long to show.
fn compact(text: &str) -> Option<String> {
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line.trim());
    }
    let out = out.trim().to_owned();
    (!out.is_empty() && out.len() <= MAX_EXPRESSION).then_some(out)
}

fn skip_ws(bytes: &[u8], mut p: usize) -> usize {
    while bytes.get(p).is_some_and(u8::is_ascii_whitespace) {
        p += 1;
    }
    p
}

/// The last non-whitespace byte before `p`.
fn skip_back_ws(bytes: &[u8], p: usize) -> Option<usize> {
    let mut q = p;
    while q > 0 {
        q -= 1;
        if !bytes[q].is_ascii_whitespace() {
            return Some(q);
        }
    }
    None
}

fn name_end(bytes: &[u8], mut p: usize) -> usize {
    while bytes.get(p).is_some_and(|&b| is_name_byte(b)) {
        p += 1;
    }
    p
}

/// Names and identifiers: ASCII letters, digits, `_`, `$`, and anything non-ASCII.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

fn is_name(key: &str) -> bool {
    !key.is_empty()
        && key.chars().all(is_name_char)
        && !key.starts_with(|c: char| c.is_ascii_digit())
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "return"
            | "await"
            | "typeof"
            | "void"
            | "delete"
            | "in"
            | "of"
            | "new"
            | "yield"
            | "case"
            | "throw"
            | "instanceof"
            | "else"
            | "do"
    )
}

/// The bracket that closes the one at `open`, skipping strings (bounded by the source).
fn matching_close(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut p = open;
    while p < bytes.len() {
        match bytes[p] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(p);
                }
            }
            q @ (b'\'' | b'"' | b'`') => {
                p += 1;
                while p < bytes.len() && bytes[p] != q {
                    if bytes[p] == b'\\' {
                        p += 1;
                    }
                    p += 1;
                }
            }
            _ => {}
        }
        p += 1;
    }
    None
}

/// The bracket that opens the one closing at `close` (strings are not skipped backwards:
/// a bracket inside a string only makes the chain unrecognised).
fn matching_open(bytes: &[u8], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut p = close + 1;
    while p > 0 {
        p -= 1;
        match bytes[p] {
            b')' | b']' | b'}' => depth += 1,
            b'(' | b'[' | b'{' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(p);
                }
            }
            _ => {}
        }
    }
    None
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
    fn messages() {
        assert_eq!(
            failure("cannot read property 'map' of undefined"),
            Some(Failure::PropertyOf("map", false))
        );
        assert_eq!(
            failure("cannot set property 'x' of null"),
            Some(Failure::PropertyOf("x", true))
        );
        assert_eq!(failure("not a function"), Some(Failure::NotAFunction));
        assert_eq!(failure("value is not iterable"), Some(Failure::NotIterable));
        assert_eq!(failure("x is not defined"), None);
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

    #[test]
    fn shapes_never_show_strings() {
        let runtime = rquickjs::Runtime::new().expect("runtime");
        let context = rquickjs::Context::full(&runtime).expect("context");
        context.with(|ctx| {
            let parse = |json: &str| ctx.json_parse(json).expect("json");
            assert_eq!(
                shape(&parse(r#"{"token":"ghp_secret","n":1,"ok":true,"l":[1,2],"e":[],"o":{},"z":null}"#)),
                "an object with keys token (string), n (number), ok (boolean), l (array of 2), e (empty array), o (object), z (null)"
            );
            assert_eq!(shape(&parse("[]")), "an empty array");
            assert_eq!(shape(&parse(r#"["a","b"]"#)), "an array of 2 (string)");
            assert_eq!(shape(&parse(r#"[1,"b"]"#)), "an array of 2");
            assert_eq!(
                shape(&parse(r#"[{"id":1,"name":"x"}]"#)),
                "an array of 1 (the first an object with keys id, name)"
            );
            assert_eq!(shape(&parse(r#""secret""#)), "a string");
            assert_eq!(shape(&parse("{}")), "an empty object");
            let wide = format!(
                "{{{}}}",
                (0..100)
                    .map(|i| format!("\"k{i}\":{i}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let text = shape(&parse(&wide));
            assert!(text.len() <= 300 && text.ends_with("… 100 keys in all"), "{text}");
            // The walk reads own properties only: a key the program put on Object.prototype
            // is still missing.
            ctx.eval::<(), _>("Object.prototype.nodes = [1];")
                .expect("eval");
            assert!(matches!(
                walk(&ctx, parse(r#"{"a":{}}"#), &[Key::Name("a".into()), Key::Name("nodes".into())]),
                Walk::Broke { i: 1, null: false, .. }
            ));
            assert!(matches!(
                walk(&ctx, parse(r#"{"a":[1]}"#), &[Key::Name("a".into()), Key::Name("map".into())]),
                Walk::Opaque
            ));
        });
    }

    #[test]
    fn origin_texts() {
        assert_eq!(origin_text("x.y", &[]), "the result of tools.x.y");
        assert_eq!(
            origin_text(
                "x.y",
                &[
                    Key::Name("items".into()),
                    Key::Index(0),
                    Key::Name("a-b".into())
                ]
            ),
            ".items[0][\"a-b\"] of the result of tools.x.y"
        );
    }
}
