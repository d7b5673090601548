//! The one walk over the parsed program ([`Scan`]): whether it has TypeScript syntax (so
//! whether the transformer runs), and the first thing in it a program cannot have (module
//! syntax where it would not be erased, decorators, `import.meta`, a name or literal spelled as
//! the lexer would have refused, [`super::spelling`]).

use super::spelling::{misspelled_name, misspelled_number, misspelled_string};
use oxc::ast::ast::Program;
use oxc::ast::ast::{
    AccessorPropertyType, FunctionType, MethodDefinitionType, PropertyDefinitionType,
};
use oxc::ast::ast::{Declaration, ImportDeclarationSpecifier, Statement};
use oxc::ast::{AstKind, AstType};
use oxc::ast_visit::Visit;

/// Whether `kind` is TypeScript syntax: a node of TypeScript's own, or a TypeScript modifier on
/// a JavaScript node (see [`Scan`]).
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
pub(super) struct Scan<'s> {
    /// The program's text, for what the tree does not keep (how a name was spelled).
    source: &'s str,
    /// Where the statements being visited now are.
    level: Level,
    /// The first thing found that a program cannot have.
    pub(super) unsupported: Option<(oxc::span::Span, Unsupported)>,
    /// Whether a node seen so far is TypeScript's.
    pub(super) typescript: bool,
}

impl<'s> Scan<'s> {
    pub(super) fn of(program: &Program<'s>) -> Scan<'s> {
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

/// What [`Scan`] refuses.
#[derive(Debug, Clone, Copy)]
pub(super) enum Unsupported {
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
    /// `import(…)`: there are no modules to load (the engine would refuse it when reached).
    DynamicImport,
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
    pub(super) fn message(self) -> &'static str {
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
            Unsupported::DynamicImport => {
                "`import()` is not available: a program has no modules to load; it reaches \
                 tools through `tools.<server>.<tool>(args)` (the SDK's README.md lists the \
                 namespaces)"
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

    fn visit_import_expression(&mut self, it: &oxc::ast::ast::ImportExpression<'a>) {
        self.found(it.span, Unsupported::DynamicImport);
        oxc::ast_visit::walk::walk_import_expression(self, it);
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
