//! GraphQL sources (`[[graphql]]`): a schema file turned into tools, called from sandboxed
//! programs against a local GraphQL endpoint that this test runs (it checks the credential,
//! records every request and answers with canned data or errors), and GitHub's real schema
//! from `@octokit/graphql-schema` loaded and turned into tools.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{GraphQlSource, SchemaFormat, SettingValue};
use airlock_supervisor::agent_api::Status;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::ToolSource;
use airlock_supervisor::tools::sources::graphql::{GraphQlApi, parses_as_document};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "Bearer gql-s3cret-token";

const SDL: &str = r#"
scalar DateTime

type Query {
  "Look up a repository by its owner and name."
  repository(owner: String!, name: String!): Repository
  viewer: User!
  echo(text: String!): String
}

type Mutation {
  createIssue(input: CreateIssueInput!): CreateIssuePayload
}

type Repository {
  id: ID!
  name: String!
  createdAt: DateTime
  owner: User!
  issues(first: Int, after: String): IssueConnection!
  collaborators(affiliation: String!): UserConnection
}

type User { id: ID! login: String! repositories(first: Int): RepositoryConnection }
type UserConnection { totalCount: Int! nodes: [User] }
type RepositoryConnection { totalCount: Int! nodes: [Repository] }
type IssueConnection { totalCount: Int! nodes: [Issue] }
type Issue { id: ID! title: String! state: IssueState! }
enum IssueState { OPEN CLOSED }
type CreateIssuePayload { issue: Issue clientMutationId: String }
input CreateIssueInput { repositoryId: ID! title: String! body: String }
"#;

/// What the endpoint received: the request body of each call, and the values of its
/// `Idempotency-Key` headers.
#[derive(Debug, Default)]
struct Recorded {
    bodies: Mutex<Vec<Value>>,
    idempotency_keys: Mutex<Vec<Vec<String>>>,
}

impl Recorded {
    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }

    fn idempotency_keys(&self) -> Vec<Vec<String>> {
        self.idempotency_keys.lock().unwrap().clone()
    }
}

/// A minimal HTTP/1.1 GraphQL endpoint on 127.0.0.1 (one request per connection).
async fn start_endpoint() -> (String, Arc<Recorded>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/graphql", listener.local_addr().unwrap());
    let recorded = Arc::new(Recorded::default());
    let seen = recorded.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head, body_start) = loop {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break (String::from_utf8_lossy(&buf[..i]).into_owned(), i + 4);
                    }
                };
                let header = |name: &str| {
                    head.lines().find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                    })
                };
                let length: usize = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < body_start + length {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body: Value = serde_json::from_slice(&buf[body_start..body_start + length])
                    .unwrap_or_default();
                let (status, answer) = if header("authorization").as_deref() != Some(TOKEN) {
                    (
                        "401 Unauthorized",
                        json!({"errors": [{"message": "Bad credentials"}]}),
                    )
                } else {
                    seen.bodies.lock().unwrap().push(body.clone());
                    let keys = head
                        .lines()
                        .filter_map(|l| l.split_once(':'))
                        .filter(|(k, _)| k.eq_ignore_ascii_case("idempotency-key"))
                        .map(|(_, v)| v.trim().to_owned())
                        .collect();
                    seen.idempotency_keys.lock().unwrap().push(keys);
                    answer(&body)
                };
                let text = answer.to_string();
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (url, recorded)
}

/// Canned answers by what the document asks for.
fn answer(body: &Value) -> (&'static str, Value) {
    let query = body["query"].as_str().unwrap_or_default();
    let vars = &body["variables"];
    if query.contains("createIssue") {
        return (
            "200 OK",
            json!({"data": {"createIssue": null}, "errors": [
                {"message": "Repository was archived so is read-only.", "path": ["createIssue"]}
            ]}),
        );
    }
    if query.contains("echo") {
        // A server that echoes the credential back: the program must not see it.
        return (
            "200 OK",
            json!({"data": {"echo": null}, "errors": [{"message": format!("rejected token {TOKEN}")}]}),
        );
    }
    if query.contains("repository") {
        return (
            "200 OK",
            json!({"data": {"repository": {
                "id": "R_1", "name": vars["name"], "owner": {"id": "U_1", "login": vars["owner"]},
                "issues": {"totalCount": 3}
            }}}),
        );
    }
    if query.contains("viewer") {
        return ("200 OK", json!({"data": {"viewer": {"login": "octocat"}}}));
    }
    (
        "200 OK",
        json!({"errors": [{"message": "unknown document"}]}),
    )
}

fn write_schema(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("schema.graphql");
    std::fs::write(&path, text).unwrap();
    path
}

fn config(name: &str, schema: PathBuf, endpoint: String) -> GraphQlSource {
    GraphQlSource {
        name: name.to_owned(),
        schema,
        schema_format: SchemaFormat::Sdl,
        endpoint,
        headers: vec![(
            "Authorization".to_owned(),
            SettingValue::Secret("gh-token".to_owned()),
        )],
        selection_depth: 2,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
    }
}

fn secrets() -> Arc<SecretStore> {
    Arc::new(SecretStore::with_values([(
        "gh-token".to_owned(),
        TOKEN.to_owned(),
    )]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_call_graphql_fields_mutations_and_custom_documents() {
    let dir = tempfile::tempdir().unwrap();
    let (url, recorded) = start_endpoint().await;
    let source =
        GraphQlApi::load(config("gh", write_schema(dir.path(), SDL), url), secrets()).unwrap();
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(source))).await;
    let r = d
        .exec(
            r#"
const repo = await tools.gh.repository({ owner: "octo", name: "hello" });
let mutation;
try { await tools.gh.mutation_createIssue({ input: { repositoryId: "R_1", title: "bug" } }) }
catch (e) { mutation = { name: e.name, code: e.code, message: e.message } }
const custom = await tools.gh.query({ query: "query Me { viewer { login } }", variables: {} });
let echoed;
try { await tools.gh.echo({ text: "hi" }) } catch (e) { echoed = e.message }
({ repo, mutation, custom, echoed })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["repo"]["name"], json!("hello"), "{}", r.result);
    assert_eq!(r.result["repo"]["owner"]["login"], json!("octo"));
    assert_eq!(r.result["mutation"]["name"], json!("ToolError"));
    assert_eq!(r.result["mutation"]["code"], json!("upstream_error"));
    let message = r.result["mutation"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "gh.mutation_createIssue failed: Repository was archived so is read-only. (at createIssue)"
        ),
        "{message}"
    );
    assert_eq!(r.result["custom"], json!({"viewer": {"login": "octocat"}}));
    let echoed = r.result["echoed"].as_str().unwrap();
    assert!(!echoed.contains("s3cret"), "{echoed}");
    assert!(echoed.contains("[redacted]"), "{echoed}");

    let bodies = recorded.bodies();
    assert_eq!(bodies.len(), 4, "{bodies:?}");
    // The field tool's document: declared variables, the default selection, bounded depth
    // (no object inside an object), `first:` on the connection, nothing that needs arguments.
    let query = bodies[0]["query"].as_str().unwrap();
    assert_eq!(
        query,
        "query airlock_repository($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id name createdAt owner { id login } issues(first: 10) { totalCount } } }"
    );
    parses_as_document(query).unwrap();
    assert_eq!(
        bodies[0]["variables"],
        json!({"owner": "octo", "name": "hello"})
    );
    assert!(
        bodies[1]["query"]
            .as_str()
            .unwrap()
            .starts_with("mutation airlock_createIssue($input: CreateIssueInput!) { createIssue(input: $input) { clientMutationId issue { id title state } } }"),
        "{}",
        bodies[1]["query"]
    );
    assert_eq!(bodies[2]["query"], json!("query Me { viewer { login } }"));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_graphql_calls_are_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let (url, recorded) = start_endpoint().await;
    let source =
        GraphQlApi::load(config("gh", write_schema(dir.path(), SDL), url), secrets()).unwrap();
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(source))).await;
    let r = d
        .exec(
            r#"
const out: any = {};
// Arguments built at run time, so that they reach the supervisor's check (literal arguments
// are already refused by the program-contract check before the program runs).
const dyn = (o: any) => JSON.parse(JSON.stringify(o));
const attempt = async (key: string, f: () => Promise<unknown>) => {
  try { await f(); out[key] = "no error" } catch (e) { out[key] = { code: e.code, message: e.message, hint: e.hint } }
};
await attempt("missing", () => tools.gh.repository(dyn({ owner: "octo" })));
// (A number for a string would be coerced, `coerce = "safe"`: an object is no near miss.)
await attempt("wrongType", () => tools.gh.repository(dyn({ owner: "octo", name: { n: 7 } })));
await attempt("unknownArg", () => tools.gh.repository(dyn({ owner: "o", name: "n", nmae: "x" })));
await attempt("badEnumless", () => tools.gh.mutation_createIssue(dyn({ input: { title: "t" } })));
await attempt("syntax", () => tools.gh.query(dyn({ query: "{ viewer { login }" })));
await attempt("sneakyMutation", () => tools.gh.query(dyn({ query: "mutation { createIssue(input: {}) { clientMutationId } }" })));
out
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    for key in [
        "missing",
        "wrongType",
        "unknownArg",
        "badEnumless",
        "syntax",
        "sneakyMutation",
    ] {
        assert_eq!(
            r.result[key]["code"],
            json!("invalid_arguments"),
            "{key}: {}",
            r.result
        );
    }
    let missing = r.result["missing"]["message"].as_str().unwrap();
    assert!(
        missing.contains("missing required argument `name`"),
        "{missing}"
    );
    let syntax = r.result["syntax"]["message"].as_str().unwrap();
    assert!(syntax.contains("does not parse at 1:"), "{syntax}");
    assert_eq!(
        r.result["sneakyMutation"]["hint"],
        json!("gh.mutate runs documents with mutations")
    );
    assert!(recorded.bodies().is_empty(), "{:?}", recorded.bodies());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_credential_fails_the_call_not_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let (url, recorded) = start_endpoint().await;
    let source = GraphQlApi::load(
        config("gh", write_schema(dir.path(), SDL), url),
        Arc::new(SecretStore::empty()),
    )
    .unwrap();
    assert_eq!(source.missing_secrets().len(), 1);
    let err = source
        .call(
            "viewer",
            json!({}),
            &airlock_supervisor::tools::CallContext::new("e", "p", 1),
        )
        .await
        .into_result()
        .unwrap_err();
    assert_eq!(err.code.as_str(), "server_unavailable");
    assert!(err.message.contains("`gh-token`"), "{}", err.message);
    assert!(recorded.bodies().is_empty());
}

/// A call's idempotency key goes upstream as `Idempotency-Key` with mutations only: a
/// mutation field, or a `mutate` document that has a mutation; never with a query. A key the
/// policy's `headers` set already is the only one sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idempotency_key_goes_with_mutations_only() {
    let dir = tempfile::tempdir().unwrap();
    let (url, recorded) = start_endpoint().await;
    let schema = write_schema(dir.path(), SDL);
    let source = GraphQlApi::load(config("gh", schema.clone(), url.clone()), secrets()).unwrap();
    let keyed = airlock_supervisor::tools::CallContext::new("e", "p", 1)
        .with_idempotency_key("journal-key-7");
    let create = json!({"input": {"repositoryId": "R_1", "title": "bug"}});
    let calls = [
        ("viewer", json!({})),
        ("mutation_createIssue", create.clone()),
        ("query", json!({"query": "{ viewer { login } }"})),
        ("mutate", json!({"query": "{ viewer { login } }"})),
        (
            "mutate",
            json!({"query": "mutation { createIssue(input: {repositoryId: \"R_1\", title: \"t\"}) { clientMutationId } }"}),
        ),
    ];
    for (tool, args) in &calls {
        // The canned answers fail the mutations; what matters is what was sent.
        let _ = source.call(tool, args.clone(), &keyed).await;
    }
    let key = || vec!["journal-key-7".to_owned()];
    assert_eq!(
        recorded.idempotency_keys(),
        [vec![], key(), vec![], vec![], key()],
        "{:?}",
        recorded.bodies()
    );
    // Without a key, no header.
    let unkeyed = airlock_supervisor::tools::CallContext::new("e", "p", 2);
    let _ = source
        .call("mutation_createIssue", create.clone(), &unkeyed)
        .await;
    assert_eq!(recorded.idempotency_keys().last(), Some(&vec![]));
    // The operator's own header wins, once.
    let mut with_header = config("gh2", schema, url);
    with_header.headers.push((
        "Idempotency-Key".to_owned(),
        SettingValue::Literal("operator-key".to_owned()),
    ));
    let source = GraphQlApi::load(with_header, secrets()).unwrap();
    let _ = source.call("mutation_createIssue", create, &keyed).await;
    assert_eq!(
        recorded.idempotency_keys().last(),
        Some(&vec!["operator-key".to_owned()])
    );
}

#[test]
fn a_malformed_schema_is_a_located_load_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_schema(dir.path(), "type Query {\n  ok: Int\n  broken(: Int\n}\n");
    let err = GraphQlApi::load(
        config("gh", path.clone(), "http://127.0.0.1:9/".into()),
        secrets(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(&format!("{}:3:10:", path.display())),
        "{err}"
    );
    assert!(err.contains("source `gh`"), "{err}");
}

/// `@octokit/graphql-schema`'s `schema.graphql`, if installed.
fn github_schema(test: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/@octokit/graphql-schema/schema.graphql");
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
        "@octokit/graphql-schema is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
    );
    eprintln!(
        "SKIPPED {test}: @octokit/graphql-schema is missing (npm ci --prefix tests/mcp-peers)"
    );
    None
}

#[test]
fn githubs_real_schema_loads_into_tools_with_valid_selections() {
    let Some(path) = github_schema("githubs_real_schema_loads_into_tools_with_valid_selections")
    else {
        return;
    };
    let started = std::time::Instant::now();
    let api = GraphQlApi::load(
        config("github", path, "https://api.github.com/graphql".into()),
        secrets(),
    )
    .unwrap();
    let elapsed = started.elapsed();
    eprintln!(
        "loaded GitHub's schema into {} tools in {elapsed:?}",
        api.descriptors().len()
    );
    let tools = api.descriptors();
    assert!(tools.len() >= 100, "{}", tools.len());
    let repository = tools.iter().find(|t| t.name == "repository").unwrap();
    // GitHub declares `name` before `owner`; both are required.
    assert_eq!(
        repository.input_schema["required"],
        json!(["name", "owner"]),
        "{}",
        repository.input_schema
    );
    assert!(tools.iter().any(|t| t.name == "mutation_createIssue"));
    assert!(tools.iter().any(|t| t.name == "query"));
    let mut checked = 0;
    for tool in tools {
        // Every declared argument given, so every variable is declared and used.
        let args: serde_json::Map<String, Value> = tool.input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        let Some(document) = api.document_for(&tool.name, &Value::Object(args)) else {
            continue;
        };
        if let Err(e) = parses_as_document(&document) {
            panic!("{}: {e}\n{document}", tool.name);
        }
        // Bounded: the selection budget keeps even `Repository` small.
        assert!(
            document.len() < 8_000,
            "{}: {} bytes",
            tool.name,
            document.len()
        );
        checked += 1;
        // Every argument schema compiles and accepts `{}` or reports missing arguments.
        let _ = airlock_supervisor::tools::arguments::ArgumentSchema::compile(&tool.input_schema)
            .check(&tool.name, &json!({}));
    }
    assert!(checked >= 100, "{checked}");
    let doc = api
        .document_for("repository", &json!({"owner": "o", "name": "n"}))
        .unwrap();
    assert!(
        doc.contains("issues(first: 10)") || doc.contains("(first: 10)"),
        "{doc}"
    );
}
