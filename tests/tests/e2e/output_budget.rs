//! The output budget (`max_output_tokens`, cl100k_base tokens): what an execution gives the
//! agent is cut at it with a note that says how much and what to do, counted in `stats`; a
//! request may lower it, never raise it past the policy.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, Status};
use airlock_tests::{DaemonOptions, TestDaemon};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

fn tokens(text: &str) -> u64 {
    tiktoken_rs::cl100k_base()
        .unwrap()
        .encode_ordinary(text)
        .len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabyte_result_is_cut_to_the_budget_with_a_note() {
    let d = TestDaemon::start().await;
    let r = d
        .exec("const words = []; for (let i = 0; i < 100000; i++) words.push('w' + i); words.join(' ').slice(0, 1 << 20)")
        .await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    let text = r.result.as_str().unwrap();
    assert!(text.starts_with("\"w0 w1 w2"), "{:.40}", text);
    assert!(
        text.contains("tokens of the result were cut at the output budget (10000 cl100k tokens"),
        "{}",
        &text[text.len() - 300..]
    );
    assert!(text.contains("store.set(key, value)"), "{text:.0}");
    assert!(text.len() < 100_000, "{}", text.len());
    assert_eq!(r.stats.output_tokens, 10_000, "{:?}", r.stats);
    assert!(r.stats.cut_tokens > 100_000, "{:?}", r.stats);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("tokens of the result were cut")),
        "{:?}",
        r.warnings
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdout_flood_is_cut() {
    let d = TestDaemon::start().await;
    let r = d
        .exec("for (let i = 0; i < 20000; i++) console.log('line ' + i); 'done'")
        .await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.result, json!("done"));
    assert!(r.stdout.starts_with("line 0\nline 1\n"), "{:.40}", r.stdout);
    let last = r.stdout.lines().last().unwrap();
    assert!(
        last.starts_with("[airlock: ") && last.contains("tokens of the stdout were cut"),
        "{last}"
    );
    assert!(r.stdout.len() < 60_000, "{}", r.stdout.len());
    assert_eq!(r.stats.output_tokens, 10_000, "{:?}", r.stats);
    assert!(r.stats.cut_tokens > 10_000, "{:?}", r.stats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_under_the_budget_is_unchanged_and_counted() {
    let d = TestDaemon::start().await;
    let r = d
        .exec("console.log('hello world'); ({ a: [1, 2, 3] })")
        .await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.result, json!({"a": [1, 2, 3]}));
    assert_eq!(r.stdout, "hello world\n");
    assert_eq!(
        r.stats.output_tokens,
        tokens(r#"{"a":[1,2,3]}"#) + tokens("hello world\n")
    );
    assert_eq!(r.stats.cut_tokens, 0);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_may_lower_the_budget_but_not_raise_it_past_the_policy() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_output_tokens = 2000;
    }))
    .await;
    let mut c = d.client().await;
    let code = "const a = []; for (let i = 0; i < 5000; i++) a.push(i); a";
    let lowered = c
        .execute(&ExecutionRequest {
            max_output_tokens: Some(300),
            ..ExecutionRequest::code(code)
        })
        .await
        .unwrap();
    assert_eq!(lowered.stats.output_tokens, 300, "{:?}", lowered.stats);
    assert!(
        lowered
            .result
            .as_str()
            .unwrap()
            .contains("(300 cl100k tokens")
    );
    let policy = d.exec(code).await;
    assert_eq!(policy.stats.output_tokens, 2000, "{:?}", policy.stats);

    for asked in [2001, 0] {
        let (status, body) = raw(
            &d,
            &format!(r#"{{"code": "1", "max_output_tokens": {asked}}}"#),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(
            body["error"]["code"],
            json!("invalid_output_budget"),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("limits.max_output_tokens") && message.contains("2000"),
            "{message}"
        );
    }
}

async fn raw(d: &TestDaemon, body: &str) -> (u16, Value) {
    let mut c = d.client().await;
    let req = hyper::Request::builder()
        .method("POST")
        .uri("/v1/executions")
        .header("host", "airlock")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = c.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}
