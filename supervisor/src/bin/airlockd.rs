//! `airlockd`: parse arguments, set up logging, bind (or inherit) the socket, and call
//! [`airlock_supervisor::run`].

use airlock_policy::Policy;
use airlock_supervisor::agent_api::ExecutionRequest;
use airlock_supervisor::client::Client;
use airlock_supervisor::mcp_server::McpServer;
use airlock_supervisor::tool_source::ToolRegistry;
use airlock_supervisor::{DaemonConfig, run, socket_path, systemd};
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
    /// The airlock-worker binary (overrides daemon.worker_path). Default: next to airlockd.
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
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(file) = &args.check_config {
        return match Policy::load(file) {
            Ok(p) => {
                println!(
                    "{}: ok ({} principal{}, pool_size {}, timeout {} ms, memory {} MiB)",
                    file.display(),
                    p.principals.len(),
                    if p.principals.len() == 1 { "" } else { "s" },
                    p.daemon.pool_size,
                    p.limits.timeout_ms,
                    p.limits.memory_bytes >> 20
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    init_tracing(args.log_format);
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
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("airlockd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn serve(args: Args) -> Result<()> {
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
        None => std::env::current_exe()
            .context("cannot find the airlockd executable to locate airlock-worker next to it")?
            .with_file_name("airlock-worker"),
    };

    // Only a socket this process bound is removed at exit: one passed by systemd belongs to
    // airlockd.socket and must outlive this process.
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
            info!(socket = %path.display(), mode = format!("{:o}", policy.daemon.socket_mode), "listening");
            (l, Some(path))
        }
    };
    let listener = tokio::net::UnixListener::from_std(listener)?;
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

    // Skeleton: the credential store's backends are wired here once they exist.
    let secrets = Arc::new(airlock_supervisor::secret_store::SecretStore::empty());
    let mut tools = ToolRegistry::new();
    for server in &policy.servers {
        tools.register(Arc::new(McpServer::new(server.clone(), secrets.clone())));
    }
    let config = DaemonConfig {
        policy,
        worker_path,
        tools,
    };
    let result = run(config, listener, shutdown_signal()).await;
    if let Some(path) = owned_path {
        let _ = std::fs::remove_file(path);
    }
    result.map_err(Into::into)
}

/// Resolves on SIGTERM or SIGINT. SIGHUP is caught so `systemctl reload` cannot kill the
/// daemon; policy reload itself is not implemented yet.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        warn!("cannot install signal handlers; stop the daemon with SIGKILL");
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { info!("SIGTERM received"); return; }
            _ = int.recv() => { info!("SIGINT received"); return; }
            _ = hup.recv() => warn!("SIGHUP received: policy reload is not supported yet; restart airlockd to apply policy changes"),
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
