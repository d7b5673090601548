//! The Airlock supervisor: the `airlockd` daemon and the `airlock` CLI as a library.
//!
//! Folders name the concepts:
//! - [`daemon`]: [`daemon::run`], the whole daemon given a config, a listener and a shutdown
//!   future (what `airlockd` and the tests call); systemd and the socket's place.
//! - [`api`]: the front doors; [`api::http`] is the HTTP/JSON agent API on the Unix socket.
//! - `execution`: one execution: worker checkout, the contract check, tool brokering,
//!   deadline, response.
//! - [`tools`]: the `ToolSource` trait, the registry, argument checks, the catalogue, and the
//!   sources ([`tools::sources`]: MCP, OpenAPI, GraphQL).
//! - [`workers`]: spawning (exec on a dedicated thread), pidfd watching, reaping, the pool.
//! - [`generation`]: one loaded policy and what was built from it; reload builds the next.
//! - [`secrets`]: the credential store only the supervisor reads, and the secret scanner.
//! - [`sdk`]: the tool catalogue as TypeScript, search and token figures.
//! - [`audit_log`]: the audit trail of executions and tool calls (SQLite, WAL).
//! - [`journal`]: sessions and the replay journal of their tool calls (SQLite, WAL), so a
//!   re-run never repeats a side effect and an execution cut off by a restart can finish.
//! - [`learned_types`]: output types learned from the results programs get (shapes only,
//!   SQLite), and drift from declared output schemas.
//!
//! Leaves: [`agent_api`] (the JSON shapes shared with clients), `metrics` (`GET /metrics`),
//! `rate_limiter` (per-principal token buckets), `determinism` (each run's clock and seeds), `state_files` (the state files' private
//! directory and SQLite schema versions), [`client`] (a client for the agent API:
//! CLI, tests, benchmark).

// Sizes and counts here come from untrusted hands (frames, requests, answers, files): a cast
// that could truncate or wrap must say why it cannot, or not be a cast (tests are exempt).
#![cfg_attr(
    not(test),
    warn(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss
    )
)]

pub mod agent_api;
pub mod api;
pub mod audit_log;
pub mod client;
pub mod daemon;
pub(crate) mod determinism;
pub(crate) mod execution;
pub mod generation;
pub mod journal;
pub mod learned_types;
pub(crate) mod metrics;
pub(crate) mod rate_limiter;
pub mod sdk;
pub mod secrets;
pub(crate) mod state_files;
pub mod tools;
pub mod workers;

pub use daemon::{DaemonConfig, Sighup, run};
