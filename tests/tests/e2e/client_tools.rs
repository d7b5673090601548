//! Client-owned tools, end to end (the real daemon in-process, real workers): a
//! request declares tools the agent's client answers (`client_tools`), the program calls them as
//! `tools.client.<name>(args)`, and when it cannot go on without their answers the execution
//! answers `waiting` with every pending call at once. The client plays the tool's owner and
//! answers either through the daemon (`POST /v1/executions/{id}/results`, the execution is kept
//! in the journal, even across a restart) or by sending the whole program again with the answers
//! so far (`client_results`, the daemon keeps nothing). Earlier calls are answered from the
//! record on every re-run, so a daemon tool's side effect happens once (the `ledger` counts).
//!
//! The requests and responses are raw JSON: the typed shapes of the agent API do not know
//! `waiting` yet.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::ledger::Ledger;
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// A made-up token of GitHub's classic shape (never a real credential), in two parts so this
/// file does not look like it holds one (the scanner's false-positive test reads the sources).
const GITHUB_TOKEN: &str = concat!("ghp_", "hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");

/// The seed's parallel example: two searches at once.
const PARALLEL: &str = r#"
const [us, fr] = await Promise.all([
  tools.client.web_search({ query: "news US today" }),
  tools.client.web_search({ query: "actualités en france aujourd'hui" }),
]);
return { us, fr };
"#;

/// The seed's dependent chain: the second search is built from the first one's answer.
const CHAIN: &str = r#"
const first: any = await tools.client.web_search({ query: "who won the 2022 world cup" });
const second: any = await tools.client.web_search({ query: "capital of " + first.top });
return { first, second };
"#;

/// The one client tool most tests declare.
fn web_search() -> Value {
    json!({
        "name": "web_search",
        "description": "Searches the web; returns the query and its top hit.",
        "input_schema": {
            "type": "object",
            "properties": { "query": { "type": "string" } },
            "required": ["query"]
        }
    })
}

/// The tool's owner, the agent's client: a pure function of the arguments, so the stateful and
/// the stateless forms can be compared.
fn search(args: &Value) -> Value {
    let query = args["query"].as_str().unwrap_or("?");
    let top = match query {
        "who won the 2022 world cup" => "Argentina".to_owned(),
        other => format!("top hit for {other}"),
    };
    json!({ "query": query, "top": top })
}

/// What the owner answers a call: a value, or an error message.
type Owner<'a> = &'a dyn Fn(&str, &Value) -> Result<Value, String>;

fn searching(tool: &str, args: &Value) -> Result<Value, String> {
    assert_eq!(tool, "web_search", "{args}");
    Ok(search(args))
}

async fn daemon_with(ledger: Option<&Arc<Ledger>>) -> TestDaemon {
    let mut options = DaemonOptions::default();
    if let Some(ledger) = ledger {
        options.sources.push(ledger.clone());
    }
    TestDaemon::start_with(options).await
}

/// `POST path` with a JSON body: the status and the body as JSON.
async fn post(d: &TestDaemon, path: &str, body: &Value) -> (u16, Value) {
    d.post_json(path, body).await
}

/// `POST /v1/executions` with `client_tools` (and whatever else `extra` holds); the answer must
/// be a 200.
async fn execute(d: &TestDaemon, code: &str, tools: Value, extra: Value) -> Value {
    let mut body = json!({ "code": code, "client_tools": tools });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, r) = post(d, "/v1/executions", &body).await;
    assert_eq!(status, 200, "{r}");
    r
}

/// `POST /v1/executions/{id}/results`: status and body.
async fn answer(d: &TestDaemon, id: &str, results: Value) -> (u16, Value) {
    post(
        d,
        &format!("/v1/executions/{id}/results"),
        &json!({ "results": results }),
    )
    .await
}

/// The pending calls of a `waiting` response, checked for shape: `n` of them, each also in the
/// trace as `client.<tool>`, outcome `pending`; the response carries its determinism.
fn waiting(r: &Value, n: usize) -> Vec<Value> {
    assert_eq!(r["status"], json!("waiting"), "{r}");
    assert!(r["id"].as_str().unwrap().starts_with("ex_"), "{r}");
    let pending = r["pending_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(pending.len(), n, "{r}");
    assert!(r["determinism"]["clock_ms"].is_u64(), "{r}");
    let seed = r["determinism"]["seed"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        !seed.is_empty() && seed.chars().all(|c| c.is_ascii_hexdigit()),
        "{r}"
    );
    for call in pending {
        let id = call["id"].as_u64().unwrap_or_else(|| panic!("{call}"));
        let tool = call["tool"].as_str().unwrap();
        let traced = r["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"].as_u64() == Some(id))
            .unwrap_or_else(|| panic!("pending call {id} is not in the trace: {r}"));
        assert_eq!(traced["tool"], json!(format!("client.{tool}")), "{r}");
        assert_eq!(traced["outcome"], json!("pending"), "{r}");
        assert_eq!(traced["args"], call["args"], "{r}");
    }
    pending.clone()
}

/// The owner's answers to a batch of pending calls, as result items.
fn answers(pending: &[Value], owner: Owner<'_>) -> Vec<Value> {
    pending
        .iter()
        .map(|call| {
            let tool = call["tool"].as_str().unwrap();
            match owner(tool, &call["args"]) {
                Ok(value) => json!({ "id": call["id"], "ok": value }),
                Err(message) => json!({ "id": call["id"], "error": { "message": message } }),
            }
        })
        .collect()
}

/// The stateful form: starts the program, then answers every batch with
/// `POST /v1/executions/{id}/results` until it ends. Every response, in order.
async fn drive_stateful(d: &TestDaemon, code: &str, tools: Value, owner: Owner<'_>) -> Vec<Value> {
    drive_stateful_with(d, code, tools, owner, json!({})).await
}

/// [`drive_stateful`] with more fields in the first request (`extra`, e.g. the language).
async fn drive_stateful_with(
    d: &TestDaemon,
    code: &str,
    tools: Value,
    owner: Owner<'_>,
    extra: Value,
) -> Vec<Value> {
    let first = execute(d, code, tools, extra).await;
    let id = first["id"].as_str().unwrap().to_owned();
    let mut responses = vec![first];
    for _ in 0..20 {
        let last = responses.last().unwrap();
        if last["status"] != json!("waiting") {
            return responses;
        }
        let n = last["pending_calls"].as_array().map_or(0, Vec::len);
        let pending = waiting(last, n);
        let (status, next) = answer(d, &id, Value::from(answers(&pending, owner))).await;
        assert_eq!(status, 200, "{next}");
        // The answer is the next response of the same execution.
        assert_eq!(next["id"], json!(id), "{next}");
        responses.push(next);
    }
    panic!("still waiting after 20 rounds: {responses:?}");
}

/// The stateless form: sends the whole program again with every answer so far
/// (`client_results`) and the determinism of the last waiting response, until it ends.
async fn drive_stateless(d: &TestDaemon, code: &str, tools: Value, owner: Owner<'_>) -> Vec<Value> {
    drive_stateless_with(d, code, tools, owner, json!({})).await
}

/// [`drive_stateless`] with more fields in every request (`base`, e.g. the language).
async fn drive_stateless_with(
    d: &TestDaemon,
    code: &str,
    tools: Value,
    owner: Owner<'_>,
    base: Value,
) -> Vec<Value> {
    let mut results: Vec<Value> = Vec::new();
    let mut determinism: Option<Value> = None;
    let mut responses: Vec<Value> = Vec::new();
    for _ in 0..20 {
        let mut extra = base.clone();
        extra["client_results"] = json!(results);
        if let Some(d) = &determinism {
            extra["determinism"] = d.clone();
        }
        let r = execute(d, code, tools.clone(), extra).await;
        if r["status"] != json!("waiting") {
            responses.push(r);
            return responses;
        }
        let n = r["pending_calls"].as_array().map_or(0, Vec::len);
        let pending = waiting(&r, n);
        results.extend(answers(&pending, owner));
        determinism = Some(r["determinism"].clone());
        responses.push(r);
    }
    panic!("still waiting after 20 rounds: {responses:?}");
}

fn ok_result(r: &Value) -> &Value {
    assert_eq!(r["status"], json!("ok"), "{r}");
    &r["result"]
}

/// 1. The seed's parallel example: both calls come in one waiting response; one POST answers
/// both; the program ends with both values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_client_calls_come_in_one_batch_and_one_post_answers_them() {
    let d = daemon_with(None).await;
    let r = execute(&d, PARALLEL, json!([web_search()]), json!({})).await;
    let pending = waiting(&r, 2);
    let id = r["id"].as_str().unwrap().to_owned();
    assert!(r["session"].as_str().unwrap().starts_with("ses_"), "{r}");
    let mut queries: Vec<&str> = pending
        .iter()
        .map(|c| {
            assert_eq!(c["tool"], json!("web_search"), "{c}");
            c["args"]["query"].as_str().unwrap()
        })
        .collect();
    queries.sort_unstable();
    assert_eq!(
        queries,
        ["actualités en france aujourd'hui", "news US today"],
        "{r}"
    );
    assert_ne!(pending[0]["id"], pending[1]["id"], "{r}");

    let (status, done) = answer(&d, &id, Value::from(answers(&pending, &searching))).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["id"], json!(id), "{done}");
    assert_eq!(
        ok_result(&done),
        &json!({
            "us": search(&json!({ "query": "news US today" })),
            "fr": search(&json!({ "query": "actualités en france aujourd'hui" })),
        })
    );
    // The final trace has both client calls, answered.
    let calls: Vec<&Value> = done["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tool"] == json!("client.web_search"))
        .collect();
    assert_eq!(calls.len(), 2, "{done}");
    assert!(calls.iter().all(|c| c["outcome"] == json!("ok")), "{done}");
}

/// 2. The dependent chain: the second call is built from the first answer, so two round trips,
/// one call each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_chain_takes_one_round_trip_per_call() {
    let d = daemon_with(None).await;
    let responses = drive_stateful(&d, CHAIN, json!([web_search()]), &searching).await;
    assert_eq!(responses.len(), 3, "{responses:?}");
    let first = waiting(&responses[0], 1);
    assert_eq!(
        first[0]["args"],
        json!({ "query": "who won the 2022 world cup" })
    );
    let second = waiting(&responses[1], 1);
    assert_eq!(
        second[0]["args"],
        json!({ "query": "capital of Argentina" })
    );
    assert_ne!(first[0]["id"], second[0]["id"]);
    assert_eq!(
        ok_result(&responses[2]),
        &json!({
            "first": search(&json!({ "query": "who won the 2022 world cup" })),
            "second": search(&json!({ "query": "capital of Argentina" })),
        })
    );
}

/// 3. A daemon tool called before and between client calls runs once, however many re-runs
/// the client's answers take: the re-runs answer it from the record (`replayed` in the trace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_tools_before_and_between_client_calls_run_once() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon_with(Some(&ledger)).await;
    let code = r#"
const a: any = await tools.ledger.create({ name: "before" });
const r1: any = await tools.client.web_search({ query: "first " + a.seq });
const b: any = await tools.ledger.create({ name: "between " + r1.top });
const r2: any = await tools.client.web_search({ query: "second " + b.seq });
return { a: a.seq, b: b.seq, r1, r2 };
"#;
    let start = execute(&d, code, json!([web_search()]), json!({})).await;
    let id = start["id"].as_str().unwrap().to_owned();
    let first = waiting(&start, 1);
    assert_eq!(first[0]["args"], json!({ "query": "first 1" }));
    assert_eq!(ledger.records().len(), 1);

    // The re-run: `before` from the record, `between` live.
    let (status, next) = answer(&d, &id, Value::from(answers(&first, &searching))).await;
    assert_eq!(status, 200, "{next}");
    let second = waiting(&next, 1);
    assert_eq!(second[0]["args"], json!({ "query": "second 2" }));
    assert_eq!(ledger.records().len(), 2);
    let trace = next["tool_calls"].as_array().unwrap();
    let ledger_calls: Vec<&Value> = trace
        .iter()
        .filter(|c| c["tool"] == json!("ledger.create"))
        .collect();
    assert_eq!(ledger_calls.len(), 2, "{trace:?}");
    assert_eq!(ledger_calls[0]["replayed"], json!(true), "{trace:?}");
    assert_eq!(ledger_calls[1]["replayed"], json!(false), "{trace:?}");

    let (status, done) = answer(&d, &id, Value::from(answers(&second, &searching))).await;
    assert_eq!(status, 200, "{done}");
    let done = &done;
    assert_eq!(
        ok_result(done),
        &json!({
            "a": 1,
            "b": 2,
            "r1": search(&json!({ "query": "first 1" })),
            "r2": search(&json!({ "query": "second 2" })),
        })
    );
    let trace = done["tool_calls"].as_array().unwrap();
    let ledger_calls: Vec<&Value> = trace
        .iter()
        .filter(|c| c["tool"] == json!("ledger.create"))
        .collect();
    assert_eq!(ledger_calls.len(), 2, "{trace:?}");
    assert!(
        ledger_calls.iter().all(|c| c["replayed"] == json!(true)),
        "{trace:?}"
    );
    assert_eq!(
        trace
            .iter()
            .filter(|c| c["tool"] == json!("client.web_search"))
            .count(),
        2,
        "{trace:?}"
    );
    // Each side effect happened once.
    let names: Vec<Value> = ledger.records().iter().map(|r| r["name"].clone()).collect();
    assert_eq!(
        names,
        [json!("before"), json!("between top hit for first 1")],
        "{names:?}"
    );
}

/// 4. An error the client answers is a `ToolError` in the program: caught, the program goes
/// on; uncaught, the execution ends `error` with the client's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_error_is_a_tool_error_in_the_program() {
    let d = daemon_with(None).await;
    let failing = |_: &str, args: &Value| -> Result<Value, String> {
        if args["query"] == json!("flaky") {
            Err("the search backend is down".to_owned())
        } else {
            Ok(search(args))
        }
    };
    let caught = r#"
let caught: any = null;
try {
  await tools.client.web_search({ query: "flaky" });
} catch (e: any) {
  caught = [e instanceof ToolError, e.name, e.code, e.message];
}
const after: any = await tools.client.web_search({ query: "after" });
return { caught, after };
"#;
    let responses = drive_stateful(&d, caught, json!([web_search()]), &failing).await;
    assert_eq!(responses.len(), 3, "{responses:?}");
    let done = responses.last().unwrap();
    let result = ok_result(done);
    assert_eq!(
        &result["caught"].as_array().unwrap()[..3],
        &[json!(true), json!("ToolError"), json!("upstream_error")],
        "{done}"
    );
    let message = result["caught"][3].as_str().unwrap();
    assert!(message.contains("the search backend is down"), "{done}");
    assert_eq!(result["after"], search(&json!({ "query": "after" })));
    let failed = &done["tool_calls"][0];
    assert_eq!(failed["tool"], json!("client.web_search"), "{done}");
    assert_eq!(failed["outcome"], json!("error"), "{done}");
    assert_eq!(failed["error"]["code"], json!("upstream_error"), "{done}");

    let uncaught = r#"const r: any = await tools.client.web_search({ query: "flaky" }); return r;"#;
    let responses = drive_stateful(&d, uncaught, json!([web_search()]), &failing).await;
    assert_eq!(responses.len(), 2, "{responses:?}");
    let done = &responses[1];
    assert_eq!(done["status"], json!("error"), "{done}");
    assert_eq!(done["error"]["name"], json!("ToolError"), "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the search backend is down"),
        "{done}"
    );
}

/// 5. Part of a batch may be answered (the rest comes back pending); results for calls that
/// are not pending, a finished execution, an unknown one are refused with clear codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_answers_and_refused_results() {
    let d = daemon_with(None).await;
    let r = execute(&d, PARALLEL, json!([web_search()]), json!({})).await;
    let pending = waiting(&r, 2);
    let id = r["id"].as_str().unwrap().to_owned();
    let (a, b) = (&pending[0], &pending[1]);

    // Only the first.
    let (status, next) = answer(
        &d,
        &id,
        json!([{ "id": a["id"], "ok": search(&a["args"]) }]),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["id"], json!(id), "{next}");
    let still = waiting(&next, 1);
    assert_eq!(still[0]["id"], b["id"], "{next}");
    assert_eq!(still[0]["args"], b["args"], "{next}");

    // The first is answered already; 999 was never a call.
    for bad in [a["id"].clone(), json!(999)] {
        let (status, body) = answer(&d, &id, json!([{ "id": bad, "ok": 1 }])).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["error"]["code"], json!("bad_request"), "{bad}: {body}");
    }
    // A refused request changed nothing: the second is still pending and its answer ends it.
    let (status, done) = answer(
        &d,
        &id,
        json!([{ "id": b["id"], "ok": search(&b["args"]) }]),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let result = ok_result(&done);
    assert_eq!(result["us"], search(&json!({ "query": "news US today" })));
    assert_eq!(
        result["fr"],
        search(&json!({ "query": "actualités en france aujourd'hui" }))
    );

    // Finished: nothing to answer any more.
    let (status, body) = answer(&d, &id, json!([{ "id": b["id"], "ok": 1 }])).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], json!("conflict"), "{body}");

    // An id that never was.
    let (status, body) = answer(&d, "ex_doesnotexist", json!([{ "id": 1, "ok": 1 }])).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], json!("not_found"), "{body}");
}

/// 6. The stateless form: the same programs driven only with `client_results` end as the
/// stateful form does, twice the same; the daemon kept nothing to post results to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stateless_form_gives_the_same_answers_as_the_stateful_one() {
    let d = daemon_with(None).await;
    for (code, round_trips) in [(PARALLEL, 1), (CHAIN, 2)] {
        let stateful = drive_stateful(&d, code, json!([web_search()]), &searching).await;
        let once = drive_stateless(&d, code, json!([web_search()]), &searching).await;
        let twice = drive_stateless(&d, code, json!([web_search()]), &searching).await;
        assert_eq!(once.len(), round_trips + 1, "{once:?}");
        let expected = ok_result(stateful.last().unwrap());
        assert_eq!(ok_result(once.last().unwrap()), expected, "{once:?}");
        assert_eq!(ok_result(twice.last().unwrap()), expected, "{twice:?}");
        // The waiting responses asked the same questions each time.
        for (x, y) in once.iter().zip(&twice).take(round_trips) {
            assert_eq!(x["pending_calls"], y["pending_calls"]);
        }
        // Nothing was kept for a stateless waiting execution.
        let id = once[0]["id"].as_str().unwrap();
        let pending = waiting(&once[0], once[0]["pending_calls"].as_array().unwrap().len());
        let (status, body) = answer(&d, id, Value::from(answers(&pending, &searching))).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["code"], json!("not_found"), "{body}");
    }
    // An error answer works the same way without the daemon keeping anything.
    let failing = |_: &str, _: &Value| -> Result<Value, String> { Err("no network".to_owned()) };
    let responses = drive_stateless(
        &d,
        r#"const r: any = await tools.client.web_search({ query: "x" }); return r;"#,
        json!([web_search()]),
        &failing,
    )
    .await;
    let done = responses.last().unwrap();
    assert_eq!(done["status"], json!("error"), "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no network"),
        "{done}"
    );
}

/// 6b. The program's clock and randomness: sent back with the answers, `determinism` makes a
/// re-run take the same path, so a call whose arguments come from `Math.random()` and
/// `Date.now()` is the same call; the stateful form keeps them itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn determinism_makes_re_runs_ask_the_same_questions() {
    let d = daemon_with(None).await;
    let code = r#"
const tag = Math.floor(Math.random() * 1e9);
const at = Date.now();
const r: any = await tools.client.web_search({ query: "q-" + tag + "-" + at });
const later = Math.floor(Math.random() * 1e9);
return { query: "q-" + tag + "-" + at, r, later };
"#;
    let tools = json!([web_search()]);
    let first = execute(&d, code, tools.clone(), json!({ "client_results": [] })).await;
    let pending = waiting(&first, 1);
    let determinism = first["determinism"].clone();
    let query = pending[0]["args"]["query"].clone();

    // The same start again with the same determinism: the same question.
    let again = execute(
        &d,
        code,
        tools.clone(),
        json!({ "client_results": [], "determinism": determinism }),
    )
    .await;
    assert_eq!(waiting(&again, 1)[0]["args"]["query"], query, "{again}");
    // Without it: a new seed, another question.
    let other = execute(&d, code, tools.clone(), json!({ "client_results": [] })).await;
    assert_ne!(waiting(&other, 1)[0]["args"]["query"], query, "{other}");

    // Answered: the program ran to the end on the same path.
    let results = answers(&pending, &searching);
    let done = execute(
        &d,
        code,
        tools.clone(),
        json!({ "client_results": results, "determinism": determinism }),
    )
    .await;
    let result = ok_result(&done);
    assert_eq!(result["query"], query, "{done}");
    assert_eq!(result["r"], search(&pending[0]["args"]), "{done}");
    let twice = execute(
        &d,
        code,
        tools.clone(),
        json!({ "client_results": results, "determinism": determinism }),
    )
    .await;
    assert_eq!(ok_result(&twice), result, "{twice}");

    // The stateful form keeps its clock and seed: the answered re-run took the same path.
    let responses = drive_stateful(&d, code, tools, &searching).await;
    assert_eq!(responses.len(), 2, "{responses:?}");
    let asked = waiting(&responses[0], 1)[0]["args"]["query"].clone();
    let done = ok_result(&responses[1]);
    assert_eq!(done["query"], asked, "{responses:?}");
    assert_eq!(done["r"], search(&json!({ "query": asked })));
}

/// 7. A client's answer is scanned like any tool result: a secret-shaped string reaches the
/// program redacted, and no response carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_client_results_are_redacted() {
    let d = daemon_with(None).await;
    let code = r#"
const r: any = await tools.client.web_search({ query: "my token" });
console.log("note: " + r.top);
return { sawToken: r.top.includes("ghp_"), top: r.top };
"#;
    let leaking = |_: &str, args: &Value| -> Result<Value, String> {
        Ok(json!({ "query": args["query"], "top": format!("token: {GITHUB_TOKEN}") }))
    };
    let stateful = drive_stateful(&d, code, json!([web_search()]), &leaking).await;
    let stateless = drive_stateless(&d, code, json!([web_search()]), &leaking).await;
    for responses in [stateful, stateless] {
        let done = responses.last().unwrap();
        let result = ok_result(done);
        assert_eq!(result["sawToken"], json!(false), "{done}");
        assert_eq!(
            result["top"],
            json!("token: [REDACTED:github-token]"),
            "{done}"
        );
        assert_eq!(
            done["stdout"],
            json!("note: token: [REDACTED:github-token]\n"),
            "{done}"
        );
        for r in &responses {
            let text = r.to_string();
            assert!(!text.contains(GITHUB_TOKEN), "{text}");
        }
        let call = done["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["tool"] == json!("client.web_search"))
            .unwrap();
        assert!(
            call["redactions"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x["rule"] == json!("github-token"))),
            "{done}"
        );
    }
}

/// 8. The contract check knows the declared tools: an unknown one, or a literal argument of the
/// wrong type, is refused before anything runs; at run time arguments that break the declared
/// schema fail the call with `invalid_arguments` (nothing waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_check_and_argument_schemas_cover_client_tools() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon_with(Some(&ledger)).await;
    let tools = json!([web_search()]);
    for (code, what) in [
        (
            r#"await tools.ledger.create({ name: "x" }); await tools.client.web_serch({ query: "x" })"#,
            "web_serch",
        ),
        (
            r#"await tools.ledger.create({ name: "x" }); await tools.client.fetch_weather({ city: "Paris" })"#,
            "fetch_weather",
        ),
    ] {
        let r = execute(&d, code, tools.clone(), json!({})).await;
        assert_eq!(r["status"], json!("error"), "{r}");
        assert_eq!(r["error"]["kind"], json!("contract"), "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(what),
            "{r}"
        );
        assert!(
            r["error"]["hint"]
                .as_str()
                .unwrap_or_default()
                .contains("web_search"),
            "the hint names the declared tools: {r}"
        );
        assert_eq!(r["tool_calls"], json!([]), "{r}");
    }
    for (code, what) in [
        (r#"await tools.client.web_search({ query: 42 })"#, "query"),
        (r#"await tools.client.web_search({})"#, "query"),
    ] {
        let r = execute(&d, code, tools.clone(), json!({})).await;
        assert_eq!(r["status"], json!("error"), "{r}");
        assert_eq!(r["error"]["kind"], json!("contract"), "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(what),
            "{r}"
        );
    }
    // Nothing ran: the ledger's calls before the refused ones were never made.
    assert_eq!(ledger.records().len(), 0);

    // A call the check cannot judge (not a literal): refused at run time, catchable.
    let code = r#"
const q: any = 42;
try {
  await tools.client.web_search({ query: q });
  return "answered";
} catch (e: any) {
  return [e.code, e.message];
}
"#;
    let r = execute(&d, code, tools.clone(), json!({})).await;
    let result = ok_result(&r);
    assert_eq!(result[0], json!("invalid_arguments"), "{r}");
    assert!(result[1].as_str().unwrap().contains("query"), "{r}");
    // Uncaught, the execution ends there without waiting for anyone.
    let r = execute(
        &d,
        "const args: any = { query: ['not', 'a', 'string'] }; return await tools.client.web_search(args);",
        tools,
        json!({}),
    )
    .await;
    assert_eq!(r["status"], json!("error"), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid_arguments")
            || r["tool_calls"][0]["error"]["code"] == json!("invalid_arguments"),
        "{r}"
    );
}

/// 9. A waiting execution is kept in the journal: a daemon started on the same state directory
/// takes the answer and finishes it, and the daemon tool called before is not called again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_execution_survives_a_restart() {
    let ledger = Arc::new(Ledger::default());
    let state = tempfile::tempdir().unwrap();
    let on_state = || {
        let mut options = DaemonOptions::default();
        options.sources.push(ledger.clone());
        options.state_directory = Some(state.path().to_owned());
        options
    };
    let code = r#"
const a: any = await tools.ledger.create({ name: "before" });
const r: any = await tools.client.web_search({ query: "after " + a.seq });
return { seq: a.seq, r };
"#;
    let first = TestDaemon::start_with(on_state()).await;
    let r = execute(&first, code, json!([web_search()]), json!({})).await;
    let pending = waiting(&r, 1);
    let id = r["id"].as_str().unwrap().to_owned();
    first.stop().await;
    assert_eq!(ledger.records().len(), 1);

    let second = TestDaemon::start_with(on_state()).await;
    let (status, done) = answer(&second, &id, Value::from(answers(&pending, &searching))).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["id"], json!(id), "{done}");
    assert_eq!(
        ok_result(&done),
        &json!({ "seq": 1, "r": search(&json!({ "query": "after 1" })) })
    );
    assert_eq!(done["tool_calls"][0]["replayed"], json!(true), "{done}");
    assert_eq!(ledger.records().len(), 1, "{:?}", ledger.records());
    // Finished now, on this daemon too.
    let (status, body) = answer(&second, &id, Value::from(answers(&pending, &searching))).await;
    assert_eq!(status, 409, "{body}");
}

/// Only the principal that started a waiting execution can answer it: for another (uid 65534)
/// it does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_answer_a_waiting_execution() {
    use airlock_tests::another_principal;
    if !another_principal::can_run("another_principal_cannot_answer_a_waiting_execution") {
        return;
    }
    let options = DaemonOptions::default().policy(|p| another_principal::admit(p, &["test.*"]));
    let d = TestDaemon::start_with(options).await;
    another_principal::open_socket(&d);
    let r = execute(&d, CHAIN, json!([web_search()]), json!({})).await;
    let pending = waiting(&r, 1);
    let id = r["id"].as_str().unwrap().to_owned();
    let body = json!({ "results": answers(&pending, &searching) }).to_string();
    let (status, text) = post_as_nobody(
        d.socket_path(),
        &format!("/v1/executions/{id}/results"),
        body,
    )
    .await;
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("not_found"), "{text}");
    // The owner still can: the other principal's attempt changed nothing.
    let (status, next) = answer(&d, &id, Value::from(answers(&pending, &searching))).await;
    assert_eq!(status, 200, "{next}");
    let second = waiting(&next, 1);
    assert_eq!(
        second[0]["args"],
        json!({ "query": "capital of Argentina" })
    );
}

/// One `POST` over the socket from a thread that runs as uid/gid 65534 (raw syscalls change
/// the credentials of the calling thread only; the thread ends after the request): the
/// status and the body text.
async fn post_as_nobody(socket: &Path, path: &str, body: String) -> (u16, String) {
    use std::io::{Read, Write};
    let socket = socket.to_owned();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let thread = std::thread::spawn(move || {
        // SAFETY: setresgid/setresuid through the raw syscall change this thread's
        // credentials only (glibc's wrappers would change every thread of the test process);
        // the thread does nothing else and ends.
        let gid = unsafe { libc::syscall(libc::SYS_setresgid, 65534, 65534, 65534) };
        // SAFETY: as above.
        let uid = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!((gid, uid), (0, 0), "{}", std::io::Error::last_os_error());
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        (status, text)
    });
    tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap()
}

/// Client tools from Python: `asyncio.gather` of two client calls comes as one waiting batch;
/// a dependent chain takes one round trip per call, stateful and stateless alike; a daemon tool
/// before and between client calls runs once (the re-runs answer it from the record); a failed
/// client call raises in the program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tools_from_python() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon_with(Some(&ledger)).await;
    let python = json!({ "language": "python" });

    let parallel = r#"
import asyncio
us, fr = await asyncio.gather(
    tools.client.web_search(query="news US today"),
    tools.client.web_search(query="actualités en france aujourd'hui"),
)
{"us": us, "fr": fr}
"#;
    let r = execute(&d, parallel, json!([web_search()]), python.clone()).await;
    let pending = waiting(&r, 2);
    let id = r["id"].as_str().unwrap().to_owned();
    let (status, done) = answer(&d, &id, Value::from(answers(&pending, &searching))).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        ok_result(&done),
        &json!({
            "us": search(&json!({ "query": "news US today" })),
            "fr": search(&json!({ "query": "actualités en france aujourd'hui" })),
        })
    );

    let chain = r#"
first = await tools.client.web_search(query="who won the 2022 world cup")
second = await tools.client.web_search(query="capital of " + first["top"])
{"first": first, "second": second}
"#;
    let expected = json!({
        "first": search(&json!({ "query": "who won the 2022 world cup" })),
        "second": search(&json!({ "query": "capital of Argentina" })),
    });
    let stateful =
        drive_stateful_with(&d, chain, json!([web_search()]), &searching, python.clone()).await;
    assert_eq!(stateful.len(), 3, "{stateful:?}");
    assert_eq!(ok_result(stateful.last().unwrap()), &expected);
    let stateless =
        drive_stateless_with(&d, chain, json!([web_search()]), &searching, python.clone()).await;
    assert_eq!(stateless.len(), 3, "{stateless:?}");
    assert_eq!(ok_result(stateless.last().unwrap()), &expected);

    let between = r#"
a = await tools.ledger.create(name="before")
r1 = await tools.client.web_search(query=f"first {a['seq']}")
b = await tools.ledger.create(name="between " + r1["top"])
{"a": a["seq"], "b": b["seq"]}
"#;
    let responses = drive_stateful_with(
        &d,
        between,
        json!([web_search()]),
        &searching,
        python.clone(),
    )
    .await;
    assert_eq!(
        ok_result(responses.last().unwrap()),
        &json!({"a": 1, "b": 2})
    );
    assert_eq!(ledger.records().len(), 2, "each daemon call ran once");

    let caught = r#"
try:
    await tools.client.web_search(query="x")
    out = "no error"
except Exception as e:
    out = str(e)
out
"#;
    let failing: Owner<'_> = &|_, _| Err("the search backend is down".to_owned());
    let responses = drive_stateful_with(&d, caught, json!([web_search()]), failing, python).await;
    let text = ok_result(responses.last().unwrap())
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("the search backend is down"), "{text}");
}
