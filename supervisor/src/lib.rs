//! The Airlock supervisor: the `airlockd` daemon and the `airlock` CLI as a library.
//!
//! - [`daemon`]: [`daemon::run`], the whole daemon given a config, a listener and a shutdown
//!   future (what `airlockd` and the tests call).
//! - [`control_socket`]: the HTTP/JSON agent API on the Unix socket, peer credentials.
//! - [`agent_api`]: request, response and event JSON types shared with clients.
//! - [`audit_log`]: the audit trail of executions and tool calls (SQLite, WAL), its writer thread,
//!   rotation and queries (`airlock audit`).
//! - [`argument_schema`]: tool arguments checked against the tool's JSON Schema.
//! - [`execution`]: one execution: worker checkout, tool brokering, deadline, response.
//! - [`metrics`]: counters and the Prometheus exposition for `GET /metrics`.
//! - [`policy_generation`]: one loaded policy and what was built from it; reload builds the next.
//! - [`rate_limiter`]: per-principal executions and tool calls per minute (token buckets).
//! - [`worker_pool`]: pre-started locked-down workers and the worker handshake.
//! - [`worker_process`]: spawning (exec on a dedicated thread), pidfd watching, reaping.
//! - [`tool_source`]: the `ToolSource` trait and the registry that routes tool calls.
//! - [`tool_catalogue`]: a caller's tools as an SDK and search index, cached per principal.
//! - [`typescript_sdk`]: the tool catalogue as TypeScript (types from JSON Schema).
//! - [`token_figures`]: `airlock sdk stats`: tokens of classic tool definitions vs the SDK's entry point.
//! - [`mcp_server`]: a `ToolSource` backed by an MCP server (stdio child or Streamable HTTP, `rmcp`).
//! - [`openapi_source`]: a `ToolSource` from an OpenAPI 3.0/3.1 document; the supervisor makes the HTTP calls.
//! - [`graphql_source`]: a `ToolSource` from a GraphQL schema (SDL or introspection); fields become tools.
//! - [`program_contract`]: a program's literal tool calls held against the catalogue before it runs.
//! - [`outbound_http`]: the HTTP client for outside services (rustls with ring, no redirects).
//! - [`secret_store`]: the credential store that only the supervisor reads.
//! - [`secret_scanner`]: known secrets and secret-shaped text found and redacted (text, JSON,
//!   streams, the daemon's own log).
//! - [`socket_path`]: default socket location and safe binding.
//! - [`systemd`]: sd_notify readiness/watchdog and socket activation.
//! - [`client`]: a client for the agent API (CLI, tests, benchmark).

pub mod agent_api;
pub mod argument_schema;
pub mod audit_log;
pub mod client;
pub mod control_socket;
pub mod daemon;
pub mod execution;
pub mod graphql_source;
pub mod mcp_server;
pub mod metrics;
pub mod openapi_source;
pub mod outbound_http;
pub mod policy_generation;
pub mod program_contract;
pub mod rate_limiter;
pub mod secret_scanner;
pub mod secret_store;
pub mod socket_path;
pub mod systemd;
pub mod token_figures;
pub mod tool_catalogue;
pub mod tool_source;
pub mod typescript_sdk;
pub mod worker_pool;
pub mod worker_process;

pub use daemon::{DaemonConfig, run};
