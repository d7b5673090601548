//! The errors an execution ends with, as the agent reads them: each one with its kind (an
//! [`ExecutionErrorKind`]) and a hint that says what to do next.

use crate::agent_api::{ExecutionError, ExecutionErrorKind};
use crate::workers::pool::WorkerStartError;
use crate::workers::process::{SpawnError, WorkerExit, signal_name};
use airlock_proto::{ErrorKind, ExecError};

impl ExecutionError {
    /// An error of `kind` with no position, stack or hint yet.
    pub fn new(kind: ExecutionErrorKind, message: impl Into<String>) -> ExecutionError {
        ExecutionError {
            kind,
            name: None,
            message: message.into(),
            line: None,
            column: None,
            stack: None,
            excerpt: None,
            hint: None,
            explanation: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> ExecutionError {
        self.hint = Some(hint.into());
        self
    }
}

/// The worker's own report of how the program failed, with the hint for its kind.
pub fn from_worker(e: ExecError) -> ExecutionError {
    let hint = match &e.explanation {
        Some(explanation) => Some(explained_hint(explanation)),
        None => hint_for(e.kind),
    };
    ExecutionError {
        kind: kind_of(e.kind),
        hint,
        explanation: e.explanation,
        name: e.name,
        message: e.message,
        line: e.line,
        column: e.column,
        stack: e.stack,
        excerpt: None,
    }
}

/// The hint of an error the worker explained (a TypeError on a tool's value): the explanation
/// first, then what to do about it.
fn explained_hint(explanation: &str) -> String {
    if explanation.ends_with("add await") {
        return format!(
            "{explanation}; write `const x = await tools.<namespace>.<tool>(…)` and use x"
        );
    }
    match explained_tool(explanation) {
        Some((namespace, name)) => format!(
            "{explanation}; use what the value has, and see servers/{namespace}/{name}.ts in the \
             SDK for the tool's result type"
        ),
        None => {
            format!("{explanation}; use what the value has")
        }
    }
}

/// The tool whose value an explanation is about (the worker names it as
/// `tools.<namespace>.<tool>`; its SDK file has the result type): namespace and name.
pub(super) fn explained_tool(explanation: &str) -> Option<(&str, &str)> {
    explanation.split_once("tools.").and_then(|(_, rest)| {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .unwrap_or(rest.len());
        rest[..end].split_once('.')
    })
}

fn kind_of(kind: ErrorKind) -> ExecutionErrorKind {
    match kind {
        ErrorKind::Syntax => ExecutionErrorKind::Syntax,
        ErrorKind::Runtime => ExecutionErrorKind::Runtime,
        ErrorKind::Timeout => ExecutionErrorKind::Timeout,
        ErrorKind::MemoryLimit => ExecutionErrorKind::MemoryLimit,
        ErrorKind::StackOverflow => ExecutionErrorKind::StackOverflow,
        ErrorKind::ResultNotJson => ExecutionErrorKind::ResultNotJson,
        ErrorKind::OutputLimit => ExecutionErrorKind::OutputLimit,
        ErrorKind::ToolCallLimit => ExecutionErrorKind::ToolCallLimit,
        ErrorKind::Deadlock => ExecutionErrorKind::Deadlock,
        ErrorKind::Cancelled => ExecutionErrorKind::Cancelled,
        ErrorKind::SandboxViolation => ExecutionErrorKind::SandboxViolation,
        ErrorKind::Internal => ExecutionErrorKind::Internal,
    }
}

fn hint_for(kind: ErrorKind) -> Option<String> {
    Some(match kind {
        ErrorKind::Syntax => "fix the syntax at the given line and column; programs are TypeScript (or JavaScript) scripts, not modules (no import/export), and reach the outside only through tools.*".into(),
        ErrorKind::Timeout => timeout_hint(),
        ErrorKind::MemoryLimit => "process data in smaller pieces or keep fewer values alive; the heap limit is set by the operator (limits.memory)".into(),
        ErrorKind::StackOverflow => "the program recursed too deeply; use a loop or an explicit stack".into(),
        ErrorKind::ResultNotJson => "return plain JSON data: convert BigInt with Number() or String(), remove cycles and functions".into(),
        ErrorKind::OutputLimit => "print less (summaries, counts) and return data as the program's result instead".into(),
        ErrorKind::ToolCallLimit => "make fewer tool calls per execution (batch, filter upstream), or split the work across executions".into(),
        ErrorKind::Deadlock => "every awaited promise must eventually settle; there are no timers or events in the sandbox besides tool calls".into(),
        ErrorKind::SandboxViolation => sandbox_hint(),
        ErrorKind::Runtime | ErrorKind::Cancelled | ErrorKind::Internal => return None,
    })
}

/// A Python program's error gets the hints that speak of Python where the kind's own hint
/// speaks of TypeScript or promises.
pub fn for_python(err: &mut ExecutionError) {
    if let Some(explanation) = &err.explanation {
        // The worker explained an error on a tool's value: the hint says what to do in
        // Python's words (TypeScript's names the SDK's .ts file and `const`).
        err.hint = Some(if explanation.contains("add `await`") {
            format!(
                "{explanation}; write `x = await tools.<namespace>.<tool>(key=value, …)` and use x"
            )
        } else if explained_tool(explanation).is_some() {
            format!("{explanation}; use what the value has")
        } else {
            // Not about a tool's value (the environment): the explanation says what to do.
            explanation.clone()
        });
        return;
    }
    let hint = match err.kind {
        ExecutionErrorKind::Syntax => {
            "fix the syntax at the given line and column; programs run in monty, a subset of \
             Python 3 (docs/agent-api.md, \"Python\")"
        }
        ExecutionErrorKind::ResultNotJson => {
            "return plain JSON data: dicts with string keys, lists, str, int, float, bool and \
             None; convert sets with list() and other values with str()"
        }
        ExecutionErrorKind::Deadlock => {
            "every awaited call must eventually finish; there are no timers or events in the \
             sandbox besides tool calls"
        }
        _ => return,
    };
    err.hint = Some(hint.to_owned());
}

pub fn timeout_hint() -> String {
    "split the work into smaller programs, await fewer slow tool calls, or pass a larger timeout_ms (up to the policy's limits.max_timeout_ms)".into()
}

fn sandbox_hint() -> String {
    "the sandbox allows computation and tool calls only; no files, network, processes or system calls".into()
}

/// The program did not finish within its deadline (`timeout_ms`).
pub fn deadline_passed(timeout_ms: u64) -> ExecutionError {
    ExecutionError::new(
        ExecutionErrorKind::Timeout,
        format!("the program did not finish within its {timeout_ms} ms deadline"),
    )
    .with_hint(timeout_hint())
}

/// The client hung up, so the program was stopped.
pub fn client_gone() -> ExecutionError {
    ExecutionError::new(
        ExecutionErrorKind::Cancelled,
        "the client hung up before the program finished, so it was stopped",
    )
    .with_hint("keep the connection open until the response arrives")
}

/// The execution was cancelled on request (`DELETE /v1/executions/{id}`).
pub fn cancelled() -> ExecutionError {
    ExecutionError::new(
        ExecutionErrorKind::Cancelled,
        "the execution was cancelled on request before the program finished",
    )
    .with_hint("its tool calls so far are in tool_calls; run the program again to redo the work")
}

/// No worker could be had for the execution.
pub fn no_worker(e: &WorkerStartError) -> ExecutionError {
    let error = ExecutionError::new(
        ExecutionErrorKind::Internal,
        format!("could not start a sandboxed worker: {e}"),
    );
    if out_of_resources(e) {
        // The host ran short for a moment (descriptors, memory, processes): the same program
        // runs once it has them again, so the agent should retry, not change its code.
        return error.with_hint("the host is short of resources right now (open files, memory or processes); run the program again in a few seconds — this is not a problem with the program; if it keeps happening, the operator should check the airlockd log and `GET /v1/health`");
    }
    error.with_hint("this is a daemon problem, not a problem with the program; the operator should check the airlockd log and `GET /v1/health`")
}

/// Whether the worker could not be started because a resource ran out (`EMFILE`, `ENFILE`,
/// `ENOMEM`, `EAGAIN`), which passes, rather than a broken installation, which does not.
fn out_of_resources(e: &WorkerStartError) -> bool {
    let io = match e {
        WorkerStartError::Spawn(
            SpawnError::Exec { source, .. }
            | SpawnError::SocketPair(source)
            | SpawnError::Pidfd { source, .. },
        ) => source,
        _ => return false,
    };
    matches!(
        io.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN)
    )
}

/// The worker broke the supervisor protocol and was stopped.
pub fn protocol(detail: &str) -> ExecutionError {
    ExecutionError::new(
        ExecutionErrorKind::Internal,
        format!("the worker broke the supervisor protocol ({detail}); it was stopped"),
    )
    .with_hint("run the program again; if this repeats, the operator should check that airlock-worker matches this airlockd")
}

/// Explains a worker that ended without `Done`, from its exit status.
pub fn crashed(context: &str, exit: Option<WorkerExit>) -> ExecutionError {
    match exit {
        Some(WorkerExit { signal: Some(libc::SIGSYS), .. }) => ExecutionError::new(
            ExecutionErrorKind::SandboxViolation,
            "the program attempted a system call the sandbox forbids; the worker was killed by the seccomp filter (SIGSYS)",
        )
        .with_hint(sandbox_hint()),
        Some(WorkerExit { signal: Some(libc::SIGXCPU), .. }) => ExecutionError::new(
            ExecutionErrorKind::Timeout,
            "the worker used up its CPU-time limit (RLIMIT_CPU) and was killed",
        )
        .with_hint(timeout_hint()),
        Some(WorkerExit { signal: Some(libc::SIGKILL), .. }) => ExecutionError::new(
            ExecutionErrorKind::WorkerCrashed,
            format!("{context}: the worker was killed by SIGKILL (from outside the daemon, or by the kernel's OOM killer)"),
        )
        .with_hint("run the program again; if it keeps happening, it may be using too much memory"),
        Some(exit) => ExecutionError::new(
            ExecutionErrorKind::WorkerCrashed,
            format!("{context}: the worker {} ", exit.describe()).trim_end(),
        )
        .with_hint(match exit.signal {
            Some(s) if s == libc::SIGSEGV || s == libc::SIGABRT => format!(
                "the worker crashed with {}; very deeply nested or very large programs can do this — simplify the program",
                signal_name(s)
            ),
            _ => "run the program again; if it repeats, report it to the operator with the execution id".into(),
        }),
        None => ExecutionError::new(
            ExecutionErrorKind::WorkerCrashed,
            format!("{context}: the worker vanished"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_hint(explanation: &str) -> Option<String> {
        let mut err = from_worker(ExecError {
            explanation: Some(explanation.to_owned()),
            ..ExecError::new(ErrorKind::Runtime, "m")
        });
        for_python(&mut err);
        err.hint
    }

    #[test]
    fn explained_python_errors_get_python_hints() {
        let hint = python_hint("r['x']: KeyError — r is the result of tools.memory.read_graph (line 1), a dict with keys a").unwrap();
        assert!(
            hint.ends_with("a dict with keys a; use what the value has"),
            "{hint}"
        );
        assert!(!hint.contains(".ts"), "{hint}");
        let hint = python_hint("r['x']: TypeError — r is the coroutine of tools.a.b (line 1), not its result: the call was not awaited — add `await` (`r = await tools.a.b(…)`)").unwrap();
        assert!(
            hint.ends_with("write `x = await tools.<namespace>.<tool>(key=value, …)` and use x"),
            "{hint}"
        );
        let environ = "os.environ['T']: KeyError — the sandbox has no environment variables";
        assert_eq!(python_hint(environ).as_deref(), Some(environ));
    }
}
