//! The fault-injection MCP server (`src/bin/airlock-mcp-fault-server.rs`, built with `rmcp`'s
//! server side) as a `[[server]]` for the tests and the MCP benchmark: over stdio as the daemon
//! starts it, or in Streamable HTTP mode as a process the test owns. Its tools (`echo`,
//! `sleep`, `crash`, `hang`, `big`, `garbage`, `add_tool`, `progress`, `stderr`, `meta`, `sloppy`) and
//! flags are documented in the binary.

use airlock_policy::{ServerTransport, StartMode, ToolServer};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The built `airlock-mcp-fault-server`, next to the other binaries of this profile (cargo
/// builds a package's binaries before its tests and benches).
pub fn binary() -> PathBuf {
    let path = crate::binaries::target_profile_dir().join("airlock-mcp-fault-server");
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p airlock-tests` builds it",
        path.display()
    );
    path
}

/// A lazily started stdio `[[server]]` named `name` running the fault server with `args`
/// (e.g. `--fail-start`), with a short call timeout so the hang-style faults end quickly.
pub fn stdio(name: &str, args: &[&str]) -> ToolServer {
    ToolServer {
        name: name.to_owned(),
        transport: ServerTransport::Stdio {
            command: binary().display().to_string(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            cwd: None,
            env: Vec::new(),
            inherit_env: Vec::new(),
        },
        start: StartMode::Lazy,
        call_timeout_ms: 2_000,
        max_concurrent_calls: 16,
        coerce: Default::default(),
        learn_types: true,
        dynamic_tools: false,
        confinement: Default::default(),
    }
}

/// The fault server in Streamable HTTP mode on a free loopback port, killed when dropped.
#[derive(Debug)]
pub struct HttpFaultServer {
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    child: Child,
}

impl HttpFaultServer {
    /// Starts it with `args` besides `--http 127.0.0.1:0` and reads the URL it prints first.
    pub fn start(args: &[&str]) -> std::io::Result<HttpFaultServer> {
        let mut child = Command::new(binary())
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        let read = match child.stdout.take() {
            Some(out) => std::io::BufReader::new(out).read_line(&mut line),
            None => Ok(0),
        };
        let url = line.trim().to_owned();
        if read.is_err() || !url.starts_with("http://") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "the fault server printed no URL (got {line:?})"
            )));
        }
        Ok(HttpFaultServer { url, child })
    }

    /// A `[[server]]` named `name` reaching this server over Streamable HTTP.
    pub fn config(&self, name: &str) -> ToolServer {
        ToolServer {
            name: name.to_owned(),
            transport: ServerTransport::Http {
                url: self.url.clone(),
                headers: Vec::new(),
            },
            start: StartMode::Lazy,
            call_timeout_ms: 2_000,
            max_concurrent_calls: 16,
            coerce: Default::default(),
            learn_types: true,
            dynamic_tools: false,
            confinement: Default::default(),
        }
    }

    /// The server's process id (for tests that kill it or wait for it to exit).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HttpFaultServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
