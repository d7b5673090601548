//! Turning the submitted program into one JavaScript script the engine can evaluate.
//!
//! The agent sends a *program*, not a module: its value is its last expression statement or a
//! top-level `return`, and it may `await` at top level. [`prepare_program`] makes that concrete:
//!
//! 1. a cheap pre-scan rejects pathological nesting before oxc's recursive parser sees it
//!    (a Rust stack overflow would kill the worker instead of reporting an error);
//! 2. oxc parses the code as a module (strict mode, top-level `await`) that may `return` at top
//!    level, and runs its semantic checks, so syntax errors carry oxc's message and the line
//!    and column in the code the agent sent;
//! 3. `import`/`export` of values (and `import()`) is rejected (there are no modules; tools are
//!    reached through `tools.<server>.<tool>()`); type-only imports and exports are accepted at
//!    the top level (and in `namespace` bodies) and erased, and refused anywhere else; so are
//!    decorators, which the engine does not have; after the semantic checks, so is a free use
//!    of a host API the sandbox lacks (`require`, `fetch`, timers, `process`, `fs`), which
//!    would otherwise fail only when reached;
//! 4. TypeScript only, and only when the program has TypeScript syntax (one that has none is
//!    JavaScript already and comes out the same): oxc's transformer strips types (and lowers
//!    `enum`/`namespace`); nothing else is down-levelled: QuickJS-ng runs modern ECMAScript
//!    (ES2023 and later features such as `using` and the regex `v` flag);
//! 5. the program's completion value becomes its return value: a final expression statement
//!    becomes `return (<expr>);`, also inside a final block, `if`/`else`, `try`/`catch` or
//!    labelled statement;
//! 6. oxc's code generator prints the program, with a source map, inside
//!    `(async function () {` … `})()`, so `await` and `return` work. The map
//!    ([`PositionMap`]) turns engine positions back into positions in the agent's code.
//!    A program that needs no rewrite but step 5's is not printed again: its own text goes
//!    inside the wrapper with `return (` … `)` spliced around its completion value
//!    ([`splice`]), and positions map back by arithmetic. In a worker that has just woken
//!    this skips about a third of the pipeline; which programs qualify, and why the others
//!    do not, is at [`splice`].
//!
//! Columns are 1-based and count UTF-16 code units (as editors and source maps do).
//!
//! What lives where: this file is the pipeline ([`prepare_program`]); `nesting` is the guard
//! that runs before oxc does ([`check_nesting`]); `scan` is the one walk that finds
//! TypeScript syntax and what a program cannot have, with `spelling` for the names and
//! literals whose lexer reports oxc may lose; `completion` makes the completion value the
//! return value, by rewriting or by splicing; `unavailable` finds the free uses of host APIs
//! the sandbox does not have; `positions` maps offsets and the engine's
//! positions back to the agent's code; `diagnostics` turns oxc's errors into the agent's
//! syntax errors.
//!
//! Text in, text out: nothing here touches the engine, the bridge or the IPC channel. It needs
//! only oxc and `airlock-proto`, and uses no `crate::` path: the libFuzzer build compiles this
//! folder outside the worker (`fuzz/libfuzzer/src/javascript.rs`).

mod completion;
mod diagnostics;
mod nesting;
mod positions;
mod scan;
mod spelling;
mod unavailable;

#[cfg(test)]
mod tests;

pub use nesting::check_nesting;
pub use positions::{LineIndex, PositionMap};

use super::tool_references;
use airlock_proto::{ErrorKind, ExecError, Language, ToolReferences};
use completion::{return_last_expression, splice};
use diagnostics::{syntax_error, syntax_error_from_diagnostics};
use oxc::allocator::Allocator;
use oxc::ast::ast::{Declaration, Statement};
use oxc::ast::builder::AstBuilder;
use oxc::codegen::{Codegen, CodegenOptions, CommentOptions};
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};
use scan::Scan;
use std::path::Path;

/// The first line of the evaluated script; the program starts on the line after it.
const WRAPPER_PREFIX: &str = "(async function () {\n";
/// Closes the wrapper; on its own line so no program text shares a line with it.
const WRAPPER_SUFFIX: &str = "\n})()";
/// Lines of the script before the first line of generated program code.
const WRAPPER_LINES_BEFORE: u32 = 1;

/// A program ready for the engine.
#[derive(Debug)]
pub struct PreparedProgram {
    /// A script whose completion value is the promise of the program's result.
    pub script: String,
    /// The file name the engine reports in stack traces (`program.ts` or `program.js`).
    pub filename: &'static str,
    /// Maps positions in [`PreparedProgram::script`] back to the agent's code.
    pub positions: PositionMap,
    /// The literal tool calls the supervisor's contract check judges before the program runs
    /// (`None`: nothing to judge).
    pub tool_references: Option<ToolReferences>,
}

#[cfg(any(test, fuzzing))]
impl PreparedProgram {
    /// Whether the program was spliced into the wrapper ([`splice`]) rather than printed.
    pub fn spliced(&self) -> bool {
        self.positions.is_spliced()
    }
}

/// Parses, checks and rewrites `code` into a [`PreparedProgram`].
///
/// Errors are [`ErrorKind::Syntax`](airlock_proto::ErrorKind::Syntax) with a 1-based line and column in `code`.
pub fn prepare_program(code: &str, language: Language) -> Result<PreparedProgram, ExecError> {
    prepare(code, language, Transform::WhenNeeded)
}

/// [`prepare_program`] with oxc's transformer run on every TypeScript program, for tests
/// that check that skipping it changes nothing.
#[cfg(any(test, fuzzing))]
pub(super) fn prepare_program_transforming(
    code: &str,
    language: Language,
) -> Result<PreparedProgram, ExecError> {
    prepare(code, language, Transform::Always)
}

/// [`prepare_program`] that never splices ([`splice`]): the code generator prints every
/// program, for tests of what it prints and for comparing the two.
#[cfg(any(test, fuzzing))]
pub(super) fn prepare_program_generated(
    code: &str,
    language: Language,
) -> Result<PreparedProgram, ExecError> {
    prepare(code, language, Transform::Generate)
}

/// `script` parsed and printed again without parentheses or comments: a spliced script and
/// the code generator's for the same program must come out the same (tests and the fuzz
/// target check it).
#[cfg(any(test, fuzzing))]
pub(super) fn normalised(script: &str) -> String {
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, script, SourceType::mjs())
        .with_options(ParseOptions {
            preserve_parens: false,
            parse_regular_expression: true,
            ..ParseOptions::default()
        })
        .parse();
    assert!(
        parsed.diagnostics.is_empty(),
        "{script}: {:?}",
        parsed.diagnostics
    );
    /// Forgets which functions were in parentheses (a hint for V8 the printer keeps).
    struct NoPife;
    impl<'a> oxc::ast_visit::VisitMut<'a> for NoPife {
        fn visit_function(
            &mut self,
            it: &mut oxc::ast::ast::Function<'a>,
            flags: oxc::semantic::ScopeFlags,
        ) {
            it.pife = false;
            oxc::ast_visit::walk_mut::walk_function(self, it, flags);
        }
        fn visit_arrow_function_expression(
            &mut self,
            it: &mut oxc::ast::ast::ArrowFunctionExpression<'a>,
        ) {
            it.pife = false;
            oxc::ast_visit::walk_mut::walk_arrow_function_expression(self, it);
        }
    }
    let mut program = parsed.program;
    oxc::ast_visit::VisitMut::visit_program(&mut NoPife, &mut program);
    Codegen::new()
        .with_options(CodegenOptions {
            comments: CommentOptions::disabled(),
            ..CodegenOptions::default()
        })
        .build(&program)
        .code
}

/// Whether [`prepare`] runs oxc's transformer on a TypeScript program, and whether it may
/// splice instead of printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transform {
    /// Only when the program has TypeScript syntax ([`Scan::typescript`]): one that has
    /// none is already JavaScript, and the transformer would print it unchanged (the fuzz
    /// target checks that) at about half the pipeline's cost in a fresh worker. A program
    /// the transformer is not run for is spliced when it can be ([`splice`]).
    WhenNeeded,
    /// As `WhenNeeded`, but always printed by the code generator (tests compare the two).
    #[cfg(any(test, fuzzing))]
    Generate,
    /// The transformer always, and the code generator (tests compare the two).
    #[cfg(any(test, fuzzing))]
    Always,
}

fn prepare(
    code: &str,
    language: Language,
    transform: Transform,
) -> Result<PreparedProgram, ExecError> {
    check_nesting(code)?;

    let lines = LineIndex::new(code);
    let (source_type, filename) = match language {
        Language::TypeScript => (SourceType::ts().with_module(true), "program.ts"),
        Language::JavaScript => (SourceType::mjs(), "program.js"),
        Language::Python => {
            return Err(ExecError::new(
                ErrorKind::Internal,
                "the JavaScript engine was handed a Python program",
            ));
        }
    };

    let allocator = Allocator::default();
    let options = ParseOptions {
        allow_return_outside_function: true,
        parse_regular_expression: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(&allocator, code, source_type)
        .with_options(options)
        .parse();
    if !parsed.diagnostics.is_empty() {
        return Err(syntax_error_from_diagnostics(
            parsed.diagnostics.into_vec(),
            &lines,
        ));
    }
    let mut program = parsed.program;

    let scan = Scan::of(&program);
    if let Some((span, unsupported)) = scan.unsupported {
        let (line, column) = lines.position(span.start);
        return Err(syntax_error(unsupported.message(), line, column));
    }
    // Before the transformer rewrites anything: the positions are in the agent's code.
    let tool_references = tool_references::find(code, &program, &lines);

    let semantic = SemanticBuilder::new()
        .with_check_syntax_error(true)
        .with_enum_eval(language == Language::TypeScript)
        .build(&program);
    if !semantic.diagnostics.is_empty() {
        return Err(syntax_error_from_diagnostics(
            semantic.diagnostics.into_vec(),
            &lines,
        ));
    }
    // Before anything runs: a free `require`, `fetch`, timer, `process` or `fs` would fail
    // only when reached, after the tool calls before it were made.
    if let Some((span, message)) =
        unavailable::first_unavailable(&program, semantic.semantic.scoping())
    {
        let (line, column) = lines.position(span.start);
        return Err(syntax_error(message, line, column));
    }

    let may_splice = transform == Transform::WhenNeeded;
    // Only a TypeScript program is looked at: JavaScript never goes through the transformer.
    let transform = language == Language::TypeScript
        && match transform {
            Transform::WhenNeeded => scan.typescript,
            #[cfg(any(test, fuzzing))]
            Transform::Generate => scan.typescript,
            #[cfg(any(test, fuzzing))]
            Transform::Always => true,
        };
    if transform {
        let scoping = semantic.semantic.into_scoping();
        // `export declare global { … }` is type-only, and erased below with the rest; oxc's
        // transformer assumes a global augmentation is never exported (a debug assertion), so
        // it goes before the transformer sees it.
        program.body.retain(|s| {
            !matches!(s, Statement::ExportDeclaration(d)
                if matches!(d.declaration, Declaration::TSGlobalDeclaration(_)))
        });
        let transform_options = TransformOptions::default();
        let transformed = Transformer::new(&allocator, Path::new(filename), &transform_options)
            .build_with_scoping(scoping, &mut program);
        if transformed.diagnostics.has_errors() {
            return Err(syntax_error_from_diagnostics(
                transformed.diagnostics.into_vec(),
                &lines,
            ));
        }
    } else {
        drop(semantic);
        if may_splice && let Some(spliced) = splice(code, &mut program, &lines) {
            return Ok(PreparedProgram {
                script: spliced.script,
                filename,
                positions: spliced.positions,
                tool_references,
            });
        }
    }

    // Erase what is left of type-only imports/exports (the transformer removes them for
    // TypeScript; plain JavaScript cannot contain them).
    program.body.retain(|s| !s.is_module_declaration());
    // A hashbang line would be a syntax error inside the wrapper function.
    program.hashbang = None;

    let builder = AstBuilder::new(&allocator);
    return_last_expression(&mut program, &builder);

    let generated = Codegen::new()
        .with_options(CodegenOptions {
            comments: CommentOptions::disabled(),
            source_map_path: Some(filename.into()),
            ..CodegenOptions::default()
        })
        .build(&program);

    let positions = match &generated.map {
        Some(map) => PositionMap::from_tokens(map.get_tokens().map(|t| {
            [
                t.get_dst_line(),
                t.get_dst_col(),
                t.get_src_line(),
                t.get_src_col(),
            ]
        })),
        None => PositionMap::default(),
    };

    let mut script =
        String::with_capacity(WRAPPER_PREFIX.len() + generated.code.len() + WRAPPER_SUFFIX.len());
    script.push_str(WRAPPER_PREFIX);
    script.push_str(&generated.code);
    script.push_str(WRAPPER_SUFFIX);

    Ok(PreparedProgram {
        script,
        filename,
        positions,
        tool_references,
    })
}
