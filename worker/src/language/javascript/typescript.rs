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
//! 3. `import`/`export` of values is rejected (there are no modules; tools are reached through
//!    `tools.<server>.<tool>()`); type-only imports and exports are accepted at the top level
//!    (and in `namespace` bodies) and erased, and refused anywhere else; so are decorators,
//!    which the engine does not have;
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

use super::tool_references;
use airlock_proto::{ErrorKind, ExecError, Language, ToolReferences};
use oxc::allocator::Allocator;
use oxc::ast::ast::Program;
use oxc::ast::ast::{
    AccessorPropertyType, FunctionType, MethodDefinitionType, PropertyDefinitionType,
};
use oxc::ast::ast::{Declaration, ImportDeclarationSpecifier, Statement};
use oxc::ast::builder::AstBuilder;
use oxc::ast::{AstKind, AstType};
use oxc::ast_visit::Visit;
use oxc::codegen::{Codegen, CodegenOptions, CommentOptions};
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::syntax::identifier::{is_identifier_part, is_identifier_start};
use oxc::transformer::{TransformOptions, Transformer};
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
        self.positions.spliced.is_some()
    }
}

/// Parses, checks and rewrites `code` into a [`PreparedProgram`].
///
/// Errors are [`ErrorKind::Syntax`] with a 1-based line and column in `code`.
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

fn is_typescript(kind: AstKind<'_>) -> bool {
    if is_typescript_node(kind.ty()) {
        return true;
    }
    match kind {
        AstKind::VariableDeclaration(d) => d.declare,
        AstKind::VariableDeclarator(d) => d.definite,
        AstKind::Function(f) => {
            f.declare
                || !matches!(
                    f.r#type,
                    FunctionType::FunctionDeclaration | FunctionType::FunctionExpression
                )
        }
        AstKind::FormalParameter(p) => {
            p.optional || p.accessibility.is_some() || p.readonly || p.r#override
        }
        AstKind::Class(c) => c.r#abstract || c.declare,
        AstKind::MethodDefinition(m) => {
            m.r#override
                || m.optional
                || m.accessibility.is_some()
                || m.r#type != MethodDefinitionType::MethodDefinition
        }
        AstKind::PropertyDefinition(p) => {
            p.declare
                || p.r#override
                || p.optional
                || p.definite
                || p.readonly
                || p.accessibility.is_some()
                || p.r#type != PropertyDefinitionType::PropertyDefinition
        }
        AstKind::AccessorProperty(a) => {
            a.r#override
                || a.definite
                || a.accessibility.is_some()
                || a.r#type != AccessorPropertyType::AccessorProperty
        }
        _ => false,
    }
}

/// Every node type of TypeScript's own (oxc 0.146's `AstType::TS*`).
fn is_typescript_node(ty: AstType) -> bool {
    matches!(
        ty,
        AstType::TSAnyKeyword
            | AstType::TSArrayType
            | AstType::TSAsExpression
            | AstType::TSBigIntKeyword
            | AstType::TSBooleanKeyword
            | AstType::TSCallSignatureDeclaration
            | AstType::TSClassImplements
            | AstType::TSConditionalType
            | AstType::TSConstructSignatureDeclaration
            | AstType::TSConstructorType
            | AstType::TSEnumBody
            | AstType::TSEnumDeclaration
            | AstType::TSEnumMember
            | AstType::TSExportAssignment
            | AstType::TSExternalModuleDeclaration
            | AstType::TSExternalModuleReference
            | AstType::TSFunctionType
            | AstType::TSGlobalDeclaration
            | AstType::TSImportEqualsDeclaration
            | AstType::TSImportType
            | AstType::TSImportTypeQualifiedName
            | AstType::TSIndexSignature
            | AstType::TSIndexSignatureName
            | AstType::TSIndexedAccessType
            | AstType::TSInferType
            | AstType::TSInstantiationExpression
            | AstType::TSInterfaceBody
            | AstType::TSInterfaceDeclaration
            | AstType::TSInterfaceHeritage
            | AstType::TSIntersectionType
            | AstType::TSIntrinsicKeyword
            | AstType::TSLiteralType
            | AstType::TSMappedType
            | AstType::TSMethodSignature
            | AstType::TSModuleBlock
            | AstType::TSNamedTupleMember
            | AstType::TSNamespaceDeclaration
            | AstType::TSNamespaceExportDeclaration
            | AstType::TSNeverKeyword
            | AstType::TSNonNullExpression
            | AstType::TSNullKeyword
            | AstType::TSNumberKeyword
            | AstType::TSObjectKeyword
            | AstType::TSOptionalType
            | AstType::TSParenthesizedType
            | AstType::TSPropertySignature
            | AstType::TSQualifiedName
            | AstType::TSRestType
            | AstType::TSSatisfiesExpression
            | AstType::TSStringKeyword
            | AstType::TSSymbolKeyword
            | AstType::TSTemplateLiteralType
            | AstType::TSThisParameter
            | AstType::TSThisType
            | AstType::TSTupleType
            | AstType::TSTypeAliasDeclaration
            | AstType::TSTypeAnnotation
            | AstType::TSTypeAssertion
            | AstType::TSTypeLiteral
            | AstType::TSTypeOperator
            | AstType::TSTypeParameter
            | AstType::TSTypeParameterDeclaration
            | AstType::TSTypeParameterInstantiation
            | AstType::TSTypePredicate
            | AstType::TSTypeQuery
            | AstType::TSTypeReference
            | AstType::TSUndefinedKeyword
            | AstType::TSUnionType
            | AstType::TSUnknownKeyword
            | AstType::TSVoidKeyword
    )
}

/// What one walk over the parsed program finds: whether it has TypeScript syntax, and the
/// first thing in it a program cannot have.
///
/// **TypeScript syntax** is anything only TypeScript has: a node of TypeScript's own (types,
/// `as`, `!`, `enum`, `namespace`, `implements`, `this` parameters, ...) or a TypeScript
/// modifier on a JavaScript node (`declare`, `abstract`, `private`, `readonly`, `override`,
/// `?` and `!` on declarations, overload signatures).
///
/// **What a program cannot have.** It is not a module: only type-only imports and exports are
/// accepted at the top level (they are erased); an exported declaration with a value
/// (`export enum`, `export namespace`, `export abstract class`, `export import x = N.y`) is a
/// value export too, which erasing would make vanish. A `namespace` body may hold
/// `export <declaration>` and `import x = N.y` (the transformer lowers them) and nothing else
/// of the kind; anything inside `declare` is erased whole. Anywhere else (a block, function,
/// class, `if`, `switch` or label), none is allowed: oxc's parser accepts them there in
/// TypeScript and its semantic checks leave them to TypeScript's checker, so they would reach
/// the engine as statements it cannot parse (or, for `import x = require('y')`, be erased and
/// leave `x` undefined). JavaScript's semantic checks refuse the nested ones too, with a
/// message that does not say what to do instead. And decorators are refused, in both
/// languages: oxc accepts them, QuickJS-ng does not.
///
/// The walk visits every node (as deep as the semantic checks' after it, which the nesting
/// guard bounds), past a finding too, so that `typescript` is always the whole program's.
struct Scan<'s> {
    /// The program's text, for what the tree does not keep (how a name was spelled).
    source: &'s str,
    /// Where the statements being visited now are.
    level: Level,
    /// The first thing found that a program cannot have.
    unsupported: Option<(oxc::span::Span, Unsupported)>,
    /// Whether a node seen so far is TypeScript's.
    typescript: bool,
}

impl<'s> Scan<'s> {
    fn of(program: &Program<'s>) -> Scan<'s> {
        let mut scan = Scan {
            source: program.source_text,
            level: Level::Program,
            unsupported: None,
            typescript: false,
        };
        scan.visit_program(program);
        scan
    }

    /// Keeps the first finding.
    fn found(&mut self, span: oxc::span::Span, unsupported: Unsupported) {
        self.unsupported.get_or_insert((span, unsupported));
    }

    /// Refuses a literal or name the lexer would have refused for how it is spelled. oxc's
    /// lexer reports these, but in a TypeScript program a report made before the parser looks
    /// ahead at `<<` for type arguments is lost when that look fails (`let q = '\x1'; a << b`
    /// parses with no diagnostic), and the code generator would then print a program the agent
    /// did not write (`q = ""`). So `Scan` reads each one as it was spelled, as the lexer did.
    fn check_spelling(
        &mut self,
        span: oxc::span::Span,
        misspelled: fn(&str) -> Option<(usize, Unsupported)>,
    ) {
        let Some(text) = self.source.get(span.start as usize..span.end as usize) else {
            return;
        };
        if let Some((at, unsupported)) = misspelled(text) {
            let start = span.start.saturating_add(u32::try_from(at).unwrap_or(0));
            self.found(oxc::span::Span::new(start, start + 1), unsupported);
        }
    }
}

/// Where in `name` (as written) an escape does not spell a character a name can have, and
/// what is wrong with it: a backslash that begins no `\uXXXX` or `\u{X…}` (at most 10FFFF),
/// or an escape spelling a character no name can have there (`cons\u0020a`).
fn misspelled_name(name: &str) -> Option<(usize, Unsupported)> {
    let bytes = name.as_bytes();
    // A private name's `#` is not part of what it spells.
    let first = usize::from(bytes.first() == Some(&b'#'));
    let mut i = first;
    while let Some(offset) = bytes.get(i..)?.iter().position(|&b| b == b'\\') {
        let at = i + offset;
        // Pointed at where oxc's own report points: the character after the backslash.
        let Some((value, length)) = unicode_escape(&bytes[at + 1..]) else {
            return Some((at + 1, Unsupported::InvalidEscape));
        };
        // A surrogate is no character: the lexer calls it an invalid escape, as here.
        let Some(spelled) = char::from_u32(value) else {
            return Some((at + 1, Unsupported::InvalidEscape));
        };
        let fits = if at == first {
            is_identifier_start(spelled)
        } else {
            is_identifier_part(spelled)
        };
        if !fits {
            return Some((at, Unsupported::InvalidNameCharacter));
        }
        i = at + 1 + length;
    }
    None
}

/// Where in a string literal (as written, quotes included) a `\x` or `\u` escape is
/// malformed. Other escapes are one character each (a line continuation, `\n`, an identity
/// escape); octal ones are refused in strict code by the semantic checks, which read the
/// tree, not the lexer's reports, so none of them is lost.
fn misspelled_string(literal: &str) -> Option<(usize, Unsupported)> {
    let bytes = literal.as_bytes();
    let mut i = 0;
    while let Some(offset) = bytes.get(i..)?.iter().position(|&b| b == b'\\') {
        let at = i + offset;
        let rest = &bytes[at + 1..];
        let length = match rest {
            [b'x', tail @ ..] => {
                (tail.len() >= 2 && tail[..2].iter().all(u8::is_ascii_hexdigit)).then_some(3)
            }
            [b'u', ..] => unicode_escape(rest).map(|(_, length)| length),
            _ => Some(1),
        };
        let Some(length) = length else {
            return Some((at, Unsupported::InvalidStringEscape));
        };
        i = at + 1 + length;
    }
    None
}

/// Where in a number or bigint literal (as written) a `_` stands other than between two
/// digits (`1_`, `1_.5`, `1_n`, `0x_1`), or follows a leading zero (`0_1`).
fn misspelled_number(literal: &str) -> Option<(usize, Unsupported)> {
    let bytes = literal.as_bytes();
    let first = bytes.iter().position(|&b| b == b'_')?;
    let hex = matches!(bytes, [b'0', b'x' | b'X', ..]);
    let digit = |b: &u8| {
        if hex {
            b.is_ascii_hexdigit()
        } else {
            b.is_ascii_digit()
        }
    };
    // `0_1` and `01_2` would be legacy octal-like literals, which take no separator.
    let leading_zero = matches!(bytes, [b'0', b'0'..=b'9' | b'_', ..]);
    let misplaced = (first..bytes.len()).find(|&at| {
        bytes[at] == b'_'
            && (leading_zero
                || !(at > 0 && digit(&bytes[at - 1]) && bytes.get(at + 1).is_some_and(digit)))
    })?;
    Some((misplaced, Unsupported::InvalidNumericSeparator))
}

/// The code point a `\u` escape spells (`rest` begins after the backslash), and how many bytes
/// of `rest` it takes: `uXXXX`, or `u{X…}` with any number of digits up to 10FFFF.
fn unicode_escape(rest: &[u8]) -> Option<(u32, usize)> {
    let (digits, length) = match rest {
        [b'u', b'{', tail @ ..] => {
            let count = tail.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            if count == 0 || tail.get(count) != Some(&b'}') {
                return None;
            }
            (&tail[..count], count + 3)
        }
        [b'u', tail @ ..] if tail.len() >= 4 && tail[..4].iter().all(u8::is_ascii_hexdigit) => {
            (&tail[..4], 5)
        }
        _ => return None,
    };
    // Bounded at each digit, so `u{000…0041}` is fine and no value overflows.
    let value = digits.iter().try_fold(0u32, |value, &b| {
        let value = value * 16 + char::from(b).to_digit(16)?;
        (value <= 0x10FFFF).then_some(value)
    })?;
    Some((value, length))
}

/// What [`Scan`] refuses.
#[derive(Debug, Clone, Copy)]
enum Unsupported {
    /// It imports or exports a value, at the top level or nested.
    Value,
    /// A type-only import or export inside a block, function, class, `if`, `switch` or label.
    NestedTypeOnly,
    /// An import, export list, `export *`, `export default` or `export =` in a namespace body.
    InNamespace,
    /// A decorator: oxc accepts them (and leaves them in the script, a parameter's where the
    /// script no longer parses); QuickJS-ng has none.
    Decorator,
    /// `import.meta`: oxc accepts it in a module, and a TypeScript program is parsed as one;
    /// the engine runs a script, where it does not parse.
    ImportMeta,
    /// A backslash in a name that does not begin a Unicode escape ([`misspelled_name`]).
    InvalidEscape,
    /// An escape in a name that spells a character no name can have there.
    InvalidNameCharacter,
    /// A malformed `\x` or `\u` escape in a string ([`misspelled_string`]).
    InvalidStringEscape,
    /// A `_` in a number that does not stand between two digits ([`misspelled_number`]).
    InvalidNumericSeparator,
}

impl Unsupported {
    /// The syntax error's message: what is wrong and what to write instead.
    fn message(self) -> &'static str {
        match self {
            Unsupported::Value => {
                "modules are not available: a program cannot import or export anything; \
                 it reaches tools through `tools.<server>.<tool>(args)` and returns its value \
                 with its last expression or a top-level `return`"
            }
            Unsupported::NestedTypeOnly => {
                "a type-only import or export can only appear at the top level of the program: \
                 move it there (a program cannot import or export values; it reaches tools \
                 through `tools.<server>.<tool>(args)`)"
            }
            Unsupported::InNamespace => {
                "a namespace can only export declarations: write `export` before the \
                 declaration (`export const a = 1;`) instead of an export list, and nothing in \
                 a program can import from a module (it reaches tools through \
                 `tools.<server>.<tool>(args)`)"
            }
            Unsupported::Decorator => {
                "decorators are not available: the engine does not run `@` decorators; call the \
                 decorator function on the class or method yourself instead"
            }
            Unsupported::InvalidEscape => {
                "Invalid Unicode escape sequence: a backslash in a name must begin `\\uXXXX` or \
                 `\\u{X}`; remove it"
            }
            Unsupported::InvalidNameCharacter => {
                "Invalid Character: this `\\u` escape spells a character a name cannot have \
                 here (a space, a symbol, or a digit first); remove it or spell the name plainly"
            }
            Unsupported::InvalidStringEscape => {
                "Invalid escape sequence: in a string `\\x` takes two hex digits and `\\u` \
                 four, or `{X}` up to 10FFFF; write `\\\\` for a backslash itself"
            }
            Unsupported::InvalidNumericSeparator => {
                "Invalid numeric separator: `_` can only stand between two digits (`1_000`), \
                 and not after a leading zero; remove it"
            }
            Unsupported::ImportMeta => {
                "`import.meta` is not available: a program is a script, not a module, and has \
                 no URL or module metadata; put what it needs in the program text, or get it \
                 from a tool"
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Directly in the program.
    Program,
    /// Directly in the body of a `namespace` that is not `declare`d.
    Namespace,
    /// Anywhere else: in a block, function, class, `if`, `switch` or label.
    Nested,
}

impl<'a> Visit<'a> for Scan<'_> {
    fn enter_node(&mut self, kind: AstKind<'a>) {
        if !self.typescript && is_typescript(kind) {
            self.typescript = true;
        }
        match kind {
            AstKind::IdentifierName(it) => self.check_spelling(it.span, misspelled_name),
            AstKind::IdentifierReference(it) => self.check_spelling(it.span, misspelled_name),
            AstKind::BindingIdentifier(it) => self.check_spelling(it.span, misspelled_name),
            AstKind::LabelIdentifier(it) => self.check_spelling(it.span, misspelled_name),
            AstKind::PrivateIdentifier(it) => self.check_spelling(it.span, misspelled_name),
            AstKind::StringLiteral(it) => self.check_spelling(it.span, misspelled_string),
            AstKind::NumericLiteral(it) => self.check_spelling(it.span, misspelled_number),
            AstKind::BigIntLiteral(it) => self.check_spelling(it.span, misspelled_number),
            _ => {}
        }
    }

    fn visit_program(&mut self, it: &Program<'a>) {
        self.level = Level::Program;
        oxc::ast_visit::walk::walk_program(self, it);
    }

    // Ambient declarations are TypeScript's and have no code: the transformer erases them
    // whole, whatever they hold, so nothing in them is looked at.
    fn visit_ts_external_module_declaration(
        &mut self,
        _: &oxc::ast::ast::TSExternalModuleDeclaration<'a>,
    ) {
        self.typescript = true;
    }

    fn visit_ts_global_declaration(&mut self, _: &oxc::ast::ast::TSGlobalDeclaration<'a>) {
        self.typescript = true;
    }

    fn visit_ts_namespace_declaration(&mut self, it: &oxc::ast::ast::TSNamespaceDeclaration<'a>) {
        if it.declare {
            self.typescript = true;
        } else {
            oxc::ast_visit::walk::walk_ts_namespace_declaration(self, it);
        }
    }

    fn visit_ts_module_block(&mut self, it: &oxc::ast::ast::TSModuleBlock<'a>) {
        let outer = std::mem::replace(&mut self.level, Level::Namespace);
        oxc::ast_visit::walk::walk_ts_module_block(self, it);
        self.level = outer;
    }

    fn visit_decorator(&mut self, it: &oxc::ast::ast::Decorator<'a>) {
        self.found(it.span, Unsupported::Decorator);
        oxc::ast_visit::walk::walk_decorator(self, it);
    }

    fn visit_import_meta(&mut self, it: &oxc::ast::ast::ImportMeta) {
        self.found(it.span, Unsupported::ImportMeta);
    }

    fn visit_statement(&mut self, it: &Statement<'a>) {
        if let Some((span, type_only)) = module_declaration(it) {
            let in_namespace_body = matches!(
                it,
                Statement::ExportDeclaration(_) | Statement::TSImportEqualsDeclaration(_)
            );
            let misplaced = match (self.level, type_only) {
                (Level::Program, true) => None,
                (Level::Program | Level::Nested, false) => Some(Unsupported::Value),
                (Level::Nested, true) => Some(Unsupported::NestedTypeOnly),
                (Level::Namespace, _) if in_namespace_body => None,
                (Level::Namespace, _) => Some(Unsupported::InNamespace),
            };
            if let Some(misplaced) = misplaced {
                self.found(span, misplaced);
            }
        }
        let outer = std::mem::replace(&mut self.level, Level::Nested);
        oxc::ast_visit::walk::walk_statement(self, it);
        self.level = outer;
    }
}

/// The span of a module declaration (or `import x = ...`) and whether it is type-only: whether
/// erasing it leaves the program meaning the same.
fn module_declaration(statement: &Statement<'_>) -> Option<(oxc::span::Span, bool)> {
    Some(match statement {
        Statement::ImportDeclaration(d) => (
            d.span,
            d.import_kind.is_type()
                || d.specifiers.as_ref().is_some_and(|specs| {
                    !specs.is_empty()
                        && specs.iter().all(|s| {
                            matches!(s, ImportDeclarationSpecifier::ImportSpecifier(s)
                                if s.import_kind.is_type())
                        })
                }),
        ),
        Statement::ExportNamedDeclaration(d) => (
            d.span,
            d.export_kind.is_type() || d.specifiers.iter().all(|s| s.export_kind.is_type()),
        ),
        // Not `is_typescript_syntax`: an `enum`, a `namespace`, an `abstract class` and an
        // `import x = N.y` are TypeScript syntax with a value.
        Statement::ExportDeclaration(d) => (
            d.span,
            d.declaration.is_type()
                || d.declaration.declare()
                || matches!(
                    &d.declaration,
                    Declaration::FunctionDeclaration(f) if f.body.is_none()
                )
                || matches!(
                    &d.declaration,
                    Declaration::TSExternalModuleDeclaration(_)
                        | Declaration::TSGlobalDeclaration(_)
                ),
        ),
        Statement::ExportAllDeclaration(d) => (d.span, d.export_kind.is_type()),
        Statement::ExportFromDeclaration(d) => (
            d.span,
            d.export_kind.is_type()
                || (!d.specifiers.is_empty()
                    && d.specifiers.iter().all(|s| s.export_kind.is_type())),
        ),
        Statement::TSImportEqualsDeclaration(d) => (d.span, false),
        s if s.is_module_declaration() => (oxc::span::GetSpan::span(s), false),
        _ => return None,
    })
}

/// A program spliced into the wrapper ([`splice`]).
struct Spliced {
    script: String,
    positions: PositionMap,
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
fn splice(code: &str, program: &mut Program<'_>, lines: &LineIndex<'_>) -> Option<Spliced> {
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
fn return_last_expression<'a>(program: &mut oxc::ast::ast::Program<'a>, builder: &AstBuilder<'a>) {
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
/// [`check_nesting`].
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

fn syntax_error(message: impl Into<String>, line: u32, column: u32) -> ExecError {
    ExecError {
        kind: ErrorKind::Syntax,
        name: Some("SyntaxError".to_owned()),
        message: message.into(),
        line: Some(line),
        column: Some(column),
        stack: None,
        explanation: None,
    }
}

fn syntax_error_from_diagnostics(
    diagnostics: Vec<oxc::diagnostics::OxcDiagnostic>,
    lines: &LineIndex,
) -> ExecError {
    let count = diagnostics.len();
    let Some(first) = diagnostics.into_iter().next() else {
        return ExecError::new(ErrorKind::Syntax, "the program does not parse");
    };
    // The primary label marks the error site; without one, the last label does (oxc lists
    // "first declared here" before "redeclared here").
    let label = first
        .labels
        .iter()
        .find(|l| l.primary())
        .or_else(|| first.labels.last());
    let mut message = first.message.to_string();
    if let Some(text) = label.filter(|l| l.primary()).and_then(|l| l.label())
        && !text.is_empty()
        && !message.contains(text)
    {
        message.push_str(" (");
        message.push_str(text);
        message.push(')');
    }
    for other in first.labels.iter().filter(|l| Some(*l) != label) {
        if let Some(text) = other.label().filter(|t| !t.is_empty()) {
            let (line, column) = lines.position(other.offset());
            message.push_str(&format!("; {text}: line {line}, column {column}"));
        }
    }
    if let Some(help) = &first.help {
        message.push_str("; ");
        message.push_str(help);
    }
    if count > 1 {
        let more = count - 1;
        let s = if more == 1 { "" } else { "s" };
        message.push_str(&format!(" [and {more} more syntax error{s}]"));
    }
    let mut err = ExecError::new(ErrorKind::Syntax, message);
    err.name = Some("SyntaxError".to_owned());
    if let Some(label) = label {
        let (line, column) = lines.position(label.offset());
        err.line = Some(line);
        err.column = Some(column);
    }
    err
}

/// Rejects programs nested too deeply for oxc's recursive parser and visitors.
///
/// A Rust stack overflow would kill the worker instead of reporting an error, so before
/// parsing, a linear scan bounds the depth of the syntax tree:
///
/// - brackets `(`, `[`, `{` and template holes `${` may nest at most [`MAX_NESTING`] deep
///   (counted outside strings, comments and regular-expression literals; a regex is told from
///   a division by the previous token, as JavaScript tokenizers without a parser do);
/// - nesting without brackets (`!!!!x`, `a ? b : c ? …`, `x => y => …`, `a.b.c…`, `f()()…`,
///   `1 + 1 + …`, `else if` chains) is bounded by counting operator tokens per bracket level
///   between statement or element boundaries (`;`, `,`, a new statement after an expression).
///   Each bracket level costs [`BRACKET_WEIGHT`] and each operator 1, except `<`, which costs
///   a bracket level; the total must stay within [`MAX_DEPTH_UNITS`].
///
/// Measured on an 8 MiB stack in a debug build, oxc overflows after ~4,400 nested functions
/// (the costliest bracket level, ~1.9 KiB each), ~17,700 chained arrows (the costliest
/// operator, ~470 bytes each) and fewer than 8,000 chained `<` (`c<st<st<…`: oxc tries
/// TypeScript type arguments at each, ~1.3 KiB a level); the limits keep the worst case under
/// half of that stack.
pub fn check_nesting(code: &str) -> Result<(), ExecError> {
    let Some((offset, what)) = NestingScanner::default().scan(code.as_bytes()) else {
        return Ok(());
    };
    let (line, column) = LineIndex::new(code).position(offset as u32);
    let message = match what {
        TooDeep::Brackets => format!(
            "program nests more than {MAX_NESTING} levels deep; flatten the nesting \
             (build deep data with loops instead of literals)"
        ),
        TooDeep::Chain => format!(
            "program is nested too deeply: one expression chains more than \
             {MAX_DEPTH_UNITS} operators, calls and brackets; split it into several statements"
        ),
    };
    Err(syntax_error(message, line, column))
}

/// Deepest bracket nesting accepted before parsing (see [`check_nesting`]).
pub const MAX_NESTING: usize = 1000;
/// Budget for the syntax-tree depth bound of [`check_nesting`].
pub const MAX_DEPTH_UNITS: u32 = 8000;
/// What one bracket level costs of [`MAX_DEPTH_UNITS`].
pub const BRACKET_WEIGHT: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TooDeep {
    Brackets,
    Chain,
}

/// What kind of opening bracket a scanner frame stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// The whole program.
    Top,
    /// `(`; `control` when it is the head of `if`/`while`/`for`/`with` (a regex may follow `)`).
    Paren {
        control: bool,
    },
    Bracket,
    /// `{`; `block` when it opens a statement block (a regex may follow `}`).
    Brace {
        block: bool,
    },
    /// `${` inside a template literal; its `}` resumes the template.
    TemplateHole,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    open: Open,
    /// Operator tokens since the last boundary at this level: a bound on how deep the syntax
    /// tree nests here without brackets.
    chain: u32,
}

/// The last significant token, enough to tell a regex literal from a division and to see
/// where a new statement starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Start of input, an operator or punctuator after which an expression starts.
    ExpressionStart,
    /// An identifier, literal, `)`, `]` or `}` ending an expression: `/` divides.
    ExpressionEnd,
    /// `}` closing a block: `/` starts a regex, a word starts a new statement.
    StatementEnd,
    /// `)` closing an `if`/`while`/`for`/`with` head: `/` starts a regex, and what follows
    /// is the statement's body (nested, not a new statement).
    ControlHeadEnd,
    /// A keyword that may precede a regex (`return`, `typeof`, …).
    Keyword,
    /// `if`, `while`, `for`, `with`: their `(` is a control head.
    ControlKeyword,
}

#[derive(Debug)]
struct NestingScanner {
    frames: Vec<Frame>,
    /// Σ over frames of (bracket weight + chain).
    units: u32,
    prev: Prev,
    /// A `;` or `,` was seen: the next token starts a new statement or element unless it is
    /// `else` (whose `if` nests the chain that follows).
    pending_reset: bool,
}

impl Default for NestingScanner {
    fn default() -> Self {
        NestingScanner {
            frames: vec![Frame {
                open: Open::Top,
                chain: 0,
            }],
            units: 0,
            prev: Prev::ExpressionStart,
            pending_reset: false,
        }
    }
}

/// Keywords that continue an expression or statement after an expression ends.
const CONTINUING_KEYWORDS: &[&[u8]] = &[
    b"in",
    b"instanceof",
    b"of",
    b"as",
    b"satisfies",
    b"else",
    b"extends",
    b"implements",
    b"keyof",
    b"is",
    b"asserts",
    b"infer",
    b"unique",
    b"readonly",
];

impl NestingScanner {
    /// Returns the byte offset where a limit is first exceeded, and which.
    fn scan(mut self, s: &[u8]) -> Option<(usize, TooDeep)> {
        let mut i = 0;
        while i < s.len() {
            let c = s[i];
            // Whitespace and comments are not tokens.
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                    i += 1;
                    continue;
                }
                b'/' if s.get(i + 1) == Some(&b'/') => {
                    while i < s.len() && s[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'/' if s.get(i + 1) == Some(&b'*') => {
                    i += 2;
                    while i < s.len() && !(s[i] == b'*' && s.get(i + 1) == Some(&b'/')) {
                        i += 1;
                    }
                    i += 2;
                    continue;
                }
                _ => {}
            }
            let is_word =
                c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'\\' || c >= 0x80;
            let word_end = if is_word { word_end(s, i) } else { i };
            let word = &s[i..word_end];
            if self.pending_reset {
                self.pending_reset = false;
                if word != b"else" {
                    self.reset_chain();
                }
            }
            // A new statement after an expression (automatic semicolon insertion) ends the
            // chain; keywords such as `in`, `as` or `else` continue it.
            let starts_operand = is_word || c == b'\'' || c == b'"';
            if starts_operand
                && matches!(self.prev, Prev::ExpressionEnd | Prev::StatementEnd)
                && !CONTINUING_KEYWORDS.contains(&word)
            {
                self.reset_chain();
            }
            match c {
                b'/' => {
                    if matches!(
                        self.prev,
                        Prev::ExpressionStart
                            | Prev::StatementEnd
                            | Prev::ControlHeadEnd
                            | Prev::Keyword
                    ) {
                        i = skip_regex(s, i + 1);
                        self.prev = Prev::ExpressionEnd;
                    } else {
                        i += 1;
                        if s.get(i) == Some(&b'=') {
                            i += 1;
                        }
                        if self.operator() {
                            return Some((i, TooDeep::Chain));
                        }
                        self.prev = Prev::ExpressionStart;
                    }
                }
                b'\'' | b'"' => {
                    i = skip_string(s, i + 1, c);
                    self.prev = Prev::ExpressionEnd;
                }
                b'`' => {
                    // A template right after an expression is a tagged call.
                    if self.prev == Prev::ExpressionEnd && self.operator() {
                        return Some((i, TooDeep::Chain));
                    }
                    match self.scan_template(s, i + 1) {
                        Ok(next) => i = next,
                        Err(too_deep) => return Some((i, too_deep)),
                    }
                }
                b'(' | b'[' | b'{' => {
                    // A call or index after an expression nests like an operator.
                    if c != b'{' && self.prev == Prev::ExpressionEnd && self.operator() {
                        return Some((i, TooDeep::Chain));
                    }
                    let open = match c {
                        b'(' => Open::Paren {
                            control: self.prev == Prev::ControlKeyword,
                        },
                        b'[' => Open::Bracket,
                        _ => Open::Brace {
                            block: matches!(self.prev, Prev::StatementEnd | Prev::ControlHeadEnd)
                                || (self.prev == Prev::ExpressionStart && brace_is_block(s, i)),
                        },
                    };
                    if let Some(too_deep) = self.open(open) {
                        return Some((i, too_deep));
                    }
                    self.prev = Prev::ExpressionStart;
                    i += 1;
                }
                b')' | b']' | b'}' => {
                    let open = self.close();
                    i += 1;
                    if c == b'}' && open == Some(Open::TemplateHole) {
                        // Back inside the template literal that opened this hole.
                        match self.scan_template(s, i) {
                            Ok(next) => i = next,
                            Err(too_deep) => return Some((i, too_deep)),
                        }
                        continue;
                    }
                    self.prev = match open {
                        Some(Open::Paren { control: true }) => Prev::ControlHeadEnd,
                        Some(Open::Brace { block: true }) => Prev::StatementEnd,
                        _ => Prev::ExpressionEnd,
                    };
                }
                b';' | b',' => {
                    self.pending_reset = true;
                    self.prev = Prev::ExpressionStart;
                    i += 1;
                }
                _ if is_word => {
                    i = word_end;
                    self.prev = if c.is_ascii_digit() {
                        Prev::ExpressionEnd
                    } else {
                        match word {
                            b"if" | b"while" | b"for" | b"with" => Prev::ControlKeyword,
                            b"return" | b"typeof" | b"new" | b"delete" | b"void" | b"throw"
                            | b"case" | b"do" | b"yield" | b"await" => Prev::Keyword,
                            w if CONTINUING_KEYWORDS.contains(&w) => Prev::Keyword,
                            _ => Prev::ExpressionEnd,
                        }
                    };
                    // Keywords that nest what follows them count like operators.
                    if self.prev != Prev::ExpressionEnd && self.operator() {
                        return Some((i, TooDeep::Chain));
                    }
                }
                b'.' if s.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                    // A number such as `.5`.
                    i = word_end_from(s, i + 1);
                    self.prev = Prev::ExpressionEnd;
                }
                b'+' | b'-' if s.get(i + 1) == Some(&c) => {
                    // `++`/`--` keep whatever came before (`a++ / 2` divides).
                    i += 2;
                    if self.operator() {
                        return Some((i, TooDeep::Chain));
                    }
                }
                _ => {
                    // Any other punctuator is an operator: `!`, `.`, `?`, `:`, `=>`, `+`, …
                    // `<` may open TypeScript type arguments, which oxc tries to parse at
                    // every `<` of a chain, one recursion deeper each (`c<st<st<…`, ~1.3 KiB
                    // of stack per level in a debug build): it costs a bracket level.
                    i += 1;
                    let cost = if c == b'<' { BRACKET_WEIGHT } else { 1 };
                    if self.operator_costing(cost) {
                        return Some((i, TooDeep::Chain));
                    }
                    self.prev = Prev::ExpressionStart;
                }
            }
        }
        None
    }

    /// Counts one operator in the innermost frame; `true` when over budget.
    fn operator(&mut self) -> bool {
        self.operator_costing(1)
    }

    /// Counts an operator that costs `units` in the innermost frame; `true` when over budget.
    fn operator_costing(&mut self, units: u32) -> bool {
        if let Some(top) = self.frames.last_mut() {
            top.chain += units;
        }
        self.units += units;
        self.units > MAX_DEPTH_UNITS
    }

    fn reset_chain(&mut self) {
        if let Some(top) = self.frames.last_mut() {
            self.units -= top.chain;
            top.chain = 0;
        }
    }

    fn open(&mut self, open: Open) -> Option<TooDeep> {
        self.frames.push(Frame { open, chain: 0 });
        self.units += BRACKET_WEIGHT;
        // The top-level frame is not a bracket.
        if self.frames.len() - 1 > MAX_NESTING {
            Some(TooDeep::Brackets)
        } else if self.units > MAX_DEPTH_UNITS {
            Some(TooDeep::Chain)
        } else {
            None
        }
    }

    /// Pops the innermost bracket (never the top-level frame; stray closers are oxc's to
    /// report).
    fn close(&mut self) -> Option<Open> {
        if self.frames.len() <= 1 {
            return None;
        }
        let frame = self.frames.pop()?;
        self.units -= BRACKET_WEIGHT + frame.chain;
        self.pending_reset = false;
        Some(frame.open)
    }

    /// Scans template text from `i` up to its closing backtick or a `${` hole. A hole opens
    /// [`Open::TemplateHole`] and returns to the main loop, whose `}` comes back here.
    fn scan_template(&mut self, s: &[u8], mut i: usize) -> Result<usize, TooDeep> {
        self.prev = Prev::ExpressionEnd;
        while i < s.len() {
            match s[i] {
                b'\\' => i += 2,
                b'`' => return Ok(i + 1),
                b'$' if s.get(i + 1) == Some(&b'{') => {
                    if let Some(too_deep) = self.open(Open::TemplateHole) {
                        return Err(too_deep);
                    }
                    self.prev = Prev::ExpressionStart;
                    return Ok(i + 2);
                }
                _ => i += 1,
            }
        }
        Ok(i)
    }
}

/// Whether a `{` after an expression-start token opens a block rather than an object.
/// Only `=>` and statement boundaries (`;`, `{`, `}`, start of input) make a block here.
fn brace_is_block(s: &[u8], i: usize) -> bool {
    let mut j = i;
    while j > 0 && matches!(s[j - 1], b' ' | b'\t' | b'\n' | b'\r') {
        j -= 1;
    }
    j == 0 || matches!(s[j - 1], b';' | b'>' | b'{' | b'}')
}

fn word_end(s: &[u8], i: usize) -> usize {
    word_end_from(s, i)
}

fn word_end_from(s: &[u8], mut i: usize) -> usize {
    while i < s.len()
        && (s[i].is_ascii_alphanumeric()
            || s[i] == b'_'
            || s[i] == b'$'
            || s[i] == b'\\'
            || s[i] >= 0x80)
    {
        i += 1;
    }
    i
}

fn skip_string(s: &[u8], mut i: usize, quote: u8) -> usize {
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

fn skip_regex(s: &[u8], mut i: usize) -> usize {
    let mut in_class = false;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            b'[' => {
                in_class = true;
                i += 1;
            }
            b']' => {
                in_class = false;
                i += 1;
            }
            b'/' if !in_class => {
                i += 1;
                while i < s.len() && s[i].is_ascii_alphabetic() {
                    i += 1;
                }
                return i;
            }
            _ => i += 1,
        }
    }
    i
}

/// Byte offset → 1-based line and UTF-16 column in the agent's code.
#[derive(Debug)]
pub struct LineIndex<'s> {
    text: &'s str,
    /// Byte offset at which each line starts.
    starts: Vec<u32>,
}

impl<'s> LineIndex<'s> {
    pub fn new(text: &'s str) -> Self {
        let mut starts = vec![0u32];
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => starts.push(i as u32 + 1),
                b'\r' if bytes.get(i + 1) != Some(&b'\n') => starts.push(i as u32 + 1),
                // U+2028 and U+2029 (E2 80 A8/A9) end lines in JavaScript too.
                0xE2 if bytes.get(i + 1) == Some(&0x80)
                    && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
                {
                    starts.push(i as u32 + 3);
                    i += 2;
                }
                _ => {}
            }
            i += 1;
        }
        LineIndex { text, starts }
    }

    /// 1-based (line, column) of a byte offset; offsets past the end clamp to the end.
    pub fn position(&self, offset: u32) -> (u32, u32) {
        position_in(self.text, &self.starts, offset)
    }
}

/// [`LineIndex::position`] of `text`, whose lines start at `starts`.
fn position_in(text: &str, starts: &[u32], offset: u32) -> (u32, u32) {
    let offset = offset.min(text.len() as u32);
    let line = starts.partition_point(|&s| s <= offset).max(1) - 1;
    let start = starts.get(line).map_or(0, |&s| s as usize);
    let mut end = offset as usize;
    while end > start && !text.is_char_boundary(end) {
        end -= 1;
    }
    let column = text.get(start..end).map_or(0, |t| t.encode_utf16().count());
    (line as u32 + 1, column as u32 + 1)
}

/// Maps (line, column) positions in the evaluated script back to the agent's code.
///
/// Built from the code generator's source map; stores, per generated line, the mappings
/// sorted by column. For a spliced program ([`splice`]), from its text instead.
#[derive(Debug, Default)]
pub struct PositionMap {
    /// Index into `mappings` of the first mapping of each generated line; one more entry than
    /// there are lines.
    line_starts: Vec<u32>,
    /// (generated column, original line, original column), all 0-based.
    mappings: Vec<[u32; 3]>,
    /// A spliced program's text and what was spliced into it (the mappings are then empty).
    spliced: Option<SplicedPositions>,
}

/// The positions of a spliced program: its script is its own text with `return (` … `)`
/// spliced in, one line down.
#[derive(Debug)]
struct SplicedPositions {
    /// The agent's code.
    code: String,
    /// Byte offset at which each of its lines starts ([`LineIndex`]).
    starts: Vec<u32>,
    /// What was spliced in: (byte offset in `code`, length), in the script's order.
    inserts: Vec<(u32, u32)>,
}

impl SplicedPositions {
    /// [`PositionMap::original`]: the engine's column counts bytes of the script's line.
    fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let index = line.checked_sub(WRAPPER_LINES_BEFORE + 1)? as usize;
        let line_start = *self.starts.get(index)?;
        let code_len = u32::try_from(self.code.len()).unwrap_or(u32::MAX);
        // The line's last byte (its `\n`), or the end of the code.
        let line_end = self
            .starts
            .get(index + 1)
            .map_or(code_len, |&next| next.saturating_sub(1));
        // Spliced text never holds a line end, so the script's line is the code's, shifted
        // by what was spliced in before it.
        let before: u32 = self
            .inserts
            .iter()
            .take_while(|&&(at, _)| at < line_start)
            .map(|&(_, len)| len)
            .sum();
        let in_script = line_start
            .saturating_add(before)
            .saturating_add(column.saturating_sub(1));
        // Back to the code: take out what was spliced in before the position; a position in
        // spliced text is where it was spliced in.
        let mut spliced = 0u32;
        let mut offset = None;
        for &(at, len) in &self.inserts {
            let start = at.saturating_add(spliced);
            if in_script < start {
                break;
            }
            if in_script < start.saturating_add(len) {
                offset = Some(at);
                break;
            }
            spliced = spliced.saturating_add(len);
        }
        let offset = offset
            .unwrap_or(in_script.saturating_sub(spliced))
            .min(line_end)
            .max(line_start);
        Some(position_in(&self.code, &self.starts, offset))
    }
}

impl PositionMap {
    /// The map of a spliced program ([`splice`]).
    fn spliced(code: &str, starts: Vec<u32>, inserts: Vec<(u32, u32)>) -> Self {
        PositionMap {
            spliced: Some(SplicedPositions {
                code: code.to_owned(),
                starts,
                inserts,
            }),
            ..PositionMap::default()
        }
    }

    fn from_tokens(tokens: impl Iterator<Item = [u32; 4]>) -> Self {
        let mut line_starts = Vec::new();
        let mut mappings = Vec::new();
        for [dst_line, dst_col, src_line, src_col] in tokens {
            while line_starts.len() <= dst_line as usize {
                line_starts.push(mappings.len() as u32);
            }
            mappings.push([dst_col, src_line, src_col]);
        }
        line_starts.push(mappings.len() as u32);
        // Tokens arrive in generated order; keep each line sorted by column regardless.
        for w in line_starts.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            if let Some(line) = mappings.get_mut(a..b) {
                line.sort_unstable_by_key(|m| m[0]);
            }
        }
        PositionMap {
            line_starts,
            mappings,
            spliced: None,
        }
    }

    fn line(&self, line: usize) -> &[[u32; 3]] {
        match (self.line_starts.get(line), self.line_starts.get(line + 1)) {
            (Some(&a), Some(&b)) => self.mappings.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Maps a 1-based (line, column) in the evaluated script to a 1-based (line, column) in
    /// the agent's code. `None` for positions in the wrapper around the program.
    pub fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        if let Some(spliced) = &self.spliced {
            return spliced.original(line, column);
        }
        let generated_line = line.checked_sub(WRAPPER_LINES_BEFORE + 1)? as usize;
        let line_count = self.line_starts.len().saturating_sub(1);
        if generated_line >= line_count {
            return None;
        }
        let col = column.saturating_sub(1);
        let here = self.line(generated_line);
        let found = match here.partition_point(|m| m[0] <= col) {
            0 => here.first().copied(),
            n => here.get(n - 1).copied(),
        };
        let found = found.or_else(|| {
            // No mapping on this line: the closest mapping on an earlier line.
            (0..generated_line)
                .rev()
                .find_map(|l| self.line(l).last().copied())
        })?;
        Some((found[1] + 1, found[2] + 1))
    }

    /// Rewrites every `filename:line:column` of a QuickJS stack trace to positions in the
    /// agent's code, and drops frames that point into the wrapper.
    ///
    /// QuickJS-ng frames look like `    at name (program.ts:3:5)`, `    at name (native)` and,
    /// for compile errors, `    at program.ts:3:5`.
    pub fn map_stack(&self, stack: &str, filename: &str) -> String {
        let mut out = String::with_capacity(stack.len());
        for line in stack.lines() {
            match self.map_frame(line, filename) {
                FrameMapping::Keep(mapped) => {
                    out.push_str(&mapped);
                    out.push('\n');
                }
                FrameMapping::Drop => {}
            }
        }
        out
    }

    /// The first position in `stack` that maps into the agent's code.
    pub fn first_position(&self, stack: &str, filename: &str) -> Option<(u32, u32)> {
        stack.lines().find_map(|line| {
            let (_, l, c, _) = parse_frame_position(line, filename)?;
            self.original(l, c)
        })
    }

    /// The position of the first frame in the program of a stack already mapped to the
    /// agent's code (a `stack` property the sandbox's `Error` has rewritten).
    pub fn first_mapped_position(stack: &str, filename: &str) -> Option<(u32, u32)> {
        stack.lines().find_map(|line| {
            let (_, l, c, _) = parse_frame_position(line, filename)?;
            Some((l, c))
        })
    }

    fn map_frame(&self, line: &str, filename: &str) -> FrameMapping {
        match parse_frame_position(line, filename) {
            None => FrameMapping::Keep(line.to_owned()),
            Some((head, l, c, tail)) => match self.original(l, c) {
                Some((ol, oc)) => FrameMapping::Keep(format!("{head}{ol}:{oc}{tail}")),
                None => FrameMapping::Drop,
            },
        }
    }
}

enum FrameMapping {
    Keep(String),
    Drop,
}

/// Splits `    at f (program.ts:3:5)` into (`    at f (program.ts:`, 3, 5, `)`).
fn parse_frame_position<'l>(line: &'l str, filename: &str) -> Option<(&'l str, u32, u32, &'l str)> {
    let at = line.find(filename)?;
    let after_name = at + filename.len();
    let rest = line.get(after_name..)?.strip_prefix(':')?;
    let line_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let l: u32 = rest.get(..line_len)?.parse().ok()?;
    let rest2 = rest.get(line_len..)?.strip_prefix(':')?;
    let col_len = rest2.bytes().take_while(u8::is_ascii_digit).count();
    let c: u32 = rest2.get(..col_len)?.parse().ok()?;
    let head = line.get(..after_name + 1)?;
    let tail = rest2.get(col_len..)?;
    Some((head, l, c, tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `code` (TypeScript) counts as having TypeScript syntax.
    fn typescript_syntax(code: &str) -> bool {
        let allocator = Allocator::default();
        let parsed = Parser::new(&allocator, code, SourceType::ts().with_module(true))
            .with_options(ParseOptions {
                allow_return_outside_function: true,
                ..ParseOptions::default()
            })
            .parse();
        assert!(
            parsed.diagnostics.is_empty(),
            "{code}: {:?}",
            parsed.diagnostics
        );
        Scan::of(&parsed.program).typescript
    }

    #[test]
    fn every_typescript_construct_is_transformed() {
        for code in [
            "let x: number = 1",
            "f<string>(x)",
            "const g = f<string>",
            "x!",
            "x as T",
            "<T>x",
            "x satisfies T",
            "type T = 1",
            "interface I {}",
            "enum E { A }",
            "const enum E { A }",
            "namespace N {}",
            "declare const x: number",
            "declare const y",
            "declare function f()",
            "declare class A {}",
            "function f(); function f() {}",
            "abstract class A {}",
            "class A { abstract m(): void }",
            "class A { private x = 1 }",
            "class A { public m() {} }",
            "class A { protected static y = 2 }",
            "class A { readonly x = 1 }",
            "class A { declare x }",
            "class A { x? = 1 }",
            "class A { m?() {} }",
            "class B extends A { override m() {} }",
            "class A { private accessor x = 1 }",
            "class A { constructor(public x) {} }",
            "class A { constructor(readonly x) {} }",
            "class A implements I {}",
            "class A<T> {}",
            "function f(this: A) {}",
            "function f(x?) {}",
            "let x!: number",
            "const f = <T,>(x) => x",
            "const f = (x): number => x",
            "import x = require('y')",
        ] {
            assert!(typescript_syntax(code), "{code}");
            // Any that prepares at all comes out without TypeScript in it.
            if let Ok(p) = prepare_program_generated(code, Language::TypeScript) {
                let forced = prepare_program_transforming(code, Language::TypeScript)
                    .expect("transforming prepares too");
                assert_eq!(p.script, forced.script, "{code}");
            }
        }
    }

    #[test]
    fn javascript_in_a_typescript_program_skips_the_transformer_and_prints_the_same() {
        for code in [
            "1 + 1",
            "const a = [1, 2, 3].map((x) => x * 2); a",
            "class A { #x = 1; static s = 2; static { this.t = 3 } get x() { return this.#x } m() { return 1 } }\nnew A().x",
            "class B extends Array { constructor() { super(); } }",
            "async function* g() { yield await 1 } for await (const x of g()) {}",
            "const { a, ...rest } = { a: 1, b: 2 }; let [x = 1, , y] = [];",
            "a?.b?.(c) ?? d; x ||= 1; y &&= 2; z ??= 3",
            "label: for (;;) { break label }",
            "`a${1}b`; /[\\p{L}]/u.test('x')",
            "try { throw 1 } catch { } finally { }",
            "function f(a, b = 1, ...c) { return arguments.length } f(1)",
            "const o = { m() {}, get g() { return 1 }, [k]: 1, 'q': 2 }",
            "if (a < b && c > d) { x } else { y }",
            "a < b > c",
            "const x = await tools.github.search_issues({ q: 'x' }); x",
            "return 5",
            "using r = null",
        ] {
            assert!(!typescript_syntax(code), "{code}");
            let fast = ts(code);
            let forced = prepare_program_transforming(code, Language::TypeScript)
                .expect("transforming prepares too");
            assert_eq!(fast.script, forced.script, "{code}");
            assert_eq!(
                format!("{:?}", fast.positions),
                format!("{:?}", forced.positions),
                "{code}"
            );
        }
    }

    /// The program as a worker prepares it, which must have been spliced.
    fn spliced(code: &str, language: Language) -> PreparedProgram {
        match prepare_program(code, language) {
            Ok(p) => {
                assert!(p.spliced(), "{code:?} was not spliced");
                p
            }
            Err(e) => panic!("prepare failed: {e:?}"),
        }
    }

    #[test]
    fn a_program_that_needs_no_printing_is_spliced_and_means_the_same() {
        for code in [
            "1 + 1",
            "1 + 1 // done",
            "/* a */ 42 /* b */;",
            "",
            "const a = 1; a",
            "let a = 1;",
            "({ a: 1 })",
            "x = 1, 2",
            "try { f(); 1 } catch (e) { 2 } finally { 3 }",
            "if (a) { b } else if (c) d; else { e; let z = 1 }",
            "if (a) b\nelse c",
            "l: { x }",
            "for (;;) { x }",
            "f();\nfunction f() {}",
            "x; const y = g();",
            "if (x) return 1;\nconst y = await f();\ny",
            "return await tools.a.b({})",
            "const s = 'é€😀'; s.length",
            "a\n;",
            "(function () { return 1 })()",
            "async () => 1",
            "class A { #x = 1; static { this.t = 3 } }\nnew A()",
            "label: for (;;) { break label }",
            "`a${1}b`; /[\\p{L}]/u.test('x')",
            "a < b > c",
            "x--\n>y",
        ] {
            for language in [Language::JavaScript, Language::TypeScript] {
                let fast = spliced(code, language);
                let printed = prepare_program_generated(code, language).expect("prints too");
                assert!(!printed.spliced());
                assert_eq!(
                    normalised(&fast.script),
                    normalised(&printed.script),
                    "{code:?}: {}",
                    fast.script
                );
            }
        }
    }

    #[test]
    fn a_backslash_in_a_name_that_is_no_escape_is_a_syntax_error() {
        // The first two once parsed as TypeScript with no diagnostic (the lexer's report lost
        // while the parser looked ahead at `<<`): spliced they failed in the engine, printed
        // they ran as the label `consa`. Found by the typescript fuzz target.
        let both = [Language::TypeScript, Language::JavaScript];
        for (code, column, languages) in [
            ("cons\\ a: nud << -92233", 6, &both[..]),
            // TypeScript syntax: printed, not spliced.
            ("let x: number = 1; cons\\ a: x << 2", 25, &both[..1]),
            ("cons\\ a: 1", 6, &both[..]),
            ("let a\\u00 = 1", 7, &both[..]),
            ("let \\u{} = 1", 6, &both[..]),
        ] {
            for &language in languages {
                let error = prepare_program(code, language)
                    .map(|p| p.script)
                    .expect_err(code);
                assert_eq!(error.kind, ErrorKind::Syntax, "{code}");
                assert!(
                    error.message.starts_with("Invalid Unicode escape sequence"),
                    "{code}: {}",
                    error.message
                );
                assert_eq!(
                    (error.line, error.column),
                    (Some(1), Some(column)),
                    "{code} ({language:?})"
                );
            }
        }
        // Escapes that are escapes still name what they spell.
        for code in [
            "const \\u0061b = 1; ab",
            "const a\\u{62} = 2; ab",
            "({ \\u0061: 3 }).a",
        ] {
            for language in [Language::TypeScript, Language::JavaScript] {
                assert!(prepare_program(code, language).is_ok(), "{code}");
            }
        }
        let at = |name| misspelled_name(name).map(|(at, _)| at);
        assert_eq!(at("plain"), None);
        assert_eq!(at("a\\u0041\\u{1D49C}b"), None);
        assert_eq!(
            misspelled_name("a\\u{1F600}").map(|(_, u)| u.message()),
            Some(Unsupported::InvalidNameCharacter.message())
        );
        assert_eq!(at("a\\u004"), Some(2));
        assert_eq!(at("\\u0041\\x"), Some(7));
    }

    #[test]
    fn a_literal_the_lexer_refuses_is_a_syntax_error_though_oxc_lost_its_report() {
        // With TypeScript syntax the program is printed: these ran as `q = ""`, `q = 1`,
        // `q = "}"` and the name `consa`. Without, it was spliced and the engine refused it
        // with its own message. The column is the backslash's or the `_`'s.
        for (literal, column, message) in [
            ("'\\x1'", 2, "Invalid escape sequence"),
            ("'ab\\u12'", 4, "Invalid escape sequence"),
            ("\"\\u{110000}\"", 2, "Invalid escape sequence"),
            ("1_", 2, "Invalid numeric separator"),
            ("1_.5", 2, "Invalid numeric separator"),
            ("1_n", 2, "Invalid numeric separator"),
            ("cons\\u0020a", 5, "Invalid Character"),
            ("a\\u0000", 2, "Invalid Character"),
        ] {
            for (prefix, code) in [
                (
                    "let t: number = 1; let q = ",
                    "let t: number = 1; let q = {}; t << 1",
                ),
                ("let t = 1; let q = ", "let t = 1; let q = {}; t << 1"),
            ] {
                let code = code.replace("{}", literal);
                let error = prepare_program(&code, Language::TypeScript)
                    .map(|p| p.script)
                    .expect_err(&code);
                assert_eq!(error.kind, ErrorKind::Syntax, "{code}");
                assert!(
                    error.message.starts_with(message) && error.message.contains("; "),
                    "{code}: {}",
                    error.message
                );
                let column = u32::try_from(prefix.len()).unwrap() + column;
                assert_eq!(
                    (error.line, error.column),
                    (Some(1), Some(column)),
                    "{code}"
                );
            }
        }
        // What the lexer accepts is still accepted, and means what it meant.
        for (code, value) in [
            (
                "let t: number = 1; let q = '\\x41\\u0042\\u{43}\\u{0000044}\\0\\q'; t << 1; q",
                "let q = \"ABCD\\0q\";",
            ),
            (
                "let t: number = 1; let q = 1_000.0_1e1_0 + 0x1_f + 0b1_0 + 0o1_7; q",
                "= 0x91854688100 + 31 + 2 + 15;",
            ),
            (
                "let t: number = 1; let q = 1_0n + 0xF_Fn; q",
                "= 10n + 255n;",
            ),
            (
                "let t: number = 1; let \\u0061\\u{62} = 1; let q = ab << 1; q",
                "let ab = 1;",
            ),
        ] {
            let printed = prepare_program(code, Language::TypeScript).expect(code);
            assert!(!printed.spliced(), "{code}");
            assert!(printed.script.contains(value), "{code}: {}", printed.script);
        }
    }

    /// Whether oxc alone (its parser and semantic checks, no [`Scan`]) accepts `code` as
    /// JavaScript, where it never looks ahead for type arguments and so loses no lexer report.
    fn oxc_accepts_javascript(code: &str) -> bool {
        let allocator = Allocator::default();
        let parsed = Parser::new(&allocator, code, SourceType::mjs()).parse();
        parsed.diagnostics.is_empty()
            && SemanticBuilder::new()
                .with_check_syntax_error(true)
                .build(&parsed.program)
                .diagnostics
                .is_empty()
    }

    /// Every text of up to `length` characters from `alphabet`.
    fn every_text(alphabet: &[&str], length: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..length {
            last = last
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn a_literal_is_refused_in_typescript_before_a_shift_exactly_when_javascript_refuses_it() {
        // oxc loses a lexer report made before a `<<` it tries as type arguments, so these
        // once parsed as TypeScript and printed as `""`, `1` and the name `consa`. Each
        // literal below, spelled every way up to a few characters, goes through the worker's
        // preparation three ways (printed TypeScript, spliced TypeScript, JavaScript) with a
        // `<<` after it; each must be refused exactly when oxc refuses it as JavaScript.
        let strings = every_text(&["\\", "x", "u", "{", "}", "0", "1", "8", "F", "\n"], 5)
            .into_iter()
            .map(|body| format!("'{body}'"));
        let numbers = every_text(&["0", "1", "8", "_", ".", "e", "x", "n", "b", "f"], 5)
            .into_iter()
            .filter(|n| n.starts_with(|c: char| c.is_ascii_digit() || c == '.') && n != ".")
            .filter(|n| !n.contains(".."));
        let names = every_text(&["\\", "u", "{", "}", "0", "2", "D", "8", "F"], 5)
            .into_iter()
            .map(|tail| format!("a{tail}"));
        // The parser, not the lexer, refuses a template's bad escape and a regular
        // expression's bad flags; they are here to show that stays so.
        let templates = every_text(&["\\", "x", "u", "{", "}", "0", "1", "8", "\n"], 4)
            .into_iter()
            .flat_map(|body| [format!("`{body}`"), format!("String.raw`{body}`")]);
        let flags = every_text(&["d", "g", "i", "m", "s", "u", "v", "y", "x"], 3)
            .into_iter()
            .map(|flags| format!("/a/{flags}"));
        let mut checked = 0;
        for literal in strings
            .chain(numbers)
            .chain(names)
            .chain(templates)
            .chain(flags)
        {
            let expected = oxc_accepts_javascript(&format!("let t = 1; let q = {literal}; t << 1"));
            // With a type annotation it is printed, and TypeScript only; without, spliced.
            let typed = format!("let t: number = 1; let q = {literal}; t << 1");
            let plain = format!("let t = 1; let q = {literal}; t << 1");
            let both = [Language::TypeScript, Language::JavaScript];
            for (code, languages) in [(typed, &both[..1]), (plain, &both[..])] {
                for &language in languages {
                    let accepted = prepare_program(&code, language).is_ok();
                    assert_eq!(accepted, expected, "{code} ({language:?})");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 3 * 235_375, "every literal, three ways");
    }

    #[test]
    fn a_spliced_script_is_the_agents_text() {
        assert_eq!(
            spliced("1 + 1", Language::JavaScript).script,
            "(async function () {\nreturn (1 + 1)\n})()"
        );
        assert_eq!(
            spliced(
                "const a = 1;\nif (a) { a } else a + 1; // done",
                Language::TypeScript
            )
            .script,
            "(async function () {\nconst a = 1;\nif (a) { return (a) } else return (a + 1); // done\n})()"
        );
        assert_eq!(
            spliced("let a = 1;", Language::JavaScript).script,
            "(async function () {\nlet a = 1;\n})()"
        );
    }

    #[test]
    fn what_cannot_go_to_the_engine_as_it_is_is_printed() {
        for (code, language) in [
            ("#!/usr/bin/env node\n42", Language::JavaScript),
            ("\"use strict\"", Language::JavaScript),
            ("import type { A } from 'a';\n1", Language::TypeScript),
            ("export type { A } from 'a';\n1", Language::TypeScript),
            ("a <!--b", Language::JavaScript),
            ("a-->b", Language::JavaScript),
            ("1 +\r\n1", Language::JavaScript),
            ("1 +\r1", Language::JavaScript),
            ("1 +\u{2028}1", Language::JavaScript),
            ("'\u{2029}'", Language::JavaScript),
            ("const a: number = 1; a", Language::TypeScript),
        ] {
            let p = prepare_program(code, language).expect("prepares");
            assert!(!p.spliced(), "{code:?} was spliced");
            let printed = prepare_program_generated(code, language).expect("prints");
            assert_eq!(p.script, printed.script, "{code:?}");
        }
    }

    #[test]
    fn spliced_positions_map_back_in_utf16_columns() {
        let code = "const s = 'é€😀'; const t = null;\n  t.x + s";
        let p = spliced(code, Language::JavaScript);
        // The engine counts bytes; the agent's editor counts UTF-16 code units.
        let (l, c) = script_position(&p.script, "const t");
        assert_eq!(p.positions.original(l, c), Some((1, 19)));
        // After `return (` on the same line.
        let (l, c) = script_position(&p.script, "t.x");
        assert_eq!(p.positions.original(l, c), Some((2, 3)));
        let (l, c) = script_position(&p.script, "s)");
        assert_eq!(p.positions.original(l, c), Some((2, 9)));
        // In the spliced `return (`: where it was spliced in.
        let (l, c) = script_position(&p.script, "return (");
        assert_eq!(p.positions.original(l, c + 3), Some((2, 3)));
        // Past the end of a line: its end, not a later line.
        assert_eq!(p.positions.original(2, u32::MAX), Some((1, 34)));
        assert_eq!(p.positions.original(3, u32::MAX), Some((2, 10)));
        // The wrapper's lines are not the program's.
        assert_eq!(p.positions.original(1, 1), None);
        assert_eq!(p.positions.original(4, 1), None);
        assert_eq!(p.positions.original(0, 1), None);
        let stack = "Error\n    at f (program.js:3:3)\n    at <anonymous> (program.js:1:1)\n";
        assert_eq!(
            p.positions.map_stack(stack, "program.js"),
            "Error\n    at f (program.js:2:3)\n"
        );
    }

    /// The program as the code generator prints it (these tests are about what it prints;
    /// [`spliced`] is the program as a worker prepares it when that needs no printing).
    fn ts(code: &str) -> PreparedProgram {
        match prepare_program_generated(code, Language::TypeScript) {
            Ok(p) => p,
            Err(e) => panic!("prepare failed: {e:?}"),
        }
    }

    fn js(code: &str) -> PreparedProgram {
        match prepare_program_generated(code, Language::JavaScript) {
            Ok(p) => p,
            Err(e) => panic!("prepare failed: {e:?}"),
        }
    }

    fn syntax(code: &str, language: Language) -> ExecError {
        match prepare_program(code, language) {
            Ok(p) => panic!("expected a syntax error, got {}", p.script),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Syntax);
                e
            }
        }
    }

    /// The generated body without the wrapper, whitespace-normalised.
    fn body(p: &PreparedProgram) -> String {
        let inner = p
            .script
            .strip_prefix(WRAPPER_PREFIX)
            .and_then(|s| s.strip_suffix(WRAPPER_SUFFIX))
            .expect("wrapper present");
        inner.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn wraps_in_async_function() {
        let p = js("1 + 1");
        assert!(p.script.starts_with("(async function () {\n"));
        assert!(p.script.ends_with("\n})()"));
        assert_eq!(body(&p), "return 1 + 1;");
        assert_eq!(p.filename, "program.js");
    }

    #[test]
    fn strips_interfaces_generics_as_satisfies() {
        let p = ts(r#"
interface User { name: string; age?: number }
type Id = string | number;
function first<T>(xs: T[]): T | undefined { return xs[0]; }
const u = { name: "a" } satisfies User;
const n = (u as unknown as User).name!;
let x: Array<Map<string, number>> = [];
declare const ambient: number;
abstract class Shape { abstract area(): number; constructor(private readonly k: number) { } }
first<Id>([1, 2]) as number
"#);
        let b = body(&p);
        for gone in [
            "interface",
            "satisfies",
            " as ",
            "type Id",
            "<T>",
            ": T",
            "declare",
            "abstract",
            "private",
            "Array<",
        ] {
            assert!(!b.contains(gone), "{gone:?} left in {b}");
        }
        assert!(b.contains("this.k = k"), "parameter property lowered: {b}");
        assert!(b.ends_with("return first([1, 2]);"), "{b}");
        assert_eq!(p.filename, "program.ts");
    }

    #[test]
    fn lowers_enums_and_namespaces() {
        let b = body(&ts(
            "enum Color { Red, Green = 5 }\nnamespace N { export const k = 1 }\nColor.Green + N.k",
        ));
        assert!(b.contains("Color[Color[\"Red\"] = 0] = \"Red\""), "{b}");
        assert!(b.ends_with("return Color.Green + N.k;"), "{b}");
    }

    #[test]
    fn does_not_downlevel_modern_syntax() {
        let b = body(&ts(
            "class A { #x = 1; static s = 2; get x() { return this.#x } }\nconst o = a?.b ?? c;\nconst { q, ...rest } = { q: 1 };\nasync function* g() { for await (const v of []) yield v }\n2n ** 3n",
        ));
        for kept in [
            "#x",
            "static s",
            "?.",
            "??",
            "...rest",
            "async function*",
            "for await",
            "2n ** 3n",
        ] {
            assert!(b.contains(kept), "{kept:?} missing from {b}");
        }
    }

    #[test]
    fn last_expression_becomes_return() {
        assert_eq!(body(&js("const a = 1; a")), "const a = 1; return a;");
        assert_eq!(body(&js("let a = 1;")), "let a = 1;");
        assert_eq!(body(&js("({ a: 1 })")), "return { a: 1 };");
        assert_eq!(body(&js("\"hello\"")), "\"hello\"; return \"hello\";");
        assert_eq!(body(&js("x = 1, 2")), "return x = 1, 2;");
        assert_eq!(body(&js("")), "");
        // Completion values of blocks, if/else, try/catch and labels.
        assert_eq!(
            body(&js("try { f(); 1 } catch (e) { 2 } finally { 3 }")),
            "try { f(); return 1; } catch (e) { return 2; } finally { 3; }"
        );
        assert_eq!(
            body(&js("if (a) { b } else if (c) d; else { e; let z = 1 }")),
            "if (a) { return b; } else if (c) return d; else { e; let z = 1; }"
        );
        assert_eq!(body(&js("l: { x }")), "l: { return x; }");
        assert_eq!(body(&js("for (;;) { x }")), "for (;;) { x; }");
        // Trailing function declarations (hoisted, no effect) do not hide the value.
        assert_eq!(
            body(&js("f();\nfunction f() {}")),
            "return f(); function f() {}"
        );
        // Trailing declarations with effects do.
        assert_eq!(body(&js("x; const y = g();")), "x; const y = g();");
        // A trailing comment or type declaration does not hide the last expression.
        assert!(body(&ts("const a = 1; a\ninterface Q {}\n// done")).ends_with("return a;"));
    }

    #[test]
    fn top_level_return_and_await() {
        assert_eq!(
            body(&js("if (x) return 1;\nconst y = await f();\ny")),
            "if (x) return 1; const y = await f(); return y;"
        );
        assert_eq!(
            body(&ts("return await tools.a.b({})")),
            "return await tools.a.b({});"
        );
        js("for await (const x of xs) {}");
    }

    #[test]
    fn imports_and_exports_are_rejected() {
        for code in [
            "import fs from 'fs';\n1",
            "import { x } from './servers/github';",
            "import * as n from 'node:os'",
            "import 'side-effect'",
            "export const a = 1",
            "export default 1",
            "export * from 'x'",
        ] {
            for lang in [Language::JavaScript, Language::TypeScript] {
                let e = syntax(code, lang);
                assert!(
                    e.message.contains("modules are not available"),
                    "{code}: {}",
                    e.message
                );
                assert!(e.message.contains("tools.<server>.<tool>"), "{}", e.message);
                assert_eq!((e.line, e.column), (Some(1), Some(1)), "{code}");
            }
        }
        let e = syntax(
            "const a = 1;\n  import x = require('y');",
            Language::TypeScript,
        );
        assert_eq!((e.line, e.column), (Some(2), Some(3)));
    }

    #[test]
    fn nested_imports_and_exports_are_rejected() {
        // The parser accepted these in TypeScript and the script kept them: the fuzzer found
        // `{ import type { T } from "./t"; }`, whose script the engine cannot parse.
        for (code, type_only) in [
            ("{ import type { T } from './t'; }\n1", true),
            ("{ import { type T } from './t'; }\n1", true),
            ("{ export type X = 1; }\n1", true),
            // `export {}` exports nothing: erased at the top level, like a type-only one.
            ("{ export {}; }\n1", true),
            (
                "function f() {\n  import type { T } from './t';\n}\n1",
                true,
            ),
            ("if (1) import type { T } from './t';\n1", true),
            (
                "class A { static { import type { T } from './t'; } }\n1",
                true,
            ),
            (
                "switch (1) { case 1: import type { T } from './t'; }\n1",
                true,
            ),
            ("label: import type { T } from './t';\n1", true),
            (
                "namespace N { function f() { import type { T } from './t'; } }\n1",
                true,
            ),
            ("{ import { x } from './t'; }\n1", false),
            ("{ export const a = 1; }\n1", false),
            ("{ import x = require('y'); }\n1", false),
            ("{ import x = N.y; }\n1", false),
            ("namespace N { { export const a = 1; } }\n1", false),
        ] {
            let e = syntax(code, Language::TypeScript);
            let expected = if type_only {
                "a type-only import or export can only appear at the top level"
            } else {
                "modules are not available"
            };
            assert!(e.message.contains(expected), "{code}: {}", e.message);
            if code.starts_with("function") {
                assert_eq!((e.line, e.column), (Some(2), Some(3)), "{code}");
            }
            if !type_only && !code.contains("import x =") && !code.contains("namespace") {
                // JavaScript's semantic checks refused these before; now with the same
                // message as TypeScript's.
                let e = syntax(code, Language::JavaScript);
                assert!(e.message.contains(expected), "{code}: {}", e.message);
            }
        }
        // A namespace body exports declarations, not lists (the list stayed in the script).
        for code in [
            "namespace N { const a = 1; export { a }; }\n1",
            "namespace N { export type { T }; }\n1",
        ] {
            let e = syntax(code, Language::TypeScript);
            assert!(
                e.message
                    .contains("a namespace can only export declarations"),
                "{code}: {}",
                e.message
            );
        }
        // An exported declaration with a value is a value export: erased, it vanished (and
        // `export namespace` left its lowering without the `let` it assigns).
        for code in [
            "export enum E { A }\nE.A",
            "export const enum E { A }\nE.A",
            "export abstract class A {}\n1",
            "export namespace N { export const a = 1; }\nN.a",
            "export import x = N.y;\nx",
        ] {
            let e = syntax(code, Language::TypeScript);
            assert!(
                e.message.contains("modules are not available"),
                "{code}: {}",
                e.message
            );
        }
        for code in [
            "export declare const x: number;\n1",
            "export declare class A {}\n1",
            "export declare namespace N { const a = 1; }\n1",
            "export declare function f(): void;\n1",
            "declare module 'm' { export = 1; }\n1",
            "declare module 'n' { export default 1; }\n1",
            "declare global { export const q: number; }\n1",
            "declare namespace D { const a = 1; export { a }; }\n1",
        ] {
            assert_eq!(body(&ts(code)), "return 1;", "{code}");
        }
        // Where TypeScript allows them, they still work or are judged by the semantic checks.
        assert_eq!(
            body(&ts("namespace N { export const a = 1; }\nN.a")),
            "let N; (function(_N) { const a = _N.a = 1; })(N || (N = {})); return N.a;"
        );
        ts("namespace N { import x = M.y; }\n1");
        ts("declare module 'm' { import type { T } from './t'; export const a: number; }\n1");
        syntax(
            "namespace N { import type { T } from './t'; }\n1",
            Language::TypeScript,
        );
    }

    #[test]
    fn decorators_are_rejected() {
        // A parameter's stayed in a script that no longer parses; the others QuickJS refused
        // with an error that did not say what to do.
        for (code, column) in [
            ("class D {\n  constructor(@inject x) {}\n}", 15),
            ("@sealed\nclass D {}", 1),
            ("class D {\n  @log m() {}\n}", 3),
            ("class D {\n  @dec accessor a = 1\n}", 3),
            ("const C = class {\n  @dec static x = 1\n}", 3),
        ] {
            for lang in [Language::TypeScript, Language::JavaScript] {
                if lang == Language::JavaScript && code.contains("inject") {
                    continue; // a parameter decorator is TypeScript's only
                }
                let e = syntax(code, lang);
                assert!(
                    e.message.contains("decorators are not available"),
                    "{code}: {}",
                    e.message
                );
                let line = if code.starts_with('@') { 1 } else { 2 };
                assert_eq!((e.line, e.column), (Some(line), Some(column)), "{code}");
            }
        }
    }

    #[test]
    fn type_only_imports_are_erased() {
        let b = body(&ts(
            "import type { Issue } from './servers/github';\nimport { type X } from './x';\nexport type Y = number;\nexport interface Z {}\nconst i: Issue | null = null;\ni",
        ));
        assert_eq!(b, "const i = null; return i;");
    }

    #[test]
    fn dynamic_import_and_require_are_left_to_the_runtime() {
        // They fail at run time (no module loader, no `require`), not at compile time.
        js("await import('os')");
        js("require('fs')");
    }

    #[test]
    fn syntax_error_positions_are_in_the_original_code() {
        let e = syntax("const a = 1;\nconst b = ;\n", Language::JavaScript);
        assert_eq!((e.line, e.column), (Some(2), Some(11)), "{e:?}");
        assert_eq!(e.name.as_deref(), Some("SyntaxError"));

        let e = syntax("let x: number = 1;\n\n   let y: = 2", Language::TypeScript);
        assert_eq!(e.line, Some(3), "{e:?}");

        // Columns count UTF-16 units: "é" is one unit, "😀" two.
        let e = syntax("const s = 'é😀'; )", Language::JavaScript);
        assert_eq!((e.line, e.column), (Some(1), Some(18)), "{e:?}");

        // Semantic errors (found after parsing) are syntax errors too.
        let e = syntax("let a = 1;\nlet a = 2;", Language::JavaScript);
        assert_eq!((e.line, e.column), (Some(2), Some(5)), "{e:?}");
        assert_eq!(
            e.message,
            "Identifier `a` has already been declared; `a` has already been declared here: line 1, column 5"
        );
        let e = syntax("f(a,\n  b", Language::JavaScript);
        assert_eq!(e.line, Some(2), "{e:?}");
        assert!(e.message.contains("Expected `)`"), "{e:?}");

        // Several errors: the first is reported, the rest counted.
        let e = syntax("const = ;\nconst = ;\nlet let = 1", Language::JavaScript);
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn strict_mode_is_enforced() {
        syntax("with (a) {}", Language::JavaScript);
        syntax("var x = 010;", Language::JavaScript);
    }

    /// Found by the fuzz target (CI, 2026-11-27): `export declare global` parses, and oxc's
    /// transformer asserts (in builds with debug assertions) that a global augmentation is
    /// never exported.
    #[test]
    fn an_exported_global_augmentation_is_erased() {
        assert_eq!(body(&ts("export declare global { }\n1")), "return 1;");
        assert_eq!(
            body(&ts(
                "import type { T } from './t';\nexport declare global { }\ndeclare global { }\nconst a: T = 1; a"
            )),
            "const a = 1; return a;"
        );
    }

    #[test]
    fn hashbang_is_dropped() {
        assert_eq!(body(&js("#!/usr/bin/env node\n42")), "return 42;");
    }

    #[test]
    fn positions_map_back_to_the_original() {
        // TypeScript whose generated code differs a lot from the original.
        let code = "interface A {\n  x: number\n}\n\nconst a: A = { x: 1 };\n\n\n    let b: string = (a as any).y.z;\n";
        let p = ts(code);
        // Find where `.z` lands in the generated script and map it back.
        let (gl, gc) = script_position(&p.script, "let b");
        assert_eq!(p.positions.original(gl, gc), Some((8, 5)));
        // Positions in the wrapper are not program positions.
        assert_eq!(p.positions.original(1, 1), None);
        let last = p.script.lines().count() as u32;
        assert_eq!(p.positions.original(last, 1), None);
    }

    #[test]
    fn stack_traces_are_rewritten() {
        let p = js("const a = 1;\n\nfunction f() {\n  null.x;\n}\nf()");
        let (fl, fc) = script_position(&p.script, "null.x");
        let (cl, cc) = script_position(&p.script, "return f()");
        let last = p.script.lines().count();
        let stack = format!(
            "    at f (program.js:{fl}:{fc})\n    at <anonymous> (program.js:{cl}:{cc})\n    at JSON.parse (native)\n    at <eval> (program.js:{last}:4)\n"
        );
        let mapped = p.positions.map_stack(&stack, "program.js");
        assert_eq!(
            mapped,
            "    at f (program.js:4:3)\n    at <anonymous> (program.js:6:1)\n    at JSON.parse (native)\n"
        );
        assert_eq!(
            p.positions.first_position(&stack, "program.js"),
            Some((4, 3))
        );
        assert_eq!(
            p.positions
                .map_stack("    at program.js:2:3\n", "program.js"),
            "    at program.js:1:1\n"
        );
    }

    /// 1-based (line, column) of the first occurrence of `needle` in `script`.
    fn script_position(script: &str, needle: &str) -> (u32, u32) {
        for (i, line) in script.lines().enumerate() {
            if let Some(c) = line.find(needle) {
                return (i as u32 + 1, c as u32 + 1);
            }
        }
        panic!("{needle:?} not in {script}");
    }

    #[test]
    fn nesting_guard() {
        let ok = format!("{}1{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert!(check_nesting(&ok).is_ok());
        let deep = format!(
            "{}1{}",
            "(".repeat(MAX_NESTING + 1),
            ")".repeat(MAX_NESTING + 1)
        );
        let e = syntax(&deep, Language::JavaScript);
        assert!(
            e.message.contains("nests more than 1000 levels"),
            "{}",
            e.message
        );
        assert_eq!((e.line, e.column), (Some(1), Some(MAX_NESTING as u32 + 1)));

        // Mixed brackets, template holes and object literals all count.
        let mixed = format!("x = {}1{}", "[{a:`${".repeat(400), "}`}]".repeat(400));
        assert!(check_nesting(&mixed).is_err());

        // Brackets inside strings, comments, regexes and templates do not count.
        let noise = "(".repeat(5000);
        for wrapped in [
            format!("'{noise}'"),
            format!("\"{noise}\""),
            format!("`{noise}`"),
            format!("// {noise}\n1"),
            format!("/* {noise} */ 1"),
            format!("x = /{noise}/.test(s)"),
            format!("if (a) /{noise}/.test(s)"),
            format!("{{}}\n/{noise}/g"),
            format!("return /[/]{noise}/"),
        ] {
            assert!(check_nesting(&wrapped).is_ok(), "{}", &wrapped[..20]);
        }
        // Divisions are not mistaken for regexes that would hide brackets.
        let parens = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        for prefix in [
            "a = b / 2 / ",
            "a = (b) / 2; c = x[0] / ",
            "a = {} / ",
            "a++ / ",
        ] {
            assert!(
                check_nesting(&format!("{prefix}{}", parens(1500))).is_err(),
                "{prefix}"
            );
        }
    }

    #[test]
    fn chains_without_brackets_are_bounded() {
        for code in [
            format!("x = {}1", "!".repeat(9000)),
            format!("x = {}1", "a ? b : ".repeat(5000)),
            format!("f = {}1", "a => ".repeat(5000)),
            format!("x = a{}", ".b".repeat(9000)),
            format!("x = f{}", "()".repeat(9000)),
            format!("x = 1{}", " + 1".repeat(9000)),
            format!("x = {}X", "new ".repeat(9000)),
            format!("{} {{}}", "if (a) {} else ".repeat(5000)),
            // `;` before `else` does not end an `if … else if …` chain.
            format!("{}z;", "if (a) x; else ".repeat(5000)),
            format!("x = 1\n{}", "+ 1\n".repeat(9000)),
            format!("x = f{}", "`t`".repeat(9000)),
        ] {
            let e = syntax(&code, Language::TypeScript);
            assert!(
                e.message.contains("nested too deeply"),
                "{}: {}",
                &code[..20],
                e.message
            );
        }
        // Ordinary large programs stay far below the bound.
        let many_statements = "const a = b.c(d + e * f, g ? h : i) ?? j;\n".repeat(20_000);
        let no_semicolons = "let v = x.y(1) + 2 * z\nfoo(v)\n".repeat(20_000);
        let blocks = "if (a > 1) { b() } else { c() }\nfunction f() { return 1 }\n".repeat(5_000);
        let long_array = format!("[{}1]", "1, ".repeat(200_000));
        let long_object = format!("({{ {} }})", "k: 'v', ".repeat(50_000));
        let types =
            "interface I { a: string; b?: number[]; c: Map<string, Set<number>> }\n".repeat(5_000);
        let else_ifs = format!("{}{{}}", "if (a === 1) { x = 1 } else ".repeat(1_000));
        for code in [
            many_statements,
            no_semicolons,
            blocks,
            long_array,
            long_object,
            types,
            else_ifs,
        ] {
            if let Err(e) = check_nesting(&code) {
                panic!("{}: {e:?}", &code[..40]);
            }
        }
    }

    /// oxc recurses per nesting level. For every shape of nesting, the deepest program the
    /// guard accepts must parse, transform and print on the worker's 8 MiB main-thread stack
    /// (checked here on a thread with exactly that stack, in whatever profile the tests run).
    #[test]
    fn oxc_survives_the_deepest_accepted_programs_on_an_8_mib_stack() {
        type Shape = fn(usize) -> String;
        let shapes: Vec<(&str, Shape)> = vec![
            ("parens", |n| {
                format!("const v = {}1{};\nv", "(".repeat(n), ")".repeat(n))
            }),
            ("arrays", |n| {
                format!("const v = {}1{};\nv", "[".repeat(n), "]".repeat(n))
            }),
            ("objects", |n| {
                format!("const v = {}1{};\nv", "{a:".repeat(n), "}".repeat(n))
            }),
            ("blocks", |n| format!("{}1{}", "{".repeat(n), "}".repeat(n))),
            ("functions", |n| {
                format!("{}1{}", "function f(){".repeat(n), "}".repeat(n))
            }),
            ("arrow bodies", |n| {
                format!("const f = {}1{};", "() => {".repeat(n), "}".repeat(n))
            }),
            ("calls", |n| {
                format!("const v: number = {}1{};", "f(".repeat(n), ")".repeat(n))
            }),
            ("templates", |n| {
                format!("const v = {}1{}", "`${".repeat(n), "}`".repeat(n))
            }),
            ("generics", |n| {
                format!("let t: {}number{} = 1", "Array<".repeat(n), ">".repeat(n))
            }),
            ("not", |n| format!("x = {}1", "!".repeat(n))),
            ("typeof", |n| format!("x = {}1", "typeof ".repeat(n))),
            ("await", |n| format!("x = {}1", "await ".repeat(n))),
            ("new", |n| format!("x = {}X", "new ".repeat(n))),
            ("ternary", |n| format!("x = {}1", "a ? b : ".repeat(n))),
            ("assign", |n| format!("{}1", "a = ".repeat(n))),
            ("arrows", |n| format!("f = {}1", "a => ".repeat(n))),
            ("plus", |n| format!("x = 1{}", " + 1".repeat(n))),
            ("pow", |n| format!("x = 1{}", " ** 1".repeat(n))),
            ("member", |n| format!("x = a{}", ".b".repeat(n))),
            ("call chain", |n| format!("x = f{}", "()".repeat(n))),
            ("else if", |n| {
                format!("{} {{}}", "if (a) {} else ".repeat(n))
            }),
            ("else if ;", |n| {
                format!("{}z;", "if (a) x; else ".repeat(n))
            }),
            ("labels", |n| {
                format!("{}1", (0..n).map(|i| format!("l{i}: ")).collect::<String>())
            }),
            ("as", |n| format!("x = y{}", " as any".repeat(n))),
            // Found by the fuzz target (tests/fuzz/typescript/13-type-arguments-chain.ts):
            // 7,990 levels passed the guard and overflowed 8 MiB.
            ("type arguments", |n| format!("c{}", "<st".repeat(n))),
            ("mixed", |n| {
                format!("x = {}1{}", "(!a ? b : ".repeat(n), ")".repeat(n))
            }),
        ];
        let handle = std::thread::Builder::new()
            .stack_size(8 * 1024 * 1024)
            .spawn(move || {
                for (name, shape) in shapes {
                    // The largest n the guard accepts.
                    let (mut lo, mut hi) = (1usize, 2usize);
                    while check_nesting(&shape(hi)).is_ok() {
                        lo = hi;
                        hi *= 2;
                        assert!(hi < 1 << 22, "{name}: the guard never triggers");
                    }
                    while hi - lo > 1 {
                        let mid = (lo + hi) / 2;
                        if check_nesting(&shape(mid)).is_ok() {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    // Parses (or fails with an ordinary error) without overflowing.
                    let _ = prepare_program(&shape(lo), Language::TypeScript);
                }
            })
            .expect("spawn");
        handle.join().expect("oxc overflowed an 8 MiB stack");
    }
}
