//! Shared harness of the end-to-end tests and the benchmark: locate the real binaries, start
//! the real daemon in-process (real workers, real socket), and an in-process tool source for
//! tests to call.
//!
//! - [`binaries`]: where `airlock-worker`, `airlockd`, `airlock` were built; the escape-probe
//!   worker build.
//! - [`test_daemon`]: [`TestDaemon`], a daemon on a temporary socket.
//! - [`test_tools`]: the `test` tool namespace (echo, add, sleep, fail, …).
//! - [`ledger`]: the `ledger` namespace, a service with side effects (sessions' tests).
//! - [`real_daemon`]: the real `airlockd` binary as a process of its own, on a policy file.
//! - [`load`]: the load suite (concurrent clients, a mix of programs, the daemon's resources).
//! - [`processes`]: finding and inspecting the daemon's worker processes.
//! - [`mcp_peers`]: real MCP servers (npm, PyPI) the tests talk to.
//! - [`conformance`]: the MCP conformance suite, and a TCP door to a daemon for it.
//! - [`fault_server`]: the fault-injection MCP server (`rmcp` server side) as a `[[server]]`.
//! - [`type_check`]: `tsc` (from npm) over a generated SDK and a program.
//! - [`raw_http`]: byte-exact HTTP requests for the escape corpus's hostile request targets.
//! - [`bench`]: what the benches share (a trivial execution timed, a pool waited for, many
//!   clients at once, binaries no older than their sources).
//! - [`another_principal`]: uid 65534 as a second principal, through the real CLI, for the
//!   tests that one principal cannot reach what another made.

pub mod another_principal;
pub mod bench;
pub mod binaries;
pub mod conformance;
pub mod fault_server;
pub mod ledger;
pub mod load;
pub mod mcp_peers;
pub mod processes;
pub mod raw_http;
pub mod real_daemon;
pub mod test_daemon;
pub mod test_tools;
pub mod type_check;

pub use test_daemon::{DaemonOptions, TestDaemon};
