//! Fuzzing the JSON Schema → TypeScript generator (`tests/fuzz/schema_types/`,
//! docs/testing.md "Fuzzing").
//!
//! Each input is a tool's input schema when it is JSON, and is also read as choices that
//! build a schema from JSON Schema's keywords (with `$ref`s into itself); each schema becomes
//! a tool's input and output schema, and [`SdkFiles::generate`] writes the tool's SDK files.
//! Beyond "no panic": every TypeScript file parses with oxc and passes its syntax checks
//! (redeclarations included), every Python stub of the tree in Python
//! ([`super::python_files`]) parses with ruff's parser, and the files stay in proportion to
//! the schema.
//!
//! [`target`] is the one input's checks: `cargo test` replays the seeds through it
//! (`fuzz_seeds_schema_types`), and the libFuzzer build (`fuzz/libfuzzer/`, `--cfg fuzzing`)
//! calls it for every input.

use super::sdk_files::{SdkFiles, SdkTool};
use super::tool_search::{ToolSearch, signature};
use airlock_fuzz::{Fuzz, Outcome, Unstructured, json_value};
use oxc::allocator::Allocator;
use oxc::parser::Parser;
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use serde_json::Value;

const KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "prefixItems",
    "additionalItems",
    "additionalProperties",
    "enum",
    "const",
    "oneOf",
    "anyOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "nullable",
    "title",
    "description",
    "default",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "deprecated",
    "a",
    "b",
    "x-y",
    "0",
    "constructor",
    "__proto__",
];
const WORDS: &[&str] = &[
    "object",
    "string",
    "number",
    "integer",
    "boolean",
    "null",
    "array",
    "#",
    "#/",
    "#/$defs/a",
    "#/$defs/b",
    "#/%24defs/a",
    "#/definitions/a",
    "#/properties/a",
    "#/properties/a/items",
    "#/$defs/a/properties/b",
    "#/a",
    "#/0",
    "#/oneOf/0",
    "#/$defs/~1",
    "http://example.invalid/s.json",
    "*/",
    "/*",
    "\"",
    "'",
    "`",
    "\\",
    "\n",
    "\u{2028}",
    "a b",
    "default",
    "class",
    "}",
    "é",
];

/// The target's settings: its seeds, dictionary and max length.
pub fn fuzz() -> Fuzz {
    Fuzz::new("schema_types").dictionary(&[
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "{\"type\":\"object\",\"properties\":{\"a\":",
        "{\"$ref\":\"#\"}",
        "{\"$ref\":\"#/$defs/a\"}",
        "\"$defs\":{\"a\":",
        "\"items\":",
        "\"oneOf\":[",
        "\"allOf\":[",
        "\"anyOf\":[",
        "\"enum\":[",
        "\"const\":",
        "\"nullable\":true",
        "\"additionalProperties\":",
        "\"prefixItems\":[",
        "\"description\":\"*/\"",
        "\"required\":[\"a\"]",
    ])
}

/// The checks on one input, the entry point of the seed replay and of the libFuzzer binary;
/// the outcome is what the random mutator's pool is kept by.
pub fn target(data: &[u8]) -> Outcome {
    let mut outcome = Outcome::of("schema");
    if let Ok(schema) = serde_json::from_slice::<Value>(data) {
        outcome = outcome.and(generate(schema, data.len()));
    }
    let mut u = Unstructured::new(data);
    let built = json_value(&mut u, KEYS, WORDS, 8);
    let size = serde_json::to_vec(&built).map_or(0, |b| b.len());
    outcome.and(generate(built, size))
}

fn generate(schema: Value, size: usize) -> Outcome {
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("Fuzzed.")
        .to_owned();
    let tool = SdkTool {
        namespace: "fuzz".into(),
        name: "tool".into(),
        description,
        input_schema: schema.clone(),
        output_schema: Some(schema),
        learned: None,
    };
    let tools = [tool];
    let files = SdkFiles::generate(&tools);
    let mut total = 0;
    let mut features = Vec::new();
    for (path, text) in &files.files {
        total += text.len();
        if path.ends_with(".ts") {
            check_typescript(path, text);
        }
        if path == "servers/fuzz/tool.ts" {
            for feature in [
                "unknown /*",
                "never",
                "[key: string]",
                " | ",
                " & ",
                "[]",
                "export type T",
            ] {
                features.push(text.contains(feature));
            }
            features.push(text.matches("export type").count() > 4);
        }
    }
    // The input and the output type each say the schema once, and each `$ref` declares an
    // alias once: linear in the schema, plus the fixed files.
    assert!(
        total <= 64 * size + 64 * 1024,
        "{total} bytes of SDK for a schema of {size} bytes"
    );
    let python = super::python_files::generate(&tools);
    let mut python_total = 0;
    for (path, text) in &python.files {
        python_total += text.len();
        if path.ends_with(".pyi") {
            check_python(path, text);
        }
    }
    assert!(
        python_total <= 64 * size + 64 * 1024,
        "{python_total} bytes of Python SDK for a schema of {size} bytes"
    );
    let search = ToolSearch::new(&tools);
    let _ = search.search("fuzz tool a", 3);
    let _ = signature(&tools[0]);
    Outcome::hash_of(&features)
}

/// `text` parses as TypeScript and passes oxc's syntax checks.
fn check_typescript(path: &str, text: &str) {
    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path).expect("a .ts path");
    let parsed = Parser::new(&allocator, text, source_type).parse();
    assert!(
        parsed.diagnostics.is_empty(),
        "{path} does not parse: {:?}\n--- {path} ---\n{text}",
        parsed.diagnostics.first().map(ToString::to_string)
    );
    let semantic = SemanticBuilder::new()
        .with_check_syntax_error(true)
        .build(&parsed.program);
    assert!(
        semantic.diagnostics.is_empty(),
        "{path} fails oxc's checks: {:?}\n--- {path} ---\n{text}",
        semantic.diagnostics.first().map(ToString::to_string)
    );
}

/// `text` parses as Python (ruff's parser, the one the worker reads programs with).
fn check_python(path: &str, text: &str) {
    if let Err(e) = ruff_python_parser::parse_module(text) {
        panic!("{path} does not parse as Python: {e:?}\n--- {path} ---\n{text}");
    }
}

#[test]
fn fuzz_seeds_schema_types() {
    fuzz().replay(target);
}

/// A few hundred inputs beyond the seeds, from a fixed generator (the same every run), so
/// the stubs' syntax is checked over many built schemas without the libFuzzer build.
#[test]
fn fuzz_generated_inputs_schema_types() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for length in 0..400usize {
        let data: Vec<u8> = (0..(length % 200) + 8)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[0]
            })
            .collect();
        target(&data);
    }
}
