//! The TypeScript SDK models browse and programs are checked against: every tool of the
//! catalogue as a typed function.
//!
//! - [`schema_types`]: JSON Schema → TypeScript types (deterministic, always valid).

pub mod schema_types;
