//! The front doors: how agents reach the daemon. `http` is the agent API (HTTP/1.1 and JSON
//! on the Unix socket). The doors only translate: admission, limits and the execution itself
//! belong to the execution service, tools to `crate::tools`.

pub mod http;
