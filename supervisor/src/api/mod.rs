//! The front doors: how agents reach the daemon. `http` is the agent API (HTTP/1.1 and JSON
//! on the Unix socket); `mcp` is Airlock as an MCP server, at `/mcp` on the same socket and
//! on stdio through `airlock mcp`. The doors only translate: admission, limits and the execution itself
//! belong to the execution service, tools to `crate::tools`.

pub mod http;
pub mod mcp;
