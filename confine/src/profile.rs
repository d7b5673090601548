//! What a confined server may reach: the launcher's whole input besides the command. The
//! daemon writes it as JSON on the launcher's command line (it holds paths and numbers, never
//! a secret: secrets reach the server in its environment only).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One server's confinement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// The server's name in the policy, for messages.
    pub name: String,
    pub mode: Mode,
    /// Read and execute: the system, the command's install prefix and package files, and the
    /// policy's `read` paths.
    pub read: Vec<PathBuf>,
    /// Read, write and execute: the policy's `write` paths.
    pub write: Vec<PathBuf>,
    /// The server's own writable directory (also its `HOME` and `TMPDIR`).
    pub scratch: PathBuf,
    /// Where it starts (the policy's `cwd`, else its scratch directory).
    pub workdir: PathBuf,
    /// Covered in its mount namespace (an empty read-only directory over a directory,
    /// `/dev/null` over a file): the daemon's policy files, socket and credentials, which
    /// may lie under a path it may otherwise read (`/etc`), and which a socket's path alone
    /// would reach (connecting needs no Landlock right).
    pub hide: Vec<PathBuf>,
    pub network: Network,
    pub limits: ServerLimits,
    /// The account it runs as, for a launcher started by root; `None`: the launcher's own.
    #[serde(default)]
    pub run_as: Option<RunAs>,
}

/// An unprivileged account for a server of a daemon running as root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAs {
    /// As the policy named it, for messages.
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// What happens when the kernel lacks a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every layer or the server does not start (the default).
    Strict,
    /// The layers there are; each missing one is reported as a warning (`confine =
    /// "best-effort"`).
    BestEffort,
}

/// The server's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// The host's network (servers that call APIs).
    Host,
    /// An empty network namespace: no interface but a loopback that is down.
    None,
    /// An empty network namespace with its loopback up and, on it, a listener at
    /// `127.0.0.1:`[`PROXY_PORT`](crate::PROXY_PORT) that the launcher hands to the daemon:
    /// the daemon's proxy, which lets through what the policy's list names, is the one way
    /// out.
    Proxy,
}

/// rlimits of the server process (and what it starts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerLimits {
    /// `RLIMIT_AS`: the address space of one process.
    pub memory_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`: counted by the kernel per user, so it includes every process of the
    /// daemon's user; meant for a dedicated user.
    pub processes: Option<u64>,
}

impl Profile {
    /// The JSON the launcher takes (`--profile`).
    pub fn to_json(&self) -> String {
        // A struct of strings, paths and numbers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<Profile, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let profile = Profile {
            name: "fs".into(),
            mode: Mode::BestEffort,
            read: vec!["/usr".into(), "/srv/docs".into()],
            write: vec!["/srv/out".into()],
            scratch: "/var/lib/airlock/servers/fs".into(),
            workdir: "/srv/docs".into(),
            hide: vec!["/etc/airlock/policy.toml".into(), "/run/airlock".into()],
            network: Network::None,
            limits: ServerLimits {
                memory_bytes: Some(1 << 30),
                open_files: Some(1024),
                processes: None,
            },
            run_as: Some(RunAs {
                name: "nobody".into(),
                uid: 65534,
                gid: 65534,
            }),
        };
        assert_eq!(Profile::from_json(&profile.to_json()).unwrap(), profile);
        assert!(profile.to_json().contains("\"best_effort\""));
    }
}
