//! A daemon killed while a call of a session is in flight (SIGKILL: no cleanup at all), then
//! started again: the execution is listed as interrupted and resumed by replay. The API behind
//! the call honours idempotency keys, as the IETF draft describes: it sees the in-flight call
//! again with the same key and answers with the record it already made; the call that had
//! completed is not sent again.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, RequestLanguage, Status};
use airlock_supervisor::client::Client;
use airlock_tests::binaries;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The API's state: its records, the answer it gave each idempotency key, what it received.
#[derive(Default)]
struct Api {
    records: Vec<Value>,
    answered: HashMap<String, Value>,
    /// (name, idempotency key) of every POST, in arrival order.
    received: Vec<(String, Option<String>)>,
    /// The first `slow` request waits until this is set.
    released: bool,
}

type Shared = Arc<(Mutex<Api>, Condvar)>;

const SPEC: &str = r#"{
  "openapi": "3.1.0",
  "info": { "title": "records", "version": "1" },
  "paths": {
    "/records": { "post": { "operationId": "create",
      "requestBody": { "required": true, "content": { "application/json": { "schema": {
        "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] } } } },
      "responses": { "200": { "description": "the record" } } } }
  }
}"#;

/// A small HTTP/1.1 server (one request per connection) on its own threads.
fn serve(api: Shared) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let api = api.clone();
            std::thread::spawn(move || handle(stream, &api));
        }
    });
    port
}

fn handle(mut stream: std::net::TcpStream, api: &Shared) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    let (mut length, mut key) = (0usize, None);
    reader.read_line(&mut line).unwrap();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
            break;
        }
        let (name, value) = header.split_once(':').unwrap();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap(),
            "idempotency-key" => key = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    let name = serde_json::from_slice::<Value>(&body).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let (lock, wake) = &**api;
    let mut state = lock.lock().unwrap();
    let first_time = !state.received.iter().any(|(n, _)| *n == name);
    state.received.push((name.clone(), key.clone()));
    if name == "slow" && first_time {
        // In flight until the test has killed the daemon.
        while !state.released {
            state = wake.wait(state).unwrap();
        }
    }
    let record = match key.as_ref().and_then(|k| state.answered.get(k)) {
        Some(answer) => answer.clone(),
        None => {
            let record = json!({ "id": state.records.len() + 1, "name": name });
            state.records.push(record.clone());
            if let Some(k) = key {
                state.answered.insert(k, record.clone());
            }
            record
        }
    };
    drop(state);
    let text = record.to_string();
    // The daemon that sent the first `slow` request is dead: this write may fail.
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn start_daemon(socket: &Path, policy: &Path) -> std::process::Child {
    let _ = std::fs::remove_file(socket);
    let mut child = binaries::airlockd_command(socket)
        .arg("--config")
        .arg(policy)
        .spawn()
        .unwrap();
    for _ in 0..400 {
        if socket.exists() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the daemon never made its socket");
}

fn request(code: &str, session: &str) -> ExecutionRequest {
    ExecutionRequest {
        code: code.to_owned(),
        language: RequestLanguage::Typescript,
        timeout_ms: Some(30_000),
        session: Some(session.to_owned()),
        replay: None,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_cut_off_by_sigkill_is_resumed_and_nothing_completed_runs_twice() {
    let dir = tempfile::tempdir().unwrap();
    let api: Shared = Arc::default();
    let port = serve(api.clone());
    let spec = dir.path().join("records.json");
    std::fs::write(&spec, SPEC).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[audit]\ndirectory = \"{d}/audit\"\n[journal]\ndirectory = \"{d}/journal\"\n\
             [[principal]]\nname = \"local\"\nusers = [\"@daemon\"]\nallow = [\"*\"]\n\
             [[openapi]]\nname = \"api\"\nspec = \"{spec}\"\nbase_url = \"http://127.0.0.1:{port}\"\n",
            d = dir.path().display(),
            spec = spec.display()
        ),
    )
    .unwrap();
    let socket = dir.path().join("a.sock");
    let mut daemon = start_daemon(&socket, &policy);

    let mut c = Client::connect(&socket).await.unwrap();
    let session = c
        .execute(&request("1", "new"))
        .await
        .unwrap()
        .session
        .unwrap();
    let code = r#"
const first: any = await tools.api.create({ name: "first" });
const slow: any = await tools.api.create({ name: "slow" });
[first.id, slow.id]
"#;
    let running = {
        let socket = socket.clone();
        let request = request(code, &session);
        tokio::spawn(async move {
            let mut c = Client::connect(&socket).await.unwrap();
            c.execute(&request).await
        })
    };
    // Wait until the second call is in flight at the API, then kill the daemon outright.
    for _ in 0..400 {
        if api
            .0
            .lock()
            .unwrap()
            .received
            .iter()
            .any(|(n, _)| n == "slow")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(
        running.await.unwrap().is_err(),
        "the client saw the daemon die"
    );
    // The API finishes what it was doing (the record is made; its answer goes nowhere).
    {
        let (lock, wake) = &*api;
        lock.lock().unwrap().released = true;
        wake.notify_all();
    }

    let mut daemon = start_daemon(&socket, &policy);
    let mut c = Client::connect(&socket).await.unwrap();
    let (status, body) = c.get("/v1/executions?status=interrupted").await.unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    let interrupted = listed["executions"].as_array().unwrap();
    assert_eq!(interrupted.len(), 1, "{body}");
    assert_eq!(interrupted[0]["session"], json!(session));
    // Both calls it sent are counted, though it never ended to count them itself.
    assert_eq!(interrupted[0]["live_calls"], json!(2), "{body}");
    let id = interrupted[0]["id"].as_str().unwrap().to_owned();

    let resumed = c.resume(&id).await.unwrap();
    assert_eq!(resumed.status, Status::Ok, "{resumed:?}");
    assert_eq!(resumed.resumed_from.as_deref(), Some(id.as_str()));
    assert_eq!(resumed.result, json!([1, 2]));
    assert!(resumed.tool_calls[0].replayed, "{:?}", resumed.tool_calls);
    assert!(!resumed.tool_calls[1].replayed);

    {
        let state = api.0.lock().unwrap();
        // One record each: the completed call was not sent again, the in-flight one twice at most,
        // with the same key both times.
        assert_eq!(state.records.len(), 2, "{:?}", state.records);
        let first: Vec<_> = state
            .received
            .iter()
            .filter(|(n, _)| n == "first")
            .collect();
        assert_eq!(first.len(), 1, "{:?}", state.received);
        let slow: Vec<_> = state.received.iter().filter(|(n, _)| n == "slow").collect();
        assert_eq!(slow.len(), 2, "{:?}", state.received);
        assert!(slow[0].1.is_some(), "sent with an idempotency key");
        assert_eq!(slow[0].1, slow[1].1);
    }

    // The resumed execution is now `resumed`, the new one `ok`; resuming again is a conflict.
    let (_, body) = c.get("/v1/executions?status=resumed").await.unwrap();
    assert!(body.contains(&id), "{body}");
    let again = c.resume(&id).await;
    assert!(format!("{again:?}").contains("409"), "{again:?}");
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}
