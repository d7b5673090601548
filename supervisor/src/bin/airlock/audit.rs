//! `airlock audit`: the audit log's executions or approval decisions, read from its files
//! (no daemon involved).

use crate::args::AuditArgs;
use airlock_supervisor::audit_log;
use anyhow::Result;
use std::process::ExitCode;

/// `airlock audit`: from `--dir`, the `[audit]` directory of `--config`, or the default.
pub fn run(args: AuditArgs) -> Result<ExitCode> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn audit_args(args: &[&str]) -> AuditArgs {
        let parsed = crate::args::Args::try_parse_from(
            ["airlock", "audit"].iter().chain(args.iter()).copied(),
        )
        .unwrap();
        match parsed.command {
            crate::args::Command::Audit(audit) => audit,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_directory_without_a_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().to_str().unwrap();
        for approvals in [false, true] {
            let mut args = vec!["--dir", dir];
            if approvals {
                args.push("--approvals");
            }
            assert_eq!(
                run(audit_args(&args)).unwrap_err().to_string(),
                format!(
                    "no audit log in {dir}: pass --dir with the daemon's audit directory (under systemd /var/lib/airlock) or --config with its policy file"
                )
            );
        }
    }

    #[test]
    fn a_policy_without_an_audit_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("policy.toml");
        std::fs::write(&config, "[audit]\nenabled = false\n").unwrap();
        let e = run(audit_args(&["--config", config.to_str().unwrap()])).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the policy {} turns the audit log off ([audit] enabled = false)",
                config.display()
            )
        );
    }
}
