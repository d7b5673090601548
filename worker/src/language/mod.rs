//! The languages programs are written in. Each one is a folder that implements
//! [`LanguageRuntime`]: started before lockdown (trusted: no program exists yet), then given
//! exactly one program after it, which it runs to its [`Outcome`] while speaking to the
//! supervisor through the [`Ipc`] it is lent.
//!
//! A language may not touch the lockdown, open files, start threads or processes, or talk to
//! anything but the IPC socket: `main` locks the process down between [`LanguageRuntime::start`]
//! and [`LanguageRuntime::run`], and the seccomp filter kills it if it tries.
//!
//! - [`javascript`]: JavaScript and TypeScript, on QuickJS with oxc for TypeScript.

use crate::ipc::Ipc;
use airlock_proto::{Language, Outcome, StartExecution, WorkerStats};

pub mod javascript;

/// One language's engine, for one program.
pub trait LanguageRuntime: Sized {
    /// Why [`LanguageRuntime::start`] failed.
    type StartError: std::fmt::Display;

    /// Starts the engine before lockdown: everything that needs files or fresh memory
    /// mappings happens here, so that running a program needs neither.
    fn start() -> Result<Self, Self::StartError>;

    /// Called once in a worker just forked from the zygote, before it says `Ready` (no program
    /// exists yet). The fork shares the zygote's memory copy-on-write and has none of its
    /// code pages mapped; whatever a first program would touch is touched here, so those page
    /// faults are taken while the worker waits in the pool instead of while a program runs.
    fn forked(&self) {}

    /// Whether this runtime runs programs written in `language`.
    fn runs(language: Language) -> bool;

    /// Runs the program of `start` to its end (after lockdown, exactly once). Never panics on
    /// any program: every failure is an [`Outcome::Error`].
    fn run(self, start: StartExecution, ipc: &mut Ipc) -> (Outcome, WorkerStats);
}
