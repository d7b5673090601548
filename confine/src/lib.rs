//! Confinement of tool servers. A stdio MCP server is a whole third-party program (Node,
//! Python), started by the daemon; this crate is what stands between it and everything the
//! daemon holds.
//!
//! `airlockd` never confines a server in its own process (it is multi-threaded, and what must
//! happen between fork and exec is more than is safe there). It execs the `airlock-confine`
//! binary instead, with a [`Profile`] the supervisor made from the policy. The launcher is a
//! fresh single-threaded process: it applies the layers in one straight sequence
//! ([`lockdown`]) and then execs the server.
//!
//! - [`profile`]: what a server may reach (the wire format between daemon and launcher);
//! - [`lockdown`]: the sequence (namespaces, `/proc`, rlimits, Landlock, capabilities,
//!   `no_new_privs`, seccomp);
//! - [`denied_syscalls`]: the seccomp deny list, as reviewed data with a reason per entry.
//!
//! It knows nothing of the policy file, MCP or the daemon's state: it is told paths and numbers.

pub mod denied_syscalls;
pub mod lockdown;
pub mod profile;

pub use profile::{Mode, Network, Profile, RunAs, ServerLimits};

/// The file descriptor on which the launcher reports a failed layer to the daemon (`error:
/// …` lines) or a skipped one in best-effort mode (`warning: …`). It is closed on exec, so the
/// daemon reads end-of-file once the server runs.
pub const STATUS_FD: i32 = 3;

/// Where a server with a network list finds the daemon's proxy, inside its own network
/// namespace (so no other process can take the port, nor reach the proxy through it).
pub const PROXY_PORT: u16 = 3128;

/// The line the launcher sends with the proxy's listening socket on the status socket.
pub const PROXY_LISTENER_LINE: &str = "proxy-listener";
