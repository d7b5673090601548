//! The program's completion value becomes its return value: rewritten in the tree
//! ([`return_last_expression`]) before the code generator prints it, or spliced into the
//! program's own text ([`splice`]) when nothing else needs printing. Both find the values
//! with the same walk ([`for_each_completion`]).

use super::positions::{LineIndex, PositionMap};
use super::{WRAPPER_PREFIX, WRAPPER_SUFFIX};
use oxc::ast::ast::{Program, Statement};
use oxc::ast::builder::AstBuilder;

/// A program spliced into the wrapper ([`splice`]).
pub(super) struct Spliced {
    pub(super) script: String,
    pub(super) positions: PositionMap,
}

/// What is spliced before a completion value, and after it.
const RETURN_OPEN: &str = "return (";
const RETURN_CLOSE: &str = ")";

/// The script for a program the transformer was not run for, made of the program's own text:
/// the wrapper around it and `return (` … `)` around its completion value (the expressions
/// [`return_last_expression`] turns into `return`s), so the code generator need not
/// print it again. `None` when the program's text cannot go to the engine as it is, and the
/// code generator prints it:
/// - a hashbang line, or a type-only `import`/`export` (which the code generator drops);
/// - a program that is only a directive (its value is returned by a statement added after
///   it);
/// - `<!--` or `-->` anywhere: in a module (which oxc parsed) they are operators, in the
///   script the engine evaluates (Annex B) they may start a comment;
/// - a carriage return, U+2028 or U+2029: oxc counts them as line ends and the engine does
///   not, and the positions below count lines by `\n` alone.
///
/// What the engine then reports is in the agent's own text, one line down (the wrapper's
/// first line), with bytes for columns: [`PositionMap`] takes the spliced text back out and
/// counts UTF-16 code units.
///
/// It takes the program mutably only because the walk it shares with
/// [`return_last_expression`] ([`for_each_completion`]) is the one that rewrites; it changes
/// nothing.
pub(super) fn splice(
    code: &str,
    program: &mut Program<'_>,
    lines: &LineIndex<'_>,
) -> Option<Spliced> {
    if program.hashbang.is_some()
        || program.body.iter().any(Statement::is_module_declaration)
        || code.contains("<!--")
        || code.contains("-->")
        || code.contains(['\r', '\u{2028}', '\u{2029}'])
    {
        return None;
    }
    let mut values = Vec::new();
    match last_statement(&program.body) {
        Some(i) => for_each_completion(&mut program.body[i], &mut |statement| {
            if let Statement::ExpressionStatement(stmt) = statement {
                values.push(oxc::span::GetSpan::span(&stmt.expression));
            }
        }),
        None if !program.directives.is_empty() => return None,
        None => {}
    }
    // (offset in `code`, text), in the order they go into the script: a value's closing
    // before anything that starts at the same offset (it cannot, but the order is defined).
    let mut inserts: Vec<(u32, &'static str)> = Vec::with_capacity(values.len() * 2);
    for span in values {
        inserts.push((span.start, RETURN_OPEN));
        inserts.push((span.end, RETURN_CLOSE));
    }
    inserts.sort_by_key(|&(at, text)| (at, text == RETURN_OPEN));
    let mut script = String::with_capacity(
        WRAPPER_PREFIX.len()
            + code.len()
            + inserts.len() * RETURN_OPEN.len()
            + WRAPPER_SUFFIX.len(),
    );
    script.push_str(WRAPPER_PREFIX);
    let mut from = 0;
    for &(at, text) in &inserts {
        script.push_str(code.get(from..at as usize)?);
        script.push_str(text);
        from = at as usize;
    }
    script.push_str(code.get(from..)?);
    script.push_str(WRAPPER_SUFFIX);
    Some(Spliced {
        script,
        positions: PositionMap::spliced(
            code,
            lines.starts.clone(),
            inserts
                .iter()
                .map(|&(at, text)| (at, text.len() as u32))
                .collect(),
        ),
    })
}

/// Makes the program's completion value its return value.
///
/// In the last statement that does something ([`last_statement`]), each expression statement
/// that gives its completion value ([`for_each_completion`]) becomes `return (<expr>);`. A
/// program that is only a directive (`"hello"`) returns that string.
pub(super) fn return_last_expression<'a>(
    program: &mut oxc::ast::ast::Program<'a>,
    builder: &AstBuilder<'a>,
) {
    if let Some(i) = last_statement(&program.body) {
        for_each_completion(&mut program.body[i], &mut |statement| {
            let taken = oxc::allocator::TakeIn::take_in(statement, builder);
            if let Statement::ExpressionStatement(stmt) = taken {
                let stmt = stmt.unbox();
                *statement =
                    Statement::new_return_statement(stmt.span, Some(stmt.expression), builder);
            }
        });
    } else if let Some(directive) = program.directives.last() {
        let literal = oxc::ast::ast::Expression::new_string_literal(
            directive.span,
            directive.expression.value,
            None,
            builder,
        );
        program.body.push(Statement::new_return_statement(
            directive.span,
            Some(literal),
            builder,
        ));
    }
}

/// The index of the program's last statement that does something: trailing function
/// declarations and empty statements have no value and no effect, so the completion value is
/// that statement's.
fn last_statement(body: &[Statement<'_>]) -> Option<usize> {
    body.iter().rposition(|s| {
        !matches!(
            s,
            Statement::FunctionDeclaration(_) | Statement::EmptyStatement(_)
        )
    })
}

/// Calls `f` on each expression statement that gives `statement`'s completion value: the
/// statement itself, or, as JavaScript's completion values go, the last statement of a block,
/// both branches of an `if`/`else`, the last statements of a `try` and its `catch`, and a
/// labelled statement's body. Shared by the rewrite ([`return_last_expression`]) and the
/// splice ([`splice`]), so both return the same values. Recursion depth is bounded by
/// [`check_nesting`](super::check_nesting).
fn for_each_completion<'a>(statement: &mut Statement<'a>, f: &mut impl FnMut(&mut Statement<'a>)) {
    match statement {
        Statement::ExpressionStatement(_) => f(statement),
        Statement::BlockStatement(block) => {
            if let Some(last) = block.body.last_mut() {
                for_each_completion(last, f);
            }
        }
        Statement::IfStatement(stmt) => {
            for_each_completion(&mut stmt.consequent, f);
            if let Some(alternate) = &mut stmt.alternate {
                for_each_completion(alternate, f);
            }
        }
        Statement::TryStatement(stmt) => {
            if let Some(last) = stmt.block.body.last_mut() {
                for_each_completion(last, f);
            }
            if let Some(handler) = &mut stmt.handler
                && let Some(last) = handler.body.body.last_mut()
            {
                for_each_completion(last, f);
            }
        }
        Statement::LabeledStatement(stmt) => for_each_completion(&mut stmt.body, f),
        _ => {}
    }
}
