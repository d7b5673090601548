//! Fuzzing the agent API's request bodies (`tests/fuzz/http_bodies/`, docs/testing.md
//! "Fuzzing").
//!
//! Each input is read as the body of every route that takes JSON (`POST /v1/executions`, its
//! `/results`, `POST /v1/approvals/<id>`, `POST /v1/sdk`) as the routes read it (their
//! types, their refusals: `invalid_json`, `invalid_execution_request`), and then, for a body that parses, checked the way the execution service checks it before
//! anything runs: the client tools (names, schemas compiled), a call's arguments against
//! them, the client results, and the SDK files a client tool adds. The same bytes are also
//! read as choices that build a JSON body from the API's own field names, serialised and fed
//! through the same path. The built value is also the arguments of the discovery tools the
//! MCP facade and programs share (`search_tools`, `read_sdk`, answered by
//! [`crate::tools::builtin`] from a catalogue of the built-in tools). Beyond "no panic": what parses serialises and parses to the same
//! value, a refusal is a `400` with a JSON error body, and the SDK files stay in proportion
//! to the request.
//!
//! [`target`] is the one input's checks: `cargo test` replays the seeds through it
//! (`fuzz_seeds_http_bodies`), and the libFuzzer build (`fuzz/libfuzzer/`, `--cfg fuzzing`)
//! calls it for every input.

use super::executions::{ClientSdkRequest, invalid_execution_request};
use super::responses::invalid_json;
use crate::agent_api::{ApprovalRequest, ClientResults, ExecutionRequest, PendingCall};
use crate::sdk::sdk_files::SdkFiles;
use crate::tools::builtin::{self, BuiltinTools, CalledAs};
use crate::tools::catalogue::{CatalogueView, ToolCatalogue};
use crate::tools::client::{ClientAnswers, ClientTools};
use crate::tools::registry::ToolRegistry;
use airlock_fuzz::{Fuzz, Outcome, Unstructured, json_value};
use hyper::body::Body as _;
use hyper::{Response, StatusCode};
use serde_json::Value;
use std::sync::{Arc, OnceLock};

const KEYS: &[&str] = &[
    "code",
    "language",
    "timeout_ms",
    "session",
    "replay",
    "client_tools",
    "client_results",
    "determinism",
    "wait",
    "name",
    "description",
    "input_schema",
    "id",
    "ok",
    "error",
    "message",
    "results",
    "decision",
    "reason",
    "clock_ms",
    "seed",
    "type",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "const",
    "pattern",
    "minimum",
    "maxLength",
    "$ref",
    "$defs",
    "oneOf",
    "allOf",
    "format",
    "query",
    "limit",
    "path",
];
const WORDS: &[&str] = &[
    "",
    "1 + 1",
    "typescript",
    "javascript",
    "python",
    "new",
    "all",
    "writes",
    "none",
    "approve",
    "deny",
    "web_search",
    "$x",
    "_",
    "a-b",
    "object",
    "string",
    "number",
    "integer",
    "array",
    "boolean",
    "null",
    "#",
    "#/$defs/a",
    "#/properties/x",
    "https://example.invalid/schema",
    "^(a+)+$",
    "[",
    "date-time",
    "email",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "é",
    "README.md",
    "/servers/airlock/search_tools.ts",
    "servers/airlock/../../etc/passwd",
    " tools.d.ts ",
    "create issue",
];

/// The target's settings: its seeds, dictionary and max length.
pub fn fuzz() -> Fuzz {
    Fuzz::new("http_bodies").dictionary(&[
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "null",
        "true",
        "\\u0000",
        "\\ud800",
        "\"code\":",
        "\"client_tools\":[{\"name\":\"t\",\"input_schema\":{}}]",
        "\"client_results\":[{\"id\":1,\"ok\":null}]",
        "\"determinism\":{\"clock_ms\":1,\"seed\":\"",
        "\"results\":[",
        "\"decision\":\"approve\"",
        "\"input_schema\":",
        "{\"type\":\"object\",\"properties\":{",
        "{\"$ref\":\"#\"}",
        "\"pattern\":\"",
        "\"format\":\"",
    ])
}

/// The checks on one input, the entry point of the seed replay and of the libFuzzer binary;
/// the outcome is what the random mutator's pool is kept by.
pub fn target(data: &[u8]) -> Outcome {
    let raw = bodies(data);
    let mut u = Unstructured::new(data);
    let built = json_value(&mut u, KEYS, WORDS, 6);
    let bytes = serde_json::to_vec(&built).expect("a JSON value serialises");
    let mut outcome = raw.and(bodies(&bytes)).and(discovery(&built));
    if let Ok(args) = serde_json::from_slice::<Value>(data) {
        outcome = outcome.and(discovery(&args));
    }
    outcome
}

/// The facade's names for the discovery tools (as `api::mcp::server` calls them).
const CALLED_AS: CalledAs = CalledAs {
    search_tools: "search_tools",
    read_sdk: "read_sdk",
};

/// `search_tools` and `read_sdk` with `args`, as the facade and `tools.airlock.*` call them
/// (the facade trims `path` and a leading `/` first).
fn discovery(args: &Value) -> Outcome {
    let view = view();
    let search = builtin::search_tools(view, args, CALLED_AS);
    let mut facade_args = args.clone();
    if let Some(Value::String(path)) = facade_args.get_mut("path") {
        *path = path.trim().trim_start_matches('/').to_owned();
    }
    let read = builtin::read_sdk(view, &facade_args, CALLED_AS);
    let name = |r: &Result<Value, crate::agent_api::ToolError>| match r {
        Ok(Value::String(_)) => "file".to_owned(),
        Ok(_) => "answer".to_owned(),
        Err(e) => format!("{:?}", e.code),
    };
    Outcome::of(&format!("{} {}", name(&search), name(&read)))
}

/// A catalogue of the daemon's built-in tools, for a principal allowed everything.
fn view() -> &'static CatalogueView {
    static VIEW: OnceLock<CatalogueView> = OnceLock::new();
    VIEW.get_or_init(|| {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(BuiltinTools::new()));
        let principal = airlock_policy::Principal::new("p", vec![], &["*"]);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(ToolCatalogue::default().view(&registry, &principal))
    })
}

/// One body through every route's parser and the checks that follow.
fn bodies(body: &[u8]) -> Outcome {
    let mut outcome = Outcome::of("bodies");
    match serde_json::from_slice::<ExecutionRequest>(body) {
        Ok(request) => {
            round_trip(&request);
            outcome = outcome.and(execution(request));
        }
        Err(e) => outcome = outcome.and(refusal(invalid_execution_request(&e))),
    }
    match serde_json::from_slice::<ClientResults>(body) {
        Ok(answers) => {
            round_trip(&answers);
            let pending: Vec<PendingCall> = answers
                .results
                .iter()
                .take(3)
                .map(|r| PendingCall {
                    id: r.id,
                    tool: "t".into(),
                    args: Value::Null,
                })
                .collect();
            let added = ClientAnswers::default().add(answers.results, &pending, 1);
            outcome = outcome.and(result_outcome("results", &added));
        }
        Err(e) => outcome = outcome.and(refusal(invalid_json(&e, "a body", "hint"))),
    }
    match serde_json::from_slice::<ApprovalRequest>(body) {
        Ok(decision) => {
            round_trip(&decision);
            outcome = outcome.and(Outcome::of("decision"));
        }
        Err(e) => outcome = outcome.and(refusal(invalid_json(&e, "a body", "hint"))),
    }
    match serde_json::from_slice::<ClientSdkRequest>(body) {
        Ok(request) => {
            let size = body.len();
            outcome = outcome.and(client_tools(request.client_tools, None, size));
        }
        Err(e) => outcome = outcome.and(refusal(invalid_json(&e, "a body", "hint"))),
    }
    outcome
}

/// What the execution service checks of a request before a worker is involved.
fn execution(request: ExecutionRequest) -> Outcome {
    let size = serde_json::to_vec(&request).map_or(0, |b| b.len());
    let mut outcome = Outcome::of(&format!(
        "{:?} {:?} {} {:?} {}",
        request.language,
        request.replay,
        request.session.is_some(),
        request.wait,
        request.determinism.is_some(),
    ));
    if let Some(results) = request.client_results.clone() {
        let answers = ClientAnswers::from_request(results, 1);
        outcome = outcome.and(result_outcome("from_request", &answers));
    }
    // The arguments a call of each tool could carry: a value of the request itself.
    let args = request
        .client_results
        .as_ref()
        .and_then(|r| r.first())
        .and_then(|r| r.ok.clone());
    outcome.and(client_tools(request.client_tools, args, size))
}

/// The client tools of a request: checked, a call checked against each, their SDK files.
fn client_tools(
    specs: Vec<crate::agent_api::ClientToolSpec>,
    args: Option<Value>,
    request_size: usize,
) -> Outcome {
    let tools = match ClientTools::new(specs) {
        Ok(tools) => tools,
        Err(e) => return Outcome::of(&e.to_string()).and(Outcome::of(e.hint())),
    };
    let mut outcome = Outcome::of("tools");
    let args = args.unwrap_or_else(|| serde_json::json!({ "a": 1 }));
    for spec in tools.specs.iter().take(4) {
        outcome = outcome.and(match tools.check(&spec.name, &args) {
            Ok(()) => Outcome::of("args ok"),
            Err(e) => Outcome::hash_of(&e.code),
        });
    }
    let files = SdkFiles::generate(&tools.sdk_tools());
    let total: usize = files.files.values().map(String::len).sum();
    // Linear in the request, plus the fixed files (tools.d.ts, README.md, tsconfig.json).
    assert!(
        total <= 64 * request_size + 64 * 1024,
        "{total} bytes of SDK for a request of {request_size} bytes"
    );
    outcome
}

fn result_outcome<T>(
    what: &str,
    result: &Result<T, crate::tools::client::ClientToolsError>,
) -> Outcome {
    match result {
        Ok(_) => Outcome::of(what),
        Err(e) => Outcome::of(&e.to_string()),
    }
}

/// A refused body: `400` and a JSON error body naming the problem.
fn refusal(resp: Response<super::ApiBody>) -> Outcome {
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body = futures_body(resp);
    let value: Value = serde_json::from_slice(&body).expect("the error body is JSON");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "an error without a message");
    // serde's text up to the first name or value it quotes: the kind of problem.
    Outcome::of(message.split(['`', '"']).next().unwrap_or(message))
}

/// The bytes of a body that is already complete (error bodies are one `Full` frame).
fn futures_body(resp: Response<super::ApiBody>) -> Vec<u8> {
    let mut body = resp.into_body();
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut out = Vec::new();
    while let std::task::Poll::Ready(Some(frame)) =
        std::pin::Pin::new(&mut body).poll_frame(&mut cx)
    {
        if let Ok(data) = frame.expect("an error body does not fail").into_data() {
            out.extend_from_slice(&data);
        }
    }
    out
}

/// Serialises `value` and parses it back: the same JSON.
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) {
    let first = serde_json::to_value(value).expect("a parsed body serialises");
    let text = serde_json::to_vec(&first).expect("a JSON value serialises");
    let again: T = serde_json::from_slice(&text).expect("a serialised body parses");
    assert_eq!(
        serde_json::to_value(&again).expect("a parsed body serialises"),
        first
    );
}

#[test]
fn fuzz_seeds_http_bodies() {
    fuzz().replay(target);
}
