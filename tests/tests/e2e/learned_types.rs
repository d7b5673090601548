//! Learned output types end to end: the real daemon, real workers, the npm
//! `server-everything` (whose `get-tiny-image` declares no output schema) and an OpenAPI
//! source against a local HTTP server (whose declared response schema the server does not
//! keep to). What a program gets is learned as a type the SDK shows; it survives a restart;
//! it is shown only to principals that may call the tool; a declared schema that results
//! contradict is reported in the SDK and counted in `/metrics`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::OpenApiSource as OpenApiConfig;
use airlock_supervisor::agent_api::{ExecutionRequest, RequestLanguage, Status};
use airlock_supervisor::client::Client;
use airlock_supervisor::sdk::SdkFiles;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::mcp_peers::server_everything;
use airlock_tests::{DaemonOptions, TestDaemon, another_principal, type_check};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The tests here start `server-everything` as children of this process: one at a time.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

fn with_everything(test: &str, state: &Path) -> Option<DaemonOptions> {
    let config = server_everything("everything", test)?;
    let mut options = DaemonOptions::default().source(Arc::new(McpServer::new(
        config,
        Arc::new(SecretStore::empty()),
    )));
    options.state_directory = Some(state.to_owned());
    Some(options)
}

async fn get(client: &mut Client, path: &str) -> (u16, String) {
    let (status, body) = client.get(path).await.unwrap();
    (status.as_u16(), body)
}

async fn sdk_file(d: &TestDaemon, path: &str) -> String {
    let (status, body) = get(&mut d.client().await, &format!("/v1/sdk/{path}")).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// Every file of the caller's SDK, as the daemon serves it.
async fn whole_sdk(d: &TestDaemon) -> SdkFiles {
    let mut client = d.client().await;
    let (_, tree) = get(&mut client, "/v1/sdk").await;
    let tree: Value = serde_json::from_str(&tree).unwrap();
    let mut files = std::collections::BTreeMap::new();
    for file in tree["files"].as_array().unwrap() {
        let path = file["path"].as_str().unwrap();
        let (_, text) = get(&mut client, &format!("/v1/sdk/{path}")).await;
        files.insert(path.to_owned(), text);
    }
    SdkFiles { files }
}

/// The row of `source`'s `tool` in the learned types' file, read beside the running daemon:
/// (results, shape).
fn stored(state: &Path, source: &str, tool: &str) -> Option<(i64, String)> {
    let conn = rusqlite::Connection::open_with_flags(
        state.join("learned.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.query_row(
        "SELECT results, shape FROM learned WHERE source = ?1 AND tool = ?2",
        [source, tool],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

/// The story: a program guesses the shape of a tool result (the MCP wire format,
/// `content[0].data`) and fails; the SDK then shows the type learned from that very result
/// (already written to disk when the error reached the agent); a program written from it
/// type-checks and succeeds; the type survives a restart and `forget` drops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_failed_on_a_guessed_shape_succeeds_with_the_learned_type() {
    let _serial = serial().await;
    let test = "a_program_that_failed_on_a_guessed_shape_succeeds_with_the_learned_type";
    let state = tempfile::tempdir().unwrap();
    let Some(options) = with_everything(test, state.path()) else {
        return;
    };
    let d = TestDaemon::start_with(options).await;
    let file = "servers/everything/get_tiny_image.ts";
    assert!(
        sdk_file(&d, file)
            .await
            .contains("export type GetTinyImageOutput = unknown;")
    );

    let guessed = d
        .exec(
            "const r: any = await tools.everything.get_tiny_image({});\nreturn r.content[0].data;",
        )
        .await;
    assert_eq!(guessed.status, Status::Error, "{guessed:?}");
    let error = guessed.error.as_ref().unwrap();
    assert_eq!(error.name.as_deref(), Some("TypeError"), "{error:?}");
    assert!(
        error
            .explanation
            .as_deref()
            .unwrap_or_default()
            .contains("tools.everything.get_tiny_image"),
        "{error:?}"
    );
    // Written at once, not at the writer's next round: the row is in the file already.
    let (results, shape) = stored(state.path(), "everything", "get_tiny_image")
        .expect("the learned type of the tool the program failed on is on disk");
    assert_eq!(results, 1);
    // Shapes only: the image's base64 data is not in it.
    assert!(!shape.contains("iVBOR"), "{shape}");

    let learned = sdk_file(&d, file).await;
    assert!(
        learned.contains("// learned from 1 result since "),
        "{learned}"
    );
    assert!(learned.contains("mimeType?: string;"), "{learned}");
    assert!(learned.contains("type: string;"), "{learned}");
    let search = get(
        &mut d.client().await,
        "/v1/tools/search?q=tiny+image&limit=1",
    )
    .await
    .1;
    assert!(search.contains("mimeType?: string"), "{search}");

    let program = "const blocks = await tools.everything.get_tiny_image({});\nconst image = blocks.find((b) => b.type === \"image\");\nimage?.mimeType;\n";
    if let Some(tsc) = type_check::tsc(test) {
        let (ok, out) = type_check::check(&tsc, &whole_sdk(&d).await, &[("program.ts", program)]);
        assert!(
            ok,
            "the program written from the learned type type-checks: {out}"
        );
    }
    let written = d.exec(program).await;
    assert_eq!(written.status, Status::Ok, "{written:?}");
    assert_eq!(written.result, json!("image/png"));

    let (status, body) = get(
        &mut d.client().await,
        "/v1/sdk/learned?tool=everything.get_tiny_image",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["learned"][0]["results"], json!(2), "{body}");
    assert_eq!(answer["learned"][0]["declared"], json!(false), "{body}");
    assert!(
        answer["learned"][0]["typescript"]
            .as_str()
            .unwrap()
            .contains("mimeType?: string"),
        "{body}"
    );
    d.stop().await;

    // A new daemon on the same state directory shows what the last one learned.
    let d = TestDaemon::start_with(with_everything(test, state.path()).unwrap()).await;
    let after = sdk_file(&d, file).await;
    assert!(
        after.contains("// learned from 2 results since "),
        "{after}"
    );
    let mut client = d.client().await;
    let (status, body) = client
        .delete("/v1/sdk/learned/everything.get_tiny_image")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    assert!(
        sdk_file(&d, file)
            .await
            .contains("export type GetTinyImageOutput = unknown;")
    );
    let (status, body) = client
        .delete("/v1/sdk/learned/everything.get_tiny_image")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 404, "{body}");
    assert!(
        body.contains("nothing is learned of `everything.get_tiny_image`"),
        "{body}"
    );
    assert_eq!(stored(state.path(), "everything", "get_tiny_image"), None);
    d.stop().await;
}

/// A daemon with server-everything where uid 65534 is a second principal that may call
/// `pattern`, after this principal's call of `get_tiny_image` taught its type; `None` (the
/// skip reported) where that cannot run.
async fn taught_with_another(test: &str, state: &Path, pattern: &str) -> Option<TestDaemon> {
    if !another_principal::can_run(test) {
        return None;
    }
    let options = with_everything(test, state)?;
    let pattern = pattern.to_owned();
    let d = TestDaemon::start_with(
        options.policy(move |p| another_principal::admit(p, &[pattern.as_str()])),
    )
    .await;
    another_principal::open_socket(&d);
    let r = d
        .exec("const r = await tools.everything.get_tiny_image({});\nr;")
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    Some(d)
}

/// What one principal's calls taught is shown only where the tool is visible: another
/// principal that may not call the tool finds no learned type, no SDK file, no search hit,
/// and cannot forget it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learned_types_stay_with_the_principals_that_may_call_the_tool() {
    let test = "learned_types_stay_with_the_principals_that_may_call_the_tool";
    let _serial = serial().await;
    let state = tempfile::tempdir().unwrap();
    let Some(d) = taught_with_another(test, state.path(), "everything.echo").await else {
        return;
    };
    let (ok, text) = another_principal::cli(&d, &["sdk", "learned"]).await;
    assert!(ok, "{text}");
    assert!(!text.contains("get_tiny_image"), "{text}");
    // Answered as for a tool nothing is learned of: nothing tells the two apart.
    for (args, absent) in [
        (
            &["sdk", "learned", "everything.get_tiny_image"][..],
            "nothing is learned of `everything.get_tiny_image`",
        ),
        (
            &["sdk", "forget", "everything.get_tiny_image"],
            "nothing is learned of `everything.get_tiny_image`",
        ),
        (
            &["sdk", "cat", "servers/everything/get_tiny_image.ts"],
            "the SDK has no file",
        ),
    ] {
        let (ok, text) = another_principal::cli(&d, args).await;
        assert!(!ok && text.contains(absent), "{args:?}: {text}");
    }
    let (ok, text) = another_principal::cli(&d, &["sdk", "search", "tiny", "image"]).await;
    assert!(!text.contains("mimeType"), "{ok} {text}");
    // The principal that may call it still has it.
    let mine = get(&mut d.client().await, "/v1/sdk/learned").await.1;
    assert!(mine.contains("everything.get_tiny_image"), "{mine}");
    d.stop().await;
}

/// What one principal's calls taught stays that principal's, even for a tool another may call
/// too: the other's SDK shows no learned type of it, and it cannot forget the first's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learned_types_are_each_principal_s_own() {
    let test = "learned_types_are_each_principal_s_own";
    let _serial = serial().await;
    let state = tempfile::tempdir().unwrap();
    let Some(d) = taught_with_another(test, state.path(), "everything.get_tiny_image").await else {
        return;
    };
    let mine = get(&mut d.client().await, "/v1/sdk/learned").await.1;
    assert!(mine.contains("everything.get_tiny_image"), "{mine}");
    // The other principal may call the tool, and sees its SDK file, without the type.
    let (ok, file) =
        another_principal::cli(&d, &["sdk", "cat", "servers/everything/get_tiny_image.ts"]).await;
    assert!(ok, "{file}");
    assert!(!file.contains("learned from"), "{file}");
    for args in [
        &["sdk", "learned", "everything.get_tiny_image"][..],
        &["sdk", "forget", "everything.get_tiny_image"],
    ] {
        let (ok, text) = another_principal::cli(&d, args).await;
        assert!(
            !ok && text.contains("nothing is learned of `everything.get_tiny_image`"),
            "{args:?}: {text}"
        );
    }
    let still = get(&mut d.client().await, "/v1/sdk/learned").await.1;
    assert!(still.contains("everything.get_tiny_image"), "{still}");
    d.stop().await;
}

/// A tiny HTTP server whose `GET /items` answers `[{"id": n}]` and `null` by turns, though
/// the document declares an array.
async fn flaky_items() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicU64::new(0));
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut read = 0;
                while !buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                }
                let n = count.fetch_add(1, Ordering::Relaxed);
                let body = if n.is_multiple_of(2) {
                    format!("[{{\"id\": {n}, \"at\": \"2026-11-20T10:00:00Z\"}}]")
                } else {
                    "null".to_owned()
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (port, task)
}

fn openapi(name: &str, spec: &Path, port: u16, learn_types: bool) -> OpenApiConfig {
    OpenApiConfig {
        name: name.into(),
        spec: spec.to_owned(),
        base_url: Some(format!("http://127.0.0.1:{port}")),
        auth: None,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        learn_types,
        coerce: Default::default(),
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

/// A declared output schema that results contradict: the SDK shows the declared type and
/// the observed one with `declared array, observed null in 2 of 4 calls`, search shows
/// both, `/metrics` counts it for the tool; a source with `learn_types = false` learns
/// nothing and shows nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_from_a_declared_output_schema_is_reported_and_counted() {
    let (port, server) = flaky_items().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("items.json");
    std::fs::write(
        &spec,
        json!({
            "openapi": "3.1.0",
            "info": {"title": "items", "version": "1"},
            "paths": {"/items": {"get": {
                "operationId": "list_items",
                "summary": "List the items.",
                "responses": {"200": {"description": "the items", "content": {"application/json": {"schema": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
                }}}}}
            }}}
        })
        .to_string(),
    )
    .unwrap();
    let (loud, quiet) = (
        openapi("api", &spec, port, true),
        openapi("quiet", &spec, port, false),
    );
    let d = TestDaemon::start_with(DaemonOptions::default().policy(move |p| {
        p.openapi.push(loud);
        p.openapi.push(quiet);
    }))
    .await;
    let r = d
        .exec(
            "const out = [];\nfor (let i = 0; i < 4; i++) out.push(await tools.api.list_items({}));\nfor (let i = 0; i < 2; i++) out.push(await tools.quiet.list_items({}));\nout;",
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let file = sdk_file(&d, "servers/api/list_items.ts").await;
    assert!(
        file.contains(
            "// declared array, observed null in 2 of 4 calls\n// learned from 4 results since "
        ),
        "{file}"
    );
    assert!(
        file.contains("export type ListItemsOutput = ListItemsDeclared | ListItemsObserved;"),
        "{file}"
    );
    assert!(file.contains("export type ListItemsObserved = {"), "{file}");
    assert!(file.contains("}[] | null;"), "{file}");
    let search = get(
        &mut d.client().await,
        "/v1/tools/search?q=list+items&limit=5",
    )
    .await
    .1;
    assert!(search.contains("| null"), "{search}");
    let metrics = get(&mut d.client().await, "/metrics").await.1;
    assert!(
        metrics.contains("airlock_learned_type_drift_total{tool=\"api.list_items\"} 2"),
        "{metrics}"
    );
    assert!(!metrics.contains("quiet.list_items"), "{metrics}");
    let quiet = sdk_file(&d, "servers/quiet/list_items.ts").await;
    assert!(!quiet.contains("learned from"), "{quiet}");
    let (status, body) = get(
        &mut d.client().await,
        "/v1/sdk/learned?tool=quiet.list_items",
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = get(&mut d.client().await, "/v1/sdk/learned?tool=api.list_items").await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["learned"][0]["declared"], json!(true), "{body}");
    assert_eq!(
        answer["learned"][0]["drift"],
        json!(["declared array, observed null in 2 of 4 calls"]),
        "{body}"
    );
    d.stop().await;
    server.abort();
}

/// The order the pipeline keeps: a result's shape is merged into its tool's learned type
/// before the program gets the result, so the very next thing the program reads from the SDK
/// (here in the same execution, through `tools.airlock.read_sdk`) already shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_learned_before_the_program_gets_it() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            "const echoed = await tools.test.echo({ id: 7, at: \"2026-11-20T10:00:00Z\" });\nconst file = await tools.airlock.read_sdk({ path: \"servers/test/echo.ts\" });\n({ echoed, file });",
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let file = r.result["file"].as_str().unwrap();
    assert!(file.contains("// learned from 1 result since "), "{file}");
    assert!(file.contains("  id: number;"), "{file}");
    assert!(file.contains("@format date-time"), "{file}");
    d.stop().await;
}

/// The same story from Python: the program guesses `r["content"]` on a list of content
/// blocks, the error names the tool, and the Python SDK then shows the type learned from
/// that result; a program written from it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_program_learns_the_shape_it_guessed() {
    let _serial = serial().await;
    let test = "a_python_program_learns_the_shape_it_guessed";
    let state = tempfile::tempdir().unwrap();
    let Some(options) = with_everything(test, state.path()) else {
        return;
    };
    let d = TestDaemon::start_with(options).await;
    let python = |code: &str| ExecutionRequest {
        code: code.to_owned(),
        language: RequestLanguage::Python,
        ..Default::default()
    };
    let guessed = d
        .client()
        .await
        .execute(&python(
            "r = await tools.everything.get_tiny_image()\nr['content'][0]['data']",
        ))
        .await
        .unwrap();
    assert_eq!(guessed.status, Status::Error, "{guessed:?}");
    let error = guessed.error.as_ref().unwrap();
    assert!(
        error
            .explanation
            .as_deref()
            .unwrap_or_default()
            .contains("tools.everything.get_tiny_image"),
        "{error:?}"
    );
    let (results, _) =
        stored(state.path(), "everything", "get_tiny_image").expect("the learned type is on disk");
    assert_eq!(results, 1);

    let (status, stub) = get(
        &mut d.client().await,
        "/v1/sdk/servers/everything/get_tiny_image.pyi?language=python",
    )
    .await;
    assert_eq!(status, 200, "{stub}");
    assert!(stub.contains("learned from 1 result"), "{stub}");
    assert!(stub.contains("mimeType: NotRequired[str]"), "{stub}");

    let written = d
        .client()
        .await
        .execute(&python(
            "blocks = await tools.everything.get_tiny_image()\n[b['mimeType'] for b in blocks if b['type'] == 'image'][0]",
        ))
        .await
        .unwrap();
    assert_eq!(written.status, Status::Ok, "{written:?}");
    assert_eq!(written.result, json!("image/png"));
}
