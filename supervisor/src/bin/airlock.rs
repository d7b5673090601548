//! `airlock`: the command-line client of `airlockd`.
//!
//! Exit codes: 0 the program succeeded, 1 the program failed, 2 it timed out, 3 the request
//! could not be made (daemon unreachable, refused, bad arguments), 4 it waits or still runs
//! (`airlock status`, `airlock logs`). `airlock policy` and
//! `airlock reload`: 0 valid / allowed / reloaded, 1 not, 3 could not check.
//!
//! `airlock secret …` does not talk to the daemon: it manages the kernel keyring of the user it
//! runs as, which is where the daemon (running as that same user) looks. Exit codes: 0 done,
//! 3 failed.
//!
//! `airlock audit` does not talk to the daemon either: it reads the audit log's files
//! (`docs/audit.md`). Exit codes: 0 done, 3 the log could not be read.

use airlock_policy::{Caller, Policy};
use airlock_supervisor::agent_api::{
    ConsoleStream, ExecutionEvent, ExecutionRequest, ExecutionResponse, NEW_SESSION, ReplayMode,
    RequestLanguage, Status,
};
use airlock_supervisor::audit_log;
use airlock_supervisor::client::{Client, ClientError, api_error};
use airlock_supervisor::daemon::socket_path;
use airlock_supervisor::generation::{ReloadReport, check_policy};
use airlock_supervisor::sdk::token_figures::{self, ToolDefinition};
use airlock_supervisor::secrets::store::{KernelKeyring, SecretStore, kernel_keyring};
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use zeroize::Zeroizing;

#[derive(Debug, Parser)]
#[command(version, about = "Run programs in airlockd's sandbox")]
struct Args {
    /// Socket of the daemon. Default: $XDG_RUNTIME_DIR/airlock/airlock.sock if it exists
    /// (/run/airlock/airlock.sock for root), else the system daemon's
    /// /run/airlock/airlock.sock; or $AIRLOCK_SOCKET.
    #[arg(long, global = true, value_name = "PATH", env = "AIRLOCK_SOCKET")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a program: a FILE, `-e CODE`, or the program on stdin.
    Exec {
        /// Program file (.ts or .js). Omit it to read the program from stdin.
        file: Option<PathBuf>,
        /// The program text itself.
        #[arg(
            short = 'e',
            long = "eval",
            value_name = "CODE",
            conflicts_with = "file"
        )]
        code: Option<String>,
        /// Treat the program as JavaScript (default: TypeScript, or by file extension).
        #[arg(long)]
        javascript: bool,
        /// Wall-clock budget in milliseconds (default: the policy's limits.timeout_ms).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Print the whole response as JSON instead of streaming output.
        #[arg(long)]
        json: bool,
        /// Run in this session: the tool calls it recorded are answered from its journal
        /// instead of being made again (see `airlock session`).
        #[arg(long, value_name = "ID", conflicts_with = "new_session")]
        session: Option<String>,
        /// Run in a new session (its id is printed; pass it to --session next time).
        #[arg(long)]
        new_session: bool,
        /// Which recorded calls to replay in a session: all (default), writes (reads run
        /// again), none.
        #[arg(long, value_name = "MODE", value_parser = replay_mode)]
        replay: Option<ReplayMode>,
        /// Start it and print its id at once; it runs on without this command (follow it
        /// with `airlock status ID` and `airlock logs -f ID`, stop it with `airlock cancel ID`).
        #[arg(long, conflicts_with = "json")]
        detach: bool,
    },
    /// Show an execution by id: running (output so far), waiting, or how it ended. Exit code
    /// as for exec; 4 while it runs or waits.
    Status { id: String },
    /// Print a detached execution's output; with -f, follow it to its end.
    Logs {
        id: String,
        /// Follow: print output as it comes, until the execution ends.
        #[arg(short = 'f', long)]
        follow: bool,
        /// Start after this event number (the `seq` of the last event seen).
        #[arg(long, value_name = "N", default_value_t = 0)]
        after: u64,
    },
    /// Stop a running or waiting execution.
    Cancel { id: String },
    /// List the calls that wait for an approver's decision (an approver sees all of them,
    /// anyone else those of its own executions).
    Approvals,
    /// Approve a call that waits (you must be one of the policy's [approvals] approvers); its
    /// execution goes on.
    Approve {
        id: String,
        /// Why, for the audit log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny a call that waits: the program gets a ToolError `denied` (with the reason).
    Deny {
        id: String,
        /// Why: the program and the audit log see it.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Finish an execution of a session that a daemon restart cut off: its code runs again
    /// in its session and every call it had made is answered from the journal.
    Resume {
        /// The execution's id (`airlock session show`, or GET /v1/executions?status=interrupted).
        id: String,
        /// Print the whole response as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sessions: list yours, show one's recorded calls and executions, delete one.
    Session {
        #[command(subcommand)]
        action: SessionCommand,
    },
    /// Serve MCP on stdin and stdout: Airlock as one MCP server (search_tools, read_sdk,
    /// execute, …) for an agent such as Claude Code or Cursor, with the tools this user may
    /// call. Each message goes to the daemon's socket (`/mcp`); logs go to stderr only.
    Mcp,
    /// Show the daemon's health.
    Health,
    /// Browse the TypeScript SDK of the tools this caller may use.
    Sdk {
        #[command(subcommand)]
        action: SdkCommand,
    },
    /// Check a policy file, or explain what the running daemon's policy (or a file's) decides
    /// for a caller.
    Policy {
        #[command(subcommand)]
        action: PolicyCommand,
    },
    /// Make the daemon read its policy again (root or the daemon's user). On any problem the
    /// daemon keeps the policy it has and this prints why.
    Reload,
    /// The policy's tool servers (root or the daemon's user): state (not started, starting,
    /// ready, failed and the next try), process, tools, confinement, last stderr lines.
    Servers {
        /// Print the daemon's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One tool server (root or the daemon's user).
    Server {
        #[command(subcommand)]
        action: ServerCommand,
    },
    /// Manage the secrets tool servers get (`{ secret = "name" }` in the policy). They live in
    /// the kernel keyring of the user this runs as, so run it as the daemon's user:
    /// `sudo -u airlock airlock secret set github-token`.
    Secret {
        #[command(subcommand)]
        action: SecretCommand,
    },
    /// Show the audit log: executions (newest first) with their tool calls, or with
    /// --approvals the decisions on calls that waited for approval. Reads the log's
    /// files directly, read-only, so run it as the daemon's user or root:
    /// `sudo -u airlock airlock audit --dir /var/lib/airlock --since 1h`.
    Audit(AuditArgs),
}

#[derive(Debug, Subcommand)]
enum ServerCommand {
    /// Start a fresh instance of the server as the daemon would (its environment, secrets and
    /// confinement), list its tools, report the time to ready and stop it: what to run after
    /// editing a policy and `airlock reload`. Exits 1 if it does not start.
    Test {
        /// The `[[server]]`'s name.
        name: String,
        /// Print the daemon's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SessionCommand {
    /// Your sessions, most recently used first.
    List,
    /// One session: its recorded calls and its executions.
    Show { id: String },
    /// Delete a session and everything recorded in it.
    Delete { id: String },
}

fn replay_mode(text: &str) -> Result<ReplayMode, String> {
    match text {
        "all" => Ok(ReplayMode::All),
        "writes" => Ok(ReplayMode::Writes),
        "none" => Ok(ReplayMode::None),
        other => Err(format!(
            "`{other}` is not a replay mode: all, writes or none"
        )),
    }
}

#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// Executions since a time: a duration back from now (90s, 15m, 1h, 2d, 1w) or a UTC
    /// time (2026-11-22, 2026-11-22T10:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = since)]
    since: Option<std::time::SystemTime>,
    /// Executions of this principal.
    #[arg(long, value_name = "NAME")]
    principal: Option<String>,
    /// Executions that called a matching tool (`*` matches anything: `github.*`); only the
    /// matching calls are listed.
    #[arg(long, value_name = "GLOB")]
    tool: Option<String>,
    /// The execution with this id.
    #[arg(long, value_name = "ID")]
    execution: Option<String>,
    /// At most this many executions.
    #[arg(long, value_name = "N", default_value_t = audit_log::query::DEFAULT_LIMIT)]
    limit: usize,
    /// One JSON object per execution and line, instead of the table.
    #[arg(long)]
    json: bool,
    /// Show the approval decisions instead of executions, newest first: who approved or
    /// denied which call, or that it expired. --since, --principal, --tool, --execution and
    /// --limit then select decisions.
    #[arg(long)]
    approvals: bool,
    /// The audit directory. Default: the policy's [audit] directory with --config, else
    /// $STATE_DIRECTORY, $XDG_STATE_HOME/airlock or ~/.local/state/airlock.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The daemon's policy file, to find its [audit] directory.
    #[arg(long, value_name = "FILE", conflicts_with = "dir")]
    config: Option<PathBuf>,
}

fn since(text: &str) -> Result<std::time::SystemTime, audit_log::timestamp::TimeError> {
    audit_log::timestamp::parse_since(text, std::time::SystemTime::now())
}

#[derive(Debug, Subcommand)]
enum SdkCommand {
    /// List the SDK's files (path and size).
    Tree,
    /// Print one file, e.g. `README.md` or `servers/github/index.ts`.
    Cat { path: String },
    /// Find tools by words; prints one-line signatures, best first.
    Search {
        /// The words to look for.
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
        /// How many results (1 to 100).
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Write every file under DIR, for agents that browse a file system.
    Write { dir: PathBuf },
    /// What the daemon learned of your tools' results: each tool's learned output type, from
    /// how many results since when, and where results contradicted a declared output schema.
    Learned {
        /// One tool (`namespace.tool`); all of them without it.
        tool: Option<String>,
        /// Print the daemon's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget what was learned of TOOL's results (`namespace.tool`); it is learned afresh
    /// from its next result.
    Forget { tool: String },
    /// Token figures (cl100k_base): every tool definition as a classic tool-calling prompt
    /// carries it (an OpenAI-style `tools` JSON array) against the SDK's entry point.
    Stats {
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Report every problem of a policy file and its `policy.d` drop-ins (file:line:column),
    /// and load its OpenAPI and GraphQL documents. Exit 0 = valid.
    Check {
        /// The main policy file.
        #[arg(default_value = DEFAULT_POLICY)]
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Say which principal admits a user and which rule decides a tool call, where the daemon
    /// keeps its state and how each stdio server is confined. Asks the running daemon (root
    /// or its own user) unless --config names a policy file to read instead. Exit 0 = allowed.
    /// With --server NAME (and no uid or tool): only what that server may read, write and
    /// execute, and the rule that granted each path.
    Explain {
        /// A policy file to explain instead of the running daemon's policy (its paths are then
        /// those a daemon started here would use).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The caller's uid (its groups are looked up in the user database).
        #[arg(long, required_unless_present = "server")]
        uid: Option<u32>,
        /// The caller's primary gid (default: the user's, from the user database).
        #[arg(long)]
        gid: Option<u32>,
        /// The tool, as `server.tool`.
        #[arg(required_unless_present = "server")]
        tool: Option<String>,
        /// One `[[server]]`: how it would be confined, each path with its reason.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["uid", "tool", "gid"])]
        server: Option<String>,
    },
}

/// Where packaged installs keep the policy.
const DEFAULT_POLICY: &str = "/etc/airlock/policy.toml";

#[derive(Debug, Subcommand)]
enum SecretCommand {
    /// Store a secret. The value is read from stdin (on a terminal: a prompt, input hidden),
    /// never from the command line, where `ps` and shell history would show it. One trailing
    /// newline is dropped, so `printf '%s' "$TOKEN" | …` and `echo "$TOKEN" | …` store the same.
    Set {
        /// The secret's name as the policy writes it: 1 to 128 of `A-Z a-z 0-9 . _ -`.
        name: String,
        /// Anything after the name: refused, without repeating it (it may be the value).
        #[arg(hide = true, num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<OsString>,
    },
    /// List the names of the secrets this user's daemon would find, and where (never values).
    List,
    /// Remove a secret from the kernel keyring.
    Delete {
        /// The secret's name.
        name: String,
    },
}

const EXIT_PROGRAM_FAILED: u8 = 1;
const EXIT_TIMEOUT: u8 = 2;
const EXIT_REQUEST_FAILED: u8 = 3;
/// The program waits for someone outside the daemon (its id is printed).
const EXIT_WAITING: u8 = 4;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("airlock: {e}");
            return ExitCode::from(EXIT_REQUEST_FAILED);
        }
    };
    match runtime.block_on(dispatch(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("airlock: {e:#}");
            ExitCode::from(EXIT_REQUEST_FAILED)
        }
    }
}

/// `airlock policy check|explain`: reads the files itself, so it works with the daemon down.
fn policy(action: PolicyCommand) -> Result<ExitCode> {
    match action {
        PolicyCommand::Check { file, json } => {
            let check = check_policy(&file, None);
            if json {
                println!("{}", serde_json::to_string_pretty(&check)?);
            } else {
                for line in &check.summary {
                    println!("{line}");
                }
                for warning in &check.warnings {
                    eprintln!("{warning}");
                }
                for problem in &check.problems {
                    eprintln!("{problem}");
                }
                if check.ok() {
                    println!("{}: ok ({} file(s))", file.display(), check.files.len());
                } else {
                    eprintln!(
                        "{}: {} problem(s); airlockd would refuse this policy",
                        file.display(),
                        check.problems.len()
                    );
                }
            }
            Ok(if check.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_PROGRAM_FAILED)
            })
        }
        PolicyCommand::Explain {
            config,
            uid,
            gid,
            tool,
            server,
        } => {
            let Some(config) = config else {
                bail!("airlock policy explain asks the daemon unless --config names a file");
            };
            let policy = Policy::load(&config)?;
            if let Some(name) = server {
                let Some(server) = policy.servers.iter().find(|s| s.name == name) else {
                    bail!(
                        "{} has no [[server]] named `{name}` (its servers: {})",
                        config.display(),
                        server_names(&policy)
                    );
                };
                println!("{}", describe_server_here(&policy, server, &config));
                return Ok(ExitCode::SUCCESS);
            }
            let (Some(uid), Some(tool)) = (uid, tool) else {
                bail!("explain needs --uid and a tool (or --server NAME)");
            };
            let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                .with_context(|| format!("cannot look up uid {uid}"))?;
            let gid = gid
                .or_else(|| user.as_ref().map(|u| u.gid.as_raw()))
                .unwrap_or(uid);
            // The socket reports the supplementary groups of the connecting process; for a
            // user's login processes those are its groups in the group database.
            let groups = match &user {
                Some(user) => {
                    let name = std::ffi::CString::new(user.name.as_str())
                        .context("user name with a NUL byte")?;
                    nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid))
                        .with_context(|| format!("cannot list the groups of {}", user.name))?
                        .into_iter()
                        .map(|g| g.as_raw())
                        .collect()
                }
                None => Vec::new(),
            };
            if let Some(user) = &user {
                println!("uid {uid} is {}; gid {gid}; groups {groups:?}", user.name);
            } else {
                println!("uid {uid} is not in the user database; gid {gid}; no groups");
            }
            let explanation = policy.explain(Caller { uid, gid, groups }, &tool);
            println!("{explanation}");
            print_server_confinement(&policy, &config);
            Ok(if explanation.allowed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_PROGRAM_FAILED)
            })
        }
    }
}

/// `airlock policy explain --server NAME` without `--config`: how the running daemon confines
/// that server (`GET /v1/policy/explain?server=NAME`).
async fn explain_server_by_daemon(socket: PathBuf, name: &str) -> Result<ExitCode> {
    let mut client = Client::connect(&socket).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}; `airlock policy explain --config FILE --server NAME` explains a policy file without a daemon"
        )
    })?;
    let path = format!("/v1/policy/explain?server={}", path_segment(name));
    let (status, body) = client.get(&path).await?;
    let v = answer_json(status, &body)?;
    println!("{}", v["description"].as_str().unwrap_or_default());
    println!(
        "policy in force: {}",
        v["policy"].as_str().unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

/// `airlock policy explain` without `--config`: the running daemon's policy and paths
/// (`GET /v1/policy/explain`).
async fn explain_by_daemon(
    socket: PathBuf,
    uid: u32,
    gid: Option<u32>,
    tool: &str,
) -> Result<ExitCode> {
    let mut client = Client::connect(&socket).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}; `airlock policy explain --config FILE` explains a policy file without a daemon"
        )
    })?;
    let mut path = format!("/v1/policy/explain?uid={uid}&tool={}", path_segment(tool));
    if let Some(gid) = gid {
        path.push_str(&format!("&gid={gid}"));
    }
    let (status, body) = client.get(&path).await?;
    let v = answer_json(status, &body)?;
    let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
    let groups = v["groups"].to_string();
    match v["user"].as_str() {
        Some(user) => println!("uid {uid} is {user}; gid {}; groups {groups}", v["gid"]),
        None => println!(
            "uid {uid} is not in the user database; gid {}; no groups",
            v["gid"]
        ),
    }
    println!("{}", text("explanation"));
    println!("policy in force: {}", text("policy"));
    let paths = &v["paths"];
    let shown = |value: &serde_json::Value, none: &str| {
        value
            .as_str()
            .map_or_else(|| none.to_owned(), str::to_owned)
    };
    println!(
        "state directory: {}",
        shown(&paths["state_directory"], "none (nothing is kept on disk)")
    );
    println!("  audit log: {}", shown(&paths["audit"], "off"));
    println!(
        "  journal: {}",
        shown(&paths["journal"], "off or unavailable")
    );
    println!(
        "  learned types: {}",
        shown(&paths["learned"], "in memory only")
    );
    println!(
        "  tool servers' scratch directories: {}",
        shown(&paths["servers"], "-")
    );
    for server in v["servers"].as_array().into_iter().flatten() {
        println!("{}", server.as_str().unwrap_or_default());
    }
    Ok(if v["allowed"] == serde_json::Value::Bool(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROGRAM_FAILED)
    })
}

/// How each stdio server of `policy` would be confined (what `airlockd` would hand its
/// launcher), for `airlock policy explain`.
/// The names of a policy's servers, for an error.
fn server_names(policy: &Policy) -> String {
    let names: Vec<&str> = policy.servers.iter().map(|s| s.name.as_str()).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// How `server` of `policy` (the file `config`) would be confined by a daemon started here.
fn describe_server_here(
    policy: &Policy,
    server: &airlock_policy::ToolServer,
    config: &std::path::Path,
) -> String {
    use airlock_supervisor::tools::sources::mcp::confinement::describe_server;
    describe_server(
        server,
        &host_here(&state_here(policy), config).with_server_user(airlock_supervisor::daemon::server_user(&policy.daemon)),
        &SecretStore::empty(),
    )
        .unwrap_or_else(|| {
            format!(
                "server `{}`: a Streamable HTTP server, reached at its url; nothing is started or confined",
                server.name
            )
        })
}

/// The state directory a daemon started here on `policy` would use.
fn state_here(policy: &Policy) -> PathBuf {
    policy
        .daemon
        .state_directory
        .clone()
        .or_else(|| airlock_supervisor::audit_log::default_directory(|k| std::env::var_os(k)).ok())
        .unwrap_or_else(|| std::env::temp_dir().join("airlock"))
}

/// Where a daemon started beside this CLI would put its launcher and servers' scratch.
fn host_here(
    state: &std::path::Path,
    config: &std::path::Path,
) -> airlock_supervisor::tools::sources::mcp::ServerHost {
    // The launcher airlockd would use is the one beside its worker: where `airlockd` beside
    // this CLI would find it.
    let worker = airlock_supervisor::daemon::default_worker_path(
        &std::env::current_exe()
            .unwrap_or_default()
            .with_file_name("airlockd"),
    );
    let hidden = vec![
        config.to_owned(),
        airlock_policy::policy_file::drop_in_directory(config),
    ];
    airlock_supervisor::tools::sources::mcp::ServerHost::new(&worker, state, hidden)
}

fn print_server_confinement(policy: &Policy, config: &std::path::Path) {
    use airlock_supervisor::tools::sources::mcp::confinement::describe_server;
    let store = SecretStore::empty();
    let host = host_here(&state_here(policy), config)
        .with_server_user(airlock_supervisor::daemon::server_user(&policy.daemon));
    for described in policy
        .servers
        .iter()
        .filter_map(|server| describe_server(server, &host, &store))
    {
        println!("{described}");
    }
}

/// The daemon's socket: the one given, else the default. (Resolved only by the commands that
/// talk to the daemon: `airlock secret` needs none.)
fn daemon_socket(given: Option<PathBuf>) -> Result<PathBuf> {
    match given {
        Some(s) => Ok(s),
        None => Ok(socket_path::client_socket_path()?),
    }
}

async fn dispatch(args: Args) -> Result<ExitCode> {
    match args.command {
        Command::Secret { action } => secret(action),
        Command::Policy { action } => match action {
            PolicyCommand::Explain {
                config: None,
                server: Some(name),
                ..
            } => explain_server_by_daemon(daemon_socket(args.socket)?, &name).await,
            PolicyCommand::Explain {
                config: None,
                uid: Some(uid),
                gid,
                tool: Some(tool),
                server: None,
            } => explain_by_daemon(daemon_socket(args.socket)?, uid, gid, &tool).await,
            action => policy(action),
        },
        Command::Reload => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = client.post("/v1/reload", Bytes::new()).await?;
            let Ok(report) = serde_json::from_str::<ReloadReport>(&body) else {
                bail!("the daemon answered {status}: {body}");
            };
            for warning in &report.warnings {
                eprintln!("{warning}");
            }
            if report.ok {
                println!(
                    "policy reloaded: generation {} from {}",
                    report.generation,
                    report.files.join(", ")
                );
                if !report.restart_needed.is_empty() {
                    println!(
                        "changed, but only applied when airlockd restarts: {}",
                        report.restart_needed.join(", ")
                    );
                }
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!(
                    "reload failed; the daemon keeps the policy it has (generation {}):",
                    report.generation
                );
                for problem in &report.problems {
                    eprintln!("{problem}");
                }
                Ok(ExitCode::from(EXIT_PROGRAM_FAILED))
            }
        }
        Command::Audit(args) => {
            let dir = audit_log::query::directory(args.dir, args.config.as_deref())?;
            let query = audit_log::AuditQuery {
                since: args.since,
                principal: args.principal,
                tool: args.tool,
                execution: args.execution,
                limit: args.limit,
            };
            if args.approvals {
                print!(
                    "{}",
                    audit_log::query::render_approvals(&dir, &query, args.json)?
                );
            } else {
                print!("{}", audit_log::query::render(&dir, &query, args.json)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sdk { action } => {
            let client = Client::connect(&daemon_socket(args.socket)?).await?;
            sdk(client, action).await
        }
        Command::Servers { json } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = client.get("/v1/servers").await?;
            let v = answer_json(status, &body)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(ExitCode::SUCCESS);
            }
            let servers = v["servers"].as_array().cloned().unwrap_or_default();
            if servers.is_empty() {
                println!("the policy in force has no [[server]]");
            }
            for server in &servers {
                print_server(server);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Server {
            action: ServerCommand::Test { name, json },
        } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let path = format!("/v1/servers/{}/test", path_segment(&name));
            let (status, body) = client.post(&path, Bytes::new()).await?;
            let v = answer_json(status, &body)?;
            let ok = v["ok"].as_bool().unwrap_or(false);
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else if ok {
                let tools: Vec<&str> = v["tools"]
                    .as_array()
                    .map(|t| t.iter().filter_map(|n| n.as_str()).collect())
                    .unwrap_or_default();
                println!(
                    "server `{name}` started and listed {} tool(s) in {} ms (protocol {}): {}",
                    tools.len(),
                    v["ready_ms"],
                    v["protocol"].as_str().unwrap_or("?"),
                    tools.join(", ")
                );
            } else {
                eprintln!(
                    "server `{name}` did not start ({} ms): {}",
                    v["ready_ms"],
                    v["error"].as_str().unwrap_or_default()
                );
                if let Some(hint) = v["hint"].as_str() {
                    eprintln!("hint: {hint}");
                }
                if let Some(stderr) = v["stderr"].as_str() {
                    eprintln!("its stderr ended with: {stderr}");
                }
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_PROGRAM_FAILED)
            })
        }
        Command::Health => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = client.get("/v1/health").await?;
            let pretty = serde_json::from_str::<serde_json::Value>(&body)
                .and_then(|v| serde_json::to_string_pretty(&v))
                .unwrap_or(body);
            println!("{pretty}");
            Ok(if status.is_success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_REQUEST_FAILED)
            })
        }
        Command::Exec {
            file,
            code,
            javascript,
            timeout_ms,
            json,
            session,
            new_session,
            replay,
            detach,
        } => {
            let (code, by_extension) = match (code, file) {
                (Some(code), _) => (code, None),
                (None, Some(path)) => {
                    let code = std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    let js = path
                        .extension()
                        .is_some_and(|e| e == "js" || e == "mjs" || e == "cjs");
                    (code, Some(js))
                }
                (None, None) => {
                    if std::io::stdin().is_terminal() {
                        eprintln!("airlock: reading the program from stdin (end with Ctrl-D)");
                    }
                    let mut code = String::new();
                    std::io::stdin()
                        .read_to_string(&mut code)
                        .context("cannot read stdin")?;
                    (code, None)
                }
            };
            let language = if javascript || by_extension == Some(true) {
                RequestLanguage::Javascript
            } else {
                RequestLanguage::Typescript
            };
            let request = ExecutionRequest {
                code,
                language,
                timeout_ms,
                session: if new_session {
                    Some(NEW_SESSION.to_owned())
                } else {
                    session
                },
                replay,
                wait: detach.then_some(false),
                ..Default::default()
            };
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            if detach {
                let body = serde_json::to_vec(&request)?;
                let (status, body) = client.post("/v1/executions", Bytes::from(body)).await?;
                let accepted = answer_json(status, &body)?;
                println!("{}", accepted["id"].as_str().unwrap_or_default());
                return Ok(ExitCode::SUCCESS);
            }
            let response = if json {
                let response = client.execute(&request).await?;
                println!("{}", serde_json::to_string_pretty(&response)?);
                response
            } else {
                // The execution's id and session, from its first event: what to say when the
                // connection is cut before its result.
                let mut started: Option<(String, Option<String>)> = None;
                let streamed = client
                    .execute_streaming(&request, |event| {
                        if let ExecutionEvent::Started { id, session } = event {
                            started = Some((id.clone(), session.clone()));
                        }
                        print_console(event);
                    })
                    .await;
                let response = match (streamed, started) {
                    (Ok(response), _) => response,
                    (Err(e), Some((id, session))) => {
                        bail!("{}", cut_off(&e, &id, session.as_deref()))
                    }
                    (Err(e), None) => return Err(e.into()),
                };
                report(&response);
                response
            };
            Ok(exit_code(&response))
        }
        Command::Status { id } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = client
                .get(&format!("/v1/executions/{}", path_segment(&id)))
                .await?;
            let value = answer_json(status, &body)?;
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(
                match serde_json::from_value::<ExecutionResponse>(value.clone()) {
                    Ok(response) => exit_code(&response),
                    // Known only by its journal row (interrupted, resumed, expired, …).
                    Err(_) => match value["status"].as_str() {
                        Some("running" | "waiting") => ExitCode::from(EXIT_WAITING),
                        _ => ExitCode::from(EXIT_PROGRAM_FAILED),
                    },
                },
            )
        }
        Command::Logs { id, follow, after } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let response = client
                .events(&id, after, follow, |_, event| print_console(event))
                .await?;
            Ok(match response {
                Some(response) => {
                    report(&response);
                    exit_code(&response)
                }
                None => ExitCode::from(EXIT_WAITING),
            })
        }
        Command::Mcp => {
            let socket = daemon_socket(args.socket)?;
            let (input, output) = airlock_supervisor::api::mcp::relay::stdio();
            airlock_supervisor::api::mcp::relay::relay(&socket, input, output).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Approvals => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = client.get("/v1/approvals").await?;
            let value = answer_json(status, &body)?;
            let approvals = value["approvals"].as_array().cloned().unwrap_or_default();
            if approvals.is_empty() {
                println!("no approvals wait");
            }
            for a in approvals {
                println!(
                    "{}  {}  call {} of {} ({})",
                    a["id"].as_str().unwrap_or_default(),
                    a["tool"].as_str().unwrap_or_default(),
                    a["call"],
                    a["execution"].as_str().unwrap_or_default(),
                    a["principal"].as_str().unwrap_or_default(),
                );
                println!("    args: {}", a["args"]);
                if let Some(excerpt) = a["excerpt"].as_str() {
                    for line in excerpt.lines() {
                        println!("    {line}");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Approve { id, reason } => {
            decide(daemon_socket(args.socket)?, "approve", &id, reason).await
        }
        Command::Deny { id, reason } => {
            decide(daemon_socket(args.socket)?, "deny", &id, reason).await
        }
        Command::Cancel { id } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = client
                .delete(&format!("/v1/executions/{}", path_segment(&id)))
                .await?;
            let value = answer_json(status, &body)?;
            println!("{id}: {}", value["status"].as_str().unwrap_or("cancelled"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Resume { id, json } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let response = client.resume(&id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&response)?);
            } else {
                print!("{}", response.stdout);
                eprint!("{}", response.stderr);
                report(&response);
            }
            Ok(exit_code(&response))
        }
        Command::Session { action } => {
            let mut client = Client::connect(&daemon_socket(args.socket)?).await?;
            let (status, body) = match &action {
                SessionCommand::List => client.get("/v1/sessions").await?,
                SessionCommand::Show { id } => {
                    client
                        .get(&format!("/v1/sessions/{}", path_segment(id)))
                        .await?
                }
                SessionCommand::Delete { id } => {
                    client
                        .delete(&format!("/v1/sessions/{}", path_segment(id)))
                        .await?
                }
            };
            let value = answer_json(status, &body)?;
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The JSON of a successful answer, or the API's error.
/// One server of `airlock servers`, as a few indented lines.
fn print_server(server: &serde_json::Value) {
    let text = |key: &str| server[key].as_str().unwrap_or_default().to_owned();
    let state = match text("state").as_str() {
        "ready" => format!(
            "ready, pid {}, {} tool(s), protocol {}",
            server["pid"],
            server["tools"],
            text("protocol")
        ),
        "failed" => format!(
            "failed {} time(s) in a row, next try in {} ms",
            server["failures"], server["next_retry_ms"]
        ),
        "not_started" => "not started (it starts on first use)".to_owned(),
        other => other.replace('_', " "),
    };
    println!("{} ({}): {state}", text("name"), text("transport"));
    println!("  runs: {}", text("target"));
    println!("  confinement: {}", text("confinement"));
    if let Some(error) = server["last_error"].as_str() {
        println!("  last error: {error}");
    }
    if let Some(hint) = server["hint"].as_str() {
        println!("  hint: {hint}");
    }
    if let Some(stderr) = server["stderr"].as_str() {
        println!("  stderr: {stderr}");
    }
}

fn answer_json(status: hyper::StatusCode, body: &str) -> Result<serde_json::Value> {
    if !status.is_success() {
        return Err(api_error(status, body.as_bytes()).into());
    }
    Ok(serde_json::from_str(body)?)
}

/// `airlock approve|deny ID`: an approver's decision.
async fn decide(
    socket: PathBuf,
    decision: &str,
    id: &str,
    reason: Option<String>,
) -> Result<ExitCode> {
    let mut client = Client::connect(&socket).await?;
    let body = serde_json::json!({ "decision": decision, "reason": reason });
    let (status, body) = client
        .post(
            &format!("/v1/approvals/{}", path_segment(id)),
            Bytes::from(body.to_string()),
        )
        .await?;
    let value = answer_json(status, &body)?;
    println!(
        "{id}: {}; execution {} is {}",
        value["decision"].as_str().unwrap_or_default(),
        value["execution"].as_str().unwrap_or_default(),
        value["status"].as_str().unwrap_or_default(),
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints a console event to stdout or stderr as the program wrote it.
/// What to tell the user when the stream of execution `id` broke before its result: which
/// execution and session it was, how to see how it ended, and how to run again without
/// repeating what it already did.
fn cut_off(error: &ClientError, id: &str, session: Option<&str>) -> String {
    let mut text = format!(
        "the connection to the daemon was cut before execution {id} ended ({error}); the daemon stops an execution whose client is gone: `airlock status {id}` shows how it ended (`airlock resume {id}` finishes one a daemon restart interrupted)"
    );
    match session {
        Some(session) => text.push_str(&format!(
            "; it ran in session {session}: `airlock exec --session {session} …` runs the program again, answering the calls it made from the journal"
        )),
        None => text.push_str(
            "; it ran in no session, so running it again repeats its tool calls (`--session new` records them next time)",
        ),
    }
    text
}

fn print_console(event: &ExecutionEvent) {
    if let ExecutionEvent::Console { stream, text, .. } = event {
        match stream {
            ConsoleStream::Stdout => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
            ConsoleStream::Stderr => eprintln!("{text}"),
        }
    }
}

/// A path segment, percent-encoded.
fn path_segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The exit status of a finished execution.
fn exit_code(response: &ExecutionResponse) -> ExitCode {
    match response.status {
        Status::Ok => ExitCode::SUCCESS,
        // Cancelled only reaches a client that is gone; counted as a failure anyway.
        Status::Error | Status::Cancelled => ExitCode::from(EXIT_PROGRAM_FAILED),
        Status::Timeout => ExitCode::from(EXIT_TIMEOUT),
        Status::Waiting | Status::Queued | Status::Running => ExitCode::from(EXIT_WAITING),
    }
}

/// Prints the result (stdout) or the error (stderr) after the streamed console output.
fn report(response: &ExecutionResponse) {
    if let Some(session) = &response.session {
        eprintln!(
            "airlock: session {session}: {} of {} tool call(s) replayed from its journal",
            response.replayed_calls,
            response.tool_calls.len()
        );
    }
    if response.stderr.contains("[airlock: console output over") {
        eprintln!("airlock: some console output was dropped (over the output limit)");
    }
    match &response.error {
        None => {
            if !response.result.is_null() {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&response.result).unwrap_or_default()
                );
            }
        }
        Some(err) => {
            let name = err
                .name
                .as_deref()
                .map(|n| format!("{n}: "))
                .unwrap_or_default();
            eprintln!("error[{}]: {name}{}", err.kind, err.message);
            if let (Some(line), Some(col)) = (err.line, err.column) {
                eprintln!("  at line {line}, column {col}");
            } else if let Some(line) = err.line {
                eprintln!("  at line {line}");
            }
            if let Some(excerpt) = &err.excerpt {
                eprint!("{excerpt}");
            }
            if let Some(stack) = &err.stack {
                for l in stack.lines().filter(|l| !l.trim().is_empty()) {
                    eprintln!("  {}", l.trim());
                }
            }
            if let Some(hint) = &err.hint {
                eprintln!("  hint: {hint}");
            }
            for call in response.tool_calls.iter().filter(|c| c.outcome != "ok") {
                let msg = call
                    .error
                    .as_ref()
                    .map(|e| e.message.as_str())
                    .unwrap_or("");
                eprintln!(
                    "  tool call #{} {} {}: {msg}",
                    call.id, call.tool, call.outcome
                );
                if let Some(hint) = call.error.as_ref().and_then(|e| e.hint.as_deref()) {
                    eprintln!("    hint: {hint}");
                }
            }
        }
    }
}

/// `airlock secret …`: the kernel keyring of this user, directly (no daemon involved).
/// `airlock sdk …`: reads the SDK from the daemon's discovery API.
async fn sdk(mut client: Client, action: SdkCommand) -> Result<ExitCode> {
    let mut get_ok = async |path: &str| -> Result<String> {
        let (status, body) = client.get(path).await?;
        if !status.is_success() {
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(body);
            bail!("{message}");
        }
        Ok(body)
    };
    match action {
        SdkCommand::Tree => {
            let listing: serde_json::Value = serde_json::from_str(&get_ok("/v1/sdk").await?)?;
            for file in listing["files"].as_array().into_iter().flatten() {
                println!(
                    "{:>9}  {}",
                    file["bytes"],
                    file["path"].as_str().unwrap_or_default()
                );
            }
            report_unavailable(&listing);
        }
        SdkCommand::Cat { path } => {
            print!(
                "{}",
                get_ok(&format!("/v1/sdk/{}", encode_path(&path))).await?
            );
        }
        SdkCommand::Search { words, limit } => {
            let query = encode_query(&words.join(" "));
            let found: serde_json::Value = serde_json::from_str(
                &get_ok(&format!("/v1/tools/search?q={query}&limit={limit}")).await?,
            )?;
            let results = found["results"].as_array().cloned().unwrap_or_default();
            if results.is_empty() {
                eprintln!(
                    "airlock: no tool matches; `airlock sdk cat README.md` lists the namespaces"
                );
            }
            for hit in results {
                println!("{}", hit["signature"].as_str().unwrap_or_default());
                if let Some(summary) = hit["summary"].as_str().filter(|s| !s.is_empty()) {
                    println!("    {summary}");
                }
            }
            report_unavailable(&found);
        }
        SdkCommand::Stats { json } => {
            let answer: serde_json::Value = serde_json::from_str(&get_ok("/v1/tools").await?)?;
            let definitions: Vec<ToolDefinition> = serde_json::from_value(answer["tools"].clone())
                .context("the daemon's GET /v1/tools answer has no tool list")?;
            let readme = get_ok("/v1/sdk/README.md").await?;
            let figures = token_figures::measure(&definitions, &readme)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&figures)?);
            } else {
                println!(
                    "tool definitions, as a classic tools array: {:>9} tokens ({} tools)",
                    figures.definitions_tokens, figures.tools
                );
                println!(
                    "SDK entry point (README.md):               {:>9} tokens",
                    figures.entry_point_tokens
                );
                println!(
                    "reduction:                                 {:>9.2} %",
                    figures.reduction_percent
                );
                println!(
                    "(tokenizer {}; the tools array is OpenAI-style JSON, compact, with each tool's name, description and input schema)",
                    figures.tokenizer
                );
            }
            report_unavailable(&answer);
        }
        SdkCommand::Learned { tool, json } => {
            let path = match &tool {
                Some(tool) => format!("/v1/sdk/learned?tool={}", encode_query(tool)),
                None => "/v1/sdk/learned".to_owned(),
            };
            let answer: serde_json::Value = serde_json::from_str(&get_ok(&path).await?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
                return Ok(ExitCode::SUCCESS);
            }
            let learned = answer["learned"].as_array().cloned().unwrap_or_default();
            if learned.is_empty() {
                eprintln!(
                    "airlock: nothing is learned yet; types are learned from your tools' successful results"
                );
            }
            for entry in learned {
                println!(
                    "tools.{}: learned from {} result(s) since {}{}",
                    entry["tool"].as_str().unwrap_or_default(),
                    entry["results"],
                    entry["since"].as_str().unwrap_or_default(),
                    if entry["declared"] == true {
                        " (the tool declares an output schema)"
                    } else {
                        ""
                    }
                );
                for line in entry["typescript"].as_str().unwrap_or_default().lines() {
                    println!("    {line}");
                }
                for drift in entry["drift"].as_array().into_iter().flatten() {
                    println!("    drift: {}", drift.as_str().unwrap_or_default());
                }
            }
        }
        SdkCommand::Forget { tool } => {
            let (status, body) = client
                .delete(&format!("/v1/sdk/learned/{}", encode_path(&tool)))
                .await?;
            if !status.is_success() {
                let answer = serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default();
                let message = answer["error"]["message"].as_str().unwrap_or(&body);
                match answer["error"]["hint"].as_str() {
                    Some(hint) => bail!("{message} ({hint})"),
                    None => bail!("{message}"),
                }
            }
            eprintln!("airlock: forgot what was learned of tools.{tool}");
        }
        SdkCommand::Write { dir } => {
            let listing: serde_json::Value = serde_json::from_str(&get_ok("/v1/sdk").await?)?;
            let mut written = 0;
            for file in listing["files"].as_array().into_iter().flatten() {
                let Some(path) = file["path"].as_str() else {
                    continue;
                };
                // The daemon's paths are relative and plain; refuse anything else rather than
                // write outside DIR.
                if path
                    .split('/')
                    .any(|part| part.is_empty() || part == "." || part == "..")
                {
                    bail!("refusing the SDK path {path:?}");
                }
                let text = get_ok(&format!("/v1/sdk/{}", encode_path(path))).await?;
                let target = dir.join(path);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                std::fs::write(&target, text)
                    .with_context(|| format!("cannot write {}", target.display()))?;
                written += 1;
            }
            eprintln!("airlock: wrote {written} file(s) under {}", dir.display());
            report_unavailable(&listing);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn report_unavailable(answer: &serde_json::Value) {
    for source in answer["unavailable"].as_array().into_iter().flatten() {
        eprintln!(
            "airlock: tools of `{}` are missing: {}",
            source["namespace"].as_str().unwrap_or_default(),
            source["error"].as_str().unwrap_or_default()
        );
    }
}

/// Percent-encodes what a URL path segment cannot hold (keeps `/`).
fn encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn encode_query(text: &str) -> String {
    encode_path(text).replace('/', "%2F")
}

fn secret(action: SecretCommand) -> Result<ExitCode> {
    let keyring = KernelKeyring::new();
    let whose = user_label(keyring.uid());
    match action {
        SecretCommand::Set { name, rest } => {
            if !rest.is_empty() {
                anyhow::bail!(
                    "unexpected argument after the name: the value is read from stdin, never from the command line (`ps` and shell history would show it); try: airlock secret set {name} < file"
                );
            }
            if !airlock_policy::sources::server::is_secret_name(&name) {
                anyhow::bail!(
                    "`{name}` is not a valid secret name (1 to 128 ASCII letters, digits, `.`, `_` and `-`)"
                );
            }
            let value = read_value(&name)?;
            keyring
                .set(&name, &value)
                .with_context(|| format!("cannot store secret `{name}`"))?;
            eprintln!(
                "airlock: stored secret `{name}` in the kernel keyring of {whose}; an airlockd running as this user uses it the next time it starts a server that needs it"
            );
            if keyring.uid() == 0 {
                eprintln!(
                    "airlock: note: the packaged airlockd runs as `airlock`; for it use `sudo -u airlock airlock secret set {name}`"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        SecretCommand::List => {
            let listing = SecretStore::from_environment(false).names();
            let mut out = std::io::stdout().lock();
            for secret in &listing.found {
                writeln!(out, "{}\t{}", secret.name, secret.backend)?;
            }
            for problem in &listing.problems {
                eprintln!("airlock: warning: {problem}");
            }
            if listing.found.is_empty() {
                eprintln!("airlock: no secrets for {whose}");
            }
            Ok(if listing.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_REQUEST_FAILED)
            })
        }
        SecretCommand::Delete { name } => {
            if keyring
                .delete(&name)
                .with_context(|| format!("cannot delete secret `{name}`"))?
            {
                eprintln!("airlock: deleted secret `{name}` from the kernel keyring of {whose}");
                Ok(ExitCode::SUCCESS)
            } else {
                anyhow::bail!("there is no secret `{name}` in the kernel keyring of {whose}")
            }
        }
    }
}

/// "uid 999 (airlock)".
fn user_label(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("uid {uid} ({})", user.name),
        _ => format!("uid {uid}"),
    }
}

/// The secret's value from stdin: a hidden prompt on a terminal, else all of stdin. Exactly one
/// trailing newline is dropped (as for systemd credential files); an empty value is refused.
fn read_value(name: &str) -> Result<Zeroizing<String>> {
    let limit = kernel_keyring::MAX_VALUE_BYTES;
    let mut bytes = if std::io::stdin().is_terminal() {
        eprint!("value of secret `{name}` (input hidden, end with Enter): ");
        // ECHONL still echoes the Enter, so the next message starts on its own line.
        hidden_terminal::read_line(limit + 1)?
    } else {
        read_stdin(limit + 1)?
    };
    if bytes.len() > limit {
        anyhow::bail!(
            "the value is longer than {limit} bytes, the most a kernel keyring key holds"
        );
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.is_empty() {
        anyhow::bail!(
            "the value is empty: give it on stdin, e.g. `airlock secret set {name} < token-file`"
        );
    }
    if std::str::from_utf8(&bytes).is_err() {
        anyhow::bail!(
            "the value is not valid UTF-8 (secrets end up in environment variables and HTTP headers)"
        );
    }
    if bytes.contains(&0) {
        anyhow::bail!(
            "the value contains a NUL byte, which no environment variable or header can carry"
        );
    }
    // Checked above; the bytes move into the `String` without a copy.
    Ok(Zeroizing::new(
        String::from_utf8(std::mem::take(&mut *bytes)).unwrap_or_default(),
    ))
}

/// Up to `limit` bytes of stdin, read straight from fd 0 into one zeroed-on-drop buffer
/// (`std::io::Stdin` would keep a copy in its own buffer).
fn read_stdin(limit: usize) -> Result<Zeroizing<Vec<u8>>> {
    let mut buffer = Zeroizing::new(vec![0u8; limit]);
    let mut len = 0;
    while len < limit {
        match nix::unistd::read(std::io::stdin(), &mut buffer[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("cannot read the value from stdin"),
        }
    }
    buffer.truncate(len);
    Ok(buffer)
}

/// Reading a line from the terminal without echoing it.
mod hidden_terminal {
    use anyhow::{Context, Result};
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    use nix::sys::termios::{LocalFlags, SetArg, Termios, tcgetattr, tcsetattr};
    use std::sync::OnceLock;
    use zeroize::{Zeroize, Zeroizing};

    /// The terminal settings to put back if a signal ends the process mid-prompt.
    static SAVED: OnceLock<libc::termios> = OnceLock::new();

    /// Puts echo back when the prompt ends, however it ends (an error, a panic).
    struct Restore(Termios);

    impl Drop for Restore {
        fn drop(&mut self) {
            // TCSAFLUSH: whatever was typed beyond the limit goes, rather than to the shell.
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSAFLUSH, &self.0);
        }
    }

    extern "C" fn restore_and_die(signal: libc::c_int) {
        if let Some(saved) = SAVED.get() {
            // SAFETY: tcsetattr, signal and raise are async-signal-safe; `saved` points to a
            // `termios` that is written once before this handler is installed and never again.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSAFLUSH, saved);
            }
        }
        // SAFETY: as above; the default action then ends the process with this signal, as if
        // the handler had not been there.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    /// One line (without its newline) of at most `limit` bytes, typed without echo. Ctrl-C
    /// and friends end the process as usual, with the terminal's echo back on.
    pub fn read_line(limit: usize) -> Result<Zeroizing<Vec<u8>>> {
        let stdin = std::io::stdin();
        let original = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
        let _ = SAVED.set(original.clone().into());
        for signal in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            let action = SigAction::new(
                SigHandler::Handler(restore_and_die),
                SaFlags::empty(),
                SigSet::empty(),
            );
            // SAFETY: the handler only makes async-signal-safe calls (see `restore_and_die`).
            unsafe { sigaction(signal, &action) }.context("cannot install a signal handler")?;
        }
        let mut hidden = original.clone();
        hidden.local_flags.remove(LocalFlags::ECHO);
        // The Enter still moves the cursor to the next line.
        hidden.local_flags.insert(LocalFlags::ECHONL);
        let _restore = Restore(original);
        tcsetattr(&stdin, SetArg::TCSAFLUSH, &hidden).context("cannot turn off echo")?;
        // Byte by byte from fd 0 (the terminal delivers whole lines anyway), into one buffer.
        let mut line = Zeroizing::new(Vec::with_capacity(limit));
        let mut byte = [0u8; 1];
        while line.len() < limit {
            match nix::unistd::read(&stdin, &mut byte) {
                Ok(0) => break,
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) => line.push(byte[0]),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e).context("cannot read from the terminal"),
            }
        }
        // The last byte read may be part of the value.
        byte.zeroize();
        Ok(line)
    }
}
