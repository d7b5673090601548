//! The discovery API: `GET /v1/sdk`, `GET /v1/sdk/<path>`, `GET /v1/tools/search`, the
//! `airlock sdk` commands on top of them, and the same from inside a program
//! (`tools.airlock.search_tools`, `tools.airlock.read_sdk`), against the real daemon.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{CallOutcome, Status};
use airlock_tests::binaries;
use airlock_tests::{DaemonOptions, TestDaemon, another_principal};
use serde_json::{Value, json};

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
    // The test tools, and the daemon's own two (the default principal is allowed `*`).
    assert_eq!(listing["tools"], 9);

    let (status, readme) = get(&d, "/v1/sdk/README.md").await;
    assert_eq!(status, 200);
    assert!(readme.contains("`tools.test`: 7 tool(s)"), "{readme}");
    let (status, add) = get(&d, "/v1/sdk/servers/test/add.ts").await;
    assert_eq!(status, 200);
    assert!(add.contains("export type Add = (input: AddInput)"), "{add}");
    let (status, missing) = get(&d, "/v1/sdk/servers/test/nope.ts").await;
    assert_eq!(status, 404);
    assert!(missing.contains("README.md"), "{missing}");
    assert!(missing.contains("GET /v1/sdk lists the files"), "{missing}");

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
    assert_eq!(e.kind.as_str(), "contract", "{e:?}");
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

/// What a program is told of a name it got wrong names only what its principal may call, in
/// the contract check and at call time: no tool it is denied (`test.add`), no namespace where
/// it may call nothing (`ledger`); and a call it may not make is answered the same whether
/// the tool exists or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_name_is_answered_only_with_what_the_principal_may_call() {
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .source(std::sync::Arc::new(airlock_tests::ledger::Ledger::default()))
            .policy(|p| {
                p.principals[0].allow = vec!["test.*".into(), "*.create".into()];
                p.principals[0].deny =
                    vec!["test.add".into(), "test.sleep*".into(), "ledger.*".into()];
            }),
    )
    .await;
    let refusal = |r: &airlock_supervisor::agent_api::ExecutionResponse| {
        let e = r.error.clone().unwrap_or_else(|| panic!("{r:?}"));
        assert_eq!(e.kind.as_str(), "contract", "{e:?}");
        format!("{} {}", e.message, e.hint.unwrap_or_default())
    };
    // A near name the principal may not call is not suggested.
    let told = refusal(&d.exec("await tools.test.addd({ a: 1, b: 2 })").await);
    assert!(told.contains("`tools.test` has no tool `addd`"), "{told}");
    assert!(!told.contains("add()"), "{told}");
    // Nor a namespace where it may call nothing.
    let told = refusal(&d.exec("await tools.ledgr.create({ name: 'x' })").await);
    assert!(!told.contains("ledger"), "{told}");
    // A call it may not make, of a tool that exists or not, is denied when it is made; the
    // program runs up to it either way.
    let denied = |r: &airlock_supervisor::agent_api::ExecutionResponse| {
        assert_eq!(r.status, Status::Error, "{r:?}");
        assert_eq!(r.stdout, "ran\n", "{r:?}");
        let call = &r.tool_calls[0];
        format!("{:?}", call.error)
    };
    let there = denied(
        &d.exec("console.log('ran'); await tools.ledger.list({})")
            .await,
    );
    let nowhere = denied(
        &d.exec("console.log('ran'); await tools.ledgex.list({})")
            .await,
    );
    assert_eq!(there.replace("ledger", "ledgex"), nowhere);
    assert!(there.contains("Denied"), "{there}");
    let there = denied(
        &d.exec("console.log('ran'); await tools.test.sleep({})")
            .await,
    );
    let nowhere = denied(
        &d.exec("console.log('ran'); await tools.test.sleepx({})")
            .await,
    );
    assert_eq!(there.replace(".sleep", ".sleepx"), nowhere);
    // A namespace it may call nothing in, near one it may: the denial says which.
    let typo = denied(
        &d.exec("console.log('ran'); await tools.tset.echo({})")
            .await,
    );
    assert!(typo.contains("did you mean tools.test?"), "{typo}");
    // The same at call time, for names the worker cannot see before the program runs.
    let r = d
        .exec(
            r#"const hints = [];
for (const [ns, name] of [["test", ["ad", "dd"].join("")], [["led", "gr"].join(""), "create"]]) {
  try { await (tools as any)[ns][name]({}); } catch (e) { hints.push(`${e.code}: ${e.message} ${e.hint}`); }
}
hints"#,
        )
        .await;
    let hints = r.result.to_string();
    assert!(hints.contains("unknown_tool"), "{r:?}");
    assert!(
        !hints.contains("tools.test.add") && !hints.contains("ledger"),
        "{hints}"
    );
}

/// `GET /metrics` counts every principal's executions and tool calls: only the operator
/// (root, the daemon's user) reads it; another principal gets `403 not_permitted`, and a
/// `GET /v1/health` without the daemon-wide counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_are_the_operators_alone() {
    if !another_principal::can_run("the_metrics_are_the_operators_alone") {
        return;
    }
    let d = TestDaemon::start_with(
        DaemonOptions::default().policy(|p| another_principal::admit(p, &["test.*"])),
    )
    .await;
    another_principal::open_socket(&d);
    d.exec("await tools.test.echo({})").await;
    let (status, body) = another_principal::get(&d, "/metrics").await;
    assert_eq!(status, 403, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "not_permitted", "{body}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("only root and the daemon's own user"),
        "{body}"
    );
    // What it may read, it still reads as itself: its health, without the counts and the
    // policy's warnings, which are every principal's.
    let (status, body) = another_principal::get(&d, "/v1/health").await;
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    for daemon_wide in [
        "executions",
        "pool",
        "policy_warnings",
        "policy_files",
        "last_reload",
    ] {
        assert!(health.get(daemon_wide).is_none(), "{daemon_wide}: {health}");
    }
    let (_, mine) = get(&d, "/v1/health").await;
    let mine: Value = serde_json::from_str(&mine).unwrap();
    assert_eq!(mine["executions"]["total"], 1, "{mine}");
    let (status, metrics) = get(&d, "/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains("airlock_tool_calls_total{outcome=\"ok\"} 1\n"),
        "{metrics}"
    );
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

/// A program finds a tool, reads its SDK (the tree and the tool's file) and calls it, all
/// without leaving the sandbox: each answer is what the caller's HTTP discovery gives, and each
/// call is brokered and traced like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_searches_reads_and_calls_the_tool_it_found() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            r#"
const found = await tools.airlock.search_tools({ query: "adds numbers", limit: 3 });
const best = found.results[0];
const tree = await tools.airlock.read_sdk({});
const file = await tools.airlock.read_sdk({ path: best.file });
const [namespace, name] = best.tool.split(".");
const sum = await (tools as any)[namespace][name]({ a: 2, b: 3 });
return { found, tree, file, sum };
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["sum"], 5, "{}", r.result);
    // The call taught the daemon `test.add`'s result type, which the SDK now shows; the
    // program read the SDK before that. Forgotten, the SDK is again what the program read.
    let (_, learned) = get(&d, "/v1/tools/search?q=adds+numbers&limit=1").await;
    assert!(learned.contains("Promise<number>"), "{learned}");
    let (status, forgot) = d
        .client()
        .await
        .delete("/v1/sdk/learned/test.add")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 200, "{forgot}");
    let (_, searched) = get(&d, "/v1/tools/search?q=adds+numbers&limit=3").await;
    let searched: Value = serde_json::from_str(&searched).unwrap();
    assert_eq!(r.result["found"], searched);
    assert_eq!(r.result["found"]["results"][0]["tool"], "test.add");
    let (_, tree) = get(&d, "/v1/sdk").await;
    assert_eq!(
        r.result["tree"],
        serde_json::from_str::<Value>(&tree).unwrap()
    );
    let (_, file) = get(&d, "/v1/sdk/servers/test/add.ts").await;
    assert_eq!(r.result["file"], json!(file));
    // Each call brokered and traced, the built-ins like the tool they found.
    let calls: Vec<(&str, CallOutcome)> = r
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.outcome))
        .collect();
    assert_eq!(
        calls,
        [
            ("airlock.search_tools", CallOutcome::Ok),
            ("airlock.read_sdk", CallOutcome::Ok),
            ("airlock.read_sdk", CallOutcome::Ok),
            ("test.add", CallOutcome::Ok),
        ]
    );
    assert_eq!(
        r.tool_calls[0].args,
        json!({ "query": "adds numbers", "limit": 3 })
    );

    // They are in the catalogue like any tool: GET /v1/tools, the SDK's files, and search.
    let (_, listed) = get(&d, "/v1/tools").await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let names: Vec<String> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}.{}",
                t["namespace"].as_str().unwrap(),
                t["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        names.contains(&"airlock.search_tools".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"airlock.read_sdk".to_owned()), "{names:?}");
    let (status, typed) = get(&d, "/v1/sdk/servers/airlock/search_tools.ts").await;
    assert_eq!(status, 200);
    assert!(typed.contains("query: string;"), "{typed}");
    let (_, globals) = get(&d, "/v1/sdk/tools.d.ts").await;
    assert!(
        globals.contains("readonly airlock: AirlockTools;"),
        "{globals}"
    );
    let (_, readme) = get(&d, "/v1/sdk/README.md").await;
    assert!(
        readme.contains("tools.airlock.search_tools({ query:"),
        "{readme}"
    );
}

/// The built-ins show a principal exactly its own tools: one allowed `test.echo` and
/// `airlock.*` finds, lists and reads nothing else, and a file of a tool it may not call does
/// not exist for it (the error says what to read instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrower_principal_discovers_only_its_own_tools() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.principals[0].allow = vec!["test.echo".into(), "airlock.*".into()];
    }))
    .await;
    let r = d
        .exec(
            r#"
const found = await tools.airlock.search_tools({ query: "adds numbers", limit: 50 });
const tree = await tools.airlock.read_sdk({});
let missing;
try { await tools.airlock.read_sdk({ path: "servers/test/add.ts" }); }
catch (e) { missing = { code: e.code, message: e.message, hint: e.hint }; }
let misspelt;
try { await tools.airlock.read_sdk({ path: "echo.ts" }); }
catch (e) { misspelt = { code: e.code, hint: e.hint }; }
return { found: found.results.map((r) => r.tool), files: tree.files.map((f) => f.path), tools: tree.tools, missing, misspelt };
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let found: Vec<&str> = r.result["found"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        found
            .iter()
            .all(|t| *t == "test.echo" || t.starts_with("airlock.")),
        "{found:?}"
    );
    assert_eq!(r.result["tools"], 3, "{}", r.result);
    let files: Vec<&str> = r.result["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(files.contains(&"servers/test/echo.ts"), "{files:?}");
    assert!(!files.contains(&"servers/test/add.ts"), "{files:?}");
    assert_eq!(
        r.result["missing"],
        json!({
            "code": "invalid_arguments",
            "message": "airlock.read_sdk: the SDK has no file `servers/test/add.ts`",
            "hint": "tools.airlock.read_sdk({}) lists the files; start with README.md",
        })
    );
    assert_eq!(
        r.result["misspelt"]["hint"],
        "did you mean `servers/test/echo.ts`? tools.airlock.read_sdk({}) lists the files; start with README.md"
    );
    // The failed reads are traced as errors, like any call's.
    assert_eq!(r.tool_calls[2].outcome, CallOutcome::Error);
    assert_eq!(r.tool_calls.len(), 4);
}

/// Two principals on one daemon: each program sees its own principal's tools, whichever
/// asked first (the SDK is cached per principal). Runs as root only (the second principal is
/// uid 65534).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_principal_discovers_its_own_tools_not_anothers() {
    if !another_principal::can_run("each_principal_discovers_its_own_tools_not_anothers") {
        return;
    }
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .policy(|p| another_principal::admit(p, &["test.echo", "airlock.*"])),
    )
    .await;
    another_principal::open_socket(&d);
    let code = "const found = await tools.airlock.search_tools({ query: 'adds numbers' }); const tree = await tools.airlock.read_sdk({}); ({ found: found.results.map((r) => r.tool), files: tree.files.map((f) => f.path) })";
    // The broad principal first: its catalogue is built (and cached) with every tool.
    let mine = d.exec(code).await;
    assert_eq!(mine.status, Status::Ok, "{mine:?}");
    assert_eq!(mine.result["found"][0], "test.add", "{}", mine.result);
    let (ok, theirs) = another_principal::cli(&d, &["exec", "-e", code]).await;
    assert!(ok, "{theirs}");
    assert!(theirs.contains("servers/test/echo.ts"), "{theirs}");
    for not_theirs in ["test.add", "servers/test/add.ts", "test.sleep"] {
        assert!(!theirs.contains(not_theirs), "{not_theirs} in {theirs}");
    }
    // And the broad principal still sees everything after the narrow one asked.
    let again = d.exec(code).await;
    assert_eq!(again.result, mine.result);
}

/// The built-ins are granted by the policy like any tool: a principal whose `allow` does not
/// match them, or whose `deny` does, gets `denied`, and its SDK does not show them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtins_need_a_grant_like_any_tool() {
    for (allow, deny) in [(vec!["test.*"], vec![]), (vec!["*"], vec!["airlock.*"])] {
        let d = TestDaemon::start_with(DaemonOptions::default().policy(move |p| {
            p.principals[0].allow = allow.iter().map(|a| (*a).into()).collect();
            p.principals[0].deny = deny.iter().map(|a| (*a).into()).collect();
        }))
        .await;
        let r = d
            .exec(
                r#"
const codes = [];
for (const call of [() => tools.airlock.search_tools({ query: "add" }), () => tools.airlock.read_sdk({})]) {
  try { await call(); codes.push("ok"); } catch (e) { codes.push(`${e.code}: ${e.message}`); }
}
codes
"#,
            )
            .await;
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(
            r.result,
            json!([
                "denied: airlock.search_tools: principal `local` is not allowed to call `airlock.search_tools`",
                "denied: airlock.read_sdk: principal `local` is not allowed to call `airlock.read_sdk`",
            ])
        );
        assert!(r.tool_calls.iter().all(|c| c.outcome == CallOutcome::Error));
        let (_, tree) = get(&d, "/v1/sdk").await;
        assert!(!tree.contains("servers/airlock/"), "{tree}");
        let (_, found) = get(&d, "/v1/tools/search?q=search+tools").await;
        assert!(!found.contains("airlock."), "{found}");
    }
}

/// The built-ins' arguments are held like any tool's: the contract check refuses a wrong
/// literal call before anything runs, and the call counts toward the execution's budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtins_are_checked_and_counted_like_any_tool() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_tool_calls = 2;
    }))
    .await;
    let r = d
        .exec("console.log('ran');\nawait tools.airlock.search_tools({ qurey: 'add' });")
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind.as_str(), "contract", "{e:?}");
    assert_eq!(
        e.message,
        "tools.airlock.search_tools: the required argument `query` is missing"
    );
    assert_eq!(r.stdout, "");
    let r = d
        .exec(
            r#"
const out = [];
for (let i = 0; i < 3; i++) {
  try { await tools.airlock.read_sdk({ path: "README.md" }); out.push("ok"); } catch (e) { out.push(e.code); }
}
out
"#,
        )
        .await;
    assert_eq!(r.result, json!(["ok", "ok", "tool_call_limit"]), "{r:?}");
}

/// In a session the built-ins are journaled like any call: a re-run answers them from the
/// record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtins_are_journaled_in_a_session() {
    let d = TestDaemon::start().await;
    let code = "const r = await tools.airlock.search_tools({ query: 'echo' }); r.results[0].tool";
    let first = d.exec_in(code, "new", None).await.unwrap();
    assert_eq!(first.status, Status::Ok, "{first:?}");
    assert!(!first.tool_calls[0].replayed);
    let session = first.session.clone().unwrap();
    let again = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(again.result, first.result);
    assert_eq!(again.replayed_calls, 1, "{again:?}");
    assert!(again.tool_calls[0].replayed);
}
