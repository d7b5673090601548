//! The daemon's log subscriber: text or JSON lines on stderr (journald's input under
//! systemd), filtered by `AIRLOCK_LOG` (default `info`), every line scanned for secrets before
//! it is written. `airlockd` installs it; so does the spine benchmark, whose in-process daemon
//! must pay for the same log as the one that ships (its execution span costs each execution
//! ~10 µs at `info`, measured in docs/performance.md).

use crate::secrets::scanner::{RedactingMakeWriter, SharedScanner};
use std::io::IsTerminal as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::{SubscriberInitExt as _, TryInitError};

/// How each log line is written (`airlockd --log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    // Plain comments, not doc comments: clap would show them in `--help`.
    // Plain text (colours only on a terminal).
    Text,
    // One JSON object per line.
    Json,
}

/// Installs the daemon's subscriber for this process. Fails if one is installed already.
pub fn init(format: LogFormat, scanner: SharedScanner) -> Result<(), TryInitError> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // rmcp logs whole JSON-RPC messages at TRACE: tool results, and any secret a server
    // echoes in them, would reach the log. Its DEBUG events stay available.
    let no_message_dumps = tracing_subscriber::filter::filter_fn(|meta| {
        !(*meta.level() == tracing::Level::TRACE && meta.target().starts_with("rmcp"))
    });
    let layer = tracing_subscriber::fmt::layer()
        // journald and log files get plain text; colours only on a terminal.
        .with_ansi(std::io::stderr().is_terminal())
        // Every line is scanned before it is written: a credential in an error message or a
        // debug field never reaches the journal.
        .with_writer(RedactingMakeWriter::new(std::io::stderr, scanner));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry
            .with(layer.with_filter(no_message_dumps))
            .try_init(),
        LogFormat::Json => registry
            .with(layer.json().with_filter(no_message_dumps))
            .try_init(),
    }
}
