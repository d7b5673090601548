//! Real MCP servers from npm and PyPI for the end-to-end tests, installed by `.ci/run`
//! (`npm ci --prefix tests/mcp-peers`). Without them a test says it was skipped, unless
//! `AIRLOCK_REQUIRE_MCP_PEERS=1` (set by `.ci/run`) makes that a failure.

use airlock_policy::{ServerTransport, StartMode, ToolServer};
use std::path::PathBuf;

/// `@modelcontextprotocol/server-everything`'s entry point, if installed.
pub fn server_everything_entry() -> Option<PathBuf> {
    npm_entry("server-everything")
}

/// The entry point of `@modelcontextprotocol/<package>`, if installed.
pub fn npm_entry(package: &str) -> Option<PathBuf> {
    let entry = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    entry.exists().then_some(entry)
}

/// A `[[server]]` running `@modelcontextprotocol/<package>` over stdio with `args`, or `None`
/// (with the skip reported) when node or the package is missing.
pub fn npm_server(name: &str, package: &str, args: &[&str], test: &str) -> Option<ToolServer> {
    let (Some(node), Some(entry)) = (node(), npm_entry(package)) else {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "{package} is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
        );
        eprintln!(
            "SKIPPED {test}: node or @modelcontextprotocol/{package} is missing (npm ci --prefix tests/mcp-peers)"
        );
        return None;
    };
    let mut all_args = vec![entry.display().to_string()];
    all_args.extend(args.iter().map(|a| (*a).to_owned()));
    Some(ToolServer {
        name: name.to_owned(),
        transport: ServerTransport::Stdio {
            command: node.display().to_string(),
            args: all_args,
            cwd: None,
            env: Vec::new(),
            inherit_env: Vec::new(),
        },
        start: StartMode::Lazy,
        call_timeout_ms: 30_000,
        max_concurrent_calls: 16,
        coerce: Default::default(),
        learn_types: true,
        dynamic_tools: false,
        confinement: Default::default(),
    })
}

/// The absolute path of `node`, if on PATH.
pub fn node() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("node"))
        .find(|p| p.is_file())
}

/// A `[[server]]` running server-everything over stdio, or `None` (with the skip reported)
/// when node or the package is missing.
pub fn server_everything(name: &str, test: &str) -> Option<ToolServer> {
    npm_server(name, "server-everything", &["stdio"], test)
}

/// The Python interpreter that has `module` importable (PyPI MCP servers are run as
/// `python -m <module>`, so the daemon's cleared environment needs no shims), or `None` with
/// the skip reported.
pub fn python_module_server(
    name: &str,
    module: &str,
    args: &[&str],
    test: &str,
) -> Option<ToolServer> {
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            &format!("import sys, {module}; print(sys.executable)"),
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let Some(python) = python else {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "the Python module {module} is not installed (.ci/run installs it with pip)"
        );
        eprintln!(
            "SKIPPED {test}: python3 with {module} is missing (pip install the PyPI package)"
        );
        return None;
    };
    let mut full_args = vec!["-m".to_owned(), module.to_owned()];
    full_args.extend(args.iter().map(|a| (*a).to_owned()));
    Some(ToolServer {
        name: name.to_owned(),
        transport: ServerTransport::Stdio {
            command: python,
            args: full_args,
            cwd: None,
            env: Vec::new(),
            inherit_env: Vec::new(),
        },
        start: StartMode::Lazy,
        call_timeout_ms: 30_000,
        max_concurrent_calls: 16,
        coerce: Default::default(),
        learn_types: true,
        dynamic_tools: false,
        confinement: Default::default(),
    })
}

/// server-everything serving Streamable HTTP on a local port (`/mcp`), killed on drop.
#[derive(Debug)]
pub struct HttpServerEverything {
    child: std::process::Child,
    pub url: String,
}

impl HttpServerEverything {
    /// Starts it and waits until it accepts connections, or `None` (skip reported) when node
    /// or the package is missing.
    pub fn start(test: &str) -> Option<HttpServerEverything> {
        // The kernel picks a free port; the server binds it again a moment later.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("no free local port");
        Self::start_on(port, test)
    }

    /// The same on a given port (to bring a server back where a daemon expects it).
    pub fn start_on(port: u16, test: &str) -> Option<HttpServerEverything> {
        let (Some(node), Some(entry)) = (node(), server_everything_entry()) else {
            assert!(
                std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
                "server-everything is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
            );
            eprintln!("SKIPPED {test}: node or @modelcontextprotocol/server-everything is missing");
            return None;
        };
        let child = std::process::Command::new(node)
            .arg(entry)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cannot start node");
        let server = HttpServerEverything {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "server-everything did not listen on port {port} within 20 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(server)
    }

    /// A `[[server]]` for it.
    pub fn config(&self, name: &str) -> ToolServer {
        ToolServer {
            name: name.to_owned(),
            transport: ServerTransport::Http {
                url: self.url.clone(),
                headers: Vec::new(),
            },
            start: StartMode::Lazy,
            call_timeout_ms: 30_000,
            max_concurrent_calls: 16,
            coerce: Default::default(),
            learn_types: true,
            dynamic_tools: false,
            confinement: Default::default(),
        }
    }

    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|rest| rest.split('/').next())
            .and_then(|p| p.parse().ok())
            .expect("the url has a port")
    }
}

impl Drop for HttpServerEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file or directory of an npm package installed in `tests/mcp-peers` (`.bin/tsc`,
/// `@octokit/openapi/generated/api.github.com.json`). `None`, with a SKIPPED line naming
/// `test`, when it is missing; missing is a failure when `.ci/run` requires the peers.
pub fn npm_package(path: &str, test: &str) -> Option<PathBuf> {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules")
        .join(path);
    if full.exists() {
        return Some(full);
    }
    assert!(
        std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
        "{path} is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
    );
    eprintln!("SKIPPED {test}: {path} is missing (npm ci --prefix tests/mcp-peers)");
    None
}

/// The four real servers models are tried against (npm `server-memory` and
/// `server-everything`, PyPI `mcp-server-time` in UTC and `mcp-server-git` on `repository`,
/// which is made a git repository), as `[[server]]` tables named `memory`, `everything`,
/// `time` and `git`. `None` (skip reported) when any is missing.
pub fn four_real_servers(test: &str, repository: &std::path::Path) -> Option<Vec<ToolServer>> {
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(repository)
        .status();
    assert!(git.is_ok_and(|s| s.success()), "git init failed");
    let repository = repository.display().to_string();
    let mut git = python_module_server(
        "git",
        "mcp_server_git",
        &["--repository", &repository],
        test,
    )?;
    // The server runs `git`; the daemon clears the environment.
    let ServerTransport::Stdio { env, .. } = &mut git.transport else {
        unreachable!("python_module_server is a stdio server")
    };
    env.push((
        "PATH".into(),
        airlock_policy::SettingValue::Literal("/usr/local/bin:/usr/bin:/bin".into()),
    ));
    Some(vec![
        npm_server("memory", "server-memory", &[], test)?,
        npm_server("everything", "server-everything", &["stdio"], test)?,
        python_module_server(
            "time",
            "mcp_server_time",
            &["--local-timezone", "UTC"],
            test,
        )?,
        git,
    ])
}

/// GitHub's REST document (`@octokit/openapi`) as the OpenAPI source `github`, its base URL a
/// closed local port (nothing is sent anywhere). `None` (skip reported) when it is missing.
pub fn github_rest_source(test: &str) -> Option<airlock_policy::OpenApiSource> {
    let spec = npm_package("@octokit/openapi/generated/api.github.com.json", test)?;
    Some(closed_openapi("github", spec))
}

/// An OpenAPI source of `spec` whose base URL is a closed local port: its tools are listed and
/// their arguments checked, and a call that gets through fails to connect.
pub fn closed_openapi(name: &str, spec: PathBuf) -> airlock_policy::OpenApiSource {
    airlock_policy::OpenApiSource {
        name: name.into(),
        spec,
        base_url: Some("http://127.0.0.1:9".into()),
        auth: None,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

/// A GraphQL source of the GitHub GraphQL `schema` whose endpoint is a closed local port.
pub fn closed_github_graphql(schema: PathBuf) -> airlock_policy::GraphQlSource {
    airlock_policy::GraphQlSource {
        name: "ghql".into(),
        schema,
        schema_format: airlock_policy::SchemaFormat::Sdl,
        endpoint: "http://127.0.0.1:9/graphql".into(),
        headers: Vec::new(),
        selection_depth: 2,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
    }
}

/// The daemon both mistakes corpora run against: [`four_real_servers`] (the memory server
/// keeping its graph in a file of its own, so a case can create entities) and
/// [`github_rest_source`], with one commit in the git server's repository so it has a log to
/// read. `None` (the test skipped, saying so) without the peers.
#[derive(Debug)]
pub struct CorpusDaemon {
    pub daemon: crate::TestDaemon,
    /// The repository's path as a quoted string, for the cases' `REPO`.
    pub repo: String,
    _repository: tempfile::TempDir,
    _store: tempfile::TempDir,
}

impl CorpusDaemon {
    pub async fn start(test: &str) -> Option<CorpusDaemon> {
        use airlock_policy::SettingValue;
        use airlock_supervisor::secrets::store::SecretStore;
        use airlock_supervisor::tools::sources::mcp::McpServer;
        use airlock_supervisor::tools::sources::openapi::OpenApiSource;
        use std::sync::Arc;
        let repository = tempfile::tempdir().ok()?;
        let mut servers = four_real_servers(test, repository.path())?;
        let github = github_rest_source(test)?;
        // By default the memory server would write beside its own code, which its
        // confinement forbids.
        let store = tempfile::tempdir().ok()?;
        for server in servers.iter_mut().filter(|s| s.name == "memory") {
            if let ServerTransport::Stdio { env, .. } = &mut server.transport {
                env.push((
                    "MEMORY_FILE_PATH".into(),
                    SettingValue::Literal(store.path().join("memory.jsonl").display().to_string()),
                ));
            }
            server.confinement.write = vec![store.path().to_owned()];
        }
        let mut options = crate::DaemonOptions::default();
        for server in servers {
            options = options.source(Arc::new(McpServer::new(
                server,
                Arc::new(SecretStore::empty()),
            )));
        }
        let github = OpenApiSource::load(github, Arc::new(SecretStore::empty()))
            .expect("the GitHub REST document loads");
        let daemon = crate::TestDaemon::start_with(options.source(Arc::new(github))).await;
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(repository.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .status()
                .is_ok_and(|s| s.success())
        };
        std::fs::write(repository.path().join("a.txt"), "a\n").ok()?;
        assert!(git(&["add", "a.txt"]) && git(&["commit", "-q", "-m", "first"]));
        let repo = format!("{:?}", repository.path().display().to_string());
        Some(CorpusDaemon {
            daemon,
            repo,
            _repository: repository,
            _store: store,
        })
    }
}

/// What an agent reads of a response's failure, for the corpora's "does it name the fix":
/// the error's message, hint and explanation, then the warnings, a line each.
pub fn agent_reads(r: &airlock_supervisor::agent_api::ExecutionResponse) -> String {
    let error = serde_json::to_value(&r.error).unwrap_or_default();
    let mut read = String::new();
    for key in ["message", "hint", "explanation"] {
        if let Some(text) = error.get(key).and_then(|v| v.as_str()) {
            read.push_str(text);
            read.push('\n');
        }
    }
    for warning in &r.warnings {
        read.push_str(warning);
        read.push('\n');
    }
    read
}
