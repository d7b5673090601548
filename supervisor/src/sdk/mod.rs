//! The TypeScript SDK models browse and programs are checked against: every tool of the
//! catalogue as a typed function.
//!
//! - `schema_types`: JSON Schema → TypeScript types (deterministic, always valid).
//! - `sdk_files`: the file tree (`README.md`, `tools.d.ts`, `servers/<ns>/…`).
//! - `tool_search`: BM25 search over the tools, answering with one-line signatures.
//! - [`token_figures`]: `airlock sdk stats`: tokens of classic tool definitions vs the SDK's
//!   entry point.
//!
//! Pure text generation from tool descriptions: nothing here calls a tool, reads policy or
//! touches a secret.

pub(crate) mod python_files;
pub(crate) mod python_types;
pub(crate) mod schema_types;
pub(crate) mod sdk_files;
pub mod token_figures;
pub(crate) mod tool_search;

#[cfg(any(test, fuzzing))]
pub mod fuzz;

pub use sdk_files::{SdkFiles, SdkTool};
pub use tool_search::{SearchHit, ToolSearch};

/// One catalogue's SDK: its files and its search index, built together.
#[derive(Debug)]
pub struct Sdk {
    pub files: SdkFiles,
    pub search: ToolSearch,
}

impl Sdk {
    pub fn new(tools: &[SdkTool]) -> Sdk {
        Sdk {
            files: SdkFiles::generate(tools),
            search: ToolSearch::new(tools),
        }
    }
}
