//! Tool servers named in `[[server]]` the way their READMEs and package managers install them,
//! under the default confinement and with nothing else set: npm's `.bin` link (a link into the
//! package whose `#!/usr/bin/env node` needs a `PATH`), `npx` in a project, a console script
//! pip wrote into the Python that has the package, a virtualenv's console script (its
//! `bin/python` a link to a Python elsewhere), `npm install -g`, `uv tool install`, `uvx` and
//! `npx -y` downloading through a `network` list, and a static binary. Each answers a call. And a server that fails
//! says why: its last stderr lines travel in the error, its secrets redacted.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{
    NetworkRule, ServerNetwork, ServerTransport, SettingValue, StartMode, ToolServer,
};
use airlock_supervisor::agent_api::Status;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::{McpServer, ServerHost};
use airlock_tests::{DaemonOptions, TestDaemon, mcp_peers};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn stdio(name: &str, command: &str, args: &[&str]) -> ToolServer {
    ToolServer {
        name: name.to_owned(),
        transport: ServerTransport::Stdio {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            cwd: None,
            env: Vec::new(),
            inherit_env: Vec::new(),
        },
        start: StartMode::Lazy,
        call_timeout_ms: 30_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
        dynamic_tools: false,
        confinement: Default::default(),
    }
}

async fn daemon_with(servers: Vec<ToolServer>, secrets: SecretStore) -> TestDaemon {
    let secrets = Arc::new(secrets);
    let mut options = DaemonOptions::default();
    for server in servers {
        options = options.source(Arc::new(McpServer::new(server, secrets.clone())));
    }
    TestDaemon::start_with(options).await
}

const THINK: &str = r#"await tools.thinking.sequentialthinking({ thought: "one step", thoughtNumber: 1, totalThoughts: 1, nextThoughtNeeded: false })"#;

/// tests/mcp-peers/ (npm ci'd by .ci/run), or `None` with the skip reported.
fn peers(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-peers");
    let bin = dir.join("node_modules/.bin/mcp-server-sequential-thinking");
    // The same check (and CI's requirement) as every npm peer.
    mcp_peers::npm_server("thinking", "server-sequential-thinking", &[], test)?;
    bin.exists().then_some(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_npm_bin_link_starts_confined() {
    let Some(peers) = peers("an_npm_bin_link_starts_confined") else {
        return;
    };
    let bin = peers.join("node_modules/.bin/mcp-server-sequential-thinking");
    let d = daemon_with(
        vec![stdio("thinking", bin.to_str().unwrap(), &[])],
        SecretStore::empty(),
    )
    .await;
    let r = d.exec(THINK).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npx_in_a_project_starts_confined() {
    let Some(peers) = peers("npx_in_a_project_starts_confined") else {
        return;
    };
    if !Path::new("/usr/bin/npx").exists() && !Path::new("/usr/local/bin/npx").exists() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "npx is missing (.ci/run installs npm)"
        );
        eprintln!("SKIPPED npx_in_a_project_starts_confined: npx is missing");
        return;
    }
    // As an MCP server's README says, `npx -y <package>`: found on the base PATH, run from a
    // project that has the package (so npx needs no download), its cache in the scratch HOME.
    let mut server = stdio(
        "thinking",
        "npx",
        &["-y", "@modelcontextprotocol/server-sequential-thinking"],
    );
    if let ServerTransport::Stdio { cwd, .. } = &mut server.transport {
        *cwd = Some(peers.clone());
    }
    let d = daemon_with(vec![server], SecretStore::empty()).await;
    let r = d.exec(THINK).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

/// The Python that has mcp_server_time, and its scripts directory, or `None` (skip reported).
fn python_with_time(test: &str) -> Option<(String, PathBuf)> {
    let ToolServer { transport, .. } =
        mcp_peers::python_module_server("time", "mcp_server_time", &[], test)?;
    let ServerTransport::Stdio { command, .. } = transport else {
        return None;
    };
    let out = std::process::Command::new(&command)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .output()
        .unwrap();
    let scripts = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Some((command, scripts))
}

/// The time server started as `script`, under the default confinement, answers a call.
async fn the_time_server_answers(script: &Path) {
    the_time_server_answers_as(stdio("time", script.to_str().unwrap(), &[])).await;
}

/// The time server of the entry `server` answers a call.
async fn the_time_server_answers_as(server: ToolServer) {
    let program = format!(
        r#"const t: any = await tools.{}.get_current_time({{ timezone: "UTC" }}); t"#,
        server.name
    );
    let d = daemon_with(vec![server], SecretStore::empty()).await;
    let r = d.exec(&program).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(r.result.to_string().contains("UTC"), "{}", r.result);
    d.stop().await;
}

/// `name` (`uv` or `uvx`) beside the Python that has mcp_server_time, or `None` (skip
/// reported; CI requires it).
fn uv_binary(test: &str, name: &str) -> Option<PathBuf> {
    let (python, scripts) = python_with_time(test)?;
    let binary = scripts.join(name);
    if !binary.is_file() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "uv is not installed beside {python} (.ci/run installs it with pip)"
        );
        eprintln!("SKIPPED {test}: {name} is missing (pip install uv)");
        return None;
    }
    Some(binary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_script_pip_installed_starts_confined() {
    let Some((_, scripts)) = python_with_time("a_console_script_pip_installed_starts_confined")
    else {
        return;
    };
    let script = scripts.join("mcp-server-time");
    assert!(script.is_file(), "pip installs {}", script.display());
    the_time_server_answers(&script).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtualenv_console_script_starts_confined() {
    let Some((python, _)) = python_with_time("a_virtualenv_console_script_starts_confined") else {
        return;
    };
    // A virtualenv whose `bin/python` links to the Python that has the package (pyenv's, here),
    // which its pyvenv.cfg names as `home`; the console script is the one pip writes.
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = std::process::Command::new(&python)
        .args(["-m", "venv", "--without-pip", "--system-site-packages"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let script = venv.join("bin/mcp-server-time");
    std::fs::write(
        &script,
        format!(
            "#!{}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom mcp_server_time import main\nif __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n",
            venv.join("bin/python").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    the_time_server_answers(&script).await;
}

/// A server that exits at once, saying why on stderr (and printing its token): the program's
/// error quotes its last words, with the token redacted, and the hint says where to look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_says_why_and_keeps_its_secret() {
    let mut server = stdio(
        "broken",
        "sh",
        &[
            "-c",
            "echo starting >&2; echo \"fatal: the API refused token $API_TOKEN (HOME is $HOME, LANG $LANG)\" >&2; exit 3",
        ],
    );
    if let ServerTransport::Stdio { env, .. } = &mut server.transport {
        env.push(("API_TOKEN".into(), SettingValue::Secret("api-token".into())));
    }
    let secrets =
        SecretStore::with_values([("api-token".to_owned(), "tok-4f9a8b7c6d5e".to_owned())]);
    let d = daemon_with(vec![server], secrets).await;
    let r = d.exec("await tools.broken.anything({})").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let error = r.error.as_ref().unwrap();
    let message = &error.message;
    assert!(message.contains("is unavailable"), "{message}");
    assert!(
        message.contains("its stderr ended with: starting | fatal: the API refused token"),
        "{message}"
    );
    assert!(!message.contains("tok-4f9a8b7c6d5e"), "{message}");
    // The base environment: its own scratch directory as HOME, a UTF-8 locale.
    assert!(
        message.contains("/servers/broken, LANG C.UTF-8"),
        "{message}"
    );
    let hint = error.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("last words"), "{error:?}");
    d.stop().await;
}

/// A command that is nowhere on the PATH is named with the PATH searched, before anything
/// is started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_names_the_path_searched() {
    let d = daemon_with(
        vec![stdio("gone", "mcp-server-that-is-not-installed", &[])],
        SecretStore::empty(),
    )
    .await;
    let r = d.exec("await tools.gone.anything({})").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let error = r.error.as_ref().unwrap();
    assert!(
        error.message.contains(
            "`mcp-server-that-is-not-installed` was not found on its PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)"
        ),
        "{error:?}"
    );
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("absolute path"),
        "{error:?}"
    );
    d.stop().await;
}

/// `airlockd --check-config` (which systemd runs before every start) names a server whose
/// command would not start, and what each other one runs; the check still passes, as with a
/// missing secret: only that server fails.
#[test]
fn check_config_names_a_command_that_would_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("server.js");
    std::fs::write(&not_executable, "").unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[server]]\nname = \"gone\"\ncommand = \"mcp-server-that-is-not-installed\"\n\n[[server]]\nname = \"sh\"\ncommand = \"sh\"\n\n[[server]]\nname = \"file\"\ncommand = \"{}\"\n",
            not_executable.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(airlock_tests::binaries::airlockd())
        .arg("--check-config")
        .arg(&policy)
        .env_remove("CREDENTIALS_DIRECTORY")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("warning: server `gone`: `mcp-server-that-is-not-installed` was not found on its PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin): it will not start"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: server `file`: {} is not an executable file",
            not_executable.display()
        )),
        "{stderr}"
    );
    assert!(stdout.contains("server `sh`: runs /"), "{stdout}");
    assert!(!stderr.contains("server `sh`"), "{stderr}");
}

/// The real `airlockd` refuses itself write-execute memory (as the systemd unit's
/// `MemoryDenyWriteExecute=` did) without passing it on: a Node server, whose V8 JIT needs such
/// memory, answers, confined, under it.
#[test]
fn a_node_server_runs_under_the_daemon_s_write_execute_refusal() {
    let test = "a_node_server_runs_under_the_daemon_s_write_execute_refusal";
    let Some(config) = mcp_peers::server_everything("everything", test) else {
        return;
    };
    let ServerTransport::Stdio { command, args, .. } = config.transport else {
        unreachable!("server_everything is a stdio server")
    };
    let dir = tempfile::tempdir().unwrap();
    let policy = format!(
        "[daemon]\npool_size = 1\nserver_user = \"root\"\n\n[[principal]]\nname = \"local\"\nusers = [\"@daemon\"]\nallow = [\"everything.*\"]\n\n[[server]]\nname = \"everything\"\ncommand = {command:?}\nargs = {args:?}\ncall_timeout_ms = 30000\n"
    );
    let mut daemon = airlock_tests::real_daemon::RealDaemon::start(dir.path(), &policy, |_| {});
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = runtime.block_on(async {
        let mut client = airlock_supervisor::client::Client::connect(&daemon.socket)
            .await
            .unwrap();
        let request = airlock_supervisor::agent_api::ExecutionRequest {
            code: r#"await tools.everything.echo({ message: "jit" })"#.to_owned(),
            timeout_ms: Some(30_000),
            ..Default::default()
        };
        client.execute(&request).await.unwrap()
    });
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(r.result.to_string().contains("jit"), "{}", r.result);
    daemon.stop();
    let log = daemon.log();
    assert!(
        log.contains("write-execute memory refused to the daemon (PR_SET_MDWE"),
        "{log}"
    );
}

/// A server that starts and never answers the handshake: the start ends at its time limit and
/// the error quotes what it said it waits for, with a hint that says where to look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_the_handshake_says_what_it_waits_for() {
    let server = stdio(
        "waiting",
        "sh",
        &[
            "-c",
            "echo 'Open https://example.com/device to log in' >&2; exec sleep 60",
        ],
    );
    let source = McpServer::new(server, Arc::new(SecretStore::empty()))
        .with_start_timeout(std::time::Duration::from_secs(1));
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(source))).await;
    let r = d.exec("await tools.waiting.anything({})").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let error = r.error.as_ref().unwrap();
    assert!(
        error.message.contains("it did not finish starting within 1s; its stderr ended with: Open https://example.com/device to log in"),
        "{error:?}"
    );
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("does not answer the MCP handshake"),
        "{error:?}"
    );
    d.stop().await;
}

/// `uvx mcp-server-time`, as the server's README says: uv (pip-installed here) resolves the
/// package from PyPI into its cache under the scratch HOME on the first start, and runs it
/// with a Python found on the base PATH. Needs PyPI, as `.ci/run` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uvx_starts_confined() {
    let Some(uvx) = uv_binary("uvx_starts_confined", "uvx") else {
        return;
    };
    // First from PyPI, with nothing cached and nothing but PyPI in its network list (reached
    // through the daemon's proxy), then again with the cache that left in the scratch HOME,
    // offline and with no network at all: a warm cache is all `uvx` needs.
    fresh_scratch("uvx_time");
    let pypi = ["pypi.org:443", "files.pythonhosted.org:443"];
    for (args, network) in [
        (&["mcp-server-time"][..], listed(&pypi)),
        (&["--offline", "mcp-server-time"][..], ServerNetwork::None),
    ] {
        // Its own name, so its scratch directory (and uv's cache there) is its own.
        let mut server = stdio("uvx_time", uvx.to_str().unwrap(), args);
        // uv trusts its own bundled roots unless told to use the system's (this machine's
        // registries are reached through a proxy with a CA of its own, in the system's store).
        if let ServerTransport::Stdio { env, .. } = &mut server.transport {
            env.push(("UV_NATIVE_TLS".into(), SettingValue::Literal("1".into())));
        }
        server.confinement.network = network;
        the_time_server_answers_as(server).await;
    }
}

/// The scratch directory (`HOME`) of server `name` as the test daemon makes it, emptied: its
/// package manager's cache from an earlier run gone, so the next start downloads.
fn fresh_scratch(name: &str) {
    let dir = ServerHost::discover().scratch_root.join(name);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{}: {e}", dir.display()),
        _ => {}
    }
}

/// A `network` list of `entries`.
fn listed(entries: &[&str]) -> ServerNetwork {
    ServerNetwork::Allow(
        entries
            .iter()
            .map(|e| NetworkRule::parse(e).unwrap())
            .collect(),
    )
}

/// `npx -y <package>` as the README says, with nothing installed or cached and only the npm
/// registry in its network list: npx downloads the package through the daemon's proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npx_downloads_through_its_network_list() {
    if peers("npx_downloads_through_its_network_list").is_none() {
        return;
    }
    fresh_scratch("npx_listed");
    let mut server = stdio(
        "npx_listed",
        "npx",
        &[
            "-y",
            "@modelcontextprotocol/server-sequential-thinking@2026.8.31",
        ],
    );
    // Node trusts its own bundled roots, and the system's store only when told (this
    // machine's registries are reached through a proxy with a CA of its own, in that store).
    if let ServerTransport::Stdio { env, .. } = &mut server.transport {
        env.push((
            "NODE_EXTRA_CA_CERTS".into(),
            SettingValue::Literal("/etc/ssl/certs/ca-certificates.crt".into()),
        ));
    }
    server.confinement.network = listed(&["registry.npmjs.org:443"]);
    let d = daemon_with(vec![server], SecretStore::empty()).await;
    let r = d
        .exec(&THINK.replace("tools.thinking", "tools.npx_listed"))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

/// `npm install -g`: the server named by its bin name alone, found on the base PATH (a link
/// into the global node_modules under the system's prefix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_npm_install_starts_confined() {
    let test = "a_global_npm_install_starts_confined";
    let name = "mcp-server-sequential-thinking";
    let found = airlock_policy::BASE_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "{name} is not installed globally (.ci/run runs npm install -g)"
        );
        eprintln!(
            "SKIPPED {test}: npm install -g @modelcontextprotocol/server-sequential-thinking"
        );
        return;
    }
    let d = daemon_with(vec![stdio("thinking", name, &[])], SecretStore::empty()).await;
    let r = d.exec(THINK).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

/// `uv tool install mcp-server-time`: its console script is a link into uv's tool
/// environment, whose `bin/python` links to the Python uv chose. (uv installs from PyPI here,
/// into folders of the test's own.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uv_tool_install_starts_confined() {
    let Some(uv) = uv_binary("a_uv_tool_install_starts_confined", "uv") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (tools, bin) = (dir.path().join("tools"), dir.path().join("bin"));
    let installed = std::process::Command::new(&uv)
        .args([
            "tool",
            "install",
            "--native-tls",
            "mcp-server-time==2026.10.19",
        ])
        .env("UV_TOOL_DIR", &tools)
        .env("UV_TOOL_BIN_DIR", &bin)
        .env("UV_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "uv tool install: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let script = bin.join("mcp-server-time");
    assert!(
        std::fs::symlink_metadata(&script).is_ok_and(|m| m.file_type().is_symlink()),
        "uv links {} into its tool environment",
        script.display()
    );
    the_time_server_answers(&script).await;
}

/// A server shipped as one static binary and put under `/opt` (as a release download is):
/// the Rust filesystem server from crates.io, built statically linked by `.ci/run`. Confined,
/// it reads the directory its arguments name and writes the one its `write` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_binary_starts_confined() {
    let binary = Path::new("/opt/rust-mcp-filesystem/bin/rust-mcp-filesystem");
    if !binary.exists() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "{} is missing (.ci/run builds it)",
            binary.display()
        );
        eprintln!(
            "SKIPPED a_static_binary_starts_confined: {} is missing",
            binary.display()
        );
        return;
    }
    assert!(
        !airlock_tests::binaries::dynamically_linked(binary),
        "{} is not statically linked",
        binary.display()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "hello from a static binary").unwrap();
    let shared = dir.path().to_str().unwrap();
    let mut server = stdio(
        "files",
        binary.to_str().unwrap(),
        &["--allow-write", shared],
    );
    server.confinement.write = vec![dir.path().to_owned()];
    server.confinement.network = ServerNetwork::None;
    let d = daemon_with(vec![server], SecretStore::empty()).await;
    let program = format!(
        r#"const read: any = await tools.files.read_text_file({{ path: "{shared}/note.txt" }});
await tools.files.write_file({{ path: "{shared}/written.txt", content: "written confined" }});
JSON.stringify(read)"#
    );
    let r = d.exec(&program).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.result.to_string().contains("hello from a static binary"),
        "{}",
        r.result
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("written.txt")).unwrap(),
        "written confined"
    );
    d.stop().await;
}
