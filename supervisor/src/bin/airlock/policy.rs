//! `airlock policy check|explain`: checking a policy file, and explaining what a policy
//! decides for a caller or how it confines a server, from a file (read here, so it works with
//! the daemon down) or from the running daemon. Describing servers from a file uses the
//! library's own description with the paths a daemon started beside this CLI would use.

use crate::EXIT_PROGRAM_FAILED;
use crate::args::PolicyCommand;
use crate::daemon::{answer_json, daemon_socket, path_segment};
use airlock_policy::{Caller, Policy};
use airlock_supervisor::client::Client;
use airlock_supervisor::generation::check_policy;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::{ServerHost, confinement};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `airlock policy …`: from the running daemon when `explain` names no `--config`, else from
/// the files.
pub async fn run(socket: Option<PathBuf>, action: PolicyCommand) -> Result<ExitCode> {
    match action {
        PolicyCommand::Explain {
            config: None,
            server: Some(name),
            ..
        } => explain_server_by_daemon(daemon_socket(socket)?, &name).await,
        PolicyCommand::Explain {
            config: None,
            uid: Some(uid),
            gid,
            tool: Some(tool),
            server: None,
        } => explain_by_daemon(daemon_socket(socket)?, uid, gid, &tool).await,
        action => policy(action),
    }
}

/// `airlock policy check|explain`: reads the files itself, so it works with the daemon down.
fn policy(action: PolicyCommand) -> Result<ExitCode> {
    match action {
        PolicyCommand::Check { file, json } => check(&file, json),
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
            explain_file(&config, uid, gid, tool, server)
        }
    }
}

/// `airlock policy check FILE`: every problem of the file and its drop-ins. Exit 0 = valid.
fn check(file: &Path, json: bool) -> Result<ExitCode> {
    let check = check_policy(file, None);
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

/// `airlock policy explain --config FILE …`: the decision of the file's policy for a caller
/// and tool, or (`--server NAME`) how it confines one server.
fn explain_file(
    config: &Path,
    uid: Option<u32>,
    gid: Option<u32>,
    tool: Option<String>,
    server: Option<String>,
) -> Result<ExitCode> {
    let policy = Policy::load(config)?;
    if let Some(name) = server {
        let Some(server) = policy.servers.iter().find(|s| s.name == name) else {
            bail!(
                "{} has no [[server]] named `{name}` (its servers: {})",
                config.display(),
                server_names(&policy)
            );
        };
        println!("{}", describe_server_here(&policy, server, config));
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
            let name =
                std::ffi::CString::new(user.name.as_str()).context("user name with a NUL byte")?;
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
    print_server_confinement(&policy, config);
    Ok(if explanation.allowed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROGRAM_FAILED)
    })
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
    print!("{}", explained(uid, &v));
    Ok(if v["allowed"] == serde_json::Value::Bool(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROGRAM_FAILED)
    })
}

/// What `airlock policy explain` prints of the daemon's explanation for `uid`.
fn explained(uid: u32, v: &serde_json::Value) -> String {
    let mut out = String::new();
    let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
    let groups = v["groups"].to_string();
    let _ = match v["user"].as_str() {
        Some(user) => writeln!(
            out,
            "uid {uid} is {user}; gid {}; groups {groups}",
            v["gid"]
        ),
        None => writeln!(
            out,
            "uid {uid} is not in the user database; gid {}; no groups",
            v["gid"]
        ),
    };
    let _ = writeln!(out, "{}", text("explanation"));
    let _ = writeln!(out, "policy in force: {}", text("policy"));
    let paths = &v["paths"];
    let shown = |value: &serde_json::Value, none: &str| {
        value
            .as_str()
            .map_or_else(|| none.to_owned(), str::to_owned)
    };
    let _ = writeln!(
        out,
        "state directory: {}",
        shown(&paths["state_directory"], "none (nothing is kept on disk)")
    );
    let _ = writeln!(out, "  audit log: {}", shown(&paths["audit"], "off"));
    let _ = writeln!(
        out,
        "  journal: {}",
        shown(&paths["journal"], "off or unavailable")
    );
    let _ = writeln!(
        out,
        "  learned types: {}",
        shown(&paths["learned"], "in memory only")
    );
    let _ = writeln!(
        out,
        "  tool servers' scratch directories: {}",
        shown(&paths["servers"], "-")
    );
    for server in v["servers"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "{}", server.as_str().unwrap_or_default());
    }
    out
}

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
    config: &Path,
) -> String {
    confinement::server_description(server, &host_here(policy, config))
}

/// Where a daemon started beside this CLI on `policy` (the file `config`) would launch its
/// servers from and keep their files: the daemon's own [`ServerHost::of_daemon`], with the
/// worker `airlockd` would use. It knows neither the daemon's socket nor whether its journal
/// opens, so those are not listed as covered.
fn host_here(policy: &Policy, config: &Path) -> ServerHost {
    // The launcher airlockd would use is the one beside its worker: the policy's, else where
    // `airlockd` beside this CLI would find it.
    let worker = policy.daemon.worker_path.clone().unwrap_or_else(|| {
        airlock_supervisor::daemon::default_worker_path(
            &std::env::current_exe()
                .unwrap_or_default()
                .with_file_name("airlockd"),
        )
    });
    ServerHost::of_daemon(
        &worker,
        policy.daemon.state_directory.clone(),
        Some(config),
        &policy.daemon,
        Vec::new(),
        Vec::new(),
    )
}

/// How each stdio server of `policy` would be confined (what `airlockd` would hand its
/// launcher), for `airlock policy explain`.
fn print_server_confinement(policy: &Policy, config: &Path) {
    let store = SecretStore::empty();
    let host = host_here(policy, config);
    for described in policy
        .servers
        .iter()
        .filter_map(|server| confinement::describe_server(server, &host, &store))
    {
        println!("{described}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
[[principal]]
name = "local"
users = [0]
allow = ["thinking.*"]

[[server]]
name = "thinking"
command = "thinking-server"

[[server]]
name = "broken"
command = "sh"
"#;

    #[test]
    fn server_names_for_an_error() {
        let policy = Policy::parse(POLICY, "p.toml").unwrap();
        assert_eq!(server_names(&policy), "thinking, broken");
        let policy = Policy::parse("", "p.toml").unwrap();
        assert_eq!(server_names(&policy), "none");
    }

    #[test]
    fn explaining_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.toml");
        std::fs::write(&file, POLICY).unwrap();
        let run = |uid, tool: Option<&str>, server: Option<&str>| {
            explain_file(
                &file,
                uid,
                None,
                tool.map(str::to_owned),
                server.map(str::to_owned),
            )
        };
        assert_eq!(
            run(Some(0), Some("thinking.think"), None).unwrap(),
            ExitCode::SUCCESS
        );
        assert_eq!(
            run(Some(0), Some("other.tool"), None).unwrap(),
            ExitCode::from(1)
        );
        assert_eq!(
            run(None, None, Some("thinking")).unwrap(),
            ExitCode::SUCCESS
        );
        assert_eq!(
            run(None, None, Some("nope")).unwrap_err().to_string(),
            format!(
                "{} has no [[server]] named `nope` (its servers: thinking, broken)",
                file.display()
            )
        );
        assert_eq!(
            run(Some(0), None, None).unwrap_err().to_string(),
            "explain needs --uid and a tool (or --server NAME)"
        );
    }

    #[test]
    fn explaining_needs_a_file_without_the_daemon() {
        let e = policy(PolicyCommand::Explain {
            config: None,
            uid: Some(0),
            gid: None,
            tool: None,
            server: None,
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "airlock policy explain asks the daemon unless --config names a file"
        );
    }

    #[test]
    fn checking_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        std::fs::write(&good, POLICY).unwrap();
        assert_eq!(check(&good, false).unwrap(), ExitCode::SUCCESS);
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[[principal]]\nname = 3\n").unwrap();
        assert_eq!(check(&bad, true).unwrap(), ExitCode::from(1));
        assert_eq!(
            check(&dir.path().join("missing.toml"), false).unwrap(),
            ExitCode::from(1)
        );
    }

    #[test]
    fn the_daemons_explanation() {
        let v = serde_json::json!({
            "user": "alice", "gid": 1000, "groups": [1000, 27],
            "explanation": "principal `local` admits uid 1000; rule `*` allows github.list",
            "policy": "/etc/airlock/policy.toml (generation 2)",
            "paths": {
                "state_directory": "/var/lib/airlock",
                "audit": "/var/lib/airlock/audit",
                "journal": null,
                "servers": "/var/lib/airlock/servers"
            },
            "servers": ["server `fs`: confined", "server `gh`: confined"],
            "allowed": true
        });
        assert_eq!(
            explained(1000, &v),
            "uid 1000 is alice; gid 1000; groups [1000,27]\n\
             principal `local` admits uid 1000; rule `*` allows github.list\n\
             policy in force: /etc/airlock/policy.toml (generation 2)\n\
             state directory: /var/lib/airlock\n\
             \x20 audit log: /var/lib/airlock/audit\n\
             \x20 journal: off or unavailable\n\
             \x20 learned types: in memory only\n\
             \x20 tool servers' scratch directories: /var/lib/airlock/servers\n\
             server `fs`: confined\n\
             server `gh`: confined\n"
        );
        let v = serde_json::json!({ "gid": 5, "explanation": "no principal admits uid 5" });
        assert_eq!(
            explained(5, &v),
            "uid 5 is not in the user database; gid 5; no groups\n\
             no principal admits uid 5\n\
             policy in force: \n\
             state directory: none (nothing is kept on disk)\n\
             \x20 audit log: off\n\
             \x20 journal: off or unavailable\n\
             \x20 learned types: in memory only\n\
             \x20 tool servers' scratch directories: -\n"
        );
    }
}
