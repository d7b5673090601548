//! Requests that reach the socket through a loopback TCP forwarder, as a web page's would
//! (DNS rebinding, or a page that names the loopback address): a foreign `Host`, a foreign
//! `Origin`, or a `POST` that is not `application/json` is refused on every route before
//! anything runs or is decided, `/mcp` included; a local client's request through the same
//! forwarder is served.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::conformance::tcp_door;
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn me() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// Sends one request with `headers` (each a whole `Name: value` line) to `127.0.0.1:port`
/// and reads the whole answer: its status and its body as JSON (`null` if it is not).
async fn send(port: u16, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, Value) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// What a page of `evil.example` sends through the forwarder after DNS rebinding: its own
/// name as `Host` and `Origin`, and a body of a type it may send without a preflight.
const REBOUND: &[&str] = &[
    "Host: evil.example",
    "Origin: http://evil.example",
    "Content-Type: text/plain",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_pages_requests_through_a_forwarder_run_and_decide_nothing() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        for principal in &mut p.principals {
            principal.approve = vec!["test.add".into()];
        }
        p.approvals.approvers = vec![me().to_string()];
        p.approvals.uids = vec![me()];
        // The test decides its own execution's call, as a local approver would.
        p.approvals.self_approve = true;
    }))
    .await;
    let port = tcp_door(d.socket.clone()).await;
    let program = json!({ "code": "await tools.test.echo({ text: 'ran' })" }).to_string();

    // A rebound page: refused before the program runs.
    let (status, body) = send(port, "POST", "/v1/executions", REBOUND, &program).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], json!("host_not_allowed"), "{body}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("Host: airlock"),
        "{body}"
    );
    // A page that names the loopback address: its Host is local, its Origin is not.
    let port_host = format!("Host: 127.0.0.1:{port}");
    let from_page = [
        port_host.as_str(),
        "Origin: https://evil.example",
        "Content-Type: application/json",
    ];
    let (status, body) = send(port, "POST", "/v1/executions", &from_page, &program).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], json!("origin_not_allowed"), "{body}");
    // A local Host and no Origin, but a body a page may send without asking first.
    let plain = [port_host.as_str(), "Content-Type: text/plain"];
    let (status, body) = send(port, "POST", "/v1/executions", &plain, &program).await;
    assert_eq!(status, 415, "{body}");
    assert_eq!(
        body["error"]["code"],
        json!("unsupported_media_type"),
        "{body}"
    );
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("Content-Type: application/json"),
        "{body}"
    );
    assert_eq!(
        d.tools.calls.load(Ordering::Relaxed),
        0,
        "a refused program ran"
    );

    // Reads are refused too, and so is the MCP door.
    let (status, body) = send(port, "GET", "/v1/sdk", REBOUND, "").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("host_not_allowed"))
    );
    let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
    let mcp = [
        port_host.as_str(),
        "Origin: http://evil.example",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ];
    let (status, body) = send(port, "POST", "/mcp", &mcp, &ping).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("origin_not_allowed"))
    );

    // A call waits for approval; the rebound page cannot decide it.
    let waiting = json!({ "code": "await tools.test.add({ a: 1, b: 2 })" }).to_string();
    let local = [port_host.as_str(), "Content-Type: application/json"];
    let (status, r) = send(port, "POST", "/v1/executions", &local, &waiting).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let approval = r["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    let execution = r["id"].as_str().unwrap().to_owned();
    let approve = json!({ "decision": "approve" }).to_string();
    let path = format!("/v1/approvals/{approval}");
    for headers in [REBOUND, &from_page[..], &plain[..]] {
        let (status, body) = send(port, "POST", &path, headers, &approve).await;
        assert!(matches!(status, 403 | 415), "{headers:?}: {status} {body}");
    }
    let (status, listed) = send(port, "GET", "/v1/approvals", &local, "").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"][0]["id"], json!(approval), "{listed}");
    assert!(listed["approvals"][0]["decision"].is_null(), "{listed}");

    // A local client's requests through the same forwarder are served.
    let (status, decided) = send(port, "POST", &path, &local, &approve).await;
    assert_eq!(status, 200, "{decided}");
    let mut done = Value::Null;
    for _ in 0..400 {
        let (_, r) = send(
            port,
            "GET",
            &format!("/v1/executions/{execution}"),
            &local,
            "",
        )
        .await;
        if r["status"] == json!("ok") {
            done = r;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(done["result"], json!(3), "{done}");
    let (status, ran) = send(port, "POST", "/v1/executions", &local, &program).await;
    assert_eq!(
        (status, &ran["result"]),
        (200, &json!({ "text": "ran" })),
        "{ran}"
    );
    d.stop().await;
}
