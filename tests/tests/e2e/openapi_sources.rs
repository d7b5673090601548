//! OpenAPI tool sources (`[[openapi]]`): documents written here (OAS 3.1, YAML and JSON) whose
//! operations sandboxed programs call through the in-process daemon, against a local HTTP
//! server this test starts; and the real documents from npm (`@octokit/openapi`'s GitHub REST
//! description, `@readme/oas-examples`), which must load.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{ApiKeyLocation, OpenApiAuth, OpenApiSource as OpenApiConfig, SettingValue};
use airlock_supervisor::agent_api::Status;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::arguments::ArgumentSchema;
use airlock_supervisor::tools::sources::openapi::{MAX_EXCERPT_BYTES, OpenApiSource};
use airlock_supervisor::tools::{CallContext, ToolSource};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "s3cret-bearer-token";
const API_KEY: &str = "k3y-for-the-query";

/// One request as the local server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A tiny HTTP/1.1 server on 127.0.0.1 (one request per connection) that records what it gets.
struct LocalServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LocalServer {
    /// `other_port`: where `/v1/moved` redirects to (as `localhost`, another host).
    async fn start(other_port: u16) -> LocalServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut stream).await else {
                        return;
                    };
                    log.lock().unwrap().push(request.clone());
                    let (status, content_type, body, extra) = respond(&request, other_port);
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(body.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        LocalServer { port, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// (status line, content type, body, extra header lines)
fn respond(r: &Seen, other_port: u16) -> (String, &'static str, String, String) {
    let path = r.target.split('?').next().unwrap_or_default();
    let authorised = r.header("authorization") == Some(&format!("Bearer {TOKEN}"))
        || r.target.contains(&format!("api_key={API_KEY}"));
    if !authorised && path.starts_with("/v1/") {
        return (
            "401 Unauthorized".into(),
            "application/json",
            json!({ "message": "no credentials" }).to_string(),
            String::new(),
        );
    }
    match path {
        "/v1/missing" => (
            "404 Not Found".into(),
            "text/plain",
            format!("not here. {}", "padding ".repeat(1000)),
            String::new(),
        ),
        "/v1/moved" => (
            "302 Found".into(),
            "text/plain",
            "moved".into(),
            format!("location: http://localhost:{other_port}/stolen\r\n"),
        ),
        "/v1/text" => ("200 OK".into(), "text/plain; charset=utf-8", "plain words".into(), String::new()),
        _ => (
            "200 OK".into(),
            "application/json",
            json!({
                "method": r.method,
                "target": r.target,
                "x_trace": r.header("x-trace"),
                // An API that quotes the credential back: the program must not see it.
                "echoed_authorization": r.header("authorization"),
                "body": serde_json::from_str::<Value>(&r.body).unwrap_or(Value::String(r.body.clone())),
            })
            .to_string(),
            String::new(),
        ),
    }
}

/// A small OAS 3.1 document; `servers` points at nothing useful, the policy's base URL wins.
const PETS_YAML: &str = r##"
openapi: 3.1.0
info:
  title: pets
  version: "1"
servers:
  - url: https://unused.example.com
paths:
  /pets/{petId}:
    get:
      operationId: pets/get
      summary: One pet by id.
      parameters:
        - { name: petId, in: path, required: true, schema: { type: integer } }
        - { name: tags, in: query, schema: { type: array, items: { type: string } } }
        - { name: X-Trace, in: header, schema: { type: string } }
      responses:
        "200": { description: the pet }
  /pets:
    post:
      operationId: pets/create
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/NewPet" }
      responses:
        "201": { description: created }
  /missing:
    get:
      operationId: missing
      responses:
        "404": { description: never there }
  /moved:
    get:
      operationId: moved
  /text:
    get:
      operationId: text
components:
  schemas:
    NewPet:
      type: object
      required: [name]
      properties:
        name: { type: string }
        kind: { enum: [cat, dog] }
"##;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn config(name: &str, spec: PathBuf, base_url: &str, auth: Option<OpenApiAuth>) -> OpenApiConfig {
    OpenApiConfig {
        name: name.into(),
        spec,
        base_url: Some(base_url.into()),
        auth,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_call_openapi_operations_with_injected_auth() {
    let other = LocalServer::start(0).await;
    let api = LocalServer::start(other.port).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = write(dir.path(), "pets.yaml", PETS_YAML);
    // A JSON twin of the document (fewer details), for the API-key-in-the-query source.
    let json_path = write(dir.path(), "pets.json", &pets_json().to_string());
    let base = format!("http://127.0.0.1:{}/v1", api.port);
    let secrets = Arc::new(SecretStore::with_values([
        ("api-token".to_owned(), TOKEN.to_owned()),
        ("api-key".to_owned(), API_KEY.to_owned()),
    ]));
    let bearer = OpenApiSource::load(
        config(
            "pets",
            yaml,
            &base,
            Some(OpenApiAuth::Bearer {
                token: SettingValue::Secret("api-token".into()),
            }),
        ),
        secrets.clone(),
    )
    .unwrap();
    let keyed = OpenApiSource::load(
        config(
            "keyed",
            json_path,
            &base,
            Some(OpenApiAuth::ApiKey {
                location: ApiKeyLocation::Query("api_key".into()),
                value: SettingValue::Secret("api-key".into()),
            }),
        ),
        secrets,
    )
    .unwrap();
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .source(Arc::new(bearer))
            .source(Arc::new(keyed)),
    )
    .await;

    let r = d
        .exec(
            r#"
const pet = await tools.pets.pets_get({ petId: 7, tags: ["a b", "c/d"], "X-Trace": "t-1" });
const created = await tools.pets.pets_create({ name: "Rex", kind: "dog" });
const text = await tools.pets.text({});
const keyed = await tools.keyed.pets_get({ petId: 8 });
async function fails(f: () => Promise<unknown>) {
  try { await f(); return null } catch (e: any) { return { code: e.code, message: e.message } }
}
const missing = await fails(() => tools.pets.missing({}));
const moved = await fails(() => tools.pets.moved({}));
const keyedMissing = await fails(() => tools.keyed.missing({}));
// Not object literals, so the daemon's contract check (before the run) lets them through and
// the argument check at call time is what refuses them.
const dynamic = (args: any) => args;
const badType = await fails(() => tools.pets.pets_get(dynamic({ petId: "seven" })));
const unknownArg = await fails(() => tools.pets.pets_get(dynamic({ petId: 1, tgas: ["x"] })));
const noBody = await fails(() => tools.pets.pets_create(dynamic({})));
({ pet, created, text, keyed, missing, moved, keyedMissing, badType, unknownArg, noBody })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let v = &r.result;

    // Path and query parameters encoded, header parameter sent, credential echoed back redacted.
    assert_eq!(v["pet"]["method"], "GET");
    assert_eq!(v["pet"]["target"], "/v1/pets/7?tags=a+b&tags=c%2Fd");
    assert_eq!(v["pet"]["x_trace"], "t-1");
    assert_eq!(v["pet"]["echoed_authorization"], "Bearer [redacted]");
    assert_eq!(v["created"]["method"], "POST");
    assert_eq!(
        v["created"]["body"],
        json!({ "name": "Rex", "kind": "dog" })
    );
    assert_eq!(v["text"], "plain words");
    assert_eq!(v["keyed"]["target"], "/v1/pets/8?api_key=[redacted]");

    // Non-2xx: status and a bounded excerpt.
    let missing = v["missing"]["message"].as_str().unwrap();
    assert_eq!(v["missing"]["code"], "upstream_error");
    assert!(missing.contains("HTTP 404 Not Found"), "{missing}");
    assert!(missing.contains("not here. padding"), "{missing}");
    assert!(missing.contains("bytes in all)"), "{missing}");
    assert!(
        missing.len() < MAX_EXCERPT_BYTES + 200,
        "{} bytes",
        missing.len()
    );
    // The key travelled in the query, but error messages never show it.
    let keyed_missing = v["keyedMissing"]["message"].as_str().unwrap();
    assert!(keyed_missing.contains("HTTP 404"), "{keyed_missing}");
    assert!(!keyed_missing.contains(API_KEY), "{keyed_missing}");

    // Redirect: reported with the target host, not followed.
    let moved = v["moved"]["message"].as_str().unwrap();
    assert_eq!(v["moved"]["code"], "upstream_error");
    assert!(moved.contains("HTTP 302 Found"), "{moved}");
    assert!(
        moved.contains(&format!("localhost:{}", other.port)),
        "{moved}"
    );
    assert!(moved.contains("not followed"), "{moved}");
    assert!(
        other.seen().is_empty(),
        "the redirect target got {:?}",
        other.seen()
    );

    // Bad arguments never left the daemon.
    for key in ["badType", "unknownArg", "noBody"] {
        assert_eq!(v[key]["code"], "invalid_arguments", "{key}: {}", v[key]);
    }
    assert!(
        v["unknownArg"]["message"]
            .as_str()
            .unwrap()
            .contains("tgas")
    );
    let seen = api.seen();
    let targets: Vec<&str> = seen.iter().map(|s| s.target.as_str()).collect();
    assert_eq!(seen.len(), 7, "{targets:?}");
    assert!(
        !targets
            .iter()
            .any(|t| t.contains("seven") || t.contains("tgas")),
        "{targets:?}"
    );

    // Each source's credential, and only its own.
    for s in &seen {
        if s.target.contains("api_key=") {
            assert_eq!(s.header("authorization"), None, "{s:?}");
            assert!(s.target.contains(&format!("api_key={API_KEY}")), "{s:?}");
        } else {
            assert_eq!(
                s.header("authorization"),
                Some(format!("Bearer {TOKEN}").as_str())
            );
        }
    }
    assert_eq!(seen[1].header("content-type"), Some("application/json"));
    assert_eq!(r.tool_calls.len(), 10);
    d.stop().await;
}

/// A malformed document is an error naming the file and position; the source that loads still
/// serves its tools next to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_document_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.yaml",
        "openapi: 3.1.0\npaths:\n  /a: [unclosed\n",
    );
    let e = OpenApiSource::load(
        config("bad", bad.clone(), "http://127.0.0.1:9", None),
        Arc::new(SecretStore::empty()),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with(&format!("{}:", bad.display())), "{e}");
    assert!(e.contains("invalid YAML"), "{e}");

    let api = LocalServer::start(0).await;
    let good = OpenApiSource::load(
        config(
            "pets",
            write(dir.path(), "pets.yaml", PETS_YAML),
            &format!("http://127.0.0.1:{}/open", api.port),
            None,
        ),
        Arc::new(SecretStore::empty()),
    )
    .unwrap();
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(good))).await;
    let r = d.exec("const t = await tools.pets.text({}); ({ t })").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // `/open/text` is not under /v1, so the server answers without credentials.
    assert_eq!(r.result["t"]["target"], "/open/text");
    // The broken source is simply absent: its namespace is unknown.
    let r = d
        .exec("const ns: string = \"bad\"; let e; try { await (tools as any)[ns].x({}) } catch (x: any) { e = x.code ?? x.name } ({ e })")
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["e"], "unknown_tool", "{r:?}");
    d.stop().await;
}

fn pets_json() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": { "title": "pets", "version": "1" },
        "paths": {
            "/pets/{petId}": { "get": { "operationId": "pets/get", "parameters": [
                { "name": "petId", "in": "path", "required": true, "schema": { "type": "integer" } },
                { "name": "tags", "in": "query", "schema": { "type": "array", "items": { "type": "string" } } }
            ] } },
            "/pets": { "post": { "operationId": "pets/create", "requestBody": { "required": true,
                "content": { "application/json": { "schema": { "type": "object" } } } } } },
            "/missing": { "get": { "operationId": "missing" } },
            "/moved": { "get": { "operationId": "moved" } },
            "/text": { "get": { "operationId": "text" } }
        }
    })
}

// ---- real documents from npm ------------------------------------------------------------------

use airlock_tests::mcp_peers::npm_package;

#[test]
fn the_github_rest_document_loads_with_all_its_operations() {
    let Some(spec) = npm_package(
        "@octokit/openapi/generated/api.github.com.json",
        "the_github_rest_document_loads_with_all_its_operations",
    ) else {
        return;
    };
    let mut config = config("github", spec, "https://api.github.com", None);
    config.base_url = None;
    let started = std::time::Instant::now();
    let source = OpenApiSource::load(config, Arc::new(SecretStore::empty())).unwrap();
    eprintln!(
        "loaded the GitHub REST document: {} tools in {:?} (this build's profile)",
        source.descriptors().len(),
        started.elapsed()
    );
    assert_eq!(source.base_url(), "https://api.github.com/");
    let tools = source.descriptors();
    assert!(tools.len() >= 1200, "{} tools", tools.len());
    let problems: Vec<(&str, &str)> = tools
        .iter()
        .filter_map(|t| source.problem(&t.name).map(|p| (t.name.as_str(), p)))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    // Every input schema compiles (the daemon compiles them lazily, on a tool's first call).
    let uncompilable: Vec<String> = tools
        .iter()
        .filter_map(|t| {
            ArgumentSchema::compile(&t.input_schema)
                .check(&t.name, &json!({}))
                .err()
                .filter(|e| e.code.as_str() == "invalid_schema")
                .map(|e| e.message)
        })
        .collect();
    assert!(uncompilable.is_empty(), "{uncompilable:#?}");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let get = tool("repos_get");
    assert_eq!(get.input_schema["required"], json!(["owner", "repo"]));
    assert!(
        get.description.contains("GET /repos/{owner}/{repo}"),
        "{}",
        get.description
    );
    // Request bodies are flattened into the arguments, as Octokit takes them.
    let create = tool("issues_create");
    let required = create.input_schema["required"].as_array().unwrap();
    assert_eq!(required, &[json!("owner"), json!("repo"), json!("title")]);
    assert!(create.input_schema["properties"]["title"].is_object());
    assert!(create.input_schema["properties"]["labels"].is_object());
    let comment = &tool("issues_create_comment").input_schema;
    assert_eq!(
        comment["required"],
        json!(["owner", "repo", "issue_number", "body"])
    );
    assert_eq!(comment["properties"]["body"]["type"], "string");
    assert!(tool("repos_list_for_org").input_schema["properties"]["per_page"].is_object());
}

/// Every OpenAPI 3.0 and 3.1 example of `@readme/oas-examples`, JSON and YAML, loads; the only
/// tools that fail are the four whose request body is multipart (listed below).
#[test]
fn every_readme_oas_example_loads() {
    let Some(root) = npm_package("@readme/oas-examples", "every_readme_oas_example_loads") else {
        return;
    };
    let mut loaded = 0;
    let mut failures = Vec::new();
    for version in ["3.0", "3.1"] {
        for format in ["json", "yaml"] {
            let dir = root.join(version).join(format);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                // `3.0/json/openapi-workshop/` is a document split over several files.
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            for file in files {
                let name = format!(
                    "{version}/{format}/{}",
                    file.file_name().unwrap().to_string_lossy()
                );
                match OpenApiSource::load(
                    config("example", file, "http://127.0.0.1:9", None),
                    Arc::new(SecretStore::empty()),
                ) {
                    Ok(source) => {
                        loaded += 1;
                        for t in source.descriptors() {
                            if let Some(p) = source.problem(&t.name) {
                                failures.push(format!("{name}: tool {}: {p}", t.name));
                            } else if let Err(e) =
                                ArgumentSchema::compile(&t.input_schema).check(&t.name, &json!({}))
                                && e.code.as_str() == "invalid_schema"
                            {
                                failures.push(format!("{name}: tool {}: {}", t.name, e.message));
                            }
                        }
                    }
                    Err(e) => failures.push(format!("{name}: {e}")),
                }
            }
        }
    }
    eprintln!("{loaded} example documents loaded");
    assert!(loaded >= 24, "{loaded}");
    // Only single tools fail: multipart/form-data bodies (file uploads) cannot be sent, and one
    // `pattern` uses a `{` that the regex engine of the argument check does not take as a
    // literal.
    let mut expected = Vec::new();
    for f in ["json", "yaml"] {
        for t in ["updateAPISpecification", "uploadAPISpecification"] {
            expected.push(format!("3.0/{f}/readme-legacy.{f}: tool {t}: its request body (multipart/form-data) is of a type this source cannot send (JSON, form and text are supported)"));
        }
    }
    let mut rest = Vec::new();
    for failure in failures {
        if failure.contains("/schema-validation.")
            && failure.contains("tool get_anything_strings: ")
            && failure.contains("is not a \"regex\"")
        {
            continue;
        }
        rest.push(failure);
    }
    let failures = rest;
    assert_eq!(failures, expected);
}

/// `airlockd --check-config` loads every OpenAPI document: a good one is summarised, a
/// malformed one is reported with file, line and column, and the check fails.
#[test]
fn check_config_reports_a_malformed_document() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "pets.yaml", PETS_YAML);
    let bad = write(
        dir.path(),
        "bad.json",
        "{\n  \"openapi\": \"3.1.0\",\n  \"paths\": {,}\n}\n",
    );
    let policy = |specs: &[&Path]| {
        let tables: String = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                format!(
                    "[[openapi]]\nname = \"api{i}\"\nspec = \"{}\"\nbase_url = \"http://127.0.0.1:9\"\nauth = {{ type = \"bearer\", token = {{ secret = \"absent-token\" }} }}\n\n",
                    spec.display()
                )
            })
            .collect();
        write(dir.path(), "policy.toml", &tables)
    };
    let run = |path: PathBuf| {
        std::process::Command::new(airlock_tests::binaries::airlockd())
            .arg("--check-config")
            .arg(path)
            .env_remove("CREDENTIALS_DIRECTORY")
            .output()
            .unwrap()
    };

    let ok = run(policy(&[&good]));
    let (out, err) = (
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr),
    );
    assert!(ok.status.success(), "{out}{err}");
    assert!(out.contains("openapi source `api0`: 5 tools"), "{out}");
    assert!(
        err.contains("openapi source `api0` needs a secret") && err.contains("absent-token"),
        "{err}"
    );

    let failed = run(policy(&[&good, &bad]));
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "openapi source `api1`: {}:3:13: invalid JSON",
            bad.display()
        )),
        "{err}"
    );
}

/// A path parameter is data in one segment: `..`, `.` and an empty value are refused naming the
/// parameter (a URL parser would normalise them away, and the request, with the source's
/// credentials, would go to a path the operator never exposed); everything else is
/// percent-encoded into the one segment, `/`, `?`, `#`, `%` and CR/LF included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_parameters_stay_one_segment_and_dot_segments_are_refused() {
    let api = LocalServer::start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let doc = write(
        dir.path(),
        "users.yaml",
        r#"
openapi: 3.1.0
info: { title: users, version: "1" }
paths:
  /users/{id}:
    get:
      operationId: get_user
      parameters:
        - { name: id, in: path, required: true, schema: { type: string } }
  /pair/{a}{b}:
    get:
      operationId: pair
      parameters:
        - { name: a, in: path, required: true, schema: { type: string } }
        - { name: b, in: path, required: true, schema: { type: string } }
"#,
    );
    let secrets = Arc::new(SecretStore::with_values([(
        "api-token".to_owned(),
        TOKEN.to_owned(),
    )]));
    let source = OpenApiSource::load(
        config(
            "users",
            doc,
            &format!("http://127.0.0.1:{}/v1", api.port),
            Some(OpenApiAuth::Bearer {
                token: SettingValue::Secret("api-token".into()),
            }),
        ),
        secrets,
    )
    .unwrap();
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(source))).await;
    let r = d
        .exec(
            r#"
async function get(id: string) {
  try { return (await tools.users.get_user({ id }) as any).target }
  catch (e: any) { return { code: e.code, message: e.message } }
}
const out: Record<string, unknown> = {};
for (const id of ["..", ".", "", "../x", "%2e%2e", "a?b", "a#b", "a\r\nX-Evil: 1", "%", "a/b", "ok"]) {
  out[JSON.stringify(id)] = await get(id);
}
try { out.pair = await tools.users.pair({ a: ".", b: "." }) } catch (e: any) { out.pair = { code: e.code, message: e.message } }
out
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let v = &r.result;
    for (value, shown) in [(r#""..""#, "`..`"), (r#"".""#, "`.`"), (r#""""#, "empty")] {
        assert_eq!(v[value]["code"], "invalid_arguments", "{value}: {v}");
        let message = v[value]["message"].as_str().unwrap();
        assert!(
            message.contains("path parameter `id` may not be") && message.contains(shown),
            "{value}: {message}"
        );
    }
    // Side by side, each part is still judged on its own.
    assert_eq!(v["pair"]["code"], "invalid_arguments", "{v}");
    assert!(
        v["pair"]["message"]
            .as_str()
            .unwrap()
            .contains("path parameter `a` may not be `.`"),
        "{v}"
    );
    for (value, target) in [
        (r#""../x""#, "/v1/users/..%2Fx"),
        (r#""%2e%2e""#, "/v1/users/%252e%252e"),
        (r#""a?b""#, "/v1/users/a%3Fb"),
        (r#""a#b""#, "/v1/users/a%23b"),
        (r#""a\r\nX-Evil: 1""#, "/v1/users/a%0D%0AX-Evil%3A%201"),
        (r#""%""#, "/v1/users/%25"),
        (r#""a/b""#, "/v1/users/a%2Fb"),
        (r#""ok""#, "/v1/users/ok"),
    ] {
        assert_eq!(v[value], target, "{value}: {v}");
    }
    // What was refused never reached the API.
    let seen: Vec<String> = api.seen().into_iter().map(|s| s.target).collect();
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(
        seen.iter()
            .all(|t| t.starts_with("/v1/users/") && t.len() > "/v1/users/".len()),
        "{seen:?}"
    );
    d.stop().await;
}

/// A call's idempotency key goes upstream as `Idempotency-Key` on `POST`, `PUT`, `PATCH` and
/// `DELETE`, never on `GET` or `HEAD`, and not at all without a key; an `Idempotency-Key` the
/// operation declares as a parameter, set by the program, is the only one sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idempotency_key_goes_with_writing_methods_only() {
    let api = LocalServer::start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let doc = write(
        dir.path(),
        "things.yaml",
        r#"
openapi: 3.1.0
info: { title: things, version: "1" }
paths:
  /things:
    get: { operationId: list }
    head: { operationId: peek }
    post: { operationId: create }
    put: { operationId: replace }
    patch: { operationId: amend }
    delete: { operationId: remove }
  /keyed:
    post:
      operationId: keyed
      parameters:
        - { name: Idempotency-Key, in: header, schema: { type: string } }
"#,
    );
    // Outside /v1/, so the local server wants no credentials.
    let source = OpenApiSource::load(
        config(
            "things",
            doc,
            &format!("http://127.0.0.1:{}/open", api.port),
            None,
        ),
        Arc::new(SecretStore::empty()),
    )
    .unwrap();
    let keyed = CallContext::new("e", "p", 1).with_idempotency_key("journal-key-7");
    for tool in ["list", "peek", "create", "replace", "amend", "remove"] {
        source
            .call(tool, json!({}), &keyed)
            .await
            .into_result()
            .unwrap();
    }
    source
        .call("create", json!({}), &CallContext::new("e", "p", 2))
        .await
        .into_result()
        .unwrap();
    source
        .call("keyed", json!({"Idempotency-Key": "program-key"}), &keyed)
        .await
        .into_result()
        .unwrap();
    let sent: Vec<(String, Vec<String>)> = api
        .seen()
        .into_iter()
        .map(|s| {
            let keys = s
                .headers
                .iter()
                .filter(|(n, _)| n == "idempotency-key")
                .map(|(_, v)| v.clone())
                .collect();
            (s.method, keys)
        })
        .collect();
    let key = || vec!["journal-key-7".to_owned()];
    assert_eq!(
        sent,
        [
            ("GET".to_owned(), vec![]),
            ("HEAD".to_owned(), vec![]),
            ("POST".to_owned(), key()),
            ("PUT".to_owned(), key()),
            ("PATCH".to_owned(), key()),
            ("DELETE".to_owned(), key()),
            ("POST".to_owned(), vec![]),
            ("POST".to_owned(), vec!["program-key".to_owned()]),
        ]
    );
    // The marks the journal reads: GET and HEAD only read.
    let read_only: Vec<(&str, bool)> = source
        .descriptors()
        .iter()
        .map(|t| (t.name.as_str(), t.read_only))
        .collect();
    assert_eq!(
        read_only,
        [
            ("amend", false),
            ("create", false),
            ("keyed", false),
            ("list", true),
            ("peek", true),
            ("remove", false),
            ("replace", false),
        ]
    );
}
