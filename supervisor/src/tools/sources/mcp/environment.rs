//! The environment a stdio server starts with: a base a service would have (systemd's `PATH`
//! for services, `HOME` and `TMPDIR` its own scratch directory, `LANG=C.UTF-8`), then the
//! variables the policy's `inherit_env` takes from the daemon's environment (those it has),
//! then the policy's `env`, each overriding what came before. Nothing else of the daemon's
//! environment reaches a server: its own variables may hold what no server should see.
//!
//! A server with a `network` list gets, last, the variables that send its HTTP clients to the
//! daemon's proxy ([`PROXY_VARIABLES`]): in its network namespace the proxy is the only way
//! out, so other values would only break it.

use airlock_policy::{BASE_PATH, SettingValue};
use std::path::Path;

/// The server's whole environment, in the order it is built (a later name replaces an
/// earlier one in place, so each name appears once).
///
/// `daemon` looks a variable up in the daemon's environment; `env` is the policy's `env`,
/// secrets already resolved.
pub fn compose(
    scratch: &Path,
    inherit: &[String],
    daemon: impl Fn(&str) -> Option<String>,
    env: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let scratch = scratch.display().to_string();
    let out: Vec<(String, String)> = vec![
        ("PATH".to_owned(), BASE_PATH.to_owned()),
        ("HOME".to_owned(), scratch.clone()),
        ("TMPDIR".to_owned(), scratch),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ];
    let inherited = inherit
        .iter()
        .filter_map(|name| daemon(name).map(|value| (name.clone(), value)));
    overridden(out, inherited.chain(env).collect())
}

/// Where a server with a `network` list finds the daemon's proxy: the variables curl, Python
/// (`requests`, `httpx`, `urllib`, pip, uv), npm and Go read, and `NODE_USE_ENV_PROXY` for
/// Node's own `fetch` and `http` (Node 24 and later). Its own loopback stays direct.
pub fn proxy_variables() -> Vec<(String, String)> {
    let proxy = format!("http://127.0.0.1:{}", airlock_confine::PROXY_PORT);
    let direct = "localhost,127.0.0.1,::1".to_owned();
    PROXY_VARIABLES
        .iter()
        .map(|name| {
            let value = match *name {
                "NO_PROXY" | "no_proxy" => direct.clone(),
                "NODE_USE_ENV_PROXY" => "1".to_owned(),
                _ => proxy.clone(),
            };
            ((*name).to_owned(), value)
        })
        .collect()
}

/// The names [`proxy_variables`] sets.
pub const PROXY_VARIABLES: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "https_proxy",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
];

/// `env` with `over` set, each replacing a variable of the same name in place.
pub fn overridden(
    mut env: Vec<(String, String)>,
    over: Vec<(String, String)>,
) -> Vec<(String, String)> {
    for (name, value) in over {
        match env.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => env.push((name, value)),
        }
    }
    env
}

/// The `PATH` a server will have, from its policy alone (for `airlock policy explain` and the
/// confinement's view of the command): `env`'s literal `PATH`, else the daemon's when
/// `inherit_env` names it, else [`BASE_PATH`]. A `PATH` given as a secret counts as the base
/// (its value is not looked up to explain a policy).
pub fn path_of(
    env: &[(String, SettingValue)],
    inherit: &[String],
    daemon: impl Fn(&str) -> Option<String>,
) -> String {
    if let Some((_, value)) = env.iter().rev().find(|(k, _)| k == "PATH") {
        if let SettingValue::Literal(path) = value {
            return path.clone();
        }
        return BASE_PATH.to_owned();
    }
    if inherit.iter().any(|n| n == "PATH")
        && let Some(path) = daemon("PATH")
    {
        return path;
    }
    BASE_PATH.to_owned()
}

/// The daemon's own environment, as [`compose`] and [`path_of`] read it.
pub fn daemon_variable(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemon_with(
        vars: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_server_starts_from_the_base_a_service_has() {
        let env = compose(
            Path::new("/state/servers/s"),
            &[],
            daemon_with(&[("SECRET", "x")]),
            Vec::new(),
        );
        assert_eq!(
            env,
            vec![
                ("PATH".to_owned(), BASE_PATH.to_owned()),
                ("HOME".to_owned(), "/state/servers/s".to_owned()),
                ("TMPDIR".to_owned(), "/state/servers/s".to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ]
        );
    }

    #[test]
    fn inherited_variables_override_the_base_and_env_overrides_both() {
        let daemon = daemon_with(&[
            ("PATH", "/opt/node/bin:/usr/bin"),
            ("NODE_OPTIONS", "--max-old-space-size=256"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("SECRET", "never"),
        ]);
        let inherit = vec![
            "PATH".to_owned(),
            "NODE_OPTIONS".to_owned(),
            "HTTPS_PROXY".to_owned(),
            // Named but not set in the daemon: not set in the server either.
            "MISSING".to_owned(),
        ];
        let env = compose(
            Path::new("/s"),
            &inherit,
            daemon,
            vec![
                ("HTTPS_PROXY".to_owned(), "http://other:8080".to_owned()),
                ("HOME".to_owned(), "/srv/home".to_owned()),
                ("TOKEN".to_owned(), "t".to_owned()),
            ],
        );
        assert_eq!(get(&env, "PATH"), Some("/opt/node/bin:/usr/bin"));
        assert_eq!(get(&env, "NODE_OPTIONS"), Some("--max-old-space-size=256"));
        assert_eq!(get(&env, "HTTPS_PROXY"), Some("http://other:8080"));
        assert_eq!(get(&env, "HOME"), Some("/srv/home"));
        assert_eq!(get(&env, "TMPDIR"), Some("/s"));
        assert_eq!(get(&env, "TOKEN"), Some("t"));
        assert_eq!(get(&env, "MISSING"), None);
        assert_eq!(get(&env, "SECRET"), None);
        // Each name once.
        let mut names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "{env:?}");
    }

    #[test]
    fn the_path_explained_is_the_one_the_server_gets() {
        let daemon = daemon_with(&[("PATH", "/daemon/bin")]);
        assert_eq!(path_of(&[], &[], &daemon), BASE_PATH);
        assert_eq!(path_of(&[], &["PATH".to_owned()], &daemon), "/daemon/bin");
        let literal = vec![(
            "PATH".to_owned(),
            SettingValue::Literal("/x/bin".to_owned()),
        )];
        assert_eq!(path_of(&literal, &["PATH".to_owned()], &daemon), "/x/bin");
        let secret = vec![("PATH".to_owned(), SettingValue::Secret("p".to_owned()))];
        assert_eq!(path_of(&secret, &[], &daemon), BASE_PATH);
    }
}
