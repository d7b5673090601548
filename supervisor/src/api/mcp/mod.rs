//! The MCP door: Airlock as an MCP server, so agents that speak MCP get code mode over the
//! operator's tools with one line of configuration.
//!
//! - `server`: the rmcp `ServerHandler` (`search_tools`, `read_sdk`, `execute`,
//!   `submit_results`, `resume`, `status`) and the Streamable HTTP service at `/mcp` on the
//!   daemon's socket;
//! - `tools`: the tools' definitions, written for a model; `instructions`: the entry point a
//!   client shows its model, built from the caller's own SDK;
//! - `render`: execution responses as MCP tool results;
//! - `relay`: `airlock mcp`, the stdio transport, which carries each message to `/mcp` on the
//!   socket (so the caller's uid decides the principal, as on every door).
//!
//! Like the HTTP door, this one only translates: who the caller is comes from the kernel
//! (`SO_PEERCRED`, through the request's extensions), what it may do from the policy in force,
//! and every execution goes through the execution service. It holds no state between
//! requests (stateless Streamable HTTP: no sessions to bound or to lose on a restart).

mod instructions;
pub mod relay;
mod render;
mod server;
mod tools;

pub use instructions::instructions;
pub use server::{Admitted, MAX_REQUEST_BODY_BYTES, McpDoor, service};
