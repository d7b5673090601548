//! The program's syntax tree (ruff's, as monty parses it), read for two things: the expression
//! that failed (by the position monty reports) and where the value it reads came from — a
//! name bound once to `await tools.<ns>.<tool>(…)` (or to the call without `await`: a
//! coroutine), to a part of such a value (`es = r["entities"]`), to an element of one (`for e
//! in r["entities"]`) or to one of the results of `a, b = await asyncio.gather(…)`.
//!
//! A name bound more than once (or by anything else: a parameter, an augmented assignment, a
//! `with`, an import) has no origin. The walk stops descending at [`MAX_DEPTH`] levels and
//! follows names at most [`MAX_ALIASES`] far.

use super::super::tool_references::{Lines, tool_reference as tool_name};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{
    Alias, Comprehension, Expr, ExprCall, ExprContext, Number, Parameter, Stmt, UnaryOp,
};
use ruff_text_size::{Ranged, TextRange};
use std::collections::HashMap;

/// Deepest level of the syntax tree the walk descends to.
const MAX_DEPTH: u32 = 256;
/// Names followed to their binding, at most.
const MAX_ALIASES: u32 = 8;
/// Keys of a path, at most.
const MAX_PATH: usize = 32;
/// Longest quote of the program in an explanation.
const MAX_TEXT: usize = 60;

/// One step into a tool's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// `["name"]` of a dict.
    Name(String),
    /// `[i]` of a list (negative from the end).
    Index(i64),
    /// Every element of a list (a loop over it).
    Each,
}

/// Where a value came from: a tool's result (or its coroutine), and the path in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `namespace.name`.
    pub tool: String,
    /// The call's line.
    pub line: u32,
    pub path: Vec<Key>,
    /// The value is the call's coroutine: the call was not awaited.
    pub coroutine: bool,
}

/// How a name was bound, when it was bound once in a way that can be followed.
enum Binding<'a> {
    Value(&'a Expr),
    Each(&'a Expr),
    /// Element `i` of `await asyncio.gather(…)`.
    Gathered(&'a Expr),
}

/// The program's parsed tree and what is known of its names.
pub struct Scan<'s> {
    source: &'s str,
    lines: Lines<'s>,
    module: ruff_python_ast::ModModule,
}

impl<'s> Scan<'s> {
    pub fn of(source: &'s str) -> Option<Scan<'s>> {
        let module = ruff_python_parser::parse_module(source).ok()?.into_syntax();
        Some(Scan {
            source,
            lines: Lines::new(source),
            module,
        })
    }

    /// Byte offset of a 1-based line and character column.
    pub fn offset(&self, line: u32, column: u32) -> Option<usize> {
        let mut start = 0;
        for _ in 1..line {
            start += self.source.get(start..)?.find('\n')? + 1;
        }
        let rest = self.source.get(start..)?;
        let chars = usize::try_from(column.checked_sub(1)?).ok()?;
        match rest.char_indices().nth(chars) {
            Some((i, _)) => Some(start + i),
            None => Some(start + rest.len()),
        }
    }

    /// The program's text of `range`, on one line, cut to [`MAX_TEXT`] characters.
    pub fn text(&self, range: TextRange) -> Option<String> {
        let text = self
            .source
            .get(range.start().to_usize()..range.end().to_usize())?;
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() <= MAX_TEXT {
            return Some(one_line);
        }
        let mut cut: String = one_line.chars().take(MAX_TEXT - 1).collect();
        cut.push('…');
        Some(cut)
    }

    /// The expressions that contain `start..end`, innermost first.
    pub fn enclosing(&self, start: usize, end: usize) -> Vec<&Expr> {
        let mut finder = Enclosing {
            start,
            end,
            found: Vec::new(),
            depth: 0,
        };
        for stmt in &self.module.body {
            finder.visit_stmt(stmt);
        }
        let mut found = finder.found;
        found.sort_by_key(|e| e.range().len());
        found
    }

    /// Where the value of `expr` came from.
    pub fn origin(&self, expr: &Expr) -> Option<Origin> {
        let bindings = self.bindings();
        self.origin_in(expr, &bindings, 0)
    }

    fn bindings(&self) -> HashMap<&str, (u32, Option<Binding<'_>>)> {
        let mut b = Bindings {
            names: HashMap::new(),
            depth: 0,
        };
        for stmt in &self.module.body {
            b.visit_stmt(stmt);
        }
        b.names
    }

    fn origin_in(
        &self,
        expr: &Expr,
        bindings: &HashMap<&str, (u32, Option<Binding<'_>>)>,
        aliases: u32,
    ) -> Option<Origin> {
        match expr {
            Expr::Await(awaited) => {
                let call = tool_call(&awaited.value)?;
                Some(self.call_origin(call, false))
            }
            Expr::Call(call) if tool_call(expr).is_some() => Some(self.call_origin(call, true)),
            Expr::Name(name) => {
                if aliases >= MAX_ALIASES {
                    return None;
                }
                let (1, Some(binding)) = bindings.get(name.id.as_str())? else {
                    return None;
                };
                match binding {
                    Binding::Value(value) => self.origin_in(value, bindings, aliases + 1),
                    Binding::Each(iter) => {
                        let mut origin = self.origin_in(iter, bindings, aliases + 1)?;
                        push(&mut origin, Key::Each)?;
                        Some(origin)
                    }
                    Binding::Gathered(call) => Some(self.call_origin(tool_call(call)?, false)),
                }
            }
            Expr::Subscript(s) => {
                let key = literal_key(&s.slice)?;
                let mut origin = self.origin_in(&s.value, bindings, aliases)?;
                push(&mut origin, key)?;
                Some(origin)
            }
            _ => None,
        }
    }

    fn call_origin(&self, call: &ExprCall, coroutine: bool) -> Origin {
        let (namespace, name) = tool_name(&call.func).unwrap_or_default();
        Origin {
            tool: format!("{namespace}.{name}"),
            line: self.lines.position(call.start().to_usize()).line,
            path: Vec::new(),
            coroutine,
        }
    }

    /// The tools the program calls from more than one place.
    pub fn call_sites(&self, tool: &str) -> usize {
        let mut sites = Sites {
            tool,
            count: 0,
            depth: 0,
        };
        for stmt in &self.module.body {
            sites.visit_stmt(stmt);
        }
        sites.count
    }
}

/// Adds a key to a path; a coroutine has no parts, and paths are bounded.
fn push(origin: &mut Origin, key: Key) -> Option<()> {
    if origin.coroutine || origin.path.len() >= MAX_PATH {
        return None;
    }
    origin.path.push(key);
    Some(())
}

/// A literal subscript: `"name"`, `3`, `-1`.
pub fn literal_key(slice: &Expr) -> Option<Key> {
    match slice {
        Expr::StringLiteral(s) => Some(Key::Name(s.value.to_str().to_owned())),
        Expr::NumberLiteral(n) => match &n.value {
            Number::Int(i) => i.as_i64().map(Key::Index),
            _ => None,
        },
        Expr::UnaryOp(u) if u.op == UnaryOp::USub => match literal_key(&u.operand)? {
            Key::Index(i) => Some(Key::Index(-i)),
            _ => None,
        },
        _ => None,
    }
}

/// `tools.ns.name(…)`.
fn tool_call(expr: &Expr) -> Option<&ExprCall> {
    match expr {
        Expr::Call(call) if tool_name(&call.func).is_some() => Some(call),
        _ => None,
    }
}

/// `asyncio.gather(…)`'s arguments.
fn gathered(expr: &Expr) -> Option<&[Expr]> {
    let Expr::Await(awaited) = expr else {
        return None;
    };
    let Expr::Call(call) = &*awaited.value else {
        return None;
    };
    match &*call.func {
        Expr::Attribute(a)
            if a.attr.as_str() == "gather"
                && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "asyncio") =>
        {
            Some(&call.arguments.args)
        }
        _ => None,
    }
}

struct Enclosing<'a> {
    start: usize,
    end: usize,
    found: Vec<&'a Expr>,
    depth: u32,
}

impl<'a> Visitor<'a> for Enclosing<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        self.depth += 1;
        visitor::walk_stmt(self, stmt);
        self.depth -= 1;
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        let range = expr.range();
        if range.start().to_usize() <= self.start && self.end <= range.end().to_usize() {
            self.found.push(expr);
        }
        self.depth += 1;
        visitor::walk_expr(self, expr);
        self.depth -= 1;
    }
}

/// Every name's count of bindings, and the binding when it is one that can be followed.
struct Bindings<'a> {
    names: HashMap<&'a str, (u32, Option<Binding<'a>>)>,
    depth: u32,
}

impl<'a> Bindings<'a> {
    fn bind(&mut self, name: &'a str, binding: Option<Binding<'a>>) {
        let entry = self.names.entry(name).or_insert((0, None));
        entry.0 = entry.0.saturating_add(1);
        entry.1 = binding;
    }

    /// The names of an assignment's target; `None` bindings for anything but a plain name
    /// or a tuple of names from `asyncio.gather`.
    fn target(&mut self, target: &'a Expr, value: Option<&'a Expr>, each: bool) {
        match target {
            Expr::Name(name) => {
                let binding = value.map(|v| {
                    if each {
                        Binding::Each(v)
                    } else {
                        Binding::Value(v)
                    }
                });
                self.bind(name.id.as_str(), binding);
            }
            Expr::Tuple(t) if !each => {
                let parts = value.and_then(gathered).filter(|p| p.len() == t.elts.len());
                for (i, element) in t.elts.iter().enumerate() {
                    let call = parts.map(|p| &p[i]);
                    match (element, call) {
                        (Expr::Name(name), Some(call)) => {
                            self.bind(name.id.as_str(), Some(Binding::Gathered(call)));
                        }
                        _ => self.target(element, None, false),
                    }
                }
            }
            Expr::Tuple(t) => {
                for element in &t.elts {
                    self.target(element, None, false);
                }
            }
            Expr::List(l) => {
                for element in &l.elts {
                    self.target(element, None, false);
                }
            }
            Expr::Starred(s) => self.target(&s.value, None, false),
            _ => {}
        }
    }
}

impl<'a> Visitor<'a> for Bindings<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        match stmt {
            Stmt::Assign(a) => {
                let single = a.targets.len() == 1;
                for target in &a.targets {
                    self.target(target, single.then_some(&*a.value), false);
                }
                self.depth += 1;
                self.visit_expr(&a.value);
                self.depth -= 1;
                return;
            }
            Stmt::AnnAssign(a) => {
                self.target(&a.target, a.value.as_deref(), false);
                self.depth += 1;
                if let Some(value) = &a.value {
                    self.visit_expr(value);
                }
                self.depth -= 1;
                return;
            }
            Stmt::For(f) => {
                // The target is bound here, not walked (it would count twice).
                self.target(&f.target, Some(&f.iter), true);
                self.depth += 1;
                self.visit_expr(&f.iter);
                self.visit_body(&f.body);
                self.visit_body(&f.orelse);
                self.depth -= 1;
                return;
            }
            Stmt::FunctionDef(f) => self.bind(f.name.as_str(), None),
            Stmt::ClassDef(c) => self.bind(c.name.as_str(), None),
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
        if let Expr::Named(n) = expr
            && let Expr::Name(name) = &*n.target
        {
            self.bind(name.id.as_str(), Some(Binding::Value(&n.value)));
            self.depth += 1;
            self.visit_expr(&n.value);
            self.depth -= 1;
            return;
        }
        if let Expr::Name(name) = expr
            && !matches!(name.ctx, ExprContext::Load)
        {
            // A store not seen as an assignment above (augmented, `with`, `del`, …).
            self.bind(name.id.as_str(), None);
        }
        self.depth += 1;
        visitor::walk_expr(self, expr);
        self.depth -= 1;
    }

    fn visit_comprehension(&mut self, c: &'a Comprehension) {
        self.target(&c.target, Some(&c.iter), true);
        self.visit_expr(&c.iter);
        for condition in &c.ifs {
            self.visit_expr(condition);
        }
    }

    fn visit_parameter(&mut self, parameter: &'a Parameter) {
        self.bind(parameter.name.as_str(), None);
    }

    fn visit_alias(&mut self, alias: &'a Alias) {
        let bound = alias.asname.as_ref().unwrap_or(&alias.name);
        self.bind(bound.as_str(), None);
    }

    fn visit_except_handler(&mut self, handler: &'a ruff_python_ast::ExceptHandler) {
        let ruff_python_ast::ExceptHandler::ExceptHandler(h) = handler;
        if let Some(name) = &h.name {
            self.bind(name.as_str(), None);
        }
        visitor::walk_except_handler(self, handler);
    }
}

/// Counts the call sites of one tool.
struct Sites<'t> {
    tool: &'t str,
    count: usize,
    depth: u32,
}

impl<'a> Visitor<'a> for Sites<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        self.depth += 1;
        visitor::walk_stmt(self, stmt);
        self.depth -= 1;
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        if let Some(call) = tool_call(expr)
            && let Some((namespace, name)) = tool_name(&call.func)
            && self.tool.split_once('.') == Some((namespace, name))
        {
            self.count += 1;
        }
        self.depth += 1;
        visitor::walk_expr(self, expr);
        self.depth -= 1;
    }
}
