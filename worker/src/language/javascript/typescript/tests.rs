//! The preparation end to end: what has TypeScript syntax, what is spliced or printed and how,
//! what is refused and where, positions and stack traces, and the nesting guard held against
//! oxc on an 8 MiB stack.

use super::nesting::MAX_NESTING;
use super::scan::{Scan, Unsupported};
use super::spelling::misspelled_name;
use super::*;
use airlock_proto::ErrorKind;

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
fn dynamic_import_and_host_apis_are_refused_before_the_program_runs() {
    // At run time they would fail only when reached, after the tool calls before them.
    for language in [Language::JavaScript, Language::TypeScript] {
        let e = syntax("const a = 1;\nawait import('os')", language);
        assert_eq!((e.line, e.column), (Some(2), Some(7)), "{e:?}");
        assert!(
            e.message.starts_with("`import()` is not available"),
            "{e:?}"
        );
        for (code, name, column) in [
            ("require('fs')", "require", 1),
            ("const x = 1;\nawait fetch('https://x')", "fetch", 7),
            ("clearTimeout(1)", "clearTimeout", 1),
            ("new XMLHttpRequest()", "XMLHttpRequest", 5),
            ("const p = process.argv", "process", 11),
            (
                "if (typeof fs === 'object') { fs.readFileSync('x') }",
                "fs",
                31,
            ),
        ] {
            let e = syntax(code, language);
            assert_eq!(e.column, Some(column), "{code}: {e:?}");
            assert!(
                e.message
                    .starts_with(&format!("`{name}` is not available: ")),
                "{code}: {e:?}"
            );
        }
        // The first use in the program is the one named, whatever the names' order.
        let e = syntax("fs.x;\nrequire('y');\nfetch('z')", language);
        assert!(e.message.starts_with("`fs` "), "{e:?}");
        let e = syntax("fetch('z');\nfs.x", language);
        assert!(e.message.starts_with("`fetch` "), "{e:?}");
    }
    // Declared, a property, a key, a string, `typeof`: not a free use.
    js("const require = (m) => m;\nrequire('fs')");
    js("function f(fetch, process) { return fetch(process) }\nf((x) => x, 1)");
    js(
        "const o = { require: 1, setTimeout: 2 };\n[o.require, o.setTimeout, 'fetch', typeof fetch]",
    );
    ts("let t: typeof setTimeout | undefined;\nt");
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
