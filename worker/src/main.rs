//! `airlock-worker`: runs exactly one untrusted program, after locking itself down.
//!
//! Started only by `airlockd` (by `exec`, with its end of a socket pair on fd 3), or forked by
//! a zygote (below). The order of
//! `main` is the security argument of this crate, so it is one straight function:
//!
//! 1. [`lockdown::prepare_process`]: fds, environment, working directory, rlimits, parent-death
//!    signal, non-dumpable (design §4 steps 1–2).
//! 2. [`LanguageRuntime::start`](language::LanguageRuntime::start) of every language ([`language::Runtimes`]): start the
//!    engines while the process can still open files (glibc reads zoneinfo once for `Date`);
//!    no untrusted byte exists yet.
//! 3. [`lockdown::lock`]: no_new_privs, Landlock, seccomp (steps 4–6). Any failure exits.
//! 4. Send `Ready`, then read the one `Start` message: the first untrusted byte.
//! 5. [`LanguageRuntime::run`](language::LanguageRuntime::run) of the program's language runs it and sends `Done`; the
//!    worker exits when the supervisor closes the socket.
//!
//! Started with `--zygote`, the process takes steps 1–3 and then [`zygote::serve`]s: it
//! forks one new worker per request from the daemon. Each forked worker finishes its own
//! lockdown ([`lockdown::enter_forked_worker`]) and goes on from step 4 like any other.
//!
//! Modules: [`lockdown`] (the layers), [`syscall_allowlist`] (reviewed seccomp data),
//! [`ipc`] (fd 3 framing), [`language`] (one folder per language behind
//! [`language::LanguageRuntime`]: [`language::javascript`], QuickJS with oxc for TypeScript, and
//! [`language::python`], monty),
//! and, only in test builds with the `escape-probe` feature, [`escape_probe`].

mod ipc;
mod lockdown;
mod syscall_allowlist;
mod zygote;

#[cfg(feature = "engine")]
mod language;

/// The runtimes this worker starts before lockdown: every language's (the pool starts
/// workers before it knows a program's language).
#[cfg(feature = "engine")]
type Program = language::Runtimes;

#[cfg(feature = "escape-probe")]
mod escape_probe;

use airlock_proto::{PROTOCOL_VERSION, SupervisorMessage, WorkerMessage};
use std::process::ExitCode;

/// Exit codes the supervisor interprets when no `Done` message arrived.
pub mod exit_code {
    /// Bad command line (the supervisor and worker binaries do not match).
    pub const USAGE: u8 = 64;
    /// A lockdown layer could not be applied: the worker refused to run.
    pub const LOCKDOWN_FAILED: u8 = 70;
    /// The IPC channel failed or the supervisor broke the protocol.
    pub const IPC_FAILED: u8 = 71;
}

fn main() -> ExitCode {
    let config = match lockdown::LockdownConfig::from_args(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("airlock-worker: {e}");
            eprintln!("airlock-worker is started by airlockd; it is not meant to be run by hand");
            return ExitCode::from(exit_code::USAGE);
        }
    };

    // Steps 1-2: after this, stderr is /dev/null and only fd 3 is open besides 0-2.
    if let Err(e) = lockdown::prepare_process(&config) {
        eprintln!("airlock-worker: lockdown failed: {e}");
        return ExitCode::from(exit_code::LOCKDOWN_FAILED);
    }

    // Still trusted territory: nothing from the program has been read yet.
    #[cfg(feature = "engine")]
    let engine = match Program::start() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("airlock-worker: engine initialisation failed: {e}");
            return ExitCode::from(exit_code::LOCKDOWN_FAILED);
        }
    };

    // Steps 4-6. Fail closed: no layer is optional.
    let mut report = match lockdown::lock(&config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("airlock-worker: lockdown failed: {e}");
            return ExitCode::from(exit_code::LOCKDOWN_FAILED);
        }
    };

    // A zygote stays in here, forking; only its forked workers come out, locked down as
    // tightly as an exec'd worker (stderr is /dev/null by now: the exit code is the report).
    if config.role == lockdown::Role::Zygote {
        match zygote::serve(config.parent_pid, &report) {
            zygote::Served::Worker(Ok(forked), warm_up) => {
                report = forked;
                #[cfg(feature = "engine")]
                if warm_up {
                    engine.forked();
                }
                #[cfg(not(feature = "engine"))]
                let _ = warm_up;
            }
            zygote::Served::Worker(Err(_), _) => return ExitCode::from(exit_code::LOCKDOWN_FAILED),
            zygote::Served::Exit(Ok(())) => return ExitCode::SUCCESS,
            zygote::Served::Exit(Err(_)) => return ExitCode::from(exit_code::IPC_FAILED),
        }
    }

    let forked = report.forked;
    // SAFETY: prepare_process verified that fd 3 is the inherited socket and closed every
    // other descriptor above 2 (a forked worker's fd 3 is its own socket, put there by
    // enter_forked_worker, which closed the received copy); nothing else owns fd 3.
    let mut ipc = unsafe { ipc::Ipc::from_inherited_fd() };
    if ipc
        .send(&WorkerMessage::Ready {
            protocol_version: PROTOCOL_VERSION,
            lockdown: report,
        })
        .is_err()
    {
        return ExitCode::from(exit_code::IPC_FAILED);
    }

    // The first untrusted bytes.
    let start = match ipc.recv() {
        Ok(SupervisorMessage::Start(start)) => start,
        // The supervisor closed the pool or was told to shut down before using this worker.
        Ok(SupervisorMessage::Cancel)
        | Err(airlock_proto::frame::blocking::IoFrameError::Closed) => {
            return ExitCode::SUCCESS;
        }
        Ok(_) | Err(_) => return ExitCode::from(exit_code::IPC_FAILED),
    };

    #[cfg(feature = "escape-probe")]
    let (outcome, stats) = {
        // The probe attacks with the engine initialised (as a real worker is) but unused.
        #[cfg(feature = "engine")]
        let _ = &engine;
        escape_probe::run(&start)
    };

    #[cfg(all(feature = "engine", not(feature = "escape-probe")))]
    let (outcome, stats) = engine.run(start, &mut ipc);

    #[cfg(all(not(feature = "engine"), not(feature = "escape-probe")))]
    let (outcome, stats) = {
        let _ = start;
        (
            airlock_proto::Outcome::Error(airlock_proto::ExecError::new(
                airlock_proto::ErrorKind::Internal,
                "this airlock-worker was built without the engine feature",
            )),
            airlock_proto::WorkerStats::default(),
        )
    };

    #[allow(unused_mut, reason = "set only in builds that run programs")]
    let mut stats = stats;
    if forked {
        stats.peak_rss_bytes = own_peak_rss_bytes();
    }
    if ipc.send(&WorkerMessage::Done { outcome, stats }).is_err() {
        return ExitCode::from(exit_code::IPC_FAILED);
    }
    // Stay alive until the supervisor hangs up. It reads an exec'd worker's memory high-water
    // mark from /proc after Done (getrusage would include the image exec replaced), which it
    // can only do while the process exists; and it hangs up on any worker only once the
    // execution is answered, so that this process's exit (unmapping its memory) does not
    // compete with the answer. Anything but the hang-up is ignored; if the supervisor dies
    // instead, PDEATHSIG ends this process.
    while ipc.recv().is_ok() {}
    ExitCode::SUCCESS
}

/// This process's peak resident set size, in bytes (0 if the kernel will not say). Only
/// meaningful in a forked worker: its figure starts from the zygote's resident pages at the
/// fork, which it shares, as an exec'd worker's starts from its loaded binary.
fn own_peak_rss_bytes() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } != 0 {
        return 0;
    }
    // ru_maxrss is in KiB on Linux.
    u64::try_from(usage.ru_maxrss)
        .unwrap_or(0)
        .saturating_mul(1024)
}
