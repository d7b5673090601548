//! `airlock policy check` and `airlockd --check-config`: a policy validated the way a reload
//! validates it, every file and every document, without starting anything.

use super::warning_lines;
use crate::secrets::store::SecretStore;
use crate::tools::sources::graphql::GraphQlApi;
use crate::tools::sources::mcp::confinement::resolve;
use crate::tools::sources::mcp::environment::{daemon_variable, path_of};
use crate::tools::sources::openapi::OpenApiSource as OpenApiTools;
use airlock_policy::{Policy, ServerTransport, ToolServer};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

/// What `airlock policy check` and `airlockd --check-config` report about a policy.
#[derive(Debug, Default, Serialize)]
pub struct PolicyCheck {
    /// The files read (main file, then drop-ins), when they could be parsed.
    pub files: Vec<String>,
    /// Every problem: with these the daemon would not start, and a reload would be refused.
    pub problems: Vec<String>,
    /// Valid but noteworthy.
    pub warnings: Vec<String>,
    /// One line per principal and source, when the policy is valid.
    pub summary: Vec<String>,
}

impl PolicyCheck {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Validates the policy at `path` (and its drop-ins) the way a reload does: every file, every
/// OpenAPI and GraphQL document. With `secrets`, secrets the sources need but this process
/// cannot read are warnings (they fail only their own source at run time).
pub fn check_policy(path: &Path, secrets: Option<&SecretStore>) -> PolicyCheck {
    let mut check = PolicyCheck::default();
    let policy = match Policy::load_all(path) {
        Ok(policy) => policy,
        Err(errors) => {
            check.problems = errors.iter().map(ToString::to_string).collect();
            return check;
        }
    };
    check.files = policy.files().map(str::to_owned).collect();
    check.warnings = warning_lines(&policy.warnings);
    for p in &policy.principals {
        let members = if p.any_user {
            "every user".to_owned()
        } else {
            format!("{} user(s), {} group(s)", p.uids.len(), p.gids.len())
        };
        check.summary.push(format!(
            "principal `{}`: {members}; {} allow, {} deny pattern(s); timeout {} ms, memory {} MiB",
            p.name,
            p.allow.len(),
            p.deny.len(),
            p.limits.timeout_ms,
            p.limits.memory_bytes >> 20
        ));
    }
    if policy.principals.is_empty() {
        check.warnings.push(format!(
            "{}: warning: the policy has no [[principal]]: every connection will be refused",
            policy.origin
        ));
    }
    let no_secrets = Arc::new(SecretStore::empty());
    for server in &policy.servers {
        let (summary, warning) = server_command(server);
        check.summary.push(summary);
        check.warnings.extend(warning);
        if let Some(secrets) = secrets {
            for problem in secrets.check_server(server) {
                check.warnings.push(format!("warning: {problem}"));
            }
        }
    }
    for config in &policy.openapi {
        if let Some(secrets) = secrets {
            for name in config.secrets() {
                if let Err(e) = secrets.get(name) {
                    check.warnings.push(format!(
                        "warning: openapi source `{}` needs a secret: {e}",
                        config.name
                    ));
                }
            }
        }
        match OpenApiTools::load(config.clone(), no_secrets.clone()) {
            Ok(source) => check.summary.push(format!(
                "openapi source `{}`: {} tools from {}",
                config.name,
                source.descriptors().len(),
                config.spec.display()
            )),
            Err(e) => check
                .problems
                .push(format!("openapi source `{}`: {e}", config.name)),
        }
    }
    for config in &policy.graphql {
        match GraphQlApi::load(config.clone(), no_secrets.clone()) {
            Ok(source) => {
                check.summary.push(format!(
                    "graphql source `{}`: {} tools from {}",
                    config.name,
                    source.descriptors().len(),
                    config.schema.display()
                ));
                if let Some(secrets) = secrets {
                    for name in config.secrets() {
                        if let Err(e) = secrets.get(name) {
                            check.warnings.push(format!(
                                "warning: graphql source `{}` needs a secret: {e}",
                                config.name
                            ));
                        }
                    }
                }
            }
            Err(e) => check
                .problems
                .push(format!("graphql source `{}`: {e}", config.name)),
        }
    }
    check
}

/// A server's summary line, and a warning when its command would not start as the daemon
/// starts it: not found on the `PATH` it gets, or not an executable file. (A warning, as a
/// missing secret is: it fails only its own server, and systemd runs the check before every
/// start.)
fn server_command(server: &ToolServer) -> (String, Option<String>) {
    let name = &server.name;
    let ServerTransport::Stdio {
        command,
        env,
        inherit_env,
        ..
    } = &server.transport
    else {
        let ServerTransport::Http { url, .. } = &server.transport else {
            unreachable!("a server is stdio or HTTP")
        };
        return (format!("server `{name}`: {url}"), None);
    };
    let path = path_of(env, inherit_env, daemon_variable);
    let Some(found) = resolve(command, Some(&path)) else {
        let warning = if command.contains('/') {
            format!(
                "warning: server `{name}`: its command {command} does not exist: it will not start"
            )
        } else {
            format!(
                "warning: server `{name}`: `{command}` was not found on its PATH ({path}): it will not start; give `command` as an absolute path or set `PATH` in its `env`"
            )
        };
        return (
            format!("server `{name}`: `{command}` (not found)"),
            Some(warning),
        );
    };
    use std::os::unix::fs::PermissionsExt;
    let executable =
        std::fs::metadata(&found).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let summary = format!("server `{name}`: runs {}", found.display());
    if !executable {
        return (
            summary,
            Some(format!(
                "warning: server `{name}`: {} is not an executable file: it will not start",
                found.display()
            )),
        );
    }
    (summary, None)
}
