//! Worker processes: starting them from one dedicated thread, by a fork of the zygote
//! (`zygote`) or by `exec`, watching and reaping them through pidfds (`process`), the
//! handshake and the pre-started pool (`pool`).
//!
//! Nothing here knows about programs, tools or policy: a worker is a locked-down process with
//! a socket, started with the ceilings it is given.

pub mod pool;
pub mod process;
pub(crate) mod zygote;
