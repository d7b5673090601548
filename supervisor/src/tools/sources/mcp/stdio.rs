//! Starting a stdio server: its environment, its command (under the confinement launcher
//! unless `confine = false`), what the launcher reports, the egress proxy of a server with
//! a `network` list, and its stdout read with a bound on each message.

use super::connection::{AbortOnDrop, ServerEvents};
use super::start::START_TIMEOUT;
use super::{McpServer, confinement, egress, environment};
use crate::tools::{SecretsUsed, ToolError};
use airlock_policy::{ConfineMode, ServerNetwork, SettingValue};
use rmcp::service::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tracing::{Instrument, info_span, warn};

/// The largest message read from a stdio server: a bit over the worker's 32 MiB frame, so
/// every result that could reach a program arrives (rmcp's default, 16 MiB, would drop
/// results between 16 and 32 MiB). Longer lines are dropped unread, which bounds the daemon's
/// memory; [`LineMeter`] notices them, so the call that waited for one fails as
/// `result_too_large` rather than as a plain timeout.
pub(super) const MAX_STDIO_MESSAGE: usize = 33 << 20;

/// What a stdio server is started as (its `[[server]]` entry's stdio keys).
#[derive(Debug, Clone, Copy)]
pub(super) struct StdioStart<'a> {
    pub(super) command: &'a str,
    pub(super) args: &'a [String],
    pub(super) cwd: Option<&'a std::path::Path>,
    pub(super) env: &'a [(String, SettingValue)],
    pub(super) inherit_env: &'a [String],
}

/// What a stdio server is reached through.
pub(super) type StdioTransport =
    AsyncRwTransport<RoleClient, LineMeter, tokio::process::ChildStdin>;

/// A stdio server's stdout, counting the lines longer than [`MAX_STDIO_MESSAGE`] (which rmcp
/// drops without a word).
#[derive(Debug)]
pub(super) struct LineMeter {
    inner: tokio::process::ChildStdout,
    line: usize,
    oversized: Arc<std::sync::atomic::AtomicU64>,
    /// Wakes the calls waiting on this server when a message is dropped.
    dropped: Arc<tokio::sync::Notify>,
}

impl tokio::io::AsyncRead for LineMeter {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if polled.is_ready() {
            let this = &mut *self;
            for &byte in &buf.filled()[before..] {
                if byte == b'\n' {
                    this.line = 0;
                } else {
                    this.line += 1;
                    if this.line == MAX_STDIO_MESSAGE + 1 {
                        this.oversized.fetch_add(1, Ordering::Relaxed);
                        this.dropped.notify_waiters();
                    }
                }
            }
        }
        polled
    }
}

/// A stdio server just spawned.
pub(super) struct Spawned {
    pub(super) transport: StdioTransport,
    pub(super) child: tokio::process::Child,
    /// The launcher's status socket, for a confined server.
    pub(super) status: Option<std::os::unix::net::UnixStream>,
    /// The secret values its environment holds.
    pub(super) secrets: SecretsUsed,
}

/// A stdio server's process (killed on drop) and, for a server with a `network` list, its
/// egress proxy, which ends with it.
#[derive(Debug)]
pub(super) struct ServerProcess {
    pub(super) child: tokio::process::Child,
    pub(super) _egress: Option<AbortOnDrop>,
}

impl McpServer {
    /// Spawns a stdio server with the base environment and what the policy adds to it
    /// ([`environment::compose`]).
    pub(super) fn spawn_stdio(
        &self,
        started: &StdioStart<'_>,
        events: &ServerEvents,
    ) -> Result<Spawned, ToolError> {
        let mut secrets = SecretsUsed::default();
        let given = self.settings().table("env", started.env, &mut secrets)?;
        let env = self.stdio_environment(started, given)?;
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or("", |(_, v)| v.as_str());
        let confined = self.config.confinement.mode != ConfineMode::Off;
        let mut cmd = self.stdio_command(started, path)?;
        cmd.env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            // Never leave a server running without the daemon that talks to it.
            .kill_on_drop(true);
        // The launcher reports a layer it could not apply on fd 3, and closes it at exec.
        let (status_read, status_write) = if confined {
            let (read, write) = std::os::unix::net::UnixStream::pair().map_err(|e| {
                self.unavailable(format!("cannot make the launcher's status pipe: {e}"))
            })?;
            (Some(read), Some(write))
        } else {
            (None, None)
        };
        let status_fd = status_write.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        guard_at_exec(&mut cmd, status_fd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let program = cmd.as_std().get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|e| {
            let error = self.unavailable(format!("cannot start `{program}`: {e}"));
            match e.kind() {
                std::io::ErrorKind::PermissionDenied => error.with_hint(format!("the daemon's user may not execute it: check its mode and the directories above it (`ls -l {program}`)")),
                _ => error,
            }
        })?;
        // Only the launcher may hold the write end now, so its exec (or exit) ends the pipe.
        drop(status_write);
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(self.unavailable("the server's stdin or stdout is missing".into()));
        };
        let stdout = LineMeter {
            inner: stdout,
            line: 0,
            oversized: events.oversized.clone(),
            dropped: events.dropped.clone(),
        };
        let transport =
            AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_STDIO_MESSAGE);
        if let Some(stderr) = child.stderr.take() {
            let span = info_span!("mcp_server", server = %self.config.name);
            let secrets = secrets.clone();
            let tail = events.stderr.clone();
            tokio::spawn(async move { tail.read(stderr, secrets).await }.instrument(span));
        }
        Ok(Spawned {
            transport,
            child,
            status: status_read,
            secrets,
        })
    }

    /// The server's environment: the base one, `inherit_env`, what the policy `given`, and
    /// for a server with a `network` list the proxy's variables; its command must be on its
    /// `PATH`.
    fn stdio_environment(
        &self,
        started: &StdioStart<'_>,
        given: Vec<(String, String)>,
    ) -> Result<Vec<(String, String)>, ToolError> {
        let command = started.command;
        let scratch = self.host.scratch_root.join(&self.config.name);
        let mut env = environment::compose(
            &scratch,
            started.inherit_env,
            environment::daemon_variable,
            given,
        );
        if matches!(self.config.confinement.network, ServerNetwork::Allow(_)) {
            env = environment::overridden(env, environment::proxy_variables());
        }
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or("", |(_, v)| v.as_str());
        if confinement::resolve(command, Some(path)).is_none() {
            return Err(self
                .unavailable(format!("`{command}` was not found on its PATH ({path})"))
                .with_hint(format!("give `command` as an absolute path, or set `PATH` in the server's `env` (or name it in `inherit_env`) so that it contains `{command}`")));
        }
        Ok(env)
    }

    /// The command that starts the server: under the confinement launcher with its profile
    /// (its scratch directory made first), or, with `confine = false`, the server's own.
    fn stdio_command(
        &self,
        started: &StdioStart<'_>,
        path: &str,
    ) -> Result<tokio::process::Command, ToolError> {
        let StdioStart {
            command, args, cwd, ..
        } = *started;
        let confinement = &self.config.confinement;
        if confinement.mode == ConfineMode::Off {
            // Its home and temporary directory, as a confined server's.
            let scratch = self.host.scratch_root.join(&self.config.name);
            confinement::make_scratch(&scratch, &self.host, None, &self.settings())?;
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            return Ok(cmd);
        }
        let started = confinement::ServerCommand {
            command,
            args,
            cwd,
            path_env: Some(path),
        };
        let profile = confinement::profile(
            &self.config.name,
            confinement,
            &started,
            &self.host,
            &self.settings(),
        )?;
        confinement::make_scratch(
            &profile.scratch,
            &self.host,
            profile.run_as.as_ref(),
            &self.settings(),
        )?;
        if !self.host.launcher.is_file() {
            return Err(self.unavailable(format!(
                "it is to be confined, and the launcher {} is missing",
                self.host.launcher.display()
            )));
        }
        let mut cmd = tokio::process::Command::new(&self.host.launcher);
        cmd.arg("--profile")
            .arg(profile.to_json())
            .arg("--")
            .arg(command)
            .args(args);
        Ok(cmd)
    }

    /// What the launcher of a confined server said before it exec'd the server (or gave up):
    /// `Ok` once the socket ends without an `error:` line, with the proxy's listener for a
    /// server with a `network` list; warnings of best-effort mode are logged.
    async fn confinement_status(
        &self,
        pipe: std::os::unix::net::UnixStream,
    ) -> Result<Option<std::net::TcpListener>, ToolError> {
        let unavailable = |why: String| self.unavailable(why);
        let (said, listener) = tokio::time::timeout(START_TIMEOUT, confinement::read_status(pipe))
            .await
            .map_err(|_| unavailable("its launcher did not finish confining it".into()))?
            .map_err(|e| unavailable(format!("the launcher's status socket: {e}")))?;
        let text = String::from_utf8_lossy(&said);
        for line in text.lines() {
            if let Some(warning) = line.strip_prefix("warning: ") {
                warn!(server = %self.config.name, "confined without a layer (confine = \"best-effort\"): {warning}");
            }
        }
        if let Some(error) = text.lines().find_map(|l| l.strip_prefix("error: ")) {
            return Err(self.launcher_failed(error));
        }
        let wants_proxy = matches!(self.config.confinement.network, ServerNetwork::Allow(_));
        match (wants_proxy, listener) {
            (true, None) => Err(unavailable(
                "its launcher did not hand over the network namespace's proxy socket".into(),
            )),
            (_, listener) => Ok(listener.filter(|_| wants_proxy)),
        }
    }

    /// A confined server once its launcher is done: its egress proxy running, if it has a
    /// `network` list.
    pub(super) async fn confined(
        &self,
        status: std::os::unix::net::UnixStream,
    ) -> Result<Option<AbortOnDrop>, ToolError> {
        self.confinement_status(status)
            .await?
            .map(|listener| self.serve_egress(listener))
            .transpose()
    }

    /// The egress proxy of this server (see [`egress`]) on the listener its launcher made.
    fn serve_egress(&self, listener: std::net::TcpListener) -> Result<AbortOnDrop, ToolError> {
        let proxy = egress::Egress {
            server: self.config.name.clone(),
            network: Arc::new(self.config.confinement.network.clone()),
            resolver: egress::system_resolver(),
        };
        egress::serve(listener, proxy)
            .map(AbortOnDrop)
            .map_err(|e| self.unavailable(format!("cannot run its egress proxy: {e}")))
    }

    /// The error for what the launcher of a confined server reported: the exec of the
    /// server failed (after every layer was in place), or a layer could not be applied.
    fn launcher_failed(&self, error: &str) -> ToolError {
        let name = &self.config.name;
        // A root daemon's server runs as another account, whose rights (not the daemon's)
        // decide what it can enter and run.
        let account = confinement::account(&self.config.confinement, &self.host)
            .filter(|_| airlock_policy::account::effective_uid() == 0);
        if let Some(account) = account
            && error.ends_with("(os error 13)")
        {
            return self
                .unavailable(format!("it was confined to run as user \"{account}\" and then {error}"))
                .with_hint(format!("user \"{account}\" (its `user`, else `[daemon] server_user`) may not reach that path: every directory above it must let that account pass (mode o+x), which a home such as /root does not; install the server where that account can reach it (/opt, /usr/local), or name another account in `user`"));
        }
        if error.starts_with("cannot start ") {
            let error_text = self.unavailable(format!("it was confined and then {error}"));
            if error.ends_with("(os error 13)") {
                return error_text.with_hint(format!("the confinement denied something the command needs to start: a `#!` line's interpreter, or the Python a virtualenv's `bin/python` links to (its `pyvenv.cfg` `home`); `airlock policy explain` lists what server `{name}` may read: add the missing directory to its `read`"));
            }
            if error.ends_with("(os error 2)") {
                return error_text.with_hint("the command or its `#!` interpreter does not exist where it was looked for: give `command` as an absolute path, or set `PATH` in the server's `env`");
            }
            return error_text;
        }
        if error.starts_with("cannot enter ") {
            return self
                .unavailable(format!("it cannot be confined: {error}"))
                .with_hint("its `cwd` must be a directory the daemon's user can enter");
        }
        self.unavailable(format!("it cannot be confined: {error}"))
            .with_hint("the kernel lacks this layer: the operator can set confine = \"best-effort\" for this server to run it with the layers there are (or confine = false, not advised)")
    }
}

/// Makes the server's process die with the daemon, puts the launcher's status socket
/// (`status_fd`) at [`airlock_confine::STATUS_FD`], and closes at exec every other
/// descriptor from fd 3 up.
fn guard_at_exec(cmd: &mut tokio::process::Command, status_fd: Option<std::os::fd::RawFd>) {
    // SAFETY: runs in the child between fork and exec and makes only async-signal-safe
    // calls (dup2, prctl, close_range). `status_fd` stays open in the parent until after the spawn.
    // The parent-death signal fires when the forking *thread* exits: servers are started
    // from runtime worker threads, which live as long as the daemon.
    unsafe {
        cmd.pre_exec(move || {
            // A server must not outlive a daemon that was killed without its shutdown.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = status_fd
                && libc::dup2(fd, airlock_confine::STATUS_FD) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            // Whatever the daemon holds, or inherited from whoever started it, without
            // close-on-exec stays out of the server: from fd 3 up (the status socket
            // excepted) closed at exec. Close-on-exec, not closed: the standard library
            // reports a failed exec on a descriptor of its own.
            let first = status_fd.map_or(3, |_| airlock_confine::STATUS_FD + 1);
            if libc::close_range(
                first.cast_unsigned(),
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC.cast_signed(),
            ) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
