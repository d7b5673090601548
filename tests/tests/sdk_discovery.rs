//! The discovery API: `GET /v1/sdk`, `GET /v1/sdk/<path>`, `GET /v1/tools/search`, and the
//! `airlock sdk` commands on top of them, against the real daemon.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::binaries;
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::Value;

async fn get(d: &TestDaemon, path: &str) -> (u16, String) {
    let (status, body) = d.client().await.get(path).await.unwrap();
    (status.as_u16(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_lists_reads_and_searches_the_callers_tools() {
    let d = TestDaemon::start().await;
    let (status, body) = get(&d, "/v1/sdk").await;
    assert_eq!(status, 200, "{body}");
    let listing: Value = serde_json::from_str(&body).unwrap();
    let paths: Vec<&str> = listing["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for expected in [
        "README.md",
        "tools.d.ts",
        "tsconfig.json",
        "servers/test/index.ts",
        "servers/test/add.ts",
    ] {
        assert!(paths.contains(&expected), "{paths:?}");
    }
    assert_eq!(listing["tools"], 7);

    let (status, readme) = get(&d, "/v1/sdk/README.md").await;
    assert_eq!(status, 200);
    assert!(readme.contains("`tools.test`: 7 tool(s)"), "{readme}");
    let (status, add) = get(&d, "/v1/sdk/servers/test/add.ts").await;
    assert_eq!(status, 200);
    assert!(add.contains("export type Add = (input: AddInput)"), "{add}");
    let (status, missing) = get(&d, "/v1/sdk/servers/test/nope.ts").await;
    assert_eq!(status, 404);
    assert!(missing.contains("README.md"), "{missing}");

    let (status, body) = get(&d, "/v1/tools/search?q=adds+numbers&limit=2").await;
    assert_eq!(status, 200, "{body}");
    let found: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(found["results"][0]["tool"], "test.add", "{found}");
    assert!(
        found["results"][0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("tools.test.add(")
    );
    assert!(found["results"].as_array().unwrap().len() <= 2);
    let (status, _) = get(&d, "/v1/tools/search?q=").await;
    assert_eq!(status, 400);
}

/// A principal sees only what it may call, in the files and in search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_shows_only_granted_tools() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.principals[0].allow = vec!["test.echo".into()];
    }))
    .await;
    let (_, body) = get(&d, "/v1/sdk").await;
    let listing: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listing["tools"], 1, "{listing}");
    assert_eq!(get(&d, "/v1/sdk/servers/test/add.ts").await.0, 404);
    let (_, body) = get(&d, "/v1/tools/search?q=adds").await;
    let found: Value = serde_json::from_str(&body).unwrap();
    assert!(
        found["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["tool"] == "test.echo"),
        "{found}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_browses_and_writes_the_sdk() {
    let d = TestDaemon::start().await;
    let socket = d.socket_path().to_owned();
    let cli = move |args: &[&str]| {
        let out = std::process::Command::new(binaries::airlock_cli())
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, tree, err) = tokio::task::spawn_blocking({
        let cli = cli.clone();
        move || cli(&["sdk", "tree"])
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(tree.contains("servers/test/echo.ts"), "{tree}");
    let (ok, found, _) = tokio::task::spawn_blocking({
        let cli = cli.clone();
        move || cli(&["sdk", "search", "waits", "milliseconds"])
    })
    .await
    .unwrap();
    assert!(ok);
    assert!(found.starts_with("tools.test.sleep("), "{found}");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("sdk");
    let (ok, _, err) = tokio::task::spawn_blocking({
        let cli = cli.clone();
        let target = target.display().to_string();
        move || cli(&["sdk", "write", &target])
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(target.join("servers/test/index.ts").is_file());
    let (ok, cat, _) = tokio::task::spawn_blocking(move || cli(&["sdk", "cat", "README.md"]))
        .await
        .unwrap();
    assert!(ok);
    assert_eq!(
        cat,
        std::fs::read_to_string(target.join("README.md")).unwrap()
    );
}

/// The contract check: a program with a wrong literal tool call is refused before it runs,
/// with the expected signature; nothing of it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_literal_tool_calls_are_refused_before_running() {
    let d = TestDaemon::start().await;
    let r = d
        .exec("console.log('ran');\nawait tools.test.echo({ x: 1 });\nawait tools.test.ad({ a: 1, b: 2 });")
        .await;
    assert_eq!(
        r.status,
        airlock_supervisor::agent_api::Status::Error,
        "{r:?}"
    );
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind, "contract", "{e:?}");
    assert_eq!(e.message, "`tools.test` has no tool `ad`");
    assert_eq!(e.hint.as_deref(), Some("did you mean tools.test.add()?"));
    assert_eq!(e.line, Some(3));
    assert!(e.excerpt.as_ref().unwrap().contains("> 3 |"), "{e:?}");
    // Nothing ran: no output, no tool call.
    assert_eq!(r.stdout, "");
    assert!(r.tool_calls.is_empty());
    // Dynamic code is not judged and runs (and fails at call time as usual).
    let r = d
        .exec("const name = 'ad'; try { await (tools.test as any)[name]({}) } catch (e) { e.code }")
        .await;
    assert_eq!(r.result, serde_json::json!("unknown_tool"), "{r:?}");
}

/// `POST /v1/sdk` with a request's `client_tools`: the SDK files that change for it, so a
/// program calling `tools.client.<name>` type-checks against the declared schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_view_of_a_request_types_its_client_tools() {
    let d = TestDaemon::start().await;
    let body = serde_json::json!({ "client_tools": [{
        "name": "web_search",
        "description": "Searches the web. Returns the top results.",
        "input_schema": { "type": "object", "properties": {
            "query": { "type": "string", "description": "what to look for" },
            "limit": { "type": "integer" } }, "required": ["query"] }
    }] });
    let (status, text) = d
        .client()
        .await
        .post("/v1/sdk", bytes::Bytes::from(body.to_string()))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 200, "{text}");
    let view: Value = serde_json::from_str(&text).unwrap();
    let files = view["files"].as_object().unwrap();
    let tool = files["servers/client/web_search.ts"].as_str().unwrap();
    assert!(tool.contains("query: string"), "{tool}");
    assert!(tool.contains("Searches the web"), "{tool}");
    assert!(files["tools.d.ts"].as_str().unwrap().contains("client"));
    // The daemon's own tools are still there: only the changed files come back.
    assert!(!files.contains_key("servers/test/add.ts"));

    // A bad declaration is refused with what to send.
    let bad = serde_json::json!({ "client_tools": [{ "name": "1bad" }] });
    let (status, text) = d
        .client()
        .await
        .post("/v1/sdk", bytes::Bytes::from(bad.to_string()))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 400, "{text}");
    assert!(text.contains("identifier"), "{text}");

    // The whole view type-checks a program that calls the client tool right, and refuses one
    // that passes a number for the query.
    let Some(tsc) =
        airlock_tests::type_check::tsc("the_sdk_view_of_a_request_types_its_client_tools")
    else {
        return;
    };
    let (_, listing) = get(&d, "/v1/sdk").await;
    let listing: Value = serde_json::from_str(&listing).unwrap();
    let mut sdk = airlock_supervisor::sdk::SdkFiles::default();
    for file in listing["files"].as_array().unwrap() {
        let path = file["path"].as_str().unwrap();
        let (_, text) = get(&d, &format!("/v1/sdk/{path}")).await;
        sdk.files.insert(path.to_owned(), text);
    }
    for (path, text) in files {
        sdk.files
            .insert(path.clone(), text.as_str().unwrap().to_owned());
    }
    let good =
        "const r = await tools.client.web_search({ query: \"news\", limit: 3 });\nexport {};\n";
    let (ok, out) = airlock_tests::type_check::check(&tsc, &sdk, &[("program.ts", good)]);
    assert!(ok, "{out}");
    let wrong = "await tools.client.web_search({ query: 42 });\nexport {};\n";
    let (ok, out) = airlock_tests::type_check::check(&tsc, &sdk, &[("program.ts", wrong)]);
    assert!(!ok, "{out}");
    assert!(out.contains("TS2322"), "{out}");
}
