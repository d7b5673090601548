//! Tool sources: adapters that speak one protocol each. `mcp` (MCP servers over stdio or
//! Streamable HTTP, `rmcp`), `openapi` (operations of an OpenAPI document), `graphql` (fields
//! of a GraphQL schema), over the shared outbound `http` client and helpers, with their
//! secrets read through `settings`.
//!
//! A source only speaks its protocol: policy, rates, argument checks, concurrency, timeouts,
//! redaction and scanning happen around it in `crate::tools::call`.

pub mod graphql;
pub(crate) mod http;
pub mod mcp;
pub mod openapi;
pub(crate) mod settings;
