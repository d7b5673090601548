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
//! - [`python`]: Python, on pydantic's monty interpreter.
//!
//! A worker is started before anyone knows the language of the program it will get, so it
//! starts every language ([`Runtimes`]) and runs the one `Start` names.

use crate::ipc::Ipc;
use airlock_proto::frame::blocking::IoFrameError;
use airlock_proto::{
    ErrorKind, ExecError, Language, Outcome, StartExecution, SupervisorMessage, WorkerStats,
};

pub mod javascript;
pub mod python;

/// Every language's runtime, started; one of them runs the program.
pub struct Runtimes {
    javascript: javascript::Engine,
    python: python::Interpreter,
}

impl Runtimes {
    /// Starts every runtime (before lockdown); the error names the language that failed.
    pub fn start() -> Result<Runtimes, String> {
        Ok(Runtimes {
            javascript: javascript::Engine::start().map_err(|e| format!("javascript: {e}"))?,
            python: python::Interpreter::start().map_err(|e| format!("python: {e}"))?,
        })
    }

    /// [`LanguageRuntime::forked`] of every runtime.
    pub fn forked(&self) {
        self.javascript.forked();
        self.python.forked();
    }

    /// Runs `start`'s program in its language's runtime.
    pub fn run(self, start: StartExecution, ipc: &mut Ipc) -> (Outcome, WorkerStats) {
        if javascript::Engine::runs(start.language) {
            // The Python interpreter holds nothing to free.
            self.javascript.run(start, ipc)
        } else if python::Interpreter::runs(start.language) {
            let Runtimes { javascript, python } = self;
            // The process exits right after `Done`; freeing the JavaScript engine would only
            // delay the answer.
            std::mem::forget(javascript);
            python.run(start, ipc)
        } else {
            (
                Outcome::Error(ExecError::new(
                    ErrorKind::Internal,
                    format!(
                        "this airlock-worker cannot run {:?} programs",
                        start.language
                    ),
                )),
                WorkerStats::default(),
            )
        }
    }
}

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

/// Charges `text` (plus one byte for its line break, so empty messages are not free) against
/// a program's output budget of `budget` bytes, of which `used` are spent: what may be sent
/// (`None` if nothing) and whether the budget is now exceeded. The same rule for every
/// language, so a program's output is cut at the same byte whatever it is written in.
pub(crate) fn take_output_budget(
    used: &mut u64,
    budget: u64,
    mut text: String,
) -> (Option<String>, bool) {
    let need = text.len() as u64 + 1;
    if used.saturating_add(need) <= budget {
        *used += need;
        return (Some(text), false);
    }
    let room = budget.saturating_sub(*used + 1);
    *used = budget;
    let mut cut = usize::try_from(room).unwrap_or(usize::MAX).min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    ((!text.is_empty()).then_some(text), true)
}

/// Sends the program's literal tool calls (`sent` is that send's outcome) and reads the
/// supervisor's verdict from `answer` before anything of the program runs, so a program the
/// contract check refuses has no effect at all: `Ok(true)` to run it, `Ok(false)` when the
/// supervisor stopped it first (a refusal, the deadline passing while it listed tools, or a
/// client that went away; the supervisor reports which, the caller tells the deadline apart).
pub(crate) fn contract_verdict(
    sent: Result<(), IoFrameError>,
    answer: impl FnOnce() -> Result<SupervisorMessage, IoFrameError>,
) -> Result<bool, ExecError> {
    if let Err(e) = sent {
        return Err(internal(format!(
            "cannot send the program's tool calls to the supervisor: {e}"
        )));
    }
    match answer() {
        Ok(SupervisorMessage::Proceed) => Ok(true),
        Ok(SupervisorMessage::Cancel) => Ok(false),
        Ok(other) => Err(internal(format!(
            "the supervisor answered the program's tool calls with {other:?} instead of Proceed"
        ))),
        Err(e) => Err(internal(format!(
            "no answer to the program's tool calls: {e}"
        ))),
    }
}

/// The error of a program the supervisor stopped before it ran, its deadline not passed.
pub(crate) fn cancelled_before_run() -> ExecError {
    ExecError::new(
        ErrorKind::Cancelled,
        "the supervisor stopped the program before it ran",
    )
}

pub(crate) fn internal(message: impl Into<String>) -> ExecError {
    ExecError::new(ErrorKind::Internal, message)
}

/// `64 MiB`, `512 KiB` or `1000-byte`.
pub(crate) fn bytes_text(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n}-byte")
    }
}
