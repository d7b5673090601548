//! The TypeScript SDK models browse and programs are checked against: every tool of the
//! catalogue as a typed function.
//!
//! - [`schema_types`]: JSON Schema → TypeScript types (deterministic, always valid).
//! - [`sdk_files`]: the file tree (`README.md`, `tools.d.ts`, `servers/<ns>/…`).

pub mod schema_types;
pub mod sdk_files;

pub use sdk_files::{SdkFiles, SdkTool};
