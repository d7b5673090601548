//! Long runs with handles, end to end: `"wait": false` answers 202 at once; the execution is
//! followed by id (`GET /v1/executions/<id>`), its events streamed and resumed after a number
//! (`/events?after=N`), cancelled (`DELETE`), kept across a restart.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::Status;
use airlock_supervisor::tools::{CallContext, ToolDescriptor, ToolFuture, ToolSource, ToolsFuture};
use airlock_tests::{DaemonOptions, TestDaemon, another_principal, binaries};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, LOCATION};
use serde_json::{Value, json};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Semaphore, watch};

async fn post(d: &TestDaemon, body: Value) -> (u16, Value) {
    let mut c = d.client().await;
    let (status, text) = c
        .post("/v1/executions", Bytes::from(body.to_string()))
        .await
        .unwrap();
    (status.as_u16(), serde_json::from_str(&text).unwrap())
}

async fn get(d: &TestDaemon, path: &str) -> (u16, String) {
    let mut c = d.client().await;
    let (status, text) = c.get(path).await.unwrap();
    (status.as_u16(), text)
}

/// The lines of an NDJSON answer, each parsed.
fn ndjson(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A `POST /v1/executions` of `body`, with `Prefer: <prefer>` when given.
fn execution_request(body: &Value, prefer: Option<&str>) -> Request<Full<Bytes>> {
    let mut req = Request::post("/v1/executions")
        .header("host", "airlock")
        .header("content-type", "application/json");
    if let Some(prefer) = prefer {
        req = req.header("prefer", prefer);
    }
    req.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

/// Polls the execution until `until` holds of it.
async fn poll(d: &TestDaemon, id: &str, until: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..400 {
        let (status, text) = get(d, &format!("/v1/executions/{id}")).await;
        assert_eq!(status, 200, "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        if until(&value) {
            return value;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("execution {id} never got there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_execution_is_polled_and_its_events_resumed() {
    let d = TestDaemon::start().await;
    let code = "for (let i = 0; i < 3; i++) { console.log('line ' + i); await tools.test.add({ a: i, b: 1 }); } 'done'";
    let (status, accepted) = post(&d, json!({ "code": code, "wait": false })).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_owned();
    assert_eq!(accepted["location"], json!(format!("/v1/executions/{id}")));
    let done = poll(&d, &id, |v| v["status"] == json!("ok")).await;
    assert_eq!(done["result"], json!("done"));
    assert_eq!(done["stdout"], json!("line 0\nline 1\nline 2\n"));

    let (status, all) = get(&d, &format!("/v1/executions/{id}/events")).await;
    assert_eq!(status, 200, "{all}");
    let lines = ndjson(&all);
    assert_eq!(
        seqs(&lines),
        (1..=lines.len() as u64).collect::<Vec<_>>(),
        "{all}"
    );
    assert_eq!(lines.last().unwrap()["event"], json!("result"), "{all}");
    // Resumed after the third event: the rest, nothing before.
    let (_, rest) = get(&d, &format!("/v1/executions/{id}/events?after=3")).await;
    let rest = ndjson(&rest);
    assert_eq!(rest.len(), lines.len() - 3);
    assert_eq!(rest[0]["seq"], json!(4));
}

// ---------------------------------------------------------------------------------------------
// A tool the test holds: `tools.gate.wait(args)` blocks until the test releases it.
// ---------------------------------------------------------------------------------------------

/// The `gate` namespace: each call of `wait` blocks until the test releases one call
/// ([`Gate::release`]), then answers with its arguments. [`Gate::entered`] waits until a number
/// of calls have arrived, so a test knows the program is blocked where it means it to be.
#[derive(Debug)]
struct Gate {
    permits: Semaphore,
    entered: watch::Sender<u64>,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            permits: Semaphore::new(0),
            entered: watch::channel(0).0,
        })
    }

    /// Lets `n` calls through (now or when they come).
    fn release(&self, n: usize) {
        self.permits.add_permits(n);
    }

    /// Waits (up to 20 s) until at least `n` calls have arrived.
    async fn entered(&self, n: u64) {
        let mut rx = self.entered.subscribe();
        tokio::time::timeout(BOUND, rx.wait_for(|k| *k >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} gate calls never arrived"))
            .unwrap();
    }
}

impl ToolSource for Gate {
    fn namespace(&self) -> &str {
        "gate"
    }

    fn tools(&self) -> ToolsFuture<'_> {
        Box::pin(async {
            Ok(vec![ToolDescriptor {
                name: "wait".into(),
                description: "waits until the test lets it through; returns its arguments".into(),
                input_schema: json!({ "type": "object" }),
                output_schema: None,
                read_only: false,
            }]
            .into())
        })
    }

    fn call<'a>(&'a self, _tool: &'a str, args: Value, _ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.entered.send_modify(|k| *k += 1);
            self.permits.acquire().await.unwrap().forget();
            Ok(args).into()
        })
    }
}

/// How long any one wait of these tests may take before it counts as a failure.
const BOUND: Duration = Duration::from_secs(20);

/// A daemon with the `gate` namespace besides `test`.
async fn gated(gate: &Arc<Gate>) -> TestDaemon {
    TestDaemon::start_with(DaemonOptions::default().source(gate.clone())).await
}

fn detached(code: &str) -> Value {
    json!({ "code": code, "wait": false })
}

/// Starts `code` detached and returns its id (asserting the 202).
async fn start(d: &TestDaemon, code: &str) -> String {
    let (status, accepted) = post(d, detached(code)).await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["status"], json!("queued"), "{accepted}");
    accepted["id"].as_str().unwrap().to_owned()
}

/// `GET /v1/executions/<id>` as JSON.
async fn show(d: &TestDaemon, id: &str) -> (u16, Value) {
    let (status, text) = get(d, &format!("/v1/executions/{id}")).await;
    (status, serde_json::from_str(&text).unwrap())
}

/// A gated daemon running `code` detached, blocked in its first `gate.wait` call: the gate,
/// the daemon and the execution's id.
async fn blocked_at_the_gate(code: &str) -> (Arc<Gate>, TestDaemon, String) {
    let gate = Gate::new();
    let d = gated(&gate).await;
    let id = start(&d, code).await;
    gate.entered(1).await;
    (gate, d, id)
}

fn is_final(v: &Value) -> bool {
    !matches!(v["status"].as_str(), Some("queued" | "running"))
}

/// Asserts that the execution is still `running`.
async fn assert_running(d: &TestDaemon, id: &str) {
    let (_, running) = show(d, id).await;
    assert_eq!(running["status"], json!("running"), "{running}");
}

/// Waits for the execution to end and asserts that it ended `ok`; returns its response.
async fn finished_ok(d: &TestDaemon, id: &str) -> Value {
    let done = poll(d, id, is_final).await;
    assert_eq!(done["status"], json!("ok"), "{done}");
    done
}

/// The NDJSON lines of a streamed answer, read as they arrive.
struct Lines {
    body: Incoming,
    buf: Vec<u8>,
}

impl Lines {
    /// `GET path` on its own connection; asserts 200 and NDJSON.
    async fn open(d: &TestDaemon, path: &str) -> Lines {
        let mut c = d.client().await;
        let req = Request::get(path)
            .header("host", "airlock")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = c.send(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        assert_eq!(
            resp.headers()[CONTENT_TYPE],
            "application/x-ndjson",
            "{path}"
        );
        // The connection lives on in its own task while the body is read.
        Lines {
            body: resp.into_body(),
            buf: Vec::new(),
        }
    }

    /// The next line, or `None` at the end of the body; a failure if neither comes in time.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            let frame = tokio::time::timeout(BOUND, self.body.frame())
                .await
                .expect("the event stream went quiet");
            match frame {
                Some(frame) => {
                    if let Some(data) = frame.unwrap().data_ref() {
                        self.buf.extend_from_slice(data);
                    }
                }
                None => {
                    assert!(self.buf.is_empty(), "a partial last line: {:?}", self.buf);
                    return None;
                }
            }
        }
    }

    /// Lines until (and with) the first that `stop` holds of.
    async fn until(&mut self, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut lines = Vec::new();
        loop {
            let line = self
                .next()
                .await
                .unwrap_or_else(|| panic!("the stream ended first: {lines:?}"));
            let done = stop(&line);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    /// Every line to the end of the body.
    async fn rest(&mut self) -> Vec<Value> {
        let mut lines = Vec::new();
        while let Some(line) = self.next().await {
            lines.push(line);
        }
        lines
    }
}

fn seqs(lines: &[Value]) -> Vec<u64> {
    lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect()
}

/// Asserts that `lines` are the events named `events`, numbered `numbers`.
#[track_caller]
fn assert_events(lines: &[Value], events: &[&str], numbers: &[u64]) {
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l["event"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(names, events, "{lines:?}");
    assert_eq!(seqs(lines), numbers, "{lines:?}");
}

/// A program blocked in a tool call is seen `running`, with what it printed and its call
/// pending, and finishes once the call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_execution_shows_its_output_and_pending_call_so_far() {
    let (gate, d, id) = blocked_at_the_gate(
        "console.log('before'); const r: any = await tools.gate.wait({ n: 1 }); console.log('after'); r.n",
    )
    .await;
    let (status, running) = show(&d, &id).await;
    assert_eq!(status, 200, "{running}");
    assert_eq!(running["id"], json!(id), "{running}");
    assert_eq!(running["status"], json!("running"), "{running}");
    assert_eq!(running["stdout"], json!("before\n"), "{running}");
    assert_eq!(running["result"], Value::Null, "{running}");
    let calls = running["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{running}");
    assert_eq!(calls[0]["tool"], json!("gate.wait"), "{running}");
    assert_eq!(calls[0]["outcome"], json!("pending"), "{running}");
    // A detached execution runs in a session of its own.
    assert!(
        running["session"].as_str().unwrap().starts_with("ses_"),
        "{running}"
    );

    gate.release(1);
    let done = finished_ok(&d, &id).await;
    assert_eq!(done["result"], json!(1), "{done}");
    assert_eq!(done["stdout"], json!("before\nafter\n"), "{done}");
    assert_eq!(done["tool_calls"][0]["outcome"], json!("ok"), "{done}");
    assert_eq!(done["session"], running["session"], "{done}");
}

/// The event stream of a running execution delivers each event as it happens and ends with
/// the result; a reader that comes back with the number of the last event it saw gets exactly
/// the rest, live or after the end; `follow=false` gives only what is there now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_streamed_live_and_resumed_after_a_number() {
    let (gate, d, id) = blocked_at_the_gate(
        "console.log('a'); await tools.gate.wait({ n: 1 }); console.log('b'); await tools.gate.wait({ n: 2 }); console.log('c'); 'end'",
    )
    .await;
    let events = format!("/v1/executions/{id}/events");
    let mut live = Lines::open(&d, &events).await;
    let first = live
        .until(|l| l["event"] == json!("tool_call_started"))
        .await;
    assert_events(
        &first,
        &["started", "console", "tool_call_started"],
        &[1, 2, 3],
    );
    assert_eq!(first[0]["id"], json!(id));
    assert_eq!(first[1]["text"], json!("a"));
    assert_eq!(first[2]["tool"], json!("gate.wait"));

    // Only what is there now, and the answer ends.
    let (status, now) = get(&d, &format!("{events}?follow=false")).await;
    assert_eq!(status, 200, "{now}");
    assert_eq!(ndjson(&now), first);

    // The next events arrive while the program is blocked again: live, not at the end.
    gate.release(1);
    let second = live
        .until(|l| l["event"] == json!("tool_call_started"))
        .await;
    assert_events(
        &second,
        &["tool_call_finished", "console", "tool_call_started"],
        &[4, 5, 6],
    );
    assert_eq!(second[0]["outcome"], json!("ok"));
    assert_eq!(second[1]["text"], json!("b"));
    gate.entered(2).await;
    assert_running(&d, &id).await;

    // A second reader resumes after event 4 while it runs: 5, 6 now, the rest as it comes.
    let mut resumed = Lines::open(&d, &format!("{events}?after=4")).await;
    let caught_up = resumed.until(|l| l["seq"] == json!(6)).await;
    assert_eq!(caught_up, second[1..]);

    gate.release(1);
    let tail = live.rest().await;
    assert_events(
        &tail,
        &["tool_call_finished", "console", "result"],
        &[7, 8, 9],
    );
    assert_eq!(tail[1]["text"], json!("c"));
    let result = &tail[2];
    assert_eq!(result["status"], json!("ok"), "{result}");
    assert_eq!(result["result"], json!("end"), "{result}");
    assert_eq!(result["stdout"], json!("a\nb\nc\n"), "{result}");
    assert_eq!(
        resumed.rest().await,
        tail,
        "the resumed reader got the same rest"
    );

    // The whole stream, once more after the end, is what the live reader saw.
    let all: Vec<Value> = first.iter().chain(&second).chain(&tail).cloned().collect();
    let _ = poll(&d, &id, is_final).await;
    for after in 0..=9 {
        let (status, text) = get(&d, &format!("{events}?after={after}")).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(ndjson(&text), all[after..], "after={after}");
    }
    // And the final response is the result event's.
    let (_, done) = show(&d, &id).await;
    assert_eq!(done, strip_event(result));
}

/// The result event without its `event` and `seq` members: the response it carries.
fn strip_event(line: &Value) -> Value {
    let mut value = line.clone();
    let object = value.as_object_mut().unwrap();
    object.remove("event");
    object.remove("seq");
    value
}

/// `Prefer: respond-async` (RFC 7240) asks for the same as `"wait": false`: `202 Accepted`
/// with the id, a `Location` header, and the execution running detached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_respond_async_answers_202_with_a_location() {
    let gate = Gate::new();
    let d = gated(&gate).await;
    let mut c = d.client().await;
    let body = json!({ "code": "const r: any = await tools.gate.wait({ n: 5 }); r.n * 2" });
    let resp = c
        .send(execution_request(&body, Some("respond-async")))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let location = resp.headers()[LOCATION].to_str().unwrap().to_owned();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let accepted: Value = serde_json::from_slice(&body).unwrap();
    let id = accepted["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ex_"), "{accepted}");
    assert_eq!(location, format!("/v1/executions/{id}"));
    assert_eq!(
        accepted,
        json!({
            "id": id,
            "status": "queued",
            "location": location,
            "events": format!("/v1/executions/{id}/events"),
        })
    );
    // It was answered before it ended: the program is blocked in its call now.
    gate.entered(1).await;
    assert_running(&d, &id).await;
    gate.release(1);
    let done = finished_ok(&d, &id).await;
    assert_eq!(done["result"], json!(10), "{done}");
}

/// The client that started a detached execution hangs up (while the program runs); the
/// execution runs to its end anyway and is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_does_not_stop_a_detached_execution() {
    let gate = Gate::new();
    let d = gated(&gate).await;
    let mut c = d.client().await;
    let body = detached(
        "console.log('started'); const r: any = await tools.gate.wait({ n: 7 }); console.log('finished'); r.n",
    );
    let resp = c.send(execution_request(&body, None)).await.unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let id = resp.headers()[LOCATION]
        .to_str()
        .unwrap()
        .strip_prefix("/v1/executions/")
        .unwrap()
        .to_owned();
    gate.entered(1).await;
    // The response unread and the connection closed, while the program waits in its call.
    drop(resp);
    drop(c);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_running(&d, &id).await;
    gate.release(1);
    let done = finished_ok(&d, &id).await;
    assert_eq!(done["result"], json!(7), "{done}");
    assert_eq!(done["stdout"], json!("started\nfinished\n"), "{done}");
}

/// `DELETE /v1/executions/<id>` on a running detached execution: `202 cancelling`, and it ends
/// `cancelled` (while its tool call still hangs); its events end with that result; a second
/// DELETE finds nothing to cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_execution_is_cancelled() {
    let (_gate, d, id) = blocked_at_the_gate(
        "console.log('waiting'); await tools.gate.wait({}); console.log('never'); 1",
    )
    .await;
    let (status, text) = d
        .client()
        .await
        .delete(&format!("/v1/executions/{id}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["status"], json!("cancelling"), "{answer}");
    // The gate is never released: cancelling does not wait for the call.
    let done = poll(&d, &id, is_final).await;
    assert_eq!(done["status"], json!("cancelled"), "{done}");
    assert_eq!(done["stdout"], json!("waiting\n"), "{done}");
    let (status, text) = get(&d, &format!("/v1/executions/{id}/events")).await;
    assert_eq!(status, 200, "{text}");
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], json!("result"), "{text}");
    assert_eq!(last["status"], json!("cancelled"), "{text}");
    let (status, text) = d
        .client()
        .await
        .delete(&format!("/v1/executions/{id}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 404, "{text}");
    assert!(text.contains("not_found"), "{text}");
}

/// A daemon stops with one detached execution finished and another blocked in a call; the
/// next daemon on the same state directory shows the first's kept response and events, and
/// the second as `interrupted`, which a resume finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_executions_are_kept_across_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let on_state = |gate: &Arc<Gate>| {
        let mut options = DaemonOptions::default().source(gate.clone());
        options.state_directory = Some(state.path().to_owned());
        options
    };
    let held = Gate::new();
    let first = TestDaemon::start_with(on_state(&held)).await;
    let finished = start(
        &first,
        "console.log('kept'); await tools.test.add({ a: 1, b: 2 })",
    )
    .await;
    let before = poll(&first, &finished, is_final).await;
    assert_eq!(before["status"], json!("ok"), "{before}");
    assert_eq!(before["result"].as_f64(), Some(3.0), "{before}");
    let (_, events_before) = get(&first, &format!("/v1/executions/{finished}/events")).await;
    let running = start(
        &first,
        "console.log('cut off'); const r: any = await tools.gate.wait({ n: 3 }); r.n",
    )
    .await;
    held.entered(1).await;
    // `stop` returns when `run` has: the daemon is gone (its grace period over), and nothing
    // of it may run on or hold the journal, as nothing would after a real daemon's exit. The
    // blocked call is never released, so the execution cannot end by itself.
    tokio::time::timeout(BOUND, first.stop())
        .await
        .expect("the daemon stopped in time");

    let open = Gate::new();
    open.release(8);
    let second = TestDaemon::start_with(on_state(&open)).await;
    let (status, after) = show(&second, &finished).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after, before);
    let (status, events_after) = get(&second, &format!("/v1/executions/{finished}/events")).await;
    assert_eq!(status, 200, "{events_after}");
    assert_eq!(events_after, events_before);

    let (status, cut) = show(&second, &running).await;
    assert_eq!(status, 200, "{cut}");
    assert_eq!(cut["status"], json!("interrupted"), "{cut}");
    assert_eq!(cut["id"], json!(running), "{cut}");
    let resumed = second.client().await.resume(&running).await.unwrap();
    assert_eq!(resumed.status, Status::Ok, "{resumed:?}");
    assert_eq!(resumed.result, json!(3));
    assert_eq!(resumed.resumed_from.as_deref(), Some(running.as_str()));
}

/// Another principal (uid 65534, through the real CLI) neither sees, follows nor cancels a
/// detached execution: each answer is the 404 of an id that does not exist, while it runs and
/// after it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_see_follow_or_cancel_a_detached_execution() {
    if !another_principal::can_run(
        "another_principal_cannot_see_follow_or_cancel_a_detached_execution",
    ) {
        return;
    }
    let gate = Gate::new();
    let options = DaemonOptions::default()
        .source(gate.clone())
        .policy(|p| another_principal::admit(p, &["gate.*", "test.*"]));
    let d = TestDaemon::start_with(options).await;
    another_principal::open_socket(&d);
    let id = start(
        &d,
        "console.log('mine'); await tools.gate.wait({}); 'secret'",
    )
    .await;
    gate.entered(1).await;
    let refused = |ok: bool, text: &str, what: &str| {
        another_principal::assert_not_found(ok, text, what);
        assert!(
            !text.contains("mine") && !text.contains("secret"),
            "{what}: {text}"
        );
    };
    for args in [
        vec!["status", id.as_str()],
        vec!["logs", id.as_str()],
        vec!["logs", "-f", id.as_str()],
        vec!["cancel", id.as_str()],
    ] {
        let (ok, text) = another_principal::cli(&d, &args).await;
        refused(ok, &text, &format!("{args:?} while it runs"));
    }
    // The other principal's attempt to cancel changed nothing.
    assert_running(&d, &id).await;
    gate.release(1);
    finished_ok(&d, &id).await;
    for args in [vec!["status", id.as_str()], vec!["logs", id.as_str()]] {
        let (ok, text) = another_principal::cli(&d, &args).await;
        refused(ok, &text, &format!("{args:?} after its end"));
    }
}

/// `limits.max_waiting_executions` bounds a principal's detached executions: one more while
/// the limit's worth run is `429 too_many_waiting`; a waiting client's execution is not
/// counted; once one ends there is room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_executions_are_bounded_per_principal() {
    let gate = Gate::new();
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .source(gate.clone())
            .policy(|p| p.limits.max_waiting_executions = 1),
    )
    .await;
    let first = start(&d, "await tools.gate.wait({ n: 1 })").await;
    gate.entered(1).await;
    let (status, refused) = post(&d, detached("2")).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(
        refused["error"]["code"],
        json!("too_many_waiting"),
        "{refused}"
    );
    // The same through the header.
    let mut c = d.client().await;
    let resp = c
        .send(execution_request(
            &json!({ "code": "2" }),
            Some("respond-async"),
        ))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    // A client that waits for its answer is not held to it.
    let plain = d.exec("40 + 2").await;
    assert_eq!(plain.status, Status::Ok, "{plain:?}");
    assert_eq!(plain.result, json!(42));

    gate.release(1);
    finished_ok(&d, &first).await;
    let next = start(&d, "3").await;
    let done = poll(&d, &next, is_final).await;
    assert_eq!(done["result"], json!(3), "{done}");
}

/// The CLI: `exec --detach` prints the id at once; `status` prints the execution (exit 4 while
/// it runs, then as for exec); `logs` prints the output so far; `logs -f` follows it to its
/// end with its exit code; `cancel` stops one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_detaches_shows_follows_and_cancels() {
    let gate = Gate::new();
    let d = gated(&gate).await;
    let socket = d.socket_path().to_owned();
    let cli = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(binaries::airlock_cli());
        cmd.arg("--socket")
            .arg(&socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    };
    let run = |args: &[&str]| {
        let mut cmd = cli(args);
        async move {
            let out = tokio::time::timeout(BOUND, cmd.output())
                .await
                .expect("the CLI finished in time")
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let (code, out, err) = run(&[
        "exec",
        "--detach",
        "-e",
        "console.log('one'); await tools.gate.wait({}); console.log('two'); 'fin'",
    ])
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    let id = out.trim().to_owned();
    assert!(id.starts_with("ex_") && !id.contains('\n'), "{out}");
    gate.entered(1).await;

    let (code, out, err) = run(&["status", &id]).await;
    assert_eq!(code, Some(4), "{out}{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["status"], json!("running"), "{out}");
    assert_eq!(shown["stdout"], json!("one\n"), "{out}");
    let (code, out, err) = run(&["logs", &id]).await;
    assert_eq!((code, out.as_str()), (Some(4), "one\n"), "{err}");

    // Following: the output so far at once, the rest as it comes, the exit code at the end.
    let mut follow = cli(&["logs", "-f", &id]).spawn().unwrap();
    let mut stdout = BufReader::new(follow.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(BOUND, stdout.next_line())
        .await
        .expect("logs -f printed the output so far")
        .unwrap();
    assert_eq!(line.as_deref(), Some("one"));
    gate.release(1);
    let mut rest = Vec::new();
    while let Some(line) = tokio::time::timeout(BOUND, stdout.next_line())
        .await
        .expect("logs -f went on")
        .unwrap()
    {
        rest.push(line);
    }
    let status = tokio::time::timeout(BOUND, follow.wait())
        .await
        .expect("logs -f ended with the execution")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert_eq!(rest, ["two", "\"fin\""]);
    let (code, out, err) = run(&["status", &id]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&shown["status"], &shown["result"]),
        (&json!("ok"), &json!("fin")),
        "{out}"
    );

    // A failing program: exit 1 from logs -f and status.
    let (code, out, err) = run(&["exec", "--detach", "-e", "throw new Error('broken')"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    let failing = out.trim().to_owned();
    let (code, _, err) = run(&["logs", "-f", &failing]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("broken"), "{err}");
    let (code, out, _) = run(&["status", &failing]).await;
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["status"],
        json!("error")
    );

    // Cancelled from the CLI while it waits in its call; logs -f then ends with exit 1.
    let (code, out, err) = run(&["exec", "--detach", "-e", "await tools.gate.wait({}); 1"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    let cancelled = out.trim().to_owned();
    gate.entered(2).await;
    let (code, out, err) = run(&["cancel", &cancelled]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.trim(), format!("{cancelled}: cancelling"));
    let (code, _, err) = run(&["logs", "-f", &cancelled]).await;
    assert_eq!(code, Some(1), "{err}");
    let (code, out, _) = run(&["status", &cancelled]).await;
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["status"],
        json!("cancelled")
    );
}

/// The resident memory of this process (which runs the daemon), in bytes.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Many readers of one kept execution's events that read nothing share one copy of its body:
/// 60 readers of an 8 MB result hold well under one copy each (each held its own before: 40
/// grew the daemon by 343 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_of_a_kept_result_share_one_copy() {
    const READERS: usize = 60;
    // The whole 8 MB goes back: the output budget raised to its maximum (at the default
    // 10,000 tokens the result would be cut to about 40 kB).
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_output_tokens = airlock_policy::LimitSettings::MAX_OUTPUT_TOKENS;
    }))
    .await;
    let id = start(&d, "'x '.repeat(4_000_000)").await;
    let done = finished_ok(&d, &id).await;
    drop(done);
    let path = format!("/v1/executions/{id}/events");
    let socket = d.socket.clone();
    let before = resident_bytes();
    // Each asks for the events and reads only the head, then nothing.
    let readers = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        (0..READERS)
            .map(|_| {
                let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                write!(s, "GET {path} HTTP/1.1\r\nHost: airlock\r\n\r\n").unwrap();
                let mut head = [0u8; 12];
                s.read_exact(&mut head).unwrap();
                assert_eq!(&head, b"HTTP/1.1 200");
                s
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    // What the daemon holds for them once each stalled: the socket buffers and one body.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = resident_bytes().saturating_sub(before);
    eprintln!(
        "{READERS} stalled readers grew the daemon by {} MB",
        grown >> 20
    );
    assert!(
        grown < 160 << 20,
        "{READERS} stalled readers of an 8 MB result grew the daemon by {} MB",
        grown >> 20
    );
    drop(readers);
    // The daemon serves on, and a reader that reads gets everything.
    let (status, text) = get(&d, &format!("/v1/executions/{id}/events")).await;
    assert_eq!(status, 200);
    let lines = ndjson(&text);
    assert_eq!(lines.last().unwrap()["event"], json!("result"));
    assert!(
        text.len() > 8_000_000,
        "the whole result: {} bytes",
        text.len()
    );
}

/// Detached submissions made at once cannot all pass `limits.max_waiting_executions`: each
/// takes its place before anything else of it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_submissions_made_at_once_keep_to_the_bound() {
    const MAX: usize = 3;
    let gate = Gate::new();
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .source(gate.clone())
            .policy(|p| p.limits.max_waiting_executions = MAX as u32),
    )
    .await;
    let mut submissions = tokio::task::JoinSet::new();
    let d = Arc::new(d);
    // Programs of 2 MB: writing one to its worker takes long enough for the others to come.
    let code = Arc::new(format!(
        "await tools.gate.wait({{}})\n// {}",
        "x".repeat(2_000_000)
    ));
    for _ in 0..16 {
        let (d, code) = (d.clone(), code.clone());
        submissions.spawn(async move { post(&d, detached(&code)).await });
    }
    let statuses = submissions.join_all().await;
    let accepted = statuses.iter().filter(|(s, _)| *s == 202).count();
    let refused = statuses
        .iter()
        .filter(|(s, v)| *s == 429 && v["error"]["code"] == json!("too_many_waiting"))
        .count();
    assert_eq!(
        (accepted, refused),
        (MAX, 16 - MAX),
        "{:?}",
        statuses.iter().map(|(s, _)| s).collect::<Vec<_>>()
    );
    gate.entered(MAX as u64).await;
    gate.release(MAX);
}

/// A Python program detached: polled while it waits in a call (its output so far shown),
/// then released and finished with its events; another one cancelled while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_python_execution_is_followed_and_cancelled() {
    let gate = Gate::new();
    let d = gated(&gate).await;
    let code = "print('waiting')\nr = await tools.gate.wait(n=1)\nprint('released')\nr";
    let (status, accepted) = post(
        &d,
        json!({ "code": code, "language": "python", "wait": false }),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_owned();
    gate.entered(1).await;
    assert_running(&d, &id).await;
    gate.release(1);
    let done = finished_ok(&d, &id).await;
    assert_eq!(done["result"], json!({ "n": 1 }), "{done}");
    assert_eq!(done["stdout"], json!("waiting\nreleased\n"), "{done}");
    let (_, events) = get(&d, &format!("/v1/executions/{id}/events")).await;
    let lines = ndjson(&events);
    assert_eq!(lines.last().unwrap()["event"], json!("result"), "{events}");

    let (status, accepted) = post(
        &d,
        json!({ "code": "await tools.gate.wait()\n'never'", "language": "python", "wait": false }),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_owned();
    gate.entered(2).await;
    let (status, text) = d
        .client()
        .await
        .delete(&format!("/v1/executions/{id}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{text}");
    let done = poll(&d, &id, is_final).await;
    assert_eq!(done["status"], json!("cancelled"), "{done}");
}
