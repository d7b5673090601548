//! Fuzzing the TypeScript stripper (`tests/fuzz/typescript/`, docs/testing.md "Fuzzing").
//!
//! Each input is prepared as TypeScript and as JavaScript by [`prepare_program`] (nesting
//! guard, oxc's parser and semantic checks, the tool-reference scan, type stripping, the
//! completion rewrite, code generation or the splice) on an 8 MiB stack, the worker's main
//! thread's, which the guard's limits are measured against.
//! Beyond "no panic" and "no stack overflow": the script made from an accepted program parses
//! again as JavaScript, with no early error; a spliced one means what the code generator's
//! print of it means; it is the same whether or not the transformer was skipped for it; its
//! positions map back into the program; and a refused program's error is a syntax error
//! located inside it.
//!
//! [`target`] is the one input's checks: `cargo test` replays the seeds through it
//! (`fuzz_seeds_typescript`), and the libFuzzer build (`fuzz/libfuzzer/`, `--cfg fuzzing`)
//! calls it for every input, both on an 8 MiB stack. The worker is a binary, so the libFuzzer
//! build compiles this file, the `typescript/` folder and `tool_references.rs` into its
//! `typescript` target, in the same module tree (they need only oxc and `airlock-proto`).

use super::typescript::{
    normalised, prepare_program, prepare_program_generated, prepare_program_transforming,
};
use airlock_fuzz::{Fuzz, Outcome};
use airlock_proto::{ErrorKind, Language};
use oxc::allocator::Allocator;
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;

/// The target's settings: its seeds, dictionary, max length and stack.
pub fn fuzz() -> Fuzz {
    // The worker's main thread's stack, which the nesting guard is measured against.
    let fuzz = Fuzz::new("typescript").stack(8 << 20);
    fuzz.max_len(32 * 1024).dictionary(&[
        "interface I { a: number; b?: string }\n",
        "type T<U> = U extends string ? { [K in keyof U]: U[K] } : never;\n",
        "enum E { A = 1, B = A << 2, C = \"c\" }\n",
        "const enum C { X }\n",
        "namespace N { export const x = 1; }\n",
        "declare module \"m\" { }\n",
        "declare global { }\n",
        "export declare global { }\n",
        "abstract class A<T> implements I { private x!: T; constructor(public y: number) { super(); } }\n",
        "import type { T } from \"./t\";\n",
        "export type { T };\n",
        "export {};\n",
        "await tools.github.search_issues({ q: \"x\", limit: 3 });\n",
        "tools.a.b",
        ": number",
        ": string[]",
        "<T,>",
        "<T extends object = {}>",
        " as const",
        " as unknown as T",
        " satisfies T",
        "!",
        "?.",
        "??=",
        "=>",
        "async ",
        "await ",
        "function* ",
        "yield ",
        "return ",
        "@decorator\n",
        "accessor ",
        "readonly ",
        "declare ",
        "abstract ",
        "override ",
        "unique symbol",
        "infer U",
        "keyof typeof x",
        "`a${b}c`",
        "/[\\p{L}--[a-z]]/v",
        "#private",
        "using x = y;\n",
        "label: ",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "<",
        ">",
        "/*",
        "*/",
        "//",
        "\n",
        "'",
        "\"",
        "\\u{10FFFF}",
        "\u{2028}",
        "#!/usr/bin/env node\n",
    ])
}

/// The checks on one input (as TypeScript and as JavaScript), the entry point of the seed
/// replay and of the libFuzzer binary.
pub fn target(data: &[u8]) -> Outcome {
    let code = String::from_utf8_lossy(data);
    check(&code, Language::TypeScript).and(check(&code, Language::JavaScript))
}

fn check(code: &str, language: Language) -> Outcome {
    match prepare_program(code, language) {
        Ok(prepared) => {
            // A program spliced into the wrapper must mean what the code generator's print
            // of it means. (Only a spliced one is prepared differently by the two; each
            // preparation is a parse, and the parser takes long on some inputs.)
            let generated;
            let printed = if prepared.spliced() {
                generated = prepare_program_generated(code, language)
                    .expect("the program prepares through the code generator too");
                assert_eq!(
                    normalised(&prepared.script),
                    normalised(&generated.script),
                    "the spliced script differs from the printed one"
                );
                &generated.script
            } else {
                &prepared.script
            };
            // A TypeScript program the transformer was skipped for (no TypeScript syntax)
            // must come out exactly as it would have through the transformer.
            if language == Language::TypeScript {
                let transformed = prepare_program_transforming(code, language)
                    .expect("the program prepares with the transformer too");
                assert_eq!(
                    *printed, transformed.script,
                    "skipping the transformer changed the script"
                );
            }
            let allocator = Allocator::default();
            let parsed = Parser::new(&allocator, &prepared.script, SourceType::mjs())
                .with_options(ParseOptions {
                    parse_regular_expression: true,
                    ..ParseOptions::default()
                })
                .parse();
            assert!(
                parsed.diagnostics.is_empty(),
                "the prepared script does not parse: {:?}\n--- script ---\n{}",
                parsed.diagnostics.first().map(ToString::to_string),
                prepared.script
            );
            // The parser leaves some early errors (an `export` inside a function, a
            // redeclaration) to the semantic checks; the engine has them all.
            let semantic = SemanticBuilder::new()
                .with_check_syntax_error(true)
                .build(&parsed.program);
            assert!(
                semantic.diagnostics.is_empty(),
                "the prepared script has an early error: {:?}\n--- script ---\n{}",
                semantic.diagnostics.first().map(ToString::to_string),
                prepared.script
            );
            let lines = line_bound(code);
            let script_lines = u32::try_from(prepared.script.split('\n').count()).unwrap_or(0);
            for line in 1..=script_lines.min(64) {
                for column in [1, 2, 40, u32::MAX] {
                    if let Some((l, c)) = prepared.positions.original(line, column) {
                        assert!(
                            (1..=lines).contains(&l) && c >= 1,
                            "script {line}:{column} maps to {l}:{c}, outside the {lines} lines"
                        );
                    }
                }
            }
            let references = prepared
                .tool_references
                .as_ref()
                .map_or(0, |r| r.calls.len());
            Outcome::hash_of(&("ok", language == Language::TypeScript, references.min(3)))
        }
        Err(error) => {
            assert_eq!(error.kind, ErrorKind::Syntax, "{error:?}");
            let lines = line_bound(code);
            if let Some(line) = error.line {
                // One past the last line for an error at the end.
                assert!(
                    line >= 1 && line <= lines.saturating_add(1),
                    "error at line {line} of a program of {lines} lines: {}",
                    error.message
                );
            }
            if let Some(column) = error.column {
                assert!(column >= 1, "error at column 0: {}", error.message);
            }
            Outcome::of(&error.message)
        }
    }
}

/// The most lines `code` can have: JavaScript ends lines at "\n", "\r", U+2028 and U+2029.
fn line_bound(code: &str) -> u32 {
    let ends = code.matches(['\n', '\r', '\u{2028}', '\u{2029}']).count();
    u32::try_from(ends).map_or(u32::MAX, |n| n.saturating_add(1))
}

#[test]
fn fuzz_seeds_typescript() {
    fuzz().replay(target);
}
