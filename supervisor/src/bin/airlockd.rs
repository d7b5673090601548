//! `airlockd`: parse arguments, set up logging, bind (or inherit) the socket, and call
//! [`airlock_supervisor::run`].

// The arguments' doc comments are clap's help text, written for a terminal (`[audit]` is a
// policy table, `<NAME>` a placeholder), not rustdoc's markdown.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use airlock_policy::Policy;
use airlock_supervisor::agent_api::ExecutionRequest;
use airlock_supervisor::client::Client;
use airlock_supervisor::daemon::logging::{self, LogFormat};
use airlock_supervisor::daemon::write_execute::{self, WriteExecute};
use airlock_supervisor::daemon::{socket_path, systemd};
use airlock_supervisor::generation::check_policy;
use airlock_supervisor::secrets::scanner::{SecretScanner, SharedScanner};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::ToolRegistry;
use airlock_supervisor::{DaemonConfig, Sighup, run};
use anyhow::{Context, Result, bail};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tracing::{info, warn};

const EXAMPLE: &str = include_str!("../../../examples/hello.ts");

/// The Airlock supervisor: runs agent programs in locked-down workers and brokers their tool
/// calls.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Policy file (TOML). Without it the embedded default is used: it admits the user running
    /// the daemon and root.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Socket path (overrides daemon.socket). Default: /run/airlock/airlock.sock as root,
    /// $XDG_RUNTIME_DIR/airlock/airlock.sock otherwise.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The airlock-worker binary (overrides daemon.worker_path). Default: next to airlockd,
    /// else ../libexec/airlock/ from it (where the Debian package puts it).
    #[arg(long, value_name = "PATH")]
    worker: Option<PathBuf>,
    /// Validate a policy file, print a summary, and exit (0 = valid).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "example"])]
    check_config: Option<PathBuf>,
    /// Once serving, run a small example program through the socket and print its output.
    #[arg(long)]
    example: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// DEVELOPMENT ONLY: also read secrets from AIRLOCK_SECRET_<NAME> environment variables
    /// (the name upper-cased, `.` and `-` as `_`), after systemd credentials and the kernel
    /// keyring. A process's environment is visible in /proc to its user and easily leaks into
    /// logs and child processes; production secrets belong in systemd credentials or
    /// `airlock secret set`.
    #[arg(long)]
    dev_secrets_from_env: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(file) = &args.check_config {
        if args.dev_secrets_from_env {
            eprintln!(
                "{}: warning: --dev-secrets-from-env is for development only",
                file.display()
            );
        }
        // Missing secrets fail only their sources, so they warn instead of failing the check
        // (which systemd runs before every start).
        let secrets = SecretStore::from_environment(args.dev_secrets_from_env);
        let check = check_policy(file, Some(&secrets));
        for line in &check.summary {
            println!("{}: {line}", file.display());
        }
        for warning in &check.warnings {
            eprintln!("{warning}");
        }
        for problem in &check.problems {
            eprintln!("{problem}");
        }
        return if check.ok() {
            println!(
                "{}: ok ({} file{})",
                file.display(),
                check.files.len(),
                if check.files.len() == 1 { "" } else { "s" }
            );
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    // Until the policy's secrets are known the shape rules alone scan the log; `run` puts the
    // policy's scanner in place before it serves.
    let log_scanner = match SecretScanner::new([]) {
        Ok(scanner) => SharedScanner::new(scanner),
        Err(e) => {
            eprintln!("airlockd: cannot build the secret scanner for the log: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = logging::init(args.log_format, log_scanner.clone()) {
        eprintln!("airlockd: cannot install the log subscriber: {e}");
        return ExitCode::FAILURE;
    }
    // Before any thread: W^X for the daemon itself, not for its children (tool servers may
    // need a JIT).
    match write_execute::deny_write_execute() {
        Ok(WriteExecute::Refused) => tracing::info!(
            "write-execute memory refused to the daemon (PR_SET_MDWE, not inherited by tool servers)"
        ),
        Ok(WriteExecute::KernelLacksNoInherit) => tracing::info!(
            "the daemon runs without PR_SET_MDWE: this kernel would pass it on to tool servers (Linux 6.6 or later keeps it to the daemon)"
        ),
        // Hardening on top (before, only the systemd unit gave it): said, not fatal.
        Err(e) => warn!("the daemon runs without PR_SET_MDWE: the kernel refused it: {e}"),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("airlockd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args, log_scanner)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("airlockd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args, log_scanner: SharedScanner) -> Result<()> {
    // The signals are caught first: before this, SIGHUP, SIGTERM and SIGINT end the process at
    // once, and a reload or stop may come as soon as systemd started it. A SIGHUP from here on
    // is kept until `run` reloads on it.
    let sighup = Sighup::catch()
        .inspect_err(|e| {
            warn!(error = %e, "cannot handle SIGHUP; reload with `airlock reload` instead");
        })
        .ok();
    let shutdown = shutdown_signal();
    let policy = match &args.config {
        Some(path) => Policy::load(path)?,
        None => Policy::embedded_default(),
    };
    let worker_path = match args
        .worker
        .clone()
        .or_else(|| policy.daemon.worker_path.clone())
    {
        Some(p) => p,
        None => airlock_supervisor::daemon::default_worker_path(
            &std::env::current_exe()
                .context("cannot find the airlockd executable to locate airlock-worker")?,
        ),
    };

    // Only a socket this process bound is removed at exit: one passed by systemd belongs to
    // airlockd.socket and must outlive this process.
    // No tool server may reach the socket.
    let mut socket_file = None;
    let (listener, owned_path) = match systemd::inherited_listener().context("socket activation")? {
        Some(l) => {
            info!("using the socket passed by systemd");
            (l, None)
        }
        None => {
            let path = match args.socket.clone().or_else(|| policy.daemon.socket.clone()) {
                Some(p) => p,
                None => socket_path::default_socket_path()?,
            };
            let l = socket_path::bind(&path, policy.daemon.socket_mode)?;
            socket_file = Some(path.clone());
            info!(socket = %path.display(), mode = format!("{:o}", policy.daemon.socket_mode), "listening");
            (l, Some(path))
        }
    };
    let listener = tokio::net::UnixListener::from_std(listener)?;
    if socket_file.is_none() {
        // Passed by systemd: its path is the listener's own.
        socket_file = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(PathBuf::from));
    }
    if policy.principals.is_empty() {
        warn!(policy = %policy.origin, "the policy has no [[principal]]: every connection will be refused");
    }

    if args.example {
        let Some(path) = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(PathBuf::from))
        else {
            bail!("--example needs a filesystem socket");
        };
        tokio::spawn(run_example(path));
    }

    let secrets = Arc::new(credential_store(&policy, args.dev_secrets_from_env));
    // The policy's tool sources are built by `run`, which builds them again on reload.
    let config = DaemonConfig {
        policy,
        worker_path,
        tools: ToolRegistry::new(),
        secrets,
        policy_path: args.config.clone(),
        reload_on_sighup: sighup,
        log_scanner: Some(log_scanner),
        state_directory: None,
        protected: socket_file.into_iter().collect(),
    };
    let result = run(config, listener, shutdown).await;
    if let Some(path) = owned_path {
        let _ = std::fs::remove_file(path);
    }
    result.map_err(Into::into)
}

/// The credential store from the environment ($CREDENTIALS_DIRECTORY) and the flags, with a
/// warning for every secret a server needs that it does not have: that server fails when it is
/// called (naming the secret), every other one works.
fn credential_store(policy: &Policy, dev_secrets_from_env: bool) -> SecretStore {
    if dev_secrets_from_env {
        warn!(
            "--dev-secrets-from-env is for development only: secrets are also read from AIRLOCK_SECRET_* environment variables, which this daemon's user can read in /proc and whatever started it may log; use systemd credentials or `airlock secret set` in production"
        );
    }
    let secrets = SecretStore::from_environment(dev_secrets_from_env);
    info!(sources = %secrets.describe(), "credential store");
    for server in &policy.servers {
        for problem in secrets.check_server(server) {
            warn!(
                server = %problem.server,
                setting = %problem.setting,
                secret = %problem.secret,
                error = %problem.error,
                "a secret this server needs is missing or unusable; the server will fail until it is provided"
            );
        }
    }
    for source in &policy.openapi {
        for name in source.secrets() {
            if let Err(e) = secrets.get(name) {
                warn!(source = %source.name, secret = %name, error = %e, "a secret this openapi source needs is missing or unusable; its calls will fail until it is provided");
            }
        }
    }
    secrets
}

/// Resolves on SIGTERM or SIGINT, caught from when this is called (not from when the future
/// is first polled). (SIGHUP reloads the policy: `run` handles it.)
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let streams = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = streams else {
            warn!("cannot install signal handlers; stop the daemon with SIGKILL");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => info!("SIGTERM received"),
            _ = int.recv() => info!("SIGINT received"),
        }
    }
}

async fn run_example(socket: PathBuf) {
    let outcome = async {
        let mut client = Client::connect(&socket).await?;
        let request = ExecutionRequest {
            code: EXAMPLE.to_owned(),
            language: Default::default(),
            timeout_ms: None,
            session: None,
            replay: None,
            ..Default::default()
        };
        client.execute(&request).await
    }
    .await;
    match outcome {
        Ok(resp) => {
            println!(
                "--- examples/hello.ts ran in a sandboxed worker ({:?}, {:.1} ms) ---",
                resp.status, resp.stats.total_ms
            );
            print!("{}", resp.stdout);
            // Each call the daemon brokered for it: checked against the policy, made, traced.
            for call in &resp.tool_calls {
                println!(
                    "tool call {}: {} ({}, {:.1} ms)",
                    call.id, call.tool, call.outcome, call.duration_ms
                );
            }
            println!(
                "result: {}",
                serde_json::to_string_pretty(&resp.result).unwrap_or_default()
            );
            if let Some(err) = resp.error {
                println!("error: {}", err.message);
            }
            let cli = std::env::current_exe()
                .map(|p| p.with_file_name("airlock").display().to_string())
                .unwrap_or_else(|_| "airlock".into());
            println!(
                "--- airlockd keeps serving on {}; try: {cli} --socket {} exec -e '1 + 1' (Ctrl-C to stop) ---",
                socket.display(),
                socket.display()
            );
        }
        Err(e) => eprintln!("example failed: {e}"),
    }
}
