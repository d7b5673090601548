//! A server's `network` list, enforced outside it: the real `airlockd` runs a hostile stdio
//! server (`airlock-mcp-escape-server`) with `network = ["<this host's address>:<port>",
//! "localhost:<port>"]`. From inside its empty network namespace the only way out is the
//! daemon's proxy (`$HTTPS_PROXY`), which lets through the listed address, and refuses, with a
//! `403` and a line in the daemon's log naming the server and the host: a host not in the list,
//! a raw IP not in the list, a listed port's neighbour, and a listed name that resolves to
//! loopback. A direct connection, bypassing the proxy, finds no network at all. Plain HTTP
//! through the proxy reaches the listed host with the URL's `Host`, whatever the request said.
//!
//! The same daemon is started with a descriptor its parent left open without close-on-exec
//! (fd 251, as a service manager or a shell might): neither the confined server nor an
//! unconfined one holds it.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::binaries;
use airlock_tests::real_daemon::{RealDaemon, policy};
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An IPv4 address of this host that is not loopback (the one a route out leaves from).
fn this_host_address() -> IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket.connect("192.0.2.1:9").unwrap();
    let ip = socket.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback(),
        "this host has no address but loopback: the proxy's way out cannot be tested here"
    );
    ip
}

/// A listener that answers each connection: an HTTP request with `200` and the `Host` it was
/// sent, anything else by echoing its first line. Counts the connections it took.
fn serve(listener: TcpListener) -> Arc<AtomicUsize> {
    let taken = Arc::new(AtomicUsize::new(0));
    let count = taken.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                if first.starts_with("GET ") {
                    let mut host = String::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        if let Some(h) = line.strip_prefix("Host: ") {
                            host = h.trim().to_owned();
                        }
                    }
                    let body = format!("{} for {host}", first.trim());
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                } else {
                    let _ = stream.write_all(first.as_bytes());
                }
            });
        }
    });
    taken
}

#[test]
fn a_network_list_lets_through_what_it_names_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let ip = this_host_address();
    let listed = TcpListener::bind((ip, 0)).unwrap();
    let port = listed.local_addr().unwrap().port();
    let reached = serve(listed);
    let unlisted = TcpListener::bind((ip, 0)).unwrap();
    let unlisted_port = unlisted.local_addr().unwrap().port();
    let reached_unlisted = serve(unlisted);
    let local = TcpListener::bind("127.0.0.1:0").unwrap();
    let local_port = local.local_addr().unwrap().port();
    let reached_local = serve(local);

    let escape = binaries::built("airlock-mcp-escape-server");
    let servers = format!(
        "[[server]]\nname = \"listed\"\ncommand = \"{escape}\"\nnetwork = [\"{ip}:{port}\", \"localhost:{local_port}\"]\n\n\
         [[server]]\nname = \"open\"\ncommand = \"{escape}\"\nconfine = false\n",
        escape = escape.display(),
    );
    let mut daemon = RealDaemon::start(dir.path(), &policy(dir.path(), 1, &servers), |cmd| {
        // SAFETY: dup2 and fcntl are async-signal-safe; fd 251 is a copy of stderr left
        // without close-on-exec, as an inherited descriptor would be.
        unsafe {
            cmd.pre_exec(|| {
                if libc::dup2(2, 251) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });

    let args = serde_json::json!({
        "via_proxy": [
            format!("{ip}:{port}"),
            format!("{ip}:{unlisted_port}"),
            "example.com:443",
            "93.184.216.34:443",
            format!("localhost:{local_port}"),
            format!("127.0.0.1:{local_port}"),
        ],
        "http_via_proxy": format!("http://{ip}:{port}/hello"),
        "tcp": format!("{ip}:{port}"),
        "inherited_fds": true,
    });
    let code = format!(
        "const a: any = await tools.listed.attempts({args});\n\
         const b: any = await tools.open.attempts({{ inherited_fds: true }});\n\
         ({{ listed: typeof a === 'string' ? JSON.parse(a) : a, open: typeof b === 'string' ? JSON.parse(b) : b }})"
    );
    let response = daemon.exec_json(&code);
    let log = daemon.log();
    daemon.kill();
    assert_eq!(response["status"], "ok", "{response:#}\n{log}");
    let report = &response["result"]["listed"];
    let said = |key: &str| report[key].as_str().unwrap_or("missing").to_owned();
    eprintln!("{report:#}");

    // The listed address is reached through the proxy, and echoes.
    let allowed = said(&format!("proxy {ip}:{port}"));
    assert!(
        allowed.starts_with("REACHED") && allowed.contains("echoed ping"),
        "{allowed}\n{log}"
    );
    // Plain HTTP goes with the URL's Host, not the one the request named.
    let http = said("http_via_proxy");
    assert!(
        http.starts_with("REACHED")
            && http.contains(&format!("GET /hello HTTP/1.1 for {ip}:{port}")),
        "{http}"
    );
    // Everything else is refused by the proxy, with the reason.
    for (target, why) in [
        (
            format!("{ip}:{unlisted_port}"),
            "not in the server's `network` list",
        ),
        (
            "example.com:443".to_owned(),
            "not in the server's `network` list",
        ),
        (
            "93.184.216.34:443".to_owned(),
            "not in the server's `network` list",
        ),
        (format!("localhost:{local_port}"), "a loopback address"),
        (format!("127.0.0.1:{local_port}"), "is a loopback address"),
    ] {
        let outcome = said(&format!("proxy {target}"));
        assert!(
            outcome.starts_with("blocked: HTTP/1.1 403") && outcome.contains(why),
            "{target}: {outcome}"
        );
    }
    // Around the proxy there is no network at all.
    let direct = said("network");
    assert!(
        direct.starts_with("blocked") && direct.contains("unreachable"),
        "{direct}"
    );
    // Only the listed listener was reached, once for the tunnel and once for plain HTTP.
    assert_eq!(reached.load(Ordering::SeqCst), 2);
    assert_eq!(reached_unlisted.load(Ordering::SeqCst), 0);
    assert_eq!(reached_local.load(Ordering::SeqCst), 0);

    // Each refusal is in the daemon's log with the server and the host.
    let log = std::fs::read_to_string(dir.path().join("airlockd.log")).unwrap();
    for host in ["example.com", "93.184.216.34", "localhost"] {
        assert!(
            log.lines()
                .any(|l| l.contains("refused a connection of the server")
                    && l.contains("server=listed")
                    && l.contains(&format!("host={host}"))),
            "no refusal of {host} logged:\n{log}"
        );
    }

    // No descriptor the daemon inherited reaches a server, confined or not.
    assert!(said("inherited_fds").starts_with("blocked"), "{report:#}");
    let open = response["result"]["open"]["inherited_fds"]
        .as_str()
        .unwrap_or("missing");
    assert!(open.starts_with("blocked"), "unconfined: {open}");
}

/// `airlock policy explain --server` shows the list, and a list with `confine = false` is
/// refused when the policy is checked (without the confinement it would be the host's network).
#[test]
fn a_network_list_is_explained_and_needs_the_confinement() {
    let dir = tempfile::tempdir().unwrap();
    let escape = binaries::built("airlock-mcp-escape-server");
    let file = dir.path().join("policy.toml");
    let write = |extra: &str| {
        std::fs::write(
            &file,
            format!(
                "[daemon]\nserver_user = \"root\"\n[[principal]]\nname = \"local\"\nusers = [0]\nallow = [\"*\"]\n\n[[server]]\nname = \"gh\"\ncommand = \"{}\"\nnetwork = [\"api.github.com:443\", \"*.githubusercontent.com:443\"]\n{extra}",
                escape.display()
            ),
        )
        .unwrap();
    };
    write("");
    let explained = Command::new(binaries::airlock_cli())
        .args(["policy", "explain", "--server", "gh", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.contains(
            "network [api.github.com:443, *.githubusercontent.com:443] (through the daemon's proxy)"
        ),
        "{text}{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    write("confine = false\n");
    let checked = Command::new(binaries::airlockd())
        .arg("--check-config")
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success(), "{said}");
    assert!(said.contains("remove `confine = false`"), "{said}");
}
