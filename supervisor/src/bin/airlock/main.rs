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
//!
//! One module per subcommand family; `args` holds the command line of them all and `daemon`
//! what the commands that talk to the daemon share.

// The arguments' doc comments are clap's help text, written for a terminal (`[audit]` is a
// policy table, `<NAME>` a placeholder), not rustdoc's markdown.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod approvals;
mod args;
mod audit;
mod daemon;
mod exec;
mod health;
mod mcp;
mod policy;
mod reload;
mod sdk;
mod secret;
mod servers;
mod sessions;

use anyhow::Result;
use args::{Args, Command, ServerCommand};
use clap::Parser;
use std::process::ExitCode;

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

/// Hands each subcommand to its module. `socket` is only resolved by the commands that talk to
/// the daemon (`airlock secret` and `airlock audit` need none), each at the point where it did.
async fn dispatch(args: Args) -> Result<ExitCode> {
    let socket = args.socket;
    match args.command {
        Command::Exec(exec) => exec::exec(socket, exec).await,
        Command::Status { id } => exec::status(socket, &id).await,
        Command::Logs { id, follow, after } => exec::logs(socket, &id, follow, after).await,
        Command::Cancel { id } => exec::cancel(socket, &id).await,
        Command::Resume { id, json } => exec::resume(socket, &id, json).await,
        Command::Approvals => approvals::list(socket).await,
        Command::Approve { id, reason } => approvals::decide(socket, "approve", &id, reason).await,
        Command::Deny { id, reason } => approvals::decide(socket, "deny", &id, reason).await,
        Command::Session { action } => sessions::run(socket, action).await,
        Command::Mcp => mcp::run(socket).await,
        Command::Health => health::run(socket).await,
        Command::Sdk { action } => sdk::run(socket, action).await,
        Command::Policy { action } => policy::run(socket, action).await,
        Command::Reload => reload::run(socket).await,
        Command::Servers { json } => servers::list(socket, json).await,
        Command::Server {
            action: ServerCommand::Test { name, json },
        } => servers::test(socket, &name, json).await,
        Command::Secret { action } => secret::run(action),
        Command::Audit(args) => audit::run(args),
    }
}
