//! The end-to-end tests, one module per feature, in one binary: each starts the real daemon
//! (in process, or `airlockd` as a process of its own) with real confined workers.
//!
//! Tests whose assertions read process-wide state (the test process's children, its
//! descriptors, its resident memory) or time under load keep a binary of their own beside
//! this one (`tests/tests/*.rs`), so that other tests running at the same time cannot move
//! what they measure.

mod approvals;
mod audit;
mod client_libraries;
mod client_tools;
mod coercion;
mod confined_servers;
mod daemon_faults;
mod error_explanations;
mod executions;
mod forwarded_requests;
mod graphql_sources;
mod hostile_programs;
mod house_rules;
mod information_flow;
mod install_styles;
mod journal_bounds;
mod learned_types;
mod lifecycle;
mod mcp_conformance;
mod mcp_facade;
mod mcp_transports;
mod mistakes_corpus;
mod openapi_sources;
mod output_budget;
mod package;
mod policy_reload;
mod python;
mod python_mistakes;
mod python_sdk;
mod sandbox;
mod sdk_discovery;
mod sdk_real_documents;
mod secret_scanning;
mod secrets;
mod server_confinement;
mod server_network;
mod servers_cli;
mod session_restart;
mod session_store;
mod sessions;
mod systemd_units;
mod tool_search_quality;
mod typescript_sdk;
