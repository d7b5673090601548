//! Host APIs a program may expect and the sandbox does not have (`require`, `fetch`, timers,
//! `process`, `fs`): a free use of one is refused before the program runs, with what to use
//! instead ([`first_unavailable`]). At run time each would only fail when reached, after the
//! tool calls before it were made.
//!
//! Only a free use counts: a name the program never declares, read or called as a value.
//! The program's own `const process = …`, a parameter named `fs`, a property `x.fetch`, an
//! object key `{ require: 1 }`, a string, a type (`NodeJS.Process`) and `typeof fetch` (which
//! does not throw) all run as before.

use oxc::ast::ast::{Expression, IdentifierReference, Program, UnaryExpression, UnaryOperator};
use oxc::ast_visit::{Visit, walk};
use oxc::semantic::{ReferenceId, Scoping};
use oxc::span::Span;
use std::collections::HashMap;

/// A host API the sandbox does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    Modules,
    Network,
    Timers,
    Process,
    Files,
}

/// The names refused, and what each is.
const UNAVAILABLE: &[(&str, Missing)] = &[
    ("require", Missing::Modules),
    ("fetch", Missing::Network),
    ("XMLHttpRequest", Missing::Network),
    ("WebSocket", Missing::Network),
    ("setTimeout", Missing::Timers),
    ("setInterval", Missing::Timers),
    ("setImmediate", Missing::Timers),
    ("clearTimeout", Missing::Timers),
    ("clearInterval", Missing::Timers),
    ("process", Missing::Process),
    ("Deno", Missing::Process),
    ("Bun", Missing::Process),
    ("fs", Missing::Files),
];

impl Missing {
    /// What to do instead, naming only what a program has.
    fn instead(self) -> &'static str {
        match self {
            Missing::Modules => {
                "a program has no modules; it reaches tools through \
                 `tools.<server>.<tool>(args)` (the SDK's README.md lists the namespaces)"
            }
            Missing::Network => {
                "the sandbox has no network; call the service through a tool: \
                 `await tools.<server>.<tool>(args)`"
            }
            Missing::Timers => {
                "the sandbox has no timers; await tool calls in order (to retry, loop over the \
                 call), and report how far the program got with `progress(value)`"
            }
            Missing::Process => {
                "a program has no environment, arguments or exit; credentials stay in the \
                 daemon and go with tool calls, `console.log()` prints, and the last expression \
                 (or a top-level `return`) is the result"
            }
            Missing::Files => {
                "the sandbox has no file system; read or write files through a tool: \
                 `await tools.<server>.<tool>(args)`"
            }
        }
    }
}

/// The first free use (in source order) of a name in [`UNAVAILABLE`]: where it is, and the
/// message that says what to use instead.
pub(super) fn first_unavailable(
    program: &Program<'_>,
    scoping: &Scoping,
) -> Option<(Span, String)> {
    let unresolved = scoping.root_unresolved_references();
    let mut refused = HashMap::new();
    for &(name, missing) in UNAVAILABLE {
        let Some(references) = unresolved.get(name) else {
            continue;
        };
        for &id in references.iter() {
            if scoping.get_reference(id).flags().is_value() {
                refused.insert(id, (name, missing));
            }
        }
    }
    if refused.is_empty() {
        return None;
    }
    // The tree is walked for the first one: the message is part of the execution's output,
    // so which use it names must not depend on a hash map's order.
    let mut find = FirstUse {
        refused,
        found: None,
    };
    find.visit_program(program);
    find.found.map(|(span, name, missing)| {
        (
            span,
            format!("`{name}` is not available: {}", missing.instead()),
        )
    })
}

/// The walk that finds the first refused reference.
struct FirstUse {
    refused: HashMap<ReferenceId, (&'static str, Missing)>,
    found: Option<(Span, &'static str, Missing)>,
}

impl<'a> Visit<'a> for FirstUse {
    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        if self.found.is_none()
            && let Some(id) = it.reference_id.get()
            && let Some(&(name, missing)) = self.refused.get(&id)
        {
            self.found = Some((it.span, name, missing));
        }
    }

    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        // `typeof fetch` is `"undefined"`: feature tests run.
        if it.operator == UnaryOperator::Typeof
            && matches!(
                it.argument.get_inner_expression(),
                Expression::Identifier(_)
            )
        {
            return;
        }
        walk::walk_unary_expression(self, it);
    }
}
