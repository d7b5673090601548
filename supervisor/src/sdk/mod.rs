//! The SDK models browse and programs are checked against: every tool of the catalogue as a
//! typed function, in TypeScript (the default) or Python.
//!
//! - `schema_types`: JSON Schema → TypeScript types (deterministic, always valid).
//! - `sdk_files`: the file tree (`README.md`, `tools.d.ts`, `servers/<ns>/…`).
//! - `python_types`, `python_files`: the same in Python (`.pyi` stubs: TypedDicts and
//!   keyword-only `async def`s), for callers that ask for `language=python`.
//! - `tool_search`: BM25 search over the tools, answering with one-line signatures (in
//!   TypeScript, or in Python on request).
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

use std::sync::OnceLock;

/// The language an SDK is written in: TypeScript unless a caller asks for Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Language {
    #[default]
    TypeScript,
    Python,
}

/// A `language` that is neither `typescript` nor `python`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown SDK language `{0}`: the accepted ones are `typescript` (the default) and `python`"
)]
pub struct UnknownLanguage(pub String);

impl Language {
    /// The accepted names, for hints and schemas.
    pub const NAMES: [&'static str; 2] = ["typescript", "python"];

    /// `typescript` or `python` (as `GET /v1/sdk?language=`, `read_sdk` and the CLI take it).
    pub fn parse(name: &str) -> Result<Language, UnknownLanguage> {
        match name {
            "typescript" => Ok(Language::TypeScript),
            "python" => Ok(Language::Python),
            other => Err(UnknownLanguage(other.chars().take(100).collect())),
        }
    }

    /// [`Self::parse`] of an optional value: TypeScript when absent (or empty).
    pub fn parse_optional(name: Option<&str>) -> Result<Language, UnknownLanguage> {
        match name {
            None | Some("") => Ok(Language::TypeScript),
            Some(name) => Language::parse(name),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Language::TypeScript => "typescript",
            Language::Python => "python",
        }
    }
}

/// One catalogue's SDK: its files and its search index, built together; the tree in Python is
/// built from the same tools the first time a caller asks for it.
#[derive(Debug)]
pub struct Sdk {
    pub files: SdkFiles,
    pub search: ToolSearch,
    tools: Vec<SdkTool>,
    python: OnceLock<SdkFiles>,
}

impl Sdk {
    pub fn new(tools: &[SdkTool]) -> Sdk {
        Sdk::from_tools(tools.to_vec())
    }

    /// [`Self::new`], keeping `tools` for the Python tree without a copy.
    pub fn from_tools(tools: Vec<SdkTool>) -> Sdk {
        Sdk {
            files: SdkFiles::generate(&tools),
            search: ToolSearch::new(&tools),
            tools,
            python: OnceLock::new(),
        }
    }

    /// The file tree in `language`.
    pub fn files_in(&self, language: Language) -> &SdkFiles {
        match language {
            Language::TypeScript => &self.files,
            Language::Python => self
                .python
                .get_or_init(|| python_files::generate(&self.tools)),
        }
    }
}
