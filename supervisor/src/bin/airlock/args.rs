//! The command line: every subcommand, its flags and their defaults (clap's derive), and the
//! parsers of the values clap cannot check by itself (a replay mode, a language, a `--since`
//! time).

use airlock_supervisor::agent_api::{ReplayMode, RequestLanguage};
use airlock_supervisor::audit_log;
use airlock_supervisor::sdk::Language;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(version, about = "Run programs in airlockd's sandbox")]
pub struct Args {
    /// Socket of the daemon. Default: $XDG_RUNTIME_DIR/airlock/airlock.sock if it exists
    /// (/run/airlock/airlock.sock for root), else the system daemon's
    /// /run/airlock/airlock.sock; or $AIRLOCK_SOCKET.
    #[arg(long, global = true, value_name = "PATH", env = "AIRLOCK_SOCKET")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program: a FILE, `-e CODE`, or the program on stdin.
    Exec(ExecArgs),
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

// `airlock exec`'s flags. No doc comment: the variant's is the subcommand's help.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// Program file (.ts, .js or .py). Omit it to read the program from stdin.
    pub file: Option<PathBuf>,
    /// The program text itself.
    #[arg(
        short = 'e',
        long = "eval",
        value_name = "CODE",
        conflicts_with = "file"
    )]
    pub code: Option<String>,
    /// Treat the program as JavaScript (the same as --language javascript).
    #[arg(long, conflicts_with = "language")]
    pub javascript: bool,
    /// The program's language: typescript, javascript or python (default: by the file's
    /// extension, else typescript).
    #[arg(long, value_name = "LANGUAGE", value_parser = language)]
    pub language: Option<RequestLanguage>,
    /// Wall-clock budget in milliseconds (default: the policy's limits.timeout_ms).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Print the whole response as JSON instead of streaming output.
    #[arg(long)]
    pub json: bool,
    /// Run in this session: the tool calls it recorded are answered from its journal
    /// instead of being made again (see `airlock session`).
    #[arg(long, value_name = "ID", conflicts_with = "new_session")]
    pub session: Option<String>,
    /// Run in a new session (its id is printed; pass it to --session next time).
    #[arg(long)]
    pub new_session: bool,
    /// Which recorded calls to replay in a session: all (default), writes (reads run
    /// again), none.
    #[arg(long, value_name = "MODE", value_parser = replay_mode)]
    pub replay: Option<ReplayMode>,
    /// Start it and print its id at once; it runs on without this command (follow it
    /// with `airlock status ID` and `airlock logs -f ID`, stop it with `airlock cancel ID`).
    #[arg(long, conflicts_with = "json")]
    pub detach: bool,
}

#[derive(Debug, Subcommand)]
pub enum ServerCommand {
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
pub enum SessionCommand {
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

fn language(text: &str) -> Result<RequestLanguage, String> {
    match text {
        "typescript" | "javascript" | "python" => Ok(RequestLanguage::from_name(text)),
        other => Err(format!(
            "`{other}` is not a language: typescript, javascript or python"
        )),
    }
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Executions since a time: a duration back from now (90s, 15m, 1h, 2d, 1w) or a UTC
    /// time (2026-11-22, 2026-11-22T10:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = since)]
    pub since: Option<std::time::SystemTime>,
    /// Executions of this principal.
    #[arg(long, value_name = "NAME")]
    pub principal: Option<String>,
    /// Executions that called a matching tool (`*` matches anything: `github.*`); only the
    /// matching calls are listed.
    #[arg(long, value_name = "GLOB")]
    pub tool: Option<String>,
    /// The execution with this id.
    #[arg(long, value_name = "ID")]
    pub execution: Option<String>,
    /// At most this many executions.
    #[arg(long, value_name = "N", default_value_t = audit_log::query::DEFAULT_LIMIT)]
    pub limit: usize,
    /// One JSON object per execution and line, instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Show the approval decisions instead of executions, newest first: who approved or
    /// denied which call, or that it expired. --since, --principal, --tool, --execution and
    /// --limit then select decisions.
    #[arg(long)]
    pub approvals: bool,
    /// The audit directory. Default: the policy's [audit] directory with --config, else
    /// $STATE_DIRECTORY, $XDG_STATE_HOME/airlock or ~/.local/state/airlock.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The daemon's policy file, to find its [audit] directory.
    #[arg(long, value_name = "FILE", conflicts_with = "dir")]
    pub config: Option<PathBuf>,
}

fn since(text: &str) -> Result<std::time::SystemTime, audit_log::timestamp::TimeError> {
    audit_log::timestamp::parse_since(text, std::time::SystemTime::now())
}

#[derive(Debug, Subcommand)]
pub enum SdkCommand {
    /// List the SDK's files (path and size).
    Tree {
        #[command(flatten)]
        language: SdkLanguageArg,
    },
    /// Print one file, e.g. `README.md` or `servers/github/index.ts`
    /// (`servers/github/__init__.pyi` in Python).
    Cat {
        path: String,
        #[command(flatten)]
        language: SdkLanguageArg,
    },
    /// Find tools by words; prints one-line signatures, best first.
    Search {
        /// The words to look for.
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
        /// How many results (1 to 100).
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        language: SdkLanguageArg,
    },
    /// Write every file under DIR, for agents that browse a file system.
    Write {
        dir: PathBuf,
        #[command(flatten)]
        language: SdkLanguageArg,
    },
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

/// `--language`: the SDK in TypeScript (the default) or Python.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct SdkLanguageArg {
    /// The SDK's language: typescript (the default) or python (`.pyi` stubs, Python
    /// signatures).
    #[arg(long = "language", value_name = "LANGUAGE", value_parser = sdk_language)]
    pub language: Option<Language>,
}

impl SdkLanguageArg {
    /// `?language=python` (or `&…` after other parameters) for Python; nothing for the
    /// default, so a TypeScript request is the one it always was.
    pub fn query(self, separator: char) -> String {
        match self.language {
            Some(Language::Python) => format!("{separator}language=python"),
            _ => String::new(),
        }
    }
}

fn sdk_language(text: &str) -> Result<Language, String> {
    Language::parse(text).map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
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
pub enum SecretCommand {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::error::ErrorKind;
    use std::path::Path;

    fn parse(args: &[&str]) -> Command {
        Args::try_parse_from(std::iter::once("airlock").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .command
    }

    fn refused(args: &[&str]) -> clap::Error {
        match Args::try_parse_from(std::iter::once("airlock").chain(args.iter().copied())) {
            Ok(parsed) => panic!("{args:?} parsed as {parsed:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_definitions_are_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn exec_defaults() {
        let Command::Exec(exec) = parse(&["exec", "job.ts"]) else {
            panic!("not exec");
        };
        assert_eq!(exec.file, Some(PathBuf::from("job.ts")));
        assert_eq!(exec.code, None);
        assert!(!exec.javascript && !exec.json && !exec.new_session && !exec.detach);
        assert_eq!(exec.timeout_ms, None);
        assert_eq!(exec.session, None);
        assert_eq!(exec.replay, None);
        let Command::Exec(exec) = parse(&["exec"]) else {
            panic!("not exec");
        };
        assert_eq!(exec.file, None, "no file: the program comes from stdin");
    }

    #[test]
    fn exec_flags() {
        let Command::Exec(exec) = parse(&[
            "exec",
            "-e",
            "return 1",
            "--javascript",
            "--timeout-ms",
            "2500",
            "--json",
            "--session",
            "s-1",
            "--replay",
            "writes",
        ]) else {
            panic!("not exec");
        };
        assert_eq!(exec.code.as_deref(), Some("return 1"));
        assert!(exec.javascript && exec.json);
        assert_eq!(exec.timeout_ms, Some(2500));
        assert_eq!(exec.session.as_deref(), Some("s-1"));
        assert_eq!(exec.replay, Some(ReplayMode::Writes));
        let Command::Exec(exec) = parse(&["exec", "--eval=x", "--new-session", "--detach"]) else {
            panic!("not exec");
        };
        assert_eq!(exec.code.as_deref(), Some("x"));
        assert!(exec.new_session && exec.detach);
    }

    #[test]
    fn exec_refusals() {
        assert_eq!(
            refused(&["exec", "job.ts", "-e", "1"]).kind(),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            refused(&["exec", "--session", "s", "--new-session"]).kind(),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            refused(&["exec", "--detach", "--json"]).kind(),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            refused(&["exec", "--timeout-ms", "soon"]).kind(),
            ErrorKind::ValueValidation
        );
        let e = refused(&["exec", "--replay", "some"]);
        assert_eq!(e.kind(), ErrorKind::ValueValidation);
        assert!(
            e.to_string()
                .contains("`some` is not a replay mode: all, writes or none"),
            "{e}"
        );
    }

    #[test]
    fn languages() {
        assert_eq!(language("python"), Ok(RequestLanguage::Python));
        assert_eq!(language("javascript"), Ok(RequestLanguage::Javascript));
        assert_eq!(language("typescript"), Ok(RequestLanguage::Typescript));
        assert_eq!(
            language("py"),
            Err("`py` is not a language: typescript, javascript or python".to_owned())
        );
        let Command::Exec(exec) = parse(&["exec", "--language", "python", "job.txt"]) else {
            panic!("not exec");
        };
        assert_eq!(exec.language, Some(RequestLanguage::Python));
    }

    #[test]
    fn replay_modes() {
        assert_eq!(replay_mode("all"), Ok(ReplayMode::All));
        assert_eq!(replay_mode("writes"), Ok(ReplayMode::Writes));
        assert_eq!(replay_mode("none"), Ok(ReplayMode::None));
        assert_eq!(
            replay_mode("All"),
            Err("`All` is not a replay mode: all, writes or none".to_owned())
        );
    }

    #[test]
    fn following_executions() {
        assert!(matches!(parse(&["status", "e1"]), Command::Status { id } if id == "e1"));
        assert!(matches!(
            parse(&["logs", "e1"]),
            Command::Logs { id, follow: false, after: 0 } if id == "e1"
        ));
        assert!(matches!(
            parse(&["logs", "-f", "--after", "17", "e1"]),
            Command::Logs {
                follow: true,
                after: 17,
                ..
            }
        ));
        assert!(matches!(
            parse(&["logs", "--follow", "e1"]),
            Command::Logs { follow: true, .. }
        ));
        assert_eq!(
            refused(&["logs", "--after", "-1", "e1"]).kind(),
            ErrorKind::UnknownArgument
        );
        assert_eq!(
            refused(&["logs", "--after", "x", "e1"]).kind(),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            refused(&["status"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert!(matches!(parse(&["cancel", "e1"]), Command::Cancel { id } if id == "e1"));
        assert!(matches!(
            parse(&["resume", "e1"]),
            Command::Resume { json: false, .. }
        ));
        assert!(matches!(
            parse(&["resume", "--json", "e1"]),
            Command::Resume { json: true, id } if id == "e1"
        ));
    }

    #[test]
    fn approvals() {
        assert!(matches!(parse(&["approvals"]), Command::Approvals));
        assert!(matches!(
            parse(&["approve", "a1"]),
            Command::Approve { id, reason: None } if id == "a1"
        ));
        assert!(matches!(
            parse(&["deny", "a1", "--reason", "not on a Friday"]),
            Command::Deny { reason: Some(r), .. } if r == "not on a Friday"
        ));
        assert_eq!(
            refused(&["approve"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
    }

    #[test]
    fn sessions() {
        assert!(matches!(
            parse(&["session", "list"]),
            Command::Session {
                action: SessionCommand::List
            }
        ));
        assert!(matches!(
            parse(&["session", "show", "s1"]),
            Command::Session { action: SessionCommand::Show { id } } if id == "s1"
        ));
        assert!(matches!(
            parse(&["session", "delete", "s1"]),
            Command::Session { action: SessionCommand::Delete { id } } if id == "s1"
        ));
        assert_eq!(
            refused(&["session"]).kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        assert_eq!(
            refused(&["session", "purge"]).kind(),
            ErrorKind::InvalidSubcommand
        );
    }

    #[test]
    fn the_daemon_commands_without_flags() {
        assert!(matches!(parse(&["mcp"]), Command::Mcp));
        assert!(matches!(parse(&["health"]), Command::Health));
        assert!(matches!(parse(&["reload"]), Command::Reload));
        assert!(matches!(
            parse(&["servers"]),
            Command::Servers { json: false }
        ));
        assert!(matches!(
            parse(&["servers", "--json"]),
            Command::Servers { json: true }
        ));
        assert!(matches!(
            parse(&["server", "test", "github", "--json"]),
            Command::Server { action: ServerCommand::Test { name, json: true } } if name == "github"
        ));
        assert_eq!(
            refused(&["server", "test"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
    }

    #[test]
    fn the_socket_is_global() {
        let args = Args::try_parse_from(["airlock", "health", "--socket", "/tmp/a.sock"]).unwrap();
        assert_eq!(args.socket, Some(PathBuf::from("/tmp/a.sock")));
        let args =
            Args::try_parse_from(["airlock", "--socket", "/tmp/b.sock", "status", "e"]).unwrap();
        assert_eq!(args.socket, Some(PathBuf::from("/tmp/b.sock")));
    }

    #[test]
    fn sdk() {
        assert!(matches!(
            parse(&["sdk", "tree"]),
            Command::Sdk {
                action: SdkCommand::Tree {
                    language: SdkLanguageArg { language: None }
                }
            }
        ));
        assert!(matches!(
            parse(&["sdk", "tree", "--language", "python"]),
            Command::Sdk {
                action: SdkCommand::Tree {
                    language: SdkLanguageArg {
                        language: Some(Language::Python)
                    }
                }
            }
        ));
        assert_eq!(
            refused(&["sdk", "tree", "--language", "rust"]).kind(),
            ErrorKind::ValueValidation
        );
        assert!(
            refused(&["sdk", "tree", "--language", "rust"])
                .to_string()
                .contains("`typescript` (the default) and `python`")
        );
        assert!(matches!(
            parse(&["sdk", "cat", "servers/github/index.ts"]),
            Command::Sdk { action: SdkCommand::Cat { path, .. } } if path == "servers/github/index.ts"
        ));
        let Command::Sdk {
            action:
                SdkCommand::Search {
                    words,
                    limit,
                    language,
                },
        } = parse(&["sdk", "search", "open", "issue", "--language", "python"])
        else {
            panic!("not sdk search");
        };
        assert_eq!(words, ["open", "issue"]);
        assert_eq!(limit, 10);
        assert_eq!(language.query('&'), "&language=python");
        assert_eq!(SdkLanguageArg { language: None }.query('?'), "");
        assert!(matches!(
            parse(&["sdk", "search", "--limit", "3", "x"]),
            Command::Sdk {
                action: SdkCommand::Search { limit: 3, .. }
            }
        ));
        assert_eq!(
            refused(&["sdk", "search"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert!(matches!(
            parse(&["sdk", "write", "out"]),
            Command::Sdk { action: SdkCommand::Write { dir, .. } } if dir == Path::new("out")
        ));
        assert!(matches!(
            parse(&["sdk", "learned"]),
            Command::Sdk {
                action: SdkCommand::Learned {
                    tool: None,
                    json: false
                }
            }
        ));
        assert!(matches!(
            parse(&["sdk", "learned", "github.list", "--json"]),
            Command::Sdk { action: SdkCommand::Learned { tool: Some(t), json: true } } if t == "github.list"
        ));
        assert!(matches!(
            parse(&["sdk", "forget", "github.list"]),
            Command::Sdk { action: SdkCommand::Forget { tool } } if tool == "github.list"
        ));
        assert!(matches!(
            parse(&["sdk", "stats", "--json"]),
            Command::Sdk {
                action: SdkCommand::Stats { json: true }
            }
        ));
    }

    #[test]
    fn policy_check() {
        let Command::Policy {
            action: PolicyCommand::Check { file, json },
        } = parse(&["policy", "check"])
        else {
            panic!("not policy check");
        };
        assert_eq!(file, PathBuf::from("/etc/airlock/policy.toml"));
        assert!(!json);
        assert!(matches!(
            parse(&["policy", "check", "p.toml", "--json"]),
            Command::Policy { action: PolicyCommand::Check { file, json: true } } if file == Path::new("p.toml")
        ));
    }

    #[test]
    fn policy_explain() {
        let Command::Policy {
            action:
                PolicyCommand::Explain {
                    config,
                    uid,
                    gid,
                    tool,
                    server,
                },
        } = parse(&["policy", "explain", "--uid", "1000", "github.list"])
        else {
            panic!("not policy explain");
        };
        assert_eq!((config, uid, gid), (None, Some(1000), None));
        assert_eq!(tool.as_deref(), Some("github.list"));
        assert_eq!(server, None);
        assert!(matches!(
            parse(&[
                "policy", "explain", "--config", "p.toml", "--uid", "0", "--gid", "5", "a.b"
            ]),
            Command::Policy {
                action: PolicyCommand::Explain {
                    config: Some(_),
                    gid: Some(5),
                    ..
                }
            }
        ));
        assert!(matches!(
            parse(&["policy", "explain", "--server", "fs"]),
            Command::Policy { action: PolicyCommand::Explain { server: Some(s), uid: None, tool: None, .. } } if s == "fs"
        ));
        assert_eq!(
            refused(&["policy", "explain", "github.list"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            refused(&["policy", "explain", "--uid", "1000"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            refused(&["policy", "explain", "--server", "fs", "--uid", "1"]).kind(),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            refused(&["policy", "explain", "--uid", "-1", "a.b"]).kind(),
            ErrorKind::UnknownArgument
        );
        assert_eq!(
            refused(&["policy", "explain", "--uid", "root", "a.b"]).kind(),
            ErrorKind::ValueValidation
        );
    }

    #[test]
    fn secrets() {
        let Command::Secret {
            action: SecretCommand::Set { name, rest },
        } = parse(&["secret", "set", "github-token"])
        else {
            panic!("not secret set");
        };
        assert_eq!(name, "github-token");
        assert!(rest.is_empty());
        // A value on the command line is taken, to be refused without being repeated.
        let Command::Secret {
            action: SecretCommand::Set { rest, .. },
        } = parse(&["secret", "set", "github-token", "ghp_x", "--not-a-flag"])
        else {
            panic!("not secret set");
        };
        assert_eq!(
            rest,
            [OsString::from("ghp_x"), OsString::from("--not-a-flag")]
        );
        assert!(matches!(
            parse(&["secret", "list"]),
            Command::Secret {
                action: SecretCommand::List
            }
        ));
        assert!(matches!(
            parse(&["secret", "delete", "t"]),
            Command::Secret { action: SecretCommand::Delete { name } } if name == "t"
        ));
        assert_eq!(
            refused(&["secret", "set"]).kind(),
            ErrorKind::MissingRequiredArgument
        );
    }

    #[test]
    fn audit_defaults() {
        let Command::Audit(audit) = parse(&["audit"]) else {
            panic!("not audit");
        };
        assert_eq!(audit.since, None);
        assert_eq!(audit.principal, None);
        assert_eq!(audit.tool, None);
        assert_eq!(audit.execution, None);
        assert_eq!(audit.limit, 100);
        assert!(!audit.json && !audit.approvals);
        assert_eq!(audit.dir, None);
        assert_eq!(audit.config, None);
    }

    #[test]
    fn audit_flags() {
        let before = std::time::SystemTime::now();
        let Command::Audit(audit) = parse(&[
            "audit",
            "--since",
            "1h",
            "--principal",
            "agents",
            "--tool",
            "github.*",
            "--execution",
            "e1",
            "--limit",
            "5",
            "--json",
            "--approvals",
            "--dir",
            "/var/lib/airlock",
        ]) else {
            panic!("not audit");
        };
        let since = audit.since.expect("a --since");
        let back = before.duration_since(since).expect("in the past");
        assert!((3599..3660).contains(&back.as_secs()), "1h back: {back:?}");
        assert_eq!(audit.principal.as_deref(), Some("agents"));
        assert_eq!(audit.tool.as_deref(), Some("github.*"));
        assert_eq!(audit.execution.as_deref(), Some("e1"));
        assert_eq!(audit.limit, 5);
        assert!(audit.json && audit.approvals);
        assert_eq!(audit.dir, Some(PathBuf::from("/var/lib/airlock")));
        let Command::Audit(audit) =
            parse(&["audit", "--since", "2026-11-22", "--config", "p.toml"])
        else {
            panic!("not audit");
        };
        let day = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_305_600);
        assert_eq!(audit.since, Some(day));
        assert_eq!(audit.config, Some(PathBuf::from("p.toml")));
    }

    #[test]
    fn audit_refusals() {
        assert_eq!(
            refused(&["audit", "--since", "yesterday"]).kind(),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            refused(&["audit", "--since", "3 fortnights"]).kind(),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            refused(&["audit", "--dir", "d", "--config", "p.toml"]).kind(),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            refused(&["audit", "--limit", "many"]).kind(),
            ErrorKind::ValueValidation
        );
    }

    #[test]
    fn unknown_commands_and_flags_are_refused() {
        assert_eq!(refused(&["run"]).kind(), ErrorKind::InvalidSubcommand);
        assert_eq!(
            refused(&["health", "--verbose"]).kind(),
            ErrorKind::UnknownArgument
        );
        assert_eq!(
            refused(&[]).kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
    }
}
