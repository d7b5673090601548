//! Credentials and their protection: the store the supervisor alone reads (`store`), and the
//! scanner that finds secrets and secret-shaped text in everything that leaves the daemon
//! towards a worker, an agent or a log (`scanner`).
//!
//! Nothing here may hand a secret's value to anything but a tool source's own settings.

pub mod scanner;
pub mod store;
