//! No code. This crate exists for its `[dependencies]`: the features other workspace members
//! turn on in the daemon's dependencies, turned on always, so that airlockd's crates get the
//! same symbol names in every build and its profile (PGO) matches (see `Cargo.toml`).
