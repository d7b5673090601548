//! The worker's TypeScript stripper, compiled here from the worker's own files: the worker is a
//! binary, so its fuzz target cannot be reached as a library's. The three need only oxc
//! and `airlock-proto`, and sit here in the module tree they have in the worker
//! (`language::javascript`), so their `super::` paths resolve as there.

#[path = "../../../worker/src/language/javascript/typescript/mod.rs"]
#[allow(dead_code, reason = "the worker uses more of the stripper than the fuzz target")]
mod typescript;

#[path = "../../../worker/src/language/javascript/tool_references.rs"]
mod tool_references;

#[path = "../../../worker/src/language/javascript/fuzz.rs"]
pub mod fuzz;
