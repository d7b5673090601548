//! The SDK in Python against the real daemon with real servers (server-everything and
//! server-memory from npm): `GET /v1/sdk?language=python` gives `.pyi` stubs that CPython's own
//! parser accepts, search answers with Python signatures, the TypeScript default is what it
//! was, and a Python program written from a stub's signature (keyword arguments) runs. Hostile
//! schemas give stubs CPython parses too.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{ServerTransport, SettingValue, ToolServer};
use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, RequestLanguage, Status};
use airlock_supervisor::sdk::{Language, Sdk, SdkTool};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::mcp_peers;
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use std::io::Write as _;
use std::sync::Arc;

async fn daemon_with(servers: Vec<ToolServer>) -> TestDaemon {
    let mut options = DaemonOptions::default();
    for server in servers {
        options = options.source(Arc::new(McpServer::new(
            server,
            Arc::new(SecretStore::empty()),
        )));
    }
    TestDaemon::start_with(options).await
}

/// server-everything and server-memory (its graph in `store`), or `None` when npm's packages
/// are missing (the skip reported).
fn real_servers(test: &str, store: &std::path::Path) -> Option<Vec<ToolServer>> {
    let everything = mcp_peers::server_everything("everything", test)?;
    let mut memory = mcp_peers::npm_server("memory", "server-memory", &[], test)?;
    if let ServerTransport::Stdio { env, .. } = &mut memory.transport {
        env.push((
            "MEMORY_FILE_PATH".into(),
            SettingValue::Literal(store.join("memory.jsonl").display().to_string()),
        ));
    }
    memory.confinement.write = vec![store.to_owned()];
    Some(vec![everything, memory])
}

async fn get(d: &TestDaemon, path: &str) -> (u16, String) {
    let (status, body) = d.client().await.get(path).await.unwrap();
    (status.as_u16(), body)
}

async fn py(d: &TestDaemon, code: &str) -> ExecutionResponse {
    d.client()
        .await
        .execute(&ExecutionRequest {
            code: code.to_owned(),
            language: RequestLanguage::Python,
            ..Default::default()
        })
        .await
        .expect("execution request failed")
}

/// CPython's verdict on `text` (`ast.parse`), or `None` without a `python3`.
fn cpython_parses(text: &str) -> Option<Result<(), String>> {
    let mut child = std::process::Command::new("python3")
        .args(["-c", "import ast,sys; ast.parse(sys.stdin.read())"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some(if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

/// The keyword-only parameter names of `async def <name>(*, a: T, b: U = ...)` in a stub.
fn parameter_names(stub: &str, name: &str) -> Vec<String> {
    let line = stub
        .lines()
        .find(|l| l.starts_with(&format!("async def {name}(")))
        .unwrap_or_else(|| panic!("no `async def {name}` in\n{stub}"));
    let inside = &line[line.find('(').unwrap() + 1..line.rfind(") ->").unwrap()];
    // Top-level commas only: annotations such as `dict[str, Any]` hold commas too.
    let mut names = Vec::new();
    let mut depth = 0;
    let mut part = String::new();
    for c in inside.chars().chain([',']) {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                let p = part.trim().to_owned();
                if let Some((n, _)) = p.split_once(':')
                    && !p.ends_with("= ...")
                {
                    names.push(n.trim().to_owned());
                }
                part.clear();
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_of_real_servers_parses_and_searches() {
    let test = "the_python_sdk_of_real_servers_parses_and_searches";
    let store = tempfile::tempdir().unwrap();
    let Some(servers) = real_servers(test, store.path()) else {
        return;
    };
    let d = daemon_with(servers).await;

    let (status, body) = get(&d, "/v1/sdk?language=python").await;
    assert_eq!(status, 200, "{body}");
    let listing: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listing["unavailable"], json!([]), "{listing}");
    let paths: Vec<String> = listing["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect();
    for expected in [
        "README.md",
        "tools.pyi",
        "servers/everything/__init__.pyi",
        "servers/everything/get_sum.pyi",
        "servers/memory/__init__.pyi",
        "servers/memory/read_graph.pyi",
        "servers/airlock/read_sdk.pyi",
    ] {
        assert!(paths.contains(&expected.to_owned()), "{paths:?}");
    }
    assert!(paths.iter().all(|p| !p.ends_with(".ts")), "{paths:?}");

    // Every stub, as CPython's parser reads it.
    let mut checked = 0;
    for path in paths.iter().filter(|p| p.ends_with(".pyi")) {
        let (status, text) = get(&d, &format!("/v1/sdk/{path}?language=python")).await;
        assert_eq!(status, 200, "{path}: {text}");
        match cpython_parses(&text) {
            None => {
                eprintln!("SKIPPED the CPython check of {test}: no python3");
                break;
            }
            Some(Ok(())) => checked += 1,
            Some(Err(e)) => panic!("{path} is not valid Python: {e}\n---\n{text}"),
        }
    }
    println!("{checked} stub(s) parsed by CPython");

    let (_, readme) = get(&d, "/v1/sdk/README.md?language=python").await;
    assert!(readme.contains("asyncio.gather"), "{readme}");
    assert!(readme.contains("`tools.memory`"), "{readme}");
    // A `.pyi` path is read from the Python tree without asking.
    let (status, get_sum) = get(&d, "/v1/sdk/servers/everything/get_sum.pyi").await;
    assert_eq!(status, 200, "{get_sum}");
    assert!(
        get_sum.contains("async def get_sum(*, a: float, b: float) -> "),
        "{get_sum}"
    );
    let (_, read_graph) = get(&d, "/v1/sdk/servers/memory/read_graph.pyi").await;
    assert!(
        read_graph.contains("async def read_graph() -> ReadGraphOutput:"),
        "{read_graph}"
    );
    let (status, missing) = get(&d, "/v1/sdk/servers/memory/nope.pyi").await;
    assert_eq!(status, 404);
    assert!(missing.contains("GET /v1/sdk?language=python"), "{missing}");

    // Search in Python: `async def` signatures and `.pyi` files; the same ranking.
    let (status, body) = get(
        &d,
        "/v1/tools/search?q=add+two+numbers&limit=3&language=python",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let found: Value = serde_json::from_str(&body).unwrap();
    let hit = &found["results"][0];
    assert_eq!(hit["tool"], "everything.get_sum", "{found}");
    assert!(
        hit["signature"]
            .as_str()
            .unwrap()
            .starts_with("async def get_sum(*, a: float, b: float) -> "),
        "{hit}"
    );
    assert_eq!(hit["file"], "servers/everything/get_sum.pyi");
    let (_, body) = get(&d, "/v1/tools/search?q=add+two+numbers&limit=3").await;
    let ts: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ts["results"][0]["tool"], "everything.get_sum");
    assert!(
        ts["results"][0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("tools.everything.get_sum(")
    );
    assert_eq!(ts["results"][0]["file"], "servers/everything/get_sum.ts");

    // The TypeScript default is untouched.
    let (_, body) = get(&d, "/v1/sdk").await;
    let listing: Value = serde_json::from_str(&body).unwrap();
    let ts_paths: Vec<&str> = listing["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(ts_paths.contains(&"tools.d.ts"), "{ts_paths:?}");
    assert!(
        ts_paths.iter().all(|p| !p.ends_with(".pyi")),
        "{ts_paths:?}"
    );
    let (_, body) = get(&d, "/v1/sdk?language=typescript").await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), listing);

    // Unknown languages are refused, naming the accepted ones.
    for path in [
        "/v1/sdk?language=rust",
        "/v1/sdk/README.md?language=rust",
        "/v1/tools/search?q=add&language=rust",
    ] {
        let (status, body) = get(&d, path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body.contains("the accepted ones are `typescript` (the default) and `python`"),
            "{path}: {body}"
        );
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_program_written_from_the_stubs_runs() {
    let test = "a_python_program_written_from_the_stubs_runs";
    let store = tempfile::tempdir().unwrap();
    let Some(servers) = real_servers(test, store.path()) else {
        return;
    };
    let d = daemon_with(servers).await;
    let (_, get_sum) = get(&d, "/v1/sdk/servers/everything/get_sum.pyi").await;
    let (_, create) = get(&d, "/v1/sdk/servers/memory/create_entities.pyi").await;
    let (_, read_graph) = get(&d, "/v1/sdk/servers/memory/read_graph.pyi").await;
    let sum_args = parameter_names(&get_sum, "get_sum");
    assert_eq!(sum_args, ["a", "b"]);
    assert_eq!(parameter_names(&create, "create_entities"), ["entities"]);
    assert!(parameter_names(&read_graph, "read_graph").is_empty());
    // The entities' TypedDict names the keys the program sends.
    for key in ["name: str", "entityType: str", "observations: list[str]"] {
        assert!(create.contains(key), "{create}");
    }

    // Keyword arguments exactly as the signatures name them.
    let program = format!(
        r#"
import asyncio
s, made = await asyncio.gather(
    tools.everything.get_sum({}=40, {}=2),
    tools.memory.create_entities(entities=[{{"name": "airlock", "entityType": "project", "observations": ["typed"]}}]),
)
graph = await tools.memory.read_graph()
{{"sum": s, "names": [e["name"] for e in graph["entities"]]}}
"#,
        sum_args[0], sum_args[1]
    );
    let r = py(&d, &program).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["names"], json!(["airlock"]), "{}", r.result);
    assert!(r.result["sum"].to_string().contains("42"), "{}", r.result);
    assert_eq!(r.tool_calls[0].args, json!({"a": 40, "b": 2}));

    // The built-in tools answer in Python from inside a Python program.
    let r = py(
        &d,
        r#"
found = await tools.airlock.search_tools(query="add two numbers", limit=1, language="python")
stub = await tools.airlock.read_sdk(path=found["results"][0]["file"])
[found["results"][0]["signature"], "async def get_sum(" in stub]
"#,
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.result[0]
            .as_str()
            .unwrap()
            .starts_with("async def get_sum(*, a: float, b: float)"),
        "{}",
        r.result
    );
    assert_eq!(r.result[1], true, "{}", r.result);
    let r = py(&d, r#"await tools.airlock.read_sdk(language="rust")"#).await;
    assert_ne!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

/// Schemas built to break a generator: deep, wide, recursive, keywords and odd keys,
/// descriptions that try to end a docstring, a comment or a string; CPython parses every stub.
#[test]
fn hostile_schemas_give_stubs_cpython_parses() {
    let mut deep = json!({"type": "string"});
    for _ in 0..300 {
        deep = json!({"type": "object", "properties": {"next": deep}});
    }
    let evil = "\"\"\" + __import__('os')\n# \\\r\u{2028}\u{c}\0'''";
    let enum_values: Vec<Value> = (0..5_000).map(|i| json!(format!("v{i}{evil}"))).collect();
    let schemas = [
        deep,
        json!({"type": "object", "properties": {"e": {"enum": enum_values}}, "required": ["e"]}),
        json!({
            "$ref": "#/$defs/a",
            "$defs": {
                "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}, "self": {"$ref": "#/$defs/a"}}},
                "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "array", "items": {"$ref": "#/$defs/b"}}]},
                "loop1": {"$ref": "#/$defs/loop2"},
                "loop2": {"oneOf": [{"$ref": "#/$defs/loop1"}, {"type": "null"}]}
            }
        }),
        json!({
            "type": "object",
            "description": evil,
            "title": evil,
            "properties": {
                "class": {"type": "string", "description": evil},
                "None": {"type": "integer"},
                "a-b": {"type": "boolean"},
                evil: {"type": "object", "properties": {"from": {"const": evil}}, "additionalProperties": {"type": "number"}},
                "lambda": {"type": ["string", "null"], "default": evil}
            },
            "required": ["class", evil]
        }),
    ];
    let mut tools = Vec::new();
    for (i, schema) in schemas.iter().enumerate() {
        for name in [format!("t{i}"), "class".to_owned(), "get$x".to_owned()] {
            tools.push(SdkTool {
                namespace: if i == 3 {
                    "None".into()
                } else {
                    format!("hostile{i}")
                },
                name,
                description: evil.into(),
                input_schema: schema.clone(),
                output_schema: Some(schema.clone()),
                learned: None,
            });
        }
    }
    let sdk = Sdk::new(&tools);
    let mut checked = 0;
    for (path, text) in &sdk.files_in(Language::Python).files {
        if !path.ends_with(".pyi") {
            continue;
        }
        match cpython_parses(text) {
            None => {
                eprintln!("SKIPPED hostile_schemas_give_stubs_cpython_parses: no python3");
                return;
            }
            Some(Ok(())) => checked += 1,
            Some(Err(e)) => panic!("{path} is not valid Python: {e}\n---\n{text}"),
        }
    }
    assert!(checked >= 12, "{checked}");
}

/// `airlock sdk tree|cat|search|write --language python`, and an unknown language refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_browses_and_writes_the_sdk_in_python() {
    let d = TestDaemon::start().await;
    let socket = d.socket_path().to_owned();
    let out_dir = tempfile::tempdir().unwrap();
    let dir = out_dir.path().display().to_string();
    let runs = tokio::task::spawn_blocking(move || {
        let cli = |args: &[&str]| {
            let out = std::process::Command::new(airlock_tests::binaries::airlock_cli())
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
        [
            cli(&["sdk", "tree", "--language", "python"]),
            cli(&["sdk", "cat", "--language", "python", "servers/test/add.pyi"]),
            cli(&["sdk", "search", "--language", "python", "adds", "numbers"]),
            cli(&["sdk", "write", "--language", "python", &dir]),
            cli(&["sdk", "tree", "--language", "rust"]),
            cli(&["sdk", "tree"]),
        ]
    })
    .await
    .unwrap();
    let [tree, cat, search, write, rust, ts_tree] = runs;
    assert!(tree.0, "{}", tree.2);
    assert!(tree.1.contains("servers/test/add.pyi"), "{}", tree.1);
    assert!(!tree.1.contains(".ts\n"), "{}", tree.1);
    assert!(cat.0, "{}", cat.2);
    assert!(cat.1.contains("async def add("), "{}", cat.1);
    assert!(search.0, "{}", search.2);
    assert!(search.1.starts_with("async def add("), "{}", search.1);
    assert!(write.0, "{}", write.2);
    let written = std::fs::read_to_string(out_dir.path().join("servers/test/add.pyi")).unwrap();
    assert_eq!(written, cat.1);
    assert!(out_dir.path().join("tools.pyi").exists());
    assert!(!rust.0);
    assert!(
        rust.2
            .contains("the accepted ones are `typescript` (the default) and `python`"),
        "{}",
        rust.2
    );
    assert!(
        ts_tree.0 && ts_tree.1.contains("servers/test/add.ts"),
        "{}",
        ts_tree.1
    );
}

/// `POST /v1/sdk?language=python`: the stubs that change for a request's client tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tools_in_python() {
    let d = TestDaemon::start().await;
    let body = json!({ "client_tools": [{
        "name": "web_search",
        "description": "Searches the web. Returns the top results.",
        "input_schema": { "type": "object", "properties": {
            "query": { "type": "string", "description": "what to look for" },
            "limit": { "type": "integer" } }, "required": ["query"] }
    }] });
    let post = |path: &'static str| {
        let body = body.clone();
        let d = &d;
        async move {
            let (status, text) = d
                .client()
                .await
                .post(path, bytes::Bytes::from(body.to_string()))
                .await
                .unwrap();
            (status.as_u16(), text)
        }
    };
    let (status, text) = post("/v1/sdk?language=python").await;
    assert_eq!(status, 200, "{text}");
    let view: Value = serde_json::from_str(&text).unwrap();
    let files = view["files"].as_object().unwrap();
    let mut paths: Vec<&str> = files.keys().map(String::as_str).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "README.md",
            "servers/client/__init__.pyi",
            "servers/client/web_search.pyi",
            "tools.pyi"
        ]
    );
    let stub = files["servers/client/web_search.pyi"].as_str().unwrap();
    assert!(
        stub.contains("async def web_search(*, query: str, limit: int = ...) -> WebSearchOutput:"),
        "{stub}"
    );
    assert!(
        files["tools.pyi"]
            .as_str()
            .unwrap()
            .contains("from .servers import client as client")
    );
    // TypeScript without asking, as before; an unknown language refused.
    let (_, text) = post("/v1/sdk").await;
    assert!(text.contains("servers/client/web_search.ts"), "{text}");
    let (status, text) = post("/v1/sdk?language=go").await;
    assert_eq!(status, 400, "{text}");
}
