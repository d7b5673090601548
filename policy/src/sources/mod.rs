//! The tables that name tool sources: `[[server]]` (MCP servers, `server`), `[[openapi]]`
//! (OpenAPI documents, `openapi`) and `[[graphql]]` (GraphQL endpoints, `graphql`), and the
//! settings they share (literal or `{ secret = "…" }` values, names, call limits).
//!
//! Only the format and its validation live here: nothing reads a document, a secret or the
//! network (the supervisor does, from what these tables say).

pub mod graphql;
pub mod openapi;
pub mod server;
#[cfg(test)]
mod test_support;
