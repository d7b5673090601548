//! The daemon as a whole: [`run`] serves the agent API on a listener until a shutdown
//! future resolves, then drains. `airlockd`'s `main` is a thin wrapper around it, and tests
//! call it in-process with their own listener and tool sources. Beside it: the socket's
//! default place and safe binding (`socket_path`), systemd's notify protocol and socket
//! activation (`systemd`), and the log subscriber `airlockd` installs (`logging`).
//!
//! This is where the parts are put together; nothing below it imports it.

pub mod logging;
pub mod socket_path;
pub mod systemd;
pub mod write_execute;

use crate::api::http::policy::DaemonPaths;
use crate::api::http::{HttpState, serve_connection};
use crate::audit_log::{AuditLog, AuditLogError};
use crate::execution::ExecutionService;
use crate::generation::{
    Generations, PolicyGeneration, SourceContext, SourceFailure, start_eager_sources,
    worker_ceiling,
};
use crate::journal::JournalState;
use crate::secrets::scanner::SharedScanner;
use crate::secrets::store::SecretStore;
use crate::tools::ToolRegistry;
use crate::tools::sources::mcp::ServerHost;
use crate::workers::pool::WorkerPool;
use crate::workers::process::{Spawner, StartMode};
use airlock_policy::Policy;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Everything `run` needs besides the listener.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub policy: Policy,
    /// The `airlock-worker` binary to exec for every execution.
    pub worker_path: PathBuf,
    /// Tool sources besides the policy's (an embedder's, or tests' fault injection); they are
    /// kept across reloads. The policy's own sources are built by `run`.
    pub tools: ToolRegistry,
    /// The credentials the policy's sources may reference.
    pub secrets: Arc<SecretStore>,
    /// The policy file to read again on reload; `None` (the embedded default, or a policy made
    /// in code) makes reload refuse with an explanation.
    pub policy_path: Option<PathBuf>,
    /// Reload on SIGHUP, caught since `airlockd` made it. In-process tests leave it `None`
    /// because a signal reaches the whole test process.
    pub reload_on_sighup: Option<Sighup>,
    /// The scanner the daemon's log writer uses; `run` puts the policy's scanner in it (and
    /// the new one on every reload), so the log never carries a secret the daemon holds.
    pub log_scanner: Option<SharedScanner>,
    /// The daemon's state directory (tool servers' scratch directories are in `servers/`);
    /// `None`: `$STATE_DIRECTORY`, else `$XDG_STATE_HOME/airlock`, else
    /// `~/.local/state/airlock`.
    pub state_directory: Option<PathBuf>,
    /// More paths no tool server may reach besides the state directory, the policy files
    /// and `$CREDENTIALS_DIRECTORY` (which `run` adds): the socket.
    pub protected: Vec<PathBuf>,
}

impl DaemonConfig {
    /// A config with no extra sources, no secrets, no policy file and no SIGHUP handling.
    pub fn new(policy: Policy, worker_path: PathBuf) -> DaemonConfig {
        DaemonConfig {
            policy,
            worker_path,
            tools: ToolRegistry::new(),
            secrets: Arc::new(SecretStore::empty()),
            policy_path: None,
            reload_on_sighup: None,
            log_scanner: None,
            state_directory: None,
            protected: Vec::new(),
        }
    }
}

/// Where the worker is when the policy does not say: beside `airlockd` (cargo's
/// `target/<profile>/`, or a tarball), else where the Debian package puts it
/// (`<prefix>/libexec/airlock/` for `airlockd` in `<prefix>/bin/`). `daemon_exe` is the
/// running `airlockd`. When neither exists, the first place is returned and [`run`]'s error
/// names it.
pub fn default_worker_path(daemon_exe: &std::path::Path) -> PathBuf {
    let beside = daemon_exe.with_file_name(WORKER_NAME);
    if beside.is_file() {
        return beside;
    }
    let libexec = daemon_exe
        .parent()
        .and_then(std::path::Path::parent)
        .map(|prefix| prefix.join("libexec/airlock").join(WORKER_NAME));
    match libexec {
        Some(path) if path.is_file() => path,
        _ => beside,
    }
}

const WORKER_NAME: &str = "airlock-worker";

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "worker binary {0} does not exist or is not executable; build it (`cargo build --release` puts it beside airlockd; the package puts it in /usr/libexec/airlock/) or set daemon.worker_path in the policy"
    )]
    WorkerMissing(PathBuf),
    #[error("cannot start the worker spawner thread: {0}")]
    Spawner(std::io::Error),
    #[error("cannot build the secret scanner, and the daemon does not serve without it: {0}")]
    Scanner(String),
    #[error(
        "{0}; fix it, set [audit] directory to a private directory, or (knowingly) turn the audit trail off with [audit] enabled = false"
    )]
    Audit(AuditLogError),
}

/// Serves the agent API on `listener` until `shutdown` resolves, then stops accepting, lets
/// running executions finish for up to `daemon.shutdown_grace_ms`, and kills what remains.
pub async fn run(
    config: DaemonConfig,
    listener: UnixListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    if !is_executable(&config.worker_path) {
        return Err(DaemonError::WorkerMissing(config.worker_path));
    }
    // Nothing of the same user may read this process's memory or environment through /proc,
    // or attach to it: a tool server runs as the same user.
    // Every argument as the `unsigned long` the kernel reads (prctl is variadic in C).
    let zero: libc::c_ulong = 0;
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, zero, zero, zero, zero) } != 0 {
        warn!(error = %std::io::Error::last_os_error(), "cannot make the daemon non-dumpable");
    }
    raise_descriptor_limit(config.policy.daemon.max_connections);
    // The output budget's tokenizer takes tens of milliseconds to load: loaded beside the
    // start, not in the first execution.
    std::thread::Builder::new()
        .name("tokenizer".into())
        .spawn(crate::execution::budget::warm)
        .map_err(
            |e| warn!(error = %e, "cannot load the tokenizer early; the first execution loads it"),
        )
        .ok();
    for warning in &config.policy.warnings {
        warn!("{warning}");
    }
    let daemon_settings = config.policy.daemon.clone();
    let sighup = config.reload_on_sighup.as_ref().and_then(Sighup::take);
    let kept = Kept::open(&config)?;
    let learned_writer = tokio::spawn(crate::learned_types::run_writer(Arc::downgrade(
        &kept.learned,
    )));
    let learned = kept.learned.clone();
    let (generations, executions, paths) = start_serving(config, kept)?;
    let state = Arc::new(HttpState {
        generations: generations.clone(),
        executions: executions.clone(),
        started: Instant::now(),
        mcp: crate::api::mcp::service(),
        paths,
        connections: Arc::default(),
        kept_events: Default::default(),
    });
    crate::daemon::systemd::notify_ready();
    let mut background = Background {
        watchdog: crate::daemon::systemd::spawn_watchdog(),
        reloader: sighup.map(|hup| tokio::spawn(reload_on_sighup(hup, generations.clone()))),
        // Approvals nobody decided in time, and executions that waited too long, end here.
        sweeper: tokio::spawn(sweep_waits(executions.clone(), generations.clone())),
        learned_writer,
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let connections = accept(&listener, &state, shutdown_rx, shutdown).await;
    info!("shutting down: no new connections; waiting for running executions");
    crate::daemon::systemd::notify_stopping();
    background.stop_serving().await;
    drop(listener);
    let _ = shutdown_tx.send(true);
    drain(
        connections,
        &executions,
        Duration::from_millis(daemon_settings.shutdown_grace_ms),
    )
    .await;
    let generation = generations.current();
    generation.pool.close().await;
    generation.shutdown_sources().await;
    background.stop(&learned);
    debug!("shutdown complete");
    Ok(())
}

/// What the daemon keeps on disk, opened once at start: the audit trail, the journal and the
/// learned types, and where each is.
struct Kept {
    audit: AuditLog,
    journal: JournalState,
    learned: Arc<crate::learned_types::LearnedTypes>,
    /// The daemon's state directory, when it has one.
    state: Option<PathBuf>,
    paths: DaemonPaths,
}

impl Kept {
    fn open(config: &DaemonConfig) -> Result<Kept, DaemonError> {
        let policy = &config.policy;
        // Before anything starts: a daemon that cannot keep its audit trail does not serve.
        // (Opening touches the disk once, at startup; records are written by the log's own
        // thread.) The audit settings are read once: a reload does not move the record.
        // One place for everything the daemon keeps, read once at start: the embedder's, else
        // the policy's `[daemon] state_directory`, else systemd's or the user's state
        // directory. The audit log and the journal go there unless their own tables name a
        // directory; learned types and tool servers' scratch directories always do.
        let state = config
            .state_directory
            .clone()
            .or_else(|| policy.daemon.state_directory.clone())
            .or_else(|| crate::audit_log::default_directory(|k| std::env::var_os(k)).ok());
        let audit = AuditLog::open(&policy.audit, state.as_deref()).map_err(DaemonError::Audit)?;
        // The journal, read once like the audit settings. One that cannot be opened costs
        // only sessions: the daemon serves one-shot executions and says why in /v1/health.
        let journal = JournalState::open(&policy.journal, state.as_deref());
        // Learned output types; without a file they are learned in memory only.
        let learned = Arc::new(open_learned_types(state.as_deref()));
        let paths = DaemonPaths {
            state_directory: state.clone(),
            audit: policy
                .audit
                .enabled
                .then(|| policy.audit.directory.clone().or_else(|| state.clone()))
                .flatten(),
            journal: matches!(journal, JournalState::Ready(_))
                .then(|| policy.journal.directory.clone().or_else(|| state.clone()))
                .flatten(),
            learned: (!learned.is_in_memory())
                .then(|| {
                    state
                        .as_ref()
                        .map(|s| s.join(crate::learned_types::store::FILE_NAME))
                })
                .flatten(),
            servers: ServerHost::of_daemon(
                &config.worker_path,
                state.clone(),
                None,
                &policy.daemon,
                Vec::new(),
                Vec::new(),
            )
            .scratch_root,
        };
        Ok(Kept {
            audit,
            journal,
            learned,
            state,
            paths,
        })
    }
}

/// Starts what serves: the worker spawner and pool, the first generation of the policy (its
/// sources), and the execution service over what the daemon keeps.
fn start_serving(
    config: DaemonConfig,
    kept: Kept,
) -> Result<(Arc<Generations>, Arc<ExecutionService>, DaemonPaths), DaemonError> {
    let Kept {
        audit,
        journal,
        learned,
        state,
        paths,
    } = kept;
    let policy = config.policy;
    let daemon_settings = policy.daemon.clone();
    let start_mode = match policy.daemon.worker_start {
        airlock_policy::WorkerStart::Fork => StartMode::Fork,
        airlock_policy::WorkerStart::Exec => StartMode::Exec,
    };
    let spawner =
        Spawner::start(config.worker_path.clone(), start_mode).map_err(DaemonError::Spawner)?;
    let pool = WorkerPool::start(
        spawner.clone(),
        worker_ceiling(&policy.limits),
        daemon_settings.pool_size,
    );
    let context = SourceContext {
        secrets: config.secrets,
        extra: config.tools,
        host: ServerHost::of_daemon(
            &config.worker_path,
            state,
            config.policy_path.as_deref(),
            &policy.daemon,
            // The audit log and the journal may have directories of their own, outside the
            // state directory: no server may reach those either.
            config.protected,
            paths.audit.iter().chain(&paths.journal).cloned().collect(),
        ),
        learned: Some(learned),
    };
    // A source that cannot be loaded at start costs only itself; the daemon serves the rest.
    let generation =
        PolicyGeneration::build(1, policy, &context, pool, None, SourceFailure::DropsSource)
            .map_err(|problems| {
                DaemonError::Scanner(
                    problems
                        .iter()
                        .map(|p| format!("{}: {}", p.source, p.message))
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            })?;
    if let Some(log) = &config.log_scanner {
        log.replace(generation.scanner.clone());
    }
    start_eager_sources(&generation);
    info!(
        policy = %generation.policy.origin,
        drop_ins = generation.policy.drop_ins.len(),
        worker = %config.worker_path.display(),
        pool_size = daemon_settings.pool_size,
        "airlockd serving"
    );
    let generations = Arc::new(Generations::new(
        generation,
        context,
        config.policy_path,
        spawner,
        config.log_scanner,
    ));
    let executions = Arc::new(ExecutionService::new(
        daemon_settings.max_concurrent_executions,
        audit,
        journal,
    ));
    Ok((generations, executions, paths))
}

/// Accepts connections until `shutdown` resolves; returns the connections still open.
async fn accept(
    listener: &UnixListener,
    state: &Arc<HttpState>,
    shutdown_rx: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()>,
) -> JoinSet<()> {
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(state.clone(), stream, shutdown_rx.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => return connections,
        }
    }
}

/// Lets the open connections' executions finish for up to `grace`, stops those that remain,
/// then gives detached executions what is left of it.
async fn drain(mut connections: JoinSet<()>, executions: &ExecutionService, grace: Duration) {
    let draining = Instant::now();
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            "grace period over; stopping the remaining executions"
        );
        // Aborting a connection task drops its execution, which kills and reaps its worker.
        connections.shutdown().await;
    }
    // Detached executions belong to no connection: they get what is left of the grace period.
    executions.close();
    executions
        .drain_detached(grace.saturating_sub(draining.elapsed()))
        .await;
}

/// The daemon's own tasks beside the connections.
struct Background {
    watchdog: Option<tokio::task::JoinHandle<()>>,
    reloader: Option<tokio::task::JoinHandle<()>>,
    sweeper: tokio::task::JoinHandle<()>,
    learned_writer: tokio::task::JoinHandle<()>,
}

impl Background {
    /// No more reloads or sweeps once the daemon stops serving.
    async fn stop_serving(&mut self) {
        if let Some(task) = &self.reloader {
            task.abort();
        }
        self.sweeper.abort();
        // It holds the journal: gone before `run` returns, so a daemon started next can open
        // it.
        let _ = (&mut self.sweeper).await;
    }

    /// The rest, at the very end: what was learned since the writer last wrote is written.
    fn stop(self, learned: &crate::learned_types::LearnedTypes) {
        self.learned_writer.abort();
        if let Err(e) = learned.flush() {
            warn!(error = %e, "the learned types of the last seconds could not be written");
        }
        if let Some(w) = self.watchdog {
            w.abort();
        }
    }
}

/// The learned output types in `directory` (`learned.sqlite`), or in memory only when there
/// is no directory or the file cannot be used (logged: the daemon serves regardless).
fn open_learned_types(directory: Option<&std::path::Path>) -> crate::learned_types::LearnedTypes {
    use crate::learned_types::LearnedTypes;
    let Some(directory) = directory else {
        warn!(
            "no state directory: learned output types are kept in memory only, until the daemon stops"
        );
        return LearnedTypes::in_memory();
    };
    LearnedTypes::open(directory).unwrap_or_else(|e| {
        warn!(error = %e, "learned output types are kept in memory only, until the daemon stops");
        LearnedTypes::in_memory()
    })
}

/// Once a second: approvals past `[approvals] ttl` are denied (their executions go on) and
/// waiting executions past `limits.waiting_ttl` expire.
async fn sweep_waits(executions: Arc<ExecutionService>, generations: Arc<Generations>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        executions.sweep(generations.current()).await;
    }
}

/// SIGHUP, caught from the moment [`Sighup::catch`] returns. `airlockd` makes it before it
/// reads the policy: SIGHUP's default action ends the process, and a handler installed later
/// (it once was, by the task that reloads) left a window in which `systemctl reload` killed a
/// daemon that was still starting. A signal that arrives before `run` listens is kept, so the
/// policy edit it announces is read, not lost.
#[derive(Clone)]
pub struct Sighup(Arc<std::sync::Mutex<Option<tokio::signal::unix::Signal>>>);

impl Sighup {
    /// Installs the handler. Needs a Tokio runtime with signals enabled.
    pub fn catch() -> std::io::Result<Sighup> {
        use tokio::signal::unix::{SignalKind, signal};
        let hup = signal(SignalKind::hangup())?;
        Ok(Sighup(Arc::new(std::sync::Mutex::new(Some(hup)))))
    }

    /// The stream, for the first `run` that asks (a second `run` on a clone of the config gets
    /// `None`: one signal, one reloader).
    fn take(&self) -> Option<tokio::signal::unix::Signal> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for Sighup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sighup")
    }
}

/// Reloads the policy on every SIGHUP (`systemctl reload airlockd`).
async fn reload_on_sighup(mut hup: tokio::signal::unix::Signal, generations: Arc<Generations>) {
    while hup.recv().await.is_some() {
        info!("SIGHUP received: reloading the policy");
        generations.reload().await;
    }
}

/// Descriptors the daemon needs besides its connections: the pool's and running workers'
/// sockets and pidfds, tool servers' pipes, the audit log, the journal, the listener.
const DESCRIPTORS_BESIDES_CONNECTIONS: u64 = 512;

/// Raises the daemon's soft `RLIMIT_NOFILE` to its hard limit (often 1,024 against 524,288
/// outside systemd, whose unit sets 65,536), so that `[daemon] max_connections` is what
/// bounds connections, not `EMFILE`; warns when even the hard limit leaves too little room.
/// The daemon only uses epoll, so descriptors above 1,024 are fine for it.
fn raise_descriptor_limit(max_connections: u32) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let needed = u64::from(max_connections) + DESCRIPTORS_BESIDES_CONNECTIONS;
    if limit.rlim_cur < needed {
        warn!(
            open_files = limit.rlim_cur,
            needed,
            "the descriptor limit (RLIMIT_NOFILE) is below [daemon] max_connections plus what workers and servers need: raise it (LimitNOFILE=) or lower max_connections"
        );
    }
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::default_worker_path;

    #[test]
    fn the_worker_is_found_beside_the_daemon_first_then_in_libexec() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("usr/bin");
        let libexec = root.path().join("usr/libexec/airlock");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&libexec).unwrap();
        let daemon = bin.join("airlockd");
        // Neither: the place beside the daemon, which the error then names.
        assert_eq!(default_worker_path(&daemon), bin.join("airlock-worker"));
        // Installed as the package lays it out.
        std::fs::write(libexec.join("airlock-worker"), b"").unwrap();
        assert_eq!(default_worker_path(&daemon), libexec.join("airlock-worker"));
        // A worker beside the daemon (cargo's target directory) wins.
        std::fs::write(bin.join("airlock-worker"), b"").unwrap();
        assert_eq!(default_worker_path(&daemon), bin.join("airlock-worker"));
    }
}
