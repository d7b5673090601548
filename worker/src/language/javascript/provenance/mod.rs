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
//! Bounds on untrusted input: the program passed
//! [`check_nesting`](super::typescript::check_nesting) (re-checked here), which bounds oxc's
//! and this module's syntax-tree recursion; patterns are followed
//! [`MAX_PATTERN_DEPTH`](bindings::MAX_PATTERN_DEPTH) deep, names
//! [`MAX_ALIASES`](bindings::MAX_ALIASES) far; the JSON walks are loops over the chain's keys
//! (at most [`MAX_EACH_IN_PATH`](results::MAX_EACH_IN_PATH) loops,
//! [`MAX_EACH`](results::MAX_EACH) elements each). A wrong explanation is worse than none.
//!
//! What lives where: this file reads the engine's message and runs the two explanations;
//! `bindings` is the walk of the program's syntax tree (how names were bound, to which tool's
//! result); `source_text` reads the member chain around the error's position from the text;
//! `results` parses a tool's latest result and walks a path through it; `shapes` says what a
//! value is without its content; `explanation` holds the chain against the value.
//!
//! It runs nothing of the program's and calls no tool: it reads the submitted code and the
//! results the bridge kept, and parses those with the engine's JSON parser (own data
//! properties only are read back); it sends nothing on the IPC channel.

mod bindings;
mod explanation;
mod results;
mod shapes;
mod source_text;

use airlock_proto::Language;
use bindings::Scan;
use explanation::{at_position, destructured};
use results::Results;
use rquickjs::Ctx;
use source_text::offset_of;

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
    let values = Results::new(ctx, latest);
    let at = failed
        .position
        .and_then(|(line, column)| offset_of(failed.source, line, column));
    if let Some(at) = at
        && let Some(found) = at_position(&scan, failed.source, at, failure, &values)
    {
        return Some(shapes::at_most(found));
    }
    if matches!(
        failure,
        Failure::ToObject | Failure::PropertyOf("Symbol.iterator", false)
    ) {
        return destructured(&scan, failed.source, at, failure, &values).map(shapes::at_most);
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
#[cfg(test)]
mod tests {
    use super::*;

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
}
