//! `airlock`: the command-line client of `airlockd`.
//!
//! Exit codes: 0 the program succeeded, 1 the program failed, 2 it timed out, 3 the request
//! could not be made (daemon unreachable, refused, bad arguments).

use airlock_supervisor::agent_api::{
    ConsoleStream, ExecutionEvent, ExecutionRequest, ExecutionResponse, RequestLanguage, Status,
};
use airlock_supervisor::client::Client;
use airlock_supervisor::socket_path;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

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
    },
    /// Show the daemon's health.
    Health,
}

const EXIT_PROGRAM_FAILED: u8 = 1;
const EXIT_TIMEOUT: u8 = 2;
const EXIT_REQUEST_FAILED: u8 = 3;

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

async fn dispatch(args: Args) -> Result<ExitCode> {
    let socket = match args.socket {
        Some(s) => s,
        None => socket_path::client_socket_path()?,
    };
    match args.command {
        Command::Health => {
            let mut client = Client::connect(&socket).await?;
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
            };
            let mut client = Client::connect(&socket).await?;
            let response = if json {
                let response = client.execute(&request).await?;
                println!("{}", serde_json::to_string_pretty(&response)?);
                response
            } else {
                let response = client
                    .execute_streaming(&request, |event| {
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
                    })
                    .await?;
                report(&response);
                response
            };
            Ok(match response.status {
                Status::Ok => ExitCode::SUCCESS,
                Status::Error => ExitCode::from(EXIT_PROGRAM_FAILED),
                Status::Timeout => ExitCode::from(EXIT_TIMEOUT),
            })
        }
    }
}

/// Prints the result (stdout) or the error (stderr) after the streamed console output.
fn report(response: &ExecutionResponse) {
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
            }
        }
    }
}
